"""LongCat's tiny release-format checkpoint (fixtures/ref/longcat/tiny: 6 tables of 3,001..3,011 rows x 8 BF16,
one file and a two-file index) packed by engram-pack --model-dir and served through the binding: Store and Session
gather the reference's embeddings (tiny-n4.expect.f32.npy) bit for bit in f32, bf16 (a torch.bfloat16 tensor where
torch is importable) and native, in both modes, pushed whole, a token a step, with drafts rewound and a slot moved
by export_state/import_state; a row cache serves them too."""
import numpy as np
import pytest

from conftest import fixture, run, tool

import engram

try:
    import torch
except ImportError:  # the bf16 results are then numpy uint16 bit patterns
    torch = None

TINY = "ref/longcat/tiny/"
SIZES = [3001 + 2 * t for t in range(6)]
OFFSETS = np.cumsum([0] + SIZES[:-1]).astype(np.uint64)
EOS = 2


def bf16_bits(x):
    """A bf16 gather's result (a torch.bfloat16 tensor, or numpy uint16 bit patterns without torch) as bits."""
    if torch is not None and isinstance(x, torch.Tensor):
        assert x.dtype == torch.bfloat16
        return x.view(torch.int16).numpy().view(np.uint16)
    assert x.dtype == np.uint16
    return x


def upper_halves(f32):
    """The reference's values are BF16 widened exactly: their bf16 bits are the float32's upper halves."""
    u = np.ascontiguousarray(f32, dtype=np.float32).view(np.uint32)
    assert ((u & 0xFFFF) == 0).all()
    return (u >> 16).astype(np.uint16)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Both checkpoint directories packed with engram-pack --model-dir: {"one": path, "sharded": path}."""
    d = tmp_path_factory.mktemp("longcat")
    out = {}
    for kind, sub in (("one", "tiny-n4"), ("sharded", "tiny-n4-sharded")):
        out[kind] = str(d / f"{kind}.engram")
        run(tool("engram-pack"), "--quiet", "--model-dir", fixture(TINY + sub), "--out", out[kind])
    return out


def reference():
    t = np.load(fixture(TINY + "tiny-n4.tokens.npy"))
    rows = np.load(fixture(TINY + "tiny-n4.ids.npy")).astype(np.uint64) + OFFSETS  # each table at its offset
    want = np.load(fixture(TINY + "tiny-n4.expect.f32.npy")).reshape(len(t), 48)
    return t, rows, want


@pytest.mark.parametrize("kind", ["one", "sharded"])
@pytest.mark.parametrize("mode", ["direct", "pagecache"])
def test_sessions_gather_the_reference(tiny, kind, mode):
    t, rows, want = reference()
    store = engram.Store(tiny[kind])
    info = store.info()
    assert info["config"]["family"] == "longcat-flash-ngram" and info["token_map"]["source"] == "none"
    np.testing.assert_array_equal(store.gather_rows(0, rows.reshape(-1), "f32").reshape(want.shape), want)
    native = store.gather_rows(0, rows.reshape(-1), "native", as_tensor=False)
    np.testing.assert_array_equal(native.view(np.uint16).reshape(want.shape), upper_halves(want))
    s = store.session(max_seqs=3, mode=mode)
    s.begin()
    s.push(0, t)
    np.testing.assert_array_equal(s.rows(0), rows)
    np.testing.assert_array_equal(s.gather(0, "f32"), want)
    b = s.gather(0, "bf16")  # a torch.bfloat16 tensor where torch is importable
    assert tuple(b.shape) == want.shape
    np.testing.assert_array_equal(bf16_bits(b), upper_halves(want))
    # decode: a token a step in slots 1 and 2; slot 2 pushes a wrong draft (EOS) each step and rewinds it, and is
    # moved to slot 0 and back every seventh step
    s.reset(1)
    s.reset(2)
    for p in range(len(t)):
        s.begin()
        s.push_batch([1, 2], [t[p], t[p]])
        s.push(2, [EOS])
        np.testing.assert_array_equal(s.rows(0)[:2], rows[[p, p]])
        np.testing.assert_array_equal(s.gather(0, "f32")[:2], want[[p, p]])
        s.rewind(2, 1)
        if p % 7 == 6:
            st = s.export_state(2)
            s.reset(2)
            s.import_state(0, st)
            s.import_state(2, s.export_state(0))
    s.close()
    store.close()


def test_row_cache_serves_the_reference(tiny):
    t, rows, want = reference()
    with engram.Store(tiny["sharded"]) as store, engram.RowCache(store, 1 << 20) as rc, \
            store.session(max_seqs=1, row_cache=rc) as s:
        for _ in range(2):  # the second pass finds its rows in the row cache
            s.reset(0)
            s.begin()
            s.push(0, t)
            np.testing.assert_array_equal(s.gather(0, "f32"), want)
        assert rc.info()["hits"] > 0
