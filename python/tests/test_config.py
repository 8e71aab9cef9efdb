"""engram.Config: loading, accessors, and rows bit-exact with the reference vectors and `engram-stat rows`."""
import errno
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, config_of, fixture, run, tool, vectors

import engram

SETS = ["demo", "tiny", "tiny-v41", "v41"]


@pytest.mark.parametrize("name", SETS)
def test_rows_equal_reference_vectors(name):
    v = vectors(name)
    cfg = config_of(name)
    for s in v.seqs:
        got = cfg.rows(v.tokens[s], v.masks.get(s))
        assert got.dtype == np.uint64 and got.shape == v.expect[s].shape
        np.testing.assert_array_equal(got, v.expect[s], err_msg=f"{name} sequence {s}")


@pytest.mark.parametrize("name", SETS)
def test_primes_and_multipliers_equal_reference_vectors(name):
    v = vectors(name)
    cfg = config_of(name)
    assert cfg.layer_ids == tuple(v.layer_ids)
    assert cfg.max_ngram == v.max_ngram
    assert cfg.columns == v.columns
    for layer in v.layer_ids:
        assert list(cfg.primes(layer)) == v.primes[layer]
        assert list(cfg.multipliers(layer)) == v.multipliers[layer]
        assert cfg.table_rows[cfg.layer_index(layer)] == sum(v.primes[layer])


def _stat_rows(name, tokens, mask=None):
    args = [tool("engram-stat"), "rows", "--config", fixture(f"ref/{name}/{name}.config.json"), "--token-map",
            fixture(f"ref/{name}/{name}.token_map.npy"), "--tokens", ",".join(map(str, tokens))]
    if mask is not None:
        args += ["--mask", ",".join(map(str, mask))]
    lines = run(*args).stdout.split()
    return lines


@pytest.mark.parametrize("name,seq", [("v41", 6), ("demo", 5), ("tiny-v41", 3), ("tiny", 4)])
def test_rows_equal_engram_stat_rows(name, seq):
    """Sequences with dead tokens (v41 6, tiny-v41 3) and negative ids (demo 5)."""
    v = vectors(name)
    cfg = config_of(name)
    mask = v.masks.get(seq)
    got = cfg.rows(v.tokens[seq], mask)
    want = np.array(_stat_rows(name, v.tokens[seq], mask), dtype=np.int64)
    cols = cfg.columns
    want = want.reshape(len(v.tokens[seq]), len(cfg.layer_ids), 2 + cols)
    assert (want[:, :, 0] == np.arange(len(v.tokens[seq]))[:, None]).all()
    assert (want[:, :, 1] == np.array(cfg.layer_ids)[None, :]).all()
    np.testing.assert_array_equal(got, want[:, :, 2:].transpose(1, 0, 2).astype(np.uint64))


def test_rows_of_any_integer_input():
    v = vectors("tiny")
    cfg = config_of("tiny")
    t = v.tokens[4]
    want = cfg.rows(t)
    for x in (t.astype(np.int32), t.astype(np.uint16), list(map(int, t)), tuple(map(int, t)), t[::-1].copy()[::-1]):
        np.testing.assert_array_equal(cfg.rows(x), want)
    m = np.ones(len(t), dtype=bool)
    np.testing.assert_array_equal(cfg.rows(t, m), want)
    np.testing.assert_array_equal(cfg.rows(t, m.astype(np.int64)), want)
    assert cfg.rows([]).shape == (2, 0, cfg.columns)


def test_accessors():
    cfg = config_of("v41")
    assert cfg.layer_ids == (1, 14)
    assert (cfg.columns, cfg.head_dim, cfg.max_ngram, cfg.heads) == (24, 256, 4, 8)
    assert cfg.table_rows == (384006168, 384016682)
    assert cfg.compressed_vocab == 99092 and cfg.pad_id == 2 and cfg.compressed_pad == 2
    assert cfg.layer_index(14) == 1 and cfg.layer_index(np.int32(1)) == 0
    assert "v41.config.json" in repr(cfg)


