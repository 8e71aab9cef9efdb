"""The binding's argument checks, table-driven: each bad argument raises the stated exception with a clear message
before anything is written or appended."""
import numpy as np
import pytest

import engram

P, COLS, HD, REC = 64, 24, 256, 264  # the step below: 64 positions of the V4.1-geometry synthetic shard


@pytest.fixture(scope="module")
def step(synthetic):
    with engram.Store(synthetic) as store, store.session(P) as s:
        s.begin()
        s.push_batch(np.arange(P), np.arange(500, 500 + P))
        yield store, s


def _ro(a):
    a.flags.writeable = False
    return a


GATHER = [
    # (description, kwargs of gather, exception, message)
    ("unknown dtype", dict(dtype="f16"), ValueError, "dtype 'f16' is not one of 'native', 'bf16' / 'bfloat16'"),
    ("numpy dtype no gather writes", dict(dtype=np.float16), ValueError, "is not one of"),
    ("dtype an object", dict(dtype=object()), ValueError, "is not one of"),
    ("layer without a table", dict(layer=2), ValueError, r"layer 2 has no Engram table in '.*' \(layers 1, 14\)"),
    ("layer as a string", dict(layer="1"), TypeError, "layer id must be an integer"),
    ("layer as a float", dict(layer=1.0), TypeError, "layer id must be an integer"),
    ("layer as a bool", dict(layer=True), TypeError, "layer id must be an integer"),
    ("f32 into float64", dict(dtype="f32", out=np.zeros((P, COLS * HD), np.float64)), ValueError, "needs float32"),
    ("bf16 into float32", dict(dtype="bf16", out=np.zeros((P, COLS * HD), np.float32)), ValueError,
     "bf16 bit patterns"),
    ("bf16 into float16", dict(dtype="bf16", out=np.zeros((P, COLS * HD), np.float16)), ValueError, "is float16"),
    ("float16 without a dtype", dict(out=np.zeros((P, COLS * HD), np.float16)), ValueError, "no gather writes it"),
    ("native into uint16", dict(dtype="native", out=np.zeros((P, COLS, REC // 2), np.uint16)), ValueError,
     "record bytes"),
    ("one position short", dict(out=np.zeros((P - 1, COLS * HD), np.uint16)), ValueError,
     f"out has shape \\[{P - 1}, {COLS * HD}\\]; a bf16 gather of layer 1 \\(64 positions\\) writes "
     f"\\[{P}, {COLS * HD}\\] or \\[{P}, {COLS}, {HD}\\]"),
    ("one element long", dict(out=np.zeros(P * COLS * HD + 1, np.uint16)), ValueError, "out has shape"),
    ("flat, of the right size", dict(out=np.zeros(P * COLS * HD, np.uint16)), ValueError, "out has shape"),
    ("transposed", dict(out=np.zeros((COLS * HD, P), np.uint16)), ValueError, "out has shape"),
    ("heads as positions", dict(out=np.zeros((COLS, P, HD), np.uint16)), ValueError, "out has shape"),
    ("dtype and out disagree", dict(dtype="f32", out=np.zeros((P, COLS * HD), np.uint16)), ValueError,
     "needs float32"),
    ("as_tensor with out", dict(out=np.zeros((P, COLS * HD), np.uint16), as_tensor=True), ValueError,
     "without out="),
    ("every other column", dict(out=np.zeros((P, 2 * COLS * HD), np.uint16)[:, ::2]), ValueError, "C-contiguous"),
    ("Fortran order", dict(out=np.zeros((P, COLS * HD), np.uint16, order="F")), ValueError, "C-contiguous"),
    ("read-only array", dict(out=_ro(np.zeros((P, COLS * HD), np.uint16))), ValueError, "read-only"),
    ("bytes object", dict(dtype="native", out=bytes(P * COLS * REC)), ValueError, "read-only"),
    ("memoryview of floats for bf16", dict(dtype="bf16", out=memoryview(np.zeros(P * COLS * HD // 2, np.float32))),
     ValueError, "format 'f'"),
    ("strided memoryview", dict(dtype="native", out=memoryview(bytearray(2 * P * COLS * REC))[::2]), ValueError,
     "C-contiguous"),
    ("big-endian memoryview", dict(dtype="bf16", out=memoryview(np.zeros(P * COLS * HD, ">u2"))), ValueError,
     "format"),
    ("a list", dict(dtype="bf16", out=[0] * (P * COLS * HD)), TypeError, "writable C-contiguous buffer"),
    ("None-like object", dict(dtype="bf16", out=object()), TypeError, "writable C-contiguous buffer"),
    ("an object without a dtype", dict(out=object()), ValueError, "no gather writes it"),
]


@pytest.mark.parametrize("what,kw,exc,msg", GATHER, ids=[g[0] for g in GATHER])
def test_gather_arguments(step, what, kw, exc, msg):
    _, s = step
    kw = dict(kw)
    layer = kw.pop("layer", 1)
    out = kw.get("out")
    before = bytes(memoryview(out).cast("B")) if isinstance(out, (np.ndarray, memoryview)) and \
        memoryview(out).c_contiguous else None
    with pytest.raises(exc, match=msg):
        s.gather(layer, **kw)
    if before is not None:
        assert bytes(memoryview(out).cast("B")) == before, "a refused buffer was written"


def test_gather_rows_arguments(step):
    _, s = step
    for rows, exc, msg in (([-1], ValueError, "negative"), ([1.5], TypeError, "integers"),
                           (["a"], TypeError, "integers")):
        with pytest.raises(exc, match=msg):
            s.gather_rows(1, rows, "f32")
    with pytest.raises(ValueError, match=r"out has shape \[2\]; a f32 gather of 2 rows of layer 1 writes \[512\] or "
                                         r"\[2, 256\]"):
        s.gather_rows(1, [1, 2], "f32", out=np.zeros(2, np.float32))


PUSH = [
    # (description, call on the session, exception, message)
    ("negative seq", lambda s: s.push(-1, [1]), ValueError, "seq -1 is not a slot number"),
    ("seq beyond 32 bits", lambda s: s.push(2 ** 32, [1]), ValueError, "is not a slot number"),
    ("seq beyond max_seqs", lambda s: s.push(P, [1]), engram.InvalidArgument, ""),
    ("seq as a float", lambda s: s.push(1.0, [1]), TypeError, "seq must be an integer"),
    ("seq as a string", lambda s: s.reset("0"), TypeError, "seq must be an integer"),
    ("reset beyond max_seqs", lambda s: s.reset(P), engram.InvalidArgument, ""),
    ("tokens 2-D", lambda s: s.push(0, [[1, 2]]), ValueError, r"tokens must be one-dimensional, not of shape \(1, 2\)"),
    ("tokens a scalar", lambda s: s.push(0, 5), ValueError, "one-dimensional"),
    ("tokens floats", lambda s: s.push(0, [1.0, 2.0]), TypeError, "tokens must be integers, not float64"),
    ("tokens strings", lambda s: s.push(0, ["1"]), TypeError, "tokens must be integers"),
    ("tokens bools", lambda s: s.push(0, [True]), TypeError, "tokens must be integers, not bool"),
    ("token beyond 64 bits", lambda s: s.push(0, [2 ** 64]), ValueError, "fit 64 bits"),
    ("uint64 token beyond int64", lambda s: s.push(0, np.array([2 ** 63], np.uint64)), ValueError,
     "does not fit int64"),
    ("token beyond the map", lambda s: s.push(0, [1, 10 ** 9]), engram.InvalidArgument, "token"),
    ("mask too short", lambda s: s.push(0, [1, 2, 3], [1, 1]), ValueError, "mask has 2 values for 3 tokens"),
    ("mask 2-D", lambda s: s.push(0, [1, 2], [[1, 1]]), ValueError, "mask must be one-dimensional"),
    ("mask floats", lambda s: s.push(0, [1, 2], [1.0, 0.0]), TypeError, "mask must be bools or integers"),
    ("mask value 2", lambda s: s.push(0, [1, 2], [1, 2]), ValueError, "mask value 2 is not 0 or 1"),
    ("batch lengths differ", lambda s: s.push_batch([0, 1], [5]), ValueError, "1 tokens for 2 seqs"),
    ("batch negative slot", lambda s: s.push_batch([0, -1], [5, 6]), ValueError, "slot -1"),
    ("batch slot beyond 32 bits", lambda s: s.push_batch([2 ** 32], [5]), ValueError, "slot 4294967296"),
    ("batch float slots", lambda s: s.push_batch([0.0], [5]), TypeError, "seqs must be integers"),
    ("batch repeated slot", lambda s: s.push_batch([3, 3], [5, 6]), engram.InvalidArgument, ""),
    ("batch slot beyond max_seqs", lambda s: s.push_batch([0, P], [5, 6]), engram.InvalidArgument, ""),
    ("batch mask too long", lambda s: s.push_batch([0], [5], [1, 1]), ValueError, "mask has 2 values for 1 tokens"),
    ("stats of a bad layer", lambda s: s.stats(7), ValueError, "layer 7"),
    ("rows of a bad layer", lambda s: s.rows(0), ValueError, "layer 0"),
]


@pytest.mark.parametrize("what,call,exc,msg", PUSH, ids=[p[0] for p in PUSH])
def test_push_arguments(step, what, call, exc, msg):
    store, s = step
    rows = s.rows(14)
    with pytest.raises(exc, match=msg):
        call(s)
    assert s.positions == P, "a refused push appended positions"
    np.testing.assert_array_equal(s.rows(14), rows)


SESSION = [
    (dict(max_seqs=0), ValueError, "max_seqs 0 is not a positive 32-bit number"),
    (dict(max_seqs=-3), ValueError, "max_seqs"),
    (dict(max_seqs=2 ** 32), ValueError, "max_seqs"),
    (dict(max_seqs=2.0), TypeError, "max_seqs must be a positive integer"),
    (dict(mode="fast"), ValueError, "mode 'fast' is not 'pagecache' or 'direct'"),
    (dict(queue_depth=0), ValueError, "queue_depth 0"),
    (dict(cache_mb=True), TypeError, "cache_mb must be a positive integer"),
    (dict(cache_mb=-1), ValueError, "cache_mb"),
    (dict(mode="direct", cache_mb=2 ** 31), engram.InvalidArgument, "cache of"),
]


@pytest.mark.parametrize("kw,exc,msg", SESSION, ids=[str(s[0]) for s in SESSION])
def test_session_arguments(step, kw, exc, msg):
    store, _ = step
    kw = dict(kw)
    with pytest.raises(exc, match=msg):
        store.session(kw.pop("max_seqs", 1), **kw)


def test_config_and_store_arguments(step):
    store, _ = step
    cfg = store.config
    for call, exc, msg in ((lambda: cfg.rows([[1]]), ValueError, "one-dimensional"),
                           (lambda: cfg.rows([1, 2], mask=[1]), ValueError, "mask has 1 values for 2 tokens"),
                           (lambda: cfg.primes(5), ValueError, "layer 5"),
                           (lambda: store.preload("all"), TypeError, "layer id"),
                           (lambda: store.row_bytes(1, "f64"), ValueError, "dtype"),
                           (lambda: engram.Store(None), TypeError, "path")):
        with pytest.raises(exc, match=msg):
            call()
    assert store.row_bytes(14, "native") == REC and store.row_bytes(1, "f32") == 4 * HD
