"""engram.Session: gathers equal `engram-stat gather` for every dtype, codec and mode, and the reference
embeddings; pushes in any grouping give the same rows; out= buffers of every kind; stats; errors."""
import array
import errno
import mmap

import numpy as np
import pytest

from conftest import CHECKPOINTS, fixture, in_child, run, tool, vectors

import engram

DTYPES = ["f32", "bf16", "native"]
MODES = ["pagecache", "direct"]
CODECS = ["raw", "zstd"]


def _stream(name):
    """Every sequence of the checkpoint's vectors, one after the other, and a mask (1 where none is given)."""
    v = vectors(CHECKPOINTS[name][0])
    tokens = np.concatenate([v.tokens[s] for s in v.seqs])
    mask = np.concatenate([v.masks.get(s, np.ones(len(v.tokens[s]), np.uint8)) for s in v.seqs])
    return v, tokens, mask


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("name", sorted(CHECKPOINTS))
def test_gather_equals_engram_stat_gather(packed, tmp_path, name, codec, mode, dtype):
    shard = packed(name, codec)
    v, tokens, mask = _stream(name)
    with engram.Store(shard) as store, store.session(1, mode=mode) as s:
        s.begin()
        # pushed in uneven chunks: the hasher keeps each slot's history, so the rows are those of one push
        for a, b in ((0, 1), (1, 7), (7, 100), (100, len(tokens))):
            s.push(0, tokens[a:b], mask[a:b])
        assert s.positions == len(tokens)
        for layer in v.layer_ids:
            got = s.gather(layer, dtype, as_tensor=False)
            out = tmp_path / f"{layer}.npy"
            run(tool("engram-stat"), "gather", shard, "--tokens", ",".join(map(str, tokens)), "--mask",
                ",".join(map(str, mask)), "--layer", layer, "--dtype", dtype, "--mode", mode, "--out", out)
            want = np.load(out)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes(), f"{name} {codec} {mode} {dtype} layer {layer}"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,kind", [("tiny-f32", "f32"), ("tiny-bf16", "bf16"), ("tiny-v41", "f32"),
                                       ("tiny-v41", "raw")])
def test_gather_equals_reference_embeddings(packed, name, kind, mode):
    """fixtures/ref/*/*.expect.*.npy: what the reference model's embedding lookup gives, per sequence."""
    d = CHECKPOINTS[name][0]
    v = vectors(d)
    with engram.Store(packed(name, "zstd")) as store, store.session(4, mode=mode) as s:
        for seq in v.seqs:
            s.begin()
            s.reset(seq % 4)
            s.push(seq % 4, v.tokens[seq], v.masks.get(seq))
            for layer in v.layer_ids:
                want = np.load(fixture(f"ref/{d}/{d}.expect.{kind}.seq{seq}.layer{layer}.npy"))
                if kind == "raw":
                    np.testing.assert_array_equal(s.gather(layer, "native"), want)
                elif kind == "bf16":  # bf16 values widened to float32: the high half is the bf16 pattern
                    bits = want.view(np.uint32)
                    assert not (bits & 0xFFFF).any()
                    np.testing.assert_array_equal(s.gather(layer, "bf16", as_tensor=False), (bits >> 16).astype(np.uint16))
                else:
                    np.testing.assert_array_equal(s.gather(layer, "f32"), want)


def test_split_store_gathers_as_one_shard(packed):
    v, tokens, mask = _stream("tiny-v41")
    got = {}
    for split in (None, "layer", "heads:2"):
        with engram.Store(packed("tiny-v41", "zstd", split)) as store, store.session(1) as s:
            s.begin()
            s.push(0, tokens, mask)
            got[split] = [s.gather(layer, "native") for layer in v.layer_ids]
    for split in ("layer", "heads:2"):
        for a, b in zip(got[None], got[split]):
            np.testing.assert_array_equal(a, b)


