"""Qwen4-Exp's PLE n-gram table (family "qwen4-exp-ple") through the binding: Config from the release's config.json
alone, rows bit-exact with the Hugging Face reference's (fixtures/ref/qwen38) through Config.rows and a Hasher
pushed every way, the tiny release-format checkpoints packed and gathered through Store and Session (torch
bfloat16 rows included), a Qwen-geometry set's gathers 2560 wide, and an FP8 (F8_E4M3_T) one's in every output type
beside a Hasher of its config."""
import json

import numpy as np
import pytest

from conftest import check_every_way_of_pushing, fixture, run, tool

import engram

REAL = ["real_edge7_len3_eos_last", "real_rand3_len64_eos_start_mid_run_end", "real_rand4_len333_eos_random"]
EOS = 248044


try:
    import torch
except ImportError:  # the bf16 results are then numpy uint16 bit patterns
    torch = None


def rne(f32):
    """float32 values to bf16 bit patterns, round to nearest even (finite values)."""
    u = np.ascontiguousarray(f32, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_bits(x):
    """A bf16 gather's result (a torch.bfloat16 tensor, or numpy uint16 bit patterns without torch) as bits."""
    if torch is not None and isinstance(x, torch.Tensor):
        assert x.dtype == torch.bfloat16
        return x.view(torch.int16).numpy().view(np.uint16)
    assert x.dtype == np.uint16
    return x


def qwen():
    return engram.Config(fixture("ref/qwen38/qwen38.config.json"))


def real(name):
    return (np.load(fixture(f"ref/qwen38/{name}_tokens.npy")), np.load(fixture(f"ref/qwen38/{name}_ids.npy")))


def test_config_is_the_release():
    cfg = qwen()
    c = json.load(open(fixture("ref/qwen38/qwen38.constants.json")))
    assert cfg.family == "qwen4-exp-ple" and "qwen4-exp-ple" in repr(cfg)
    assert cfg.layer_ids == (2,) and cfg.columns == 16 and cfg.head_dim == 160 and cfg.max_ngram == 3
    assert cfg.table_rows == (c["padded_vocab_size"],) and cfg.addressed_rows == (c["total_vocab_size"],)
    assert list(cfg.multipliers(2)) == c["layer_multipliers"]
    assert list(cfg.primes(2)) == c["head_vocab_sizes"]
    assert cfg.raw_vocab == 248320 and cfg.pad_id == EOS and cfg.compressed_pad == EOS
    assert engram.Config(fixture("ref/tiny/tiny.config.json"),
                         token_map=fixture("ref/tiny/tiny.token_map.npy")).family == "deepseek-engram"


@pytest.mark.parametrize("name", REAL)
def test_rows_equal_the_reference(name):
    t, ids = real(name)
    got = qwen().rows(t)
    assert got.shape == (1, len(t), 16)
    np.testing.assert_array_equal(got[0], ids.astype(np.uint64))


@pytest.mark.parametrize("name", REAL)
def test_hasher_every_way_of_pushing(name):
    """Whole, in chunks, a token at a time in a decode batch beside another slot, with wrong drafts (EOS among
    them) rewound, and moved between slots by export and import: the reference's rows every time."""
    t, ids = real(name)
    check_every_way_of_pushing(engram.Hasher(qwen(), max_seqs=3), t, ids.astype(np.uint64), EOS, 248320, 2)


def test_ids_outside_the_vocab_and_token_maps_are_refused():
    cfg = qwen()
    for bad in (-1, 248320):
        with pytest.raises(engram.InvalidArgument) as e:
            cfg.rows([5, 6, bad])
        assert f"token id {bad} at position 2 is outside the vocabulary [0, 248320)" in str(e.value)
    with pytest.raises(engram.InvalidArgument) as e:
        engram.Config(fixture("ref/qwen38/qwen38.config.json"), token_map=fixture("ref/tiny/tiny.token_map.npy"))
    assert "give no token map" in str(e.value)
    with pytest.raises(engram.InvalidArgument) as e:
        engram.Config(fixture("ref/tiny/tiny.config.json"))
    assert "needs its compressed-token map" in str(e.value)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny release-format checkpoints (BF16, FP8) packed: {"bf16": path, "fp8": path}."""
    d = tmp_path_factory.mktemp("qwen")
    out = {}
    for kind in ("bf16", "fp8"):
        out[kind] = str(d / f"{kind}.engram")
        run(tool("engram-pack"), "--quiet", "--config", fixture("ref/qwen38/tiny/tiny-n3.config.json"), "--weights",
            fixture(f"ref/qwen38/tiny/tiny-n3.{kind}.safetensors"), "--out", out[kind])
    return out


@pytest.mark.parametrize("kind", ["bf16", "fp8"])
@pytest.mark.parametrize("mode", ["direct", "pagecache"])
def test_sessions_gather_the_reference(tiny, kind, mode):
    t = np.load(fixture("ref/qwen38/tiny/tiny-n3.tokens.npy"))
    ids = np.load(fixture("ref/qwen38/tiny/tiny-n3.layer2.ids.npy")).astype(np.uint64)
    want = np.load(fixture(f"ref/qwen38/tiny/tiny-n3.layer2.expect.{kind}.npy"))
    store = engram.Store(tiny[kind])
    info = store.info()
    assert info["config"]["family"] == "qwen4-exp-ple" and info["token_map"]["source"] == "none"
    np.testing.assert_array_equal(store.gather_rows(2, ids.reshape(-1), "f32").reshape(want.shape), want)
    s = store.session(max_seqs=2, mode=mode)
    s.begin()
    s.push(0, t)
    np.testing.assert_array_equal(s.rows(2), ids)
    np.testing.assert_array_equal(s.gather(2, "f32"), want)
    b = s.gather(2, "bf16")  # a torch.bfloat16 tensor where torch is importable
    assert tuple(b.shape) == want.shape
    np.testing.assert_array_equal(bf16_bits(b), rne(want))
    # decode: a token a step in slot 1, its rows and values the reference's
    s.reset(1)
    for p in range(len(t)):
        s.begin()
        s.push_batch([1], [t[p]])
        np.testing.assert_array_equal(s.rows(2)[0], ids[p])
        np.testing.assert_array_equal(s.gather(2, "f32")[0], want[p])
    s.close()
    store.close()


def test_release_geometry_gathers_2560_wide(tmp_path):
    """A synthetic set of the release's geometry (ngram_vocab_size_base divided by 65536): a step's bf16 gather is
    [positions, 2560] (into a torch.bfloat16 tensor where torch is importable), each row the store's own."""
    out = tmp_path / "q.engram"
    run(tool("engram-pack"), "--quiet", "--config", fixture("ref/qwen38/qwen38.config.json"), "--synthetic", "65536",
        "--out", out)
    store = engram.Store(out)
    t, _ = real(REAL[1])
    s = store.session(max_seqs=1)
    s.begin()
    s.push(0, t)
    emb = torch.empty(len(t), 2560, dtype=torch.bfloat16) if torch else np.empty((len(t), 2560), np.uint16)
    assert s.gather(2, "bf16", out=emb) is emb
    again = store.gather_rows(2, s.rows(2).reshape(-1), "bf16")
    np.testing.assert_array_equal(bf16_bits(emb), bf16_bits(again).reshape(len(t), 2560))
    s.close()
    store.close()


def e4m3_values(b):
    """e4m3fn bytes (numpy uint8) to float32 values, from the format's definition (bias 7, NaN 0x7F / 0xFF)."""
    b = b.astype(np.int32)
    e, m = (b >> 3) & 0xF, b & 7
    v = np.where(e == 0, m / 8.0 * 2.0**-6, (1 + m / 8.0) * 2.0 ** (e - 7))
    return np.where(b & 0x80, -v, v).astype(np.float32)


def test_release_geometry_fp8_every_output(tmp_path):
    """A synthetic F8_E4M3_T set of the release's geometry (engram-pack --synthetic-dtype e4m3t): a Hasher of the
    store's config gives the session's rows; the native gather is [positions, 16, 164] (160 e4m3 bytes, then the
    table's float32 scale), the f32 gather into a torch.float32 tensor [positions, 2560] is e4m3 x scale of those
    bytes, and bf16 is that rounded to nearest even."""
    out = tmp_path / "q8.engram"
    run(tool("engram-pack"), "--quiet", "--config", fixture("ref/qwen38/qwen38.config.json"), "--synthetic", "65536",
        "--synthetic-dtype", "e4m3t", "--out", out)
    t, _ = real(REAL[2])
    with engram.Store(out) as store, engram.Hasher(store.config, max_seqs=2) as h, \
            store.session(max_seqs=2, mode="pagecache") as s:
        s.begin()
        s.push(1, t)
        np.testing.assert_array_equal(s.rows(2), h.push(1, t)[0])
        native = s.gather(2, "native", as_tensor=False)
        assert native.shape == (len(t), 16, 164)
        rec = native
        scale = rec[:, :, 160:].copy().view(np.float32)
        assert (scale == np.float32(2.0**-12)).all()
        want = (e4m3_values(rec[:, :, :160]) * scale).reshape(len(t), 2560)
        f32 = torch.empty(len(t), 2560, dtype=torch.float32) if torch else np.empty((len(t), 2560), np.float32)
        assert s.gather(2, "f32", out=f32) is f32
        got = f32.numpy() if torch else f32
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(bf16_bits(s.gather(2, "bf16")), rne(want))
