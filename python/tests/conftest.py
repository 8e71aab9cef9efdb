"""Shared helpers of the binding's tests: the freshly built library and tools, fixtures, reference vectors,
shards packed once per run.

The tests load the library of the build directory ($ENGRAM_BUILD, default build/: what `make check` sets) and
the package of this checkout, never an installed copy of either. They read only fixtures/."""
import os
import subprocess
import sys

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, os.environ.get("ENGRAM_BUILD", "build"))
os.environ.setdefault("ENGRAM_LIBDIR", BUILD)
sys.path.insert(0, os.path.join(ROOT, "python"))

import engram  # noqa: E402  (after the paths above)


def fixture(rel):
    return os.path.join(ROOT, "fixtures", rel)


def tool(name):
    return os.path.join(BUILD, name)


def run(*args, **kw):
    """Run a program; returns its completed process (stdout text), failing the test on a non-zero exit."""
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True, **kw)
    if p.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args))}: exit {p.returncode}\n{p.stderr}")
    return p


class Vectors:
    """fixtures/ref/NAME/NAME.vectors.txt: config values, multipliers, primes, inputs, masks and the rows each
    position addresses (offsets added here when the file gives bare hashes)."""

    def __init__(self, name):
        self.name = name
        self.layer_ids, self.max_ngram = [], 0
        self.multipliers, self.primes = {}, {}
        self.tokens, self.masks, self.rows = {}, {}, {}
        offsets = False
        with open(fixture(f"ref/{name}/{name}.vectors.txt")) as f:
            for line in f:
                w = line.split()
                if not w or w[0].startswith("#"):
                    continue
                key, vals = w[0], w[1:]
                if key == "config" and vals[0] in ("layer_ids", "engram_layer_ids"):
                    self.layer_ids = [int(x) for x in vals[1:]]
                elif key == "config" and vals[0] in ("max_ngram_size", "engram_max_ngram_size"):
                    self.max_ngram = int(vals[1])
                elif key == "multipliers":
                    self.multipliers[int(vals[0])] = [int(x) for x in vals[1:]]
                elif key == "primes":
                    self.primes.setdefault(int(vals[0]), []).extend(int(x) for x in vals[2:])
                elif key == "input":
                    s = int(vals[0])
                    self.tokens[s] = np.array([int(x) for x in vals[2:]], dtype=np.int64)
                    assert len(self.tokens[s]) == int(vals[1])
                elif key == "mask":
                    self.masks[int(vals[0])] = np.array([int(x) for x in vals[1:]], dtype=np.uint8)
                elif key in ("hash", "rows"):
                    offsets = key == "rows"
                    s, layer, pos = int(vals[0]), int(vals[1]), int(vals[2])
                    self.rows.setdefault(s, {}).setdefault(layer, {})[pos] = [int(x) for x in vals[3:]]
        self.seqs = sorted(self.tokens)
        self.columns = len(next(iter(self.primes.values())))
        # [layers, positions, columns] per sequence, rows inside each layer's table
        self.expect = {}
        for s in self.seqs:
            n = len(self.tokens[s])
            e = np.zeros((len(self.layer_ids), n, self.columns), dtype=np.uint64)
            for li, layer in enumerate(self.layer_ids):
                add = 0 if offsets else np.concatenate(([0], np.cumsum(self.primes[layer])[:-1])).astype(np.uint64)
                for pos in range(n):
                    e[li, pos] = np.array(self.rows[s][layer][pos], dtype=np.uint64) + add
            self.expect[s] = e


_vectors = {}


def vectors(name):
    if name not in _vectors:
        _vectors[name] = Vectors(name)
    return _vectors[name]