def test_push_batch_equals_pushes_and_reset_starts_a_sequence(synthetic):
    rng = np.random.default_rng(1)
    with engram.Store(synthetic) as store, store.session(8) as a, store.session(8) as b:
        cfg = store.config
        for step in range(6):
            slots = rng.permutation(8)[:5]
            toks = rng.integers(0, cfg.raw_vocab, 5)
            live = rng.integers(0, 4, 5) > 0
            if step == 3:
                a.reset(slots[0])
                b.reset(slots[0])
            a.begin()
            a.push_batch(slots.astype(np.uintc), toks, live)
            b.begin()
            for k in range(5):
                b.push(int(slots[k]), toks[k:k + 1], live[k:k + 1])
            assert a.positions == b.positions == 5
            for layer in cfg.layer_ids:
                np.testing.assert_array_equal(a.rows(layer), b.rows(layer))
                np.testing.assert_array_equal(a.gather(layer, "bf16", as_tensor=False), b.gather(layer, "bf16", as_tensor=False))
        # after a reset the slot's rows are those of a fresh sequence
        a.begin()
        a.reset(2)
        a.push(2, [5, 6, 7])
        np.testing.assert_array_equal(a.rows(14), cfg.rows([5, 6, 7])[1])


def test_rows_prefetch_and_gather_rows(synthetic):
    with engram.Store(synthetic) as store, store.session(2) as s:
        s.begin()
        s.push(1, np.arange(100, 160))
        for layer in store.config.layer_ids:
            r = s.rows(layer)
            assert r.shape == (60, 24) and r.dtype == np.uint64
            np.testing.assert_array_equal(r, store.config.rows(np.arange(100, 160))[store.config.layer_index(layer)])
            s.prefetch_rows(layer, r[:3])
            for dtype in DTYPES:
                g = s.gather(layer, dtype, as_tensor=False)
                np.testing.assert_array_equal(s.gather_rows(layer, r, dtype, as_tensor=False), g)
                # the store's own read path gives the same rows
                np.testing.assert_array_equal(store.gather_rows(layer, r, dtype, as_tensor=False), g)
                one = s.gather_rows(layer, r[5, 7], dtype, as_tensor=False)
                if dtype == "native":
                    np.testing.assert_array_equal(one, g[5, 7])
                else:
                    np.testing.assert_array_equal(one, g[5, 7 * 256:8 * 256])
        with pytest.raises(engram.InvalidArgument):
            s.gather_rows(1, [store.config.table_rows[0]], "f32")
        s.prefetch_rows(14, [store.config.table_rows[1]])  # the C API leaves a bad row to the gather to report
        with pytest.raises(engram.InvalidArgument) as e:
            s.gather_rows(14, [store.config.table_rows[1]], "native")
        assert str(store.config.table_rows[1]) in e.value.strerror


def test_empty_step(synthetic):
    with engram.Store(synthetic) as store, store.session(1) as s:
        s.begin()
        assert s.gather(1, "f32").shape == (0, 24 * 256)
        assert s.gather(1, "native").shape == (0, 24, 264)
        assert s.rows(14).shape == (0, 24)
        s.push(0, [])
        assert s.positions == 0 and s.gather_bytes(14, "bf16") == 0


def _outs(shape, np_dtype, fmt):
    """The kinds of writable buffer gather(out=) takes, each of the gather's shape: numpy arrays, memoryviews of
    numpy, array.array, mmap and bytearray memory."""
    n = int(np.prod(shape))
    nbytes = n * np.dtype(np_dtype).itemsize
    yield "ndarray", np.empty(shape, np_dtype)
    yield "memoryview", memoryview(np.empty(shape, np_dtype))
    yield "array.array", memoryview(array.array(fmt, bytes(nbytes))).cast("B").cast(fmt, shape)
    m = mmap.mmap(-1, nbytes)
    yield "mmap", memoryview(m).cast(fmt, shape)
    yield "bytearray as view", memoryview(bytearray(nbytes)).cast(fmt, shape)


@pytest.mark.parametrize("dtype,np_dtype,fmt", [("f32", np.float32, "f"), ("bf16", np.uint16, "H"),
                                                ("native", np.uint8, "B")])
def test_gather_into_every_kind_of_buffer(synthetic, dtype, np_dtype, fmt):
    with engram.Store(synthetic) as store, store.session(64) as s:
        s.begin()
        s.push_batch(np.arange(64), np.arange(1000, 1064))
        want = s.gather(14, dtype, as_tensor=False)
        for kind, buf in _outs(want.shape, np_dtype, fmt):
            ret = s.gather(14, dtype, out=buf)
            assert ret is buf, kind
            assert bytes(memoryview(buf).cast("B")) == want.tobytes(), kind
        # the other shape of the same rows: [positions, columns, head_dim] (or [positions, columns x record])
        other = (64, 24, 256) if dtype != "native" else (64, 24 * 264)
        buf = np.empty(other, np_dtype)
        assert s.gather(14, out=buf) is buf  # the dtype taken from out=
        assert buf.tobytes() == want.tobytes()
        # a flat buffer of the right size, or a transposed one, is refused: the shape says what is written
        for bad in (np.empty(want.size, np_dtype), np.empty(want.shape[::-1], np_dtype),
                    memoryview(bytearray(want.nbytes)).cast(fmt)):
            with pytest.raises(ValueError, match="out has shape"):
                s.gather(14, dtype, out=bad)