def test_errors_name_the_file(tmp_path):
    with pytest.raises(engram.Error) as e:
        engram.Config(tmp_path / "missing.json", token_map=fixture("ref/v41/v41.token_map.npy"))
    assert e.value.errno == errno.ENOENT and "missing.json" in str(e.value)
    assert isinstance(e.value, OSError) and e.value.name == "ENOENT"

    bad = tmp_path / "bad.json"
    bad.write_text('{"text_config": {"engram_layer_ids": [1,')
    with pytest.raises(engram.Error) as e:
        engram.Config(bad, token_map=fixture("ref/v41/v41.token_map.npy"))
    assert e.value.errno == engram.EPARSE and "bad.json" in e.value.strerror and e.value.name == "EPARSE"

    j = json.load(open(fixture("ref/v41/v41.config.json")))
    del j["text_config"]["engram_n_heads"]
    bad.write_text(json.dumps(j))
    with pytest.raises(engram.Error) as e:
        engram.Config(bad, token_map=fixture("ref/v41/v41.token_map.npy"))
    assert e.value.errno == engram.ECONFIG and "engram_n_heads" in e.value.strerror

    with pytest.raises(engram.Error) as e:  # the V4.1 config wants 99,092 compressed ids; tiny's map has fewer
        engram.Config(fixture("ref/v41/v41.config.json"), token_map=fixture("ref/tiny/tiny.token_map.npy"))
    assert e.value.errno == engram.ETOKMAP and "tiny.token_map.npy" in e.value.strerror

    with pytest.raises(engram.Error) as e:
        engram.Config(fixture("ref/v41/v41.config.json"), token_map=fixture("ref/v41/v41.config.json"))
    assert e.value.errno == engram.EPARSE


def test_token_beyond_the_map_is_invalid_argument():
    cfg = config_of("tiny")
    with pytest.raises(engram.InvalidArgument) as e:
        cfg.rows([1, 2, cfg.raw_vocab])
    assert e.value.errno == errno.EINVAL and isinstance(e.value, ValueError) and isinstance(e.value, engram.Error)


def test_config_needs_one_token_map():
    with pytest.raises(ValueError):
        engram.Config(fixture("ref/tiny/tiny.config.json"))
    with pytest.raises(ValueError):
        engram.Config(fixture("ref/tiny/tiny.config.json"), token_map=fixture("ref/tiny/tiny.token_map.npy"),
                      tokenizer=fixture("tokenizers/edge/bytelevel.json"))
    with pytest.raises(TypeError):
        engram.Config(3, token_map=fixture("ref/tiny/tiny.token_map.npy"))


def _libs_mapped(code):
    """Run code in a fresh interpreter with this checkout's engram; which libengram files it mapped."""
    prog = ("import sys; sys.path.insert(0, sys.argv[1]); import engram\n" + code +
            "\nprint(' '.join(sorted({l.split()[-1].rsplit('/', 1)[-1] for l in open('/proc/self/maps') "
            "if 'libengram' in l})))")
    p = subprocess.run([sys.executable, "-c", prog, ROOT + "/python"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


def test_tokenizer_config_equals_token_map_config(tmp_path):
    """Config(tokenizer=) builds the map from tokenizer.json in libengram-pack, loaded only then."""
    c = tmp_path / "c.json"
    c.write_text(json.dumps({"engram_vocab_size": [50, 60], "max_ngram_size": 3, "n_embed_per_ngram": 8,
                             "n_head_per_ngram": 2, "layer_ids": [2], "pad_id": 1, "seed": 5}))
    a = engram.Config(c, tokenizer=fixture("tokenizers/edge/bytelevel.json"))
    b = engram.Config(c, token_map=fixture("tokenizers/edge/bytelevel.token_map.npy"))
    assert a.raw_vocab == b.raw_vocab and a.compressed_vocab == b.compressed_vocab
    t = np.arange(a.raw_vocab)
    np.testing.assert_array_equal(a.rows(t), b.rows(t))
    with pytest.raises(engram.Error) as e:
        engram.Config(c, tokenizer=tmp_path / "none.json")
    assert e.value.errno == errno.ENOENT and "none.json" in e.value.strerror

    tmap = fixture("tokenizers/edge/bytelevel.token_map.npy")
    served = _libs_mapped(f"engram.Config({str(c)!r}, token_map={tmap!r})")
    assert not any("engram-pack" in x for x in served) and any(x.startswith("libengram.so") for x in served)
    packed = _libs_mapped(f"engram.Config({str(c)!r}, tokenizer={fixture('tokenizers/edge/bytelevel.json')!r})")
    assert any(x.startswith("libengram-pack.so") for x in packed)