def check_every_way_of_pushing(h, t, ids, eos, vocab, keep):
    """A raw-id family's Hasher h (3 slots) against a sequence t's rows ids ([positions, columns], the layer's one):
    whole, in chunks, a token at a time in a decode batch beside another slot, with wrong drafts (EOS among them)
    rewound, moved between slots by export and import, and the history given back by seed (from the start, or its
    last keep tokens and more, then the rest pushed): the same rows every time."""
    for chunk in (len(t), 1, 2, 3, 5, 64):
        h.reset(0)
        got = np.concatenate([h.push(0, t[p:p + chunk])[0] for p in range(0, len(t), chunk)])
        np.testing.assert_array_equal(got, ids, err_msg=f"chunk {chunk}")
    rng = np.random.default_rng(5)
    h.reset(1)
    h.reset(2)
    for p in range(len(t)):
        step = h.push_batch([2, 1], [t[p], t[p]])[0]
        np.testing.assert_array_equal(step, np.stack([ids[p], ids[p]]), err_msg=f"batch at {p}")
        drafts = [eos if rng.integers(2) else int(rng.integers(vocab)) for _ in range(int(rng.integers(4)))]
        if drafts:
            h.push(1, drafts)
            h.rewind(1, len(drafts))
        if p % 7 == 3:
            state = h.export_state(1)
            h.reset(1)
            h.import_state(0, state)
            h.import_state(1, h.export_state(0))
    for cut in (0, 1, 2, len(t) // 2, len(t) - 1):
        h.seed(0, t[:cut], start=True)
        np.testing.assert_array_equal(h.push(0, t[cut:])[0], ids[cut:], err_msg=f"seeded from the start, {cut}")
        if cut >= keep:
            h.seed(0, t[:cut])
            np.testing.assert_array_equal(h.push(0, t[cut:])[0], ids[cut:], err_msg=f"seeded, {cut}")


def config_of(name):
    return engram.Config(fixture(f"ref/{name}/{name}.config.json"),
                         token_map=fixture(f"ref/{name}/{name}.token_map.npy"))


# The checkpoints of fixtures/ref packed by the tests: NAME -> (fixture dir, config, token map, weights)
CHECKPOINTS = {
    "tiny-f32": ("tiny", "tiny.f32.safetensors"),
    "tiny-bf16": ("tiny", "tiny.bf16.safetensors"),
    "tiny-v41": ("tiny-v41", "tiny-v41.safetensors"),
}


@pytest.fixture(scope="session")
def packed(tmp_path_factory):
    """pack(checkpoint, codec, split=None) -> path of a shard (or manifest) packed once per run with engram-pack
    (2-page blocks, as the C tests pack them)."""
    root = tmp_path_factory.mktemp("shards")
    done = {}

    def pack(name, codec="raw", split=None):
        key = (name, codec, split)
        if key not in done:
            d, weights = CHECKPOINTS[name]
            out = root / f"{name}-{codec}{'-' + split if split else ''}.engram"
            args = [tool("engram-pack"), "--quiet", "--config", fixture(f"ref/{d}/{d}.config.json"),
                    "--token-map", fixture(f"ref/{d}/{d}.token_map.npy"), "--weights", fixture(f"ref/{d}/{weights}"),
                    "--out", out, "--codec", codec, "--block-pages", "2"]
            if split:
                args += ["--split", split]
            run(*args)
            done[key] = str(out)
        return done[key]

    return pack


@pytest.fixture(scope="session")
def synthetic(tmp_path_factory):
    """A raw shard of DeepSeek-V4.1 geometry, F8_E4M3 rows, every vocab size divided by 8192 (two ~12 MiB
    tables), packed once per run."""
    out = tmp_path_factory.mktemp("synthetic") / "v41-s8192.engram"
    run(tool("engram-pack"), "--quiet", "--config", fixture("ref/v41/v41.config.json"), "--token-map",
        fixture("ref/v41/v41.token_map.npy"), "--synthetic", "8192", "--synthetic-dtype", "e4m3", "--seed", "3",
        "--out", out)
    return str(out)


def fortunes():
    """The real token stream of fixtures/tokens (DeepSeek-V3 token ids of English text)."""
    return np.load(fixture("tokens/fortunes-en.npy")).astype(np.int64)


def in_child(fn):
    """fn() in a forked child, which never returns into pytest: the byte it returns (99 if it raised)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 99
        try:
            code = fn()
        finally:
            os.write(w, bytes([code]))
            os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    return got