def test_gather_into_a_torch_tensor(synthetic):
    torch = pytest.importorskip("torch")
    with engram.Store(synthetic) as store, store.session(64) as s:
        s.begin()
        s.push_batch(np.arange(64, dtype=np.uintc), np.arange(2000, 2064))
        want = s.gather(1, "bf16", as_tensor=False)
        t = torch.empty((64, 24 * 256), dtype=torch.bfloat16)
        assert s.gather(1, "bf16", out=t) is t
        assert (t.view(torch.int16).numpy().view(np.uint16) == want).all()
        f = torch.empty((64, 24 * 256), dtype=torch.float32)
        s.gather(1, "f32", out=f)
        np.testing.assert_array_equal(f.numpy(), s.gather(1, "f32"))
        # bf16 widened to float32 is exact: the tensor holds the values the f32 gather rounds to bf16
        np.testing.assert_array_equal(t.float().numpy().view(np.uint32) >> 16, want)
        # a slice of a bigger buffer: contiguous rows are fine, a column slice is not
        big = torch.zeros((128, 24 * 256), dtype=torch.bfloat16)
        s.gather(1, "bf16", out=big[32:96])
        assert (big[32:96].view(torch.int16).numpy().view(np.uint16) == want).all()
        assert not big[:32].view(torch.int16).numpy().any() and not big[96:].view(torch.int16).numpy().any()
        with pytest.raises(ValueError, match="contiguous"):
            s.gather(1, "bf16", out=torch.empty((64, 2 * 24 * 256), dtype=torch.bfloat16)[:, ::2])
        with pytest.raises(ValueError, match="torch.float16"):
            s.gather(1, "bf16", out=torch.empty((64, 24 * 256), dtype=torch.float16))
        with pytest.raises(ValueError, match=r"out has shape \[63, 6144\]; a bf16 gather of layer 1 \(64 positions\) "
                                             r"writes \[64, 6144\] or \[64, 24, 256\]"):
            s.gather(1, "bf16", out=torch.empty((63, 24 * 256), dtype=torch.bfloat16))
        with pytest.raises(ValueError, match="grad"):
            s.gather(1, "f32", out=torch.empty((64, 24 * 256), requires_grad=True))


def test_stats(synthetic):
    with engram.Store(synthetic) as store, store.session(4, mode="direct") as s:
        s.begin()
        s.push(0, np.arange(10))
        s.gather(1, "f32")
        st = s.stats(1, step=True)
        assert isinstance(st, engram.IoStats)
        # every field of the C struct, in its order, each documented
        assert list(st._fields) == [n for n, _ in engram._lib.IoStats._fields_ if n != "size"]
        assert all(getattr(engram.IoStats, f).__doc__ and "Alias" not in getattr(engram.IoStats, f).__doc__
                   for f in st._fields)
        assert st.rows == st["rows"] == st.as_dict()["rows"]
        assert st["rows"] == 10 * 24 == st["ready"] + st["not_ready"] + st["misses"]
        assert len(st["lead_hist"]) == engram._lib.LEAD_BUCKETS and all(isinstance(x, int) for x in st["lead_hist"])
        total = s.stats()
        assert total["rows"] == 240 and total["requested"] >= 2 * 240 and total["ios"] >= 1
        s.gather(14, "f32")
        assert s.stats()["rows"] == 480 and s.stats(14)["rows"] == 240
        s.begin()
        assert s.stats(step=True)["rows"] == 0 and s.stats()["rows"] == 480


def test_session_options(synthetic):
    with engram.Store(synthetic) as store:
        with store.session(3, mode="direct", queue_depth=4, cache_mb=8, uring=False, prefetch=False) as s:
            assert s.backend.startswith("pread pool") and s.max_seqs == 3 and s.mode == "direct"
            s.begin()
            s.push(2, [7, 8, 9])
            assert s.stats(step=True)["requested"] == 0
            with store.session(3) as ref:
                ref.begin()
                ref.push(2, [7, 8, 9])
                np.testing.assert_array_equal(s.gather(14, "bf16", as_tensor=False), ref.gather(14, "bf16", as_tensor=False))
        assert "closed" in repr(s)


def test_bad_token_appends_nothing(synthetic):
    with engram.Store(synthetic) as store, store.session(4) as s:
        s.begin()
        s.push(0, [1, 2])
        with pytest.raises(engram.InvalidArgument) as e:
            s.push(1, [3, store.config.raw_vocab])
        assert e.value.errno == errno.EINVAL and "token" in e.value.strerror
        with pytest.raises(engram.InvalidArgument):
            s.push_batch([1, 1], [3, 4])
        with pytest.raises(engram.InvalidArgument):
            s.push_batch([1, 4], [3, 4])
        with pytest.raises(engram.InvalidArgument):
            s.push(4, [3])
        with pytest.raises(engram.InvalidArgument):
            s.reset(4)
        assert s.positions == 2
        np.testing.assert_array_equal(s.rows(1), store.config.rows([1, 2])[0])


def test_read_errors_raise_with_the_file(packed, tmp_path):
    """A shard whose table data no longer matches its checksums: zstd frames that do not decode fail the gather
    with ECORRUPT naming the file, in both modes (the metadata, at the end of the file, is intact)."""
    src = packed("tiny-v41", "zstd")
    bad = tmp_path / "bad.engram"
    data = bytearray(open(src, "rb").read())
    for off in range(8192, len(data) // 2, 64):
        data[off] ^= 0x5A
    bad.write_bytes(bytes(data))
    v, tokens, mask = _stream("tiny-v41")
    for mode in MODES:
        with engram.Store(bad) as store, store.session(1, mode=mode) as s:
            s.begin()
            s.push(0, tokens)
            with pytest.raises(engram.Error) as e:
                s.gather(1, "f32")
            assert e.value.errno == engram.ECORRUPT and "bad.engram" in e.value.strerror


def test_prefetch_next_reads_drafts_without_pushing_them(synthetic):
    slots, first, drafts = np.arange(8), np.arange(100, 108), np.arange(5000, 5008)
    with engram.Store(synthetic) as store, store.session(8, mode="direct") as s, \
            store.session(8, mode="direct") as ref:
        for x in (s, ref):
            x.begin()
            x.push_batch(slots, first)
        rows, requested = s.rows(1), s.stats()["requested"]
        s.prefetch_next(slots, drafts)
        assert s.positions == 8 and s.stats()["requested"] == requested + 8 * 24 * 2
        np.testing.assert_array_equal(s.rows(1), rows)
        with pytest.raises(engram.InvalidArgument):
            s.prefetch_next([1, 1], [5, 6])
        with pytest.raises(ValueError, match="1 tokens for 2 seqs"):
            s.prefetch_next([1, 2], [5])
        for x in (s, ref):  # the drafts confirmed: the next step pushes them
            x.begin()
            x.push_batch(slots, drafts)
        for layer in (1, 14):
            np.testing.assert_array_equal(s.rows(layer), ref.rows(layer))
            np.testing.assert_array_equal(s.gather(layer, "native"), ref.gather(layer, "native"))
        # counted once gathered: the I/O thread starts the reads a push queues
        assert s.stats(step=True)["ios"] == 0 < ref.stats(step=True)["ios"]


@pytest.mark.parametrize("uring", [True, False])
def test_forked_child_gets_eforked(synthetic, uring):
    """A session made before a fork raises engram.Error(EFORKED) in the child; the store makes new ones there."""
    with engram.Store(synthetic) as store, store.session(1, uring=uring) as s:
        s.begin()
        s.push(0, np.arange(40))
        want = s.gather(1, "f32")

        def child():
            try:
                s.gather(1, "f32")
                return 1
            except engram.Error as e:
                if e.errno != engram.EFORKED or "fork" not in e.strerror:
                    return 1
            with store.session(1, uring=uring) as c:
                c.begin()
                c.push(0, np.arange(40))
                return 0 if np.array_equal(c.gather(1, "f32"), want) else 3

        assert in_child(child) == b"\x00"
        np.testing.assert_array_equal(s.gather(1, "f32"), want)  # the parent's session is unaffected
