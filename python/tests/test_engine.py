"""What an engine needs from the binding: speculative rewind, slot state export/import, torch-native gathers, the
dtypes of numpy and torch, out= checked by shape, OSError subclasses by errno, keyword-only options, negative
token ids refused on request, an independent read path (Store.gather_rows, Store.read_row), type hints."""
import errno
import inspect
import os

import numpy as np
import pytest

from conftest import fixture, fortunes

import engram


def _accepted_rows(store, stream):
    with store.session(1) as ref:
        ref.begin()
        ref.push(0, stream)
        return {lid: ref.rows(lid) for lid in store.config.layer_ids}, \
            {lid: ref.gather(lid, "f32") for lid in store.config.layer_ids}


@pytest.mark.parametrize("mode", ["pagecache", "direct"])
def test_speculative_loop_with_rewind_and_preemption(synthetic, mode):
    """An engine loop verifying k drafts per step (k + 1 positions), rewinding the rejected ones, and preempting
    the sequence to another slot halfway: every accepted position's rows and gathered rows are those of the
    accepted stream pushed straight through."""
    rng = np.random.default_rng(7)
    stream = fortunes()[:300]
    want_rows, want_f32 = _accepted_rows(engram.Store(synthetic), stream)
    with engram.Store(synthetic) as store, store.session(2, mode=mode) as s:
        slot, p, steps, wasted = 0, 0, 0, 0
        s.push(slot, stream[:1])  # the prompt's first token, in a step of its own
        s.begin()
        p = 1
        while p + 9 < len(stream):
            k = int(rng.integers(0, 6))
            drafts = stream[p:p + 1 + k].copy()  # the known token, then k drafts
            j = int(rng.integers(0, k + 1))      # the first j drafts right
            if j < k:
                drafts[1 + j] = (drafts[1 + j] + 1) % store.config.raw_vocab
            s.begin()
            s.push(slot, drafts)
            for lid in store.config.layer_ids:
                r = s.rows(lid)
                np.testing.assert_array_equal(r[:1 + j], want_rows[lid][p:p + 1 + j])
                g = s.gather(lid, "f32")
                np.testing.assert_array_equal(g[:1 + j], want_f32[lid][p:p + 1 + j])
            s.rewind(slot, k - j)
            assert s.positions == 1 + k  # a rewind never changes the step
            wasted += k - j
            p += 1 + j
            steps += 1
            if steps % 17 == 0:  # preempt: the state leaves the slot, the slot serves another sequence, resume
                state = s.export_state(slot)
                assert isinstance(state, bytes) and 24 <= len(state) <= engram.SEQ_STATE_MAX
                s.reset(slot)
                s.begin()
                s.push(slot, [5, 6, 7])
                slot = 1 - slot
                s.import_state(slot, state)
        assert steps > 30 and wasted > 0


def test_rewind_beyond_what_is_kept_then_seed(synthetic):
    stream = fortunes()[1000:1200]
    with engram.Store(synthetic) as store, store.session(1) as s:
        want, _ = _accepted_rows(store, stream)
        s.begin()
        s.push(0, stream[:150])
        with pytest.raises(engram.Error) as e:
            s.rewind(0, 100)
        assert e.value.errno == errno.ERANGE and "seed" in e.value.strerror
        # the tokens given back: the last max_ngram - 1 accepted ones (here: back to position 50)
        s.seed(0, stream[50 - 3:50])
        s.begin()
        s.push(0, stream[50:60])
        np.testing.assert_array_equal(s.rows(14), want[14][50:60])
        s.seed(0, stream[:2], start=True)
        s.begin()
        s.push(0, stream[2:5])
        np.testing.assert_array_equal(s.rows(1), want[1][2:5])
        with pytest.raises(engram.InvalidArgument, match="ENGRAM_SEED_START"):
            s.seed(0, stream[:2])
        with pytest.raises(ValueError, match="negative"):
            s.rewind(0, -1)


def test_hasher_rewinds_and_moves_slots_to_a_session(synthetic):
    """The hasher's slots as a session's: rewind, seed, and a state exported from one imported by the other."""
    stream = fortunes()[3000:3100]
    cfg_file = engram.Config(fixture("ref/v41/v41.config.json"), token_map=fixture("ref/v41/v41.token_map.npy"))
    with engram.Store(synthetic) as store, store.session(2) as s:
        h = engram.Hasher(store.config, 3)
        want = store.config.rows(stream)
        np.testing.assert_array_equal(h.push(0, stream[:50]), want[:, :50])
        h.push(0, [7, 8, 9])                       # three rejected drafts
        h.rewind(0, 3)
        b = h.push_batch([0, 2], [stream[50], 5])
        np.testing.assert_array_equal(b[:, :1], want[:, 50:51])
        s.begin()
        s.import_state(1, h.export_state(0))       # the hasher's slot continues in the session
        s.push(1, stream[51:60])
        np.testing.assert_array_equal(s.rows(14), want[1, 51:60])
        h.seed(1, stream[:60], start=True)
        np.testing.assert_array_equal(h.push(1, stream[60:70]), want[:, 60:70])
        with pytest.raises(RuntimeError, match="in use"):
            store.close()                          # the hasher uses the store's config
        h.close()
        # the synthetic store's primes are not the file config's: its states are another config's
        with pytest.raises(engram.Error) as e:
            s.import_state(0, engram.Hasher(cfg_file).export_state(0))
        assert e.value.errno == engram.ECONFIG


def test_a_file_config_and_its_store_share_states(packed):
    stream = fortunes()[:60] % 1000
    cfg = engram.Config(fixture("ref/tiny-v41/tiny-v41.config.json"),
                        token_map=fixture("ref/tiny-v41/tiny-v41.token_map.npy"))
    with engram.Store(packed("tiny-v41", "raw")) as store, store.session(1) as s:
        g = engram.Hasher(cfg, 1)
        g.push(0, stream[:20])
        s.import_state(0, g.export_state(0))
        s.begin()
        s.push(0, stream[20:25])
        np.testing.assert_array_equal(s.rows(1), cfg.rows(stream)[0, 20:25])


def test_state_of_another_config_or_corrupt_is_refused(synthetic, packed):
    with engram.Store(synthetic) as store, store.session(1) as s, \
            engram.Store(packed("tiny-v41", "raw")) as other, other.session(1) as o:
        s.begin()
        s.push(0, [1, 2, 3, 4, 5])
        state = s.export_state(0)
        with pytest.raises(engram.Error) as e:
            o.import_state(0, state)
        assert e.value.errno == engram.ECONFIG
        bad = bytearray(state)
        bad[30] ^= 1
        with pytest.raises(engram.Error) as e:
            s.import_state(0, bytes(bad))
        assert e.value.errno == engram.ECORRUPT
        with pytest.raises(engram.Error) as e:
            s.import_state(0, state[:-1])
        assert e.value.errno == engram.ETRUNC
        with pytest.raises(TypeError, match="bytes"):
            s.import_state(0, "text")


def test_dtypes_of_numpy_torch_and_names(synthetic):
    torch = pytest.importorskip("torch")
    with engram.Store(synthetic) as store, store.session(4) as s:
        s.begin()
        s.push_batch([0, 1, 2], [10, 20, 30])
        bits = s.gather(14, "bf16", as_tensor=False)
        f32 = s.gather(14, "f32")
        for d in ("bf16", "bfloat16", torch.bfloat16, None):
            t = s.gather(14, d)
            assert isinstance(t, torch.Tensor) and t.dtype == torch.bfloat16 and tuple(t.shape) == (3, 6144)
            assert (t.view(torch.int16).numpy().view(np.uint16) == bits).all()
        for d in ("f32", "float32", np.float32, np.dtype("float32")):
            g = s.gather(14, d)
            assert isinstance(g, np.ndarray) and g.dtype == np.float32
            np.testing.assert_array_equal(g, f32)
        for t in (s.gather(14, "f32", as_tensor=True), s.gather(14, torch.float32)):  # a torch dtype: a tensor
            assert isinstance(t, torch.Tensor) and t.dtype == torch.float32
            np.testing.assert_array_equal(t.numpy(), f32)
        assert isinstance(s.gather(14, torch.float32, as_tensor=False), np.ndarray)
        np.testing.assert_array_equal(s.gather(14, np.uint16), bits)
        nat = s.gather(14, torch.uint8)
        np.testing.assert_array_equal(nat.numpy(), s.gather(14, "native"))
        n = s.gather(14, "native", as_tensor=True)
        assert isinstance(n, torch.Tensor) and tuple(n.shape) == (3, 24, 264)
        # dtype from out=, in either shape
        for shape in ((3, 6144), (3, 24, 256)):
            out = torch.empty(shape, dtype=torch.bfloat16)
            assert s.gather(14, out=out) is out
            assert (out.reshape(3, 6144).view(torch.int16).numpy().view(np.uint16) == bits).all()
            out = torch.empty(shape, dtype=torch.float32)
            s.gather(14, out=out)
            np.testing.assert_array_equal(out.reshape(3, 6144).numpy(), f32)
        # the silently accepted buffers
        for shape in ((6144, 3), (18432,), (3, 24, 256 // 2, 2)):
            with pytest.raises(ValueError, match=r"out has shape .*; a bf16 gather of layer 14 \(3 positions\) "
                                                 r"writes \[3, 6144\] or \[3, 24, 256\]"):
                s.gather(14, out=torch.empty(shape, dtype=torch.bfloat16))
        with pytest.raises(ValueError, match="contiguous"):
            s.gather(14, out=torch.empty((6144, 3), dtype=torch.bfloat16).t())
        # gather_rows and the store's rows take the same dtypes
        r = s.rows(14)
        t = store.gather_rows(14, r, torch.bfloat16)
        assert t.dtype == torch.bfloat16 and (t.view(torch.int16).numpy().view(np.uint16) == bits).all()


def test_without_torch_bf16_is_numpy_uint16(synthetic):
    """Where torch cannot be imported a bf16 gather returns numpy uint16 bit patterns (documented); run in a child
    whose torch import fails."""
    import subprocess
    import sys
    from conftest import BUILD, ROOT
    code = f"""
import sys
sys.modules["torch"] = None  # import torch raises ImportError
import numpy as np, engram
with engram.Store({synthetic!r}) as st, st.session() as s:
    s.begin(); s.push(0, [1, 2, 3])
    g = s.gather(14)
    print(type(g).__name__, g.dtype, g.shape)
    try:
        s.gather(14, as_tensor=True)
    except ValueError as e:
        print("as_tensor:", e)
"""
    env = dict(os.environ, ENGRAM_LIBDIR=BUILD, PYTHONPATH=f"{ROOT}/python")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "ndarray uint16 (3, 6144)" in p.stdout and "as_tensor: as_tensor=True needs torch" in p.stdout


def test_store_read_paths_equal_the_session(synthetic):
    with engram.Store(synthetic) as store, store.session(1, mode="direct") as s:
        s.begin()
        s.push(0, fortunes()[:40])
        r = s.rows(1)
        nat = s.gather(1, "native")
        np.testing.assert_array_equal(store.gather_rows(1, r, "native"), nat)
        assert store.read_row(1, int(r[3, 5])) == nat[3, 5].tobytes()
        out = np.empty((40, 24, 256), np.float32)
        assert store.gather_rows(1, r, out=out) is out
        np.testing.assert_array_equal(out.reshape(40, -1), s.gather(1, "f32"))
        with pytest.raises(engram.InvalidArgument):
            store.read_row(1, store.config.table_rows[0])
        with pytest.raises(ValueError, match="not a row number"):
            store.read_row(1, -1)


def test_negative_token_ids_refused_on_request(synthetic):
    with engram.Store(synthetic) as store:
        with store.session(2) as s:
            s.begin()
            s.push(0, [-1, -7, -10 ** 12])  # the demo's rule: kept as they are
            assert s.positions == 3
            with pytest.raises(ValueError, match=r"token id -7 at position 1 is negative"):
                s.push(0, [3, -7], refuse_negative=True)
            assert s.positions == 3
        with store.session(2, refuse_negative=True) as s:
            s.begin()
            for call in (lambda: s.push(0, [1, -1]), lambda: s.push_batch([0, 1], [5, -10 ** 12]),
                         lambda: s.prefetch_next([0], [-2]), lambda: s.seed(0, [-1, 2, 3])):
                with pytest.raises(ValueError, match="negative"):
                    call()
            assert s.positions == 0
            s.push(0, [-1], refuse_negative=False)
            assert s.positions == 1


def test_oserror_subclasses_with_the_filename(tmp_path, synthetic):
    missing = tmp_path / "none.engram"
    with pytest.raises(FileNotFoundError) as e:
        engram.Store(missing)
    assert e.value.filename == str(missing) and isinstance(e.value, engram.Error)
    with pytest.raises(IsADirectoryError) as e:
        engram.Store(tmp_path)
    assert e.value.filename == str(tmp_path)
    cfg = fixture("ref/tiny/tiny.config.json")
    with pytest.raises(FileNotFoundError) as e:
        engram.Config(cfg, token_map=tmp_path / "map.npy")
    assert e.value.filename == str(tmp_path / "map.npy")
    with pytest.raises(FileNotFoundError) as e:
        engram.Config(tmp_path / "c.json", token_map=fixture("ref/tiny/tiny.token_map.npy"))
    assert e.value.filename == str(tmp_path / "c.json")
    with pytest.raises(FileNotFoundError):
        engram.RowCache.remove("/engram-test-never-made")
    if os.geteuid() != 0:  # root reads anything
        locked = tmp_path / "locked.engram"
        locked.write_bytes(open(synthetic, "rb").read(4096))
        locked.chmod(0)
        with pytest.raises(PermissionError) as e:
            engram.Store(locked)
        assert e.value.filename == str(locked) and isinstance(e.value, engram.PermissionDenied)


def test_options_are_keyword_only_and_sizes_in_bytes(synthetic):
    with engram.Store(synthetic) as store:
        with pytest.raises(TypeError):
            store.session(1, "direct")
        with pytest.raises(TypeError):
            engram.CacheSim(store, "page", 1 << 20, 4096)
        with pytest.raises(TypeError):
            engram.Config(fixture("ref/tiny/tiny.config.json"), fixture("ref/tiny/tiny.token_map.npy"))
        with store.session(1, cache_bytes=8 << 20, page_cache_bytes=64 << 20) as a, \
                store.session(1, cache_mb=8, page_cache_mb=64) as b:
            for x in (a, b):
                x.begin()
                x.push(0, [1, 2, 3])
            np.testing.assert_array_equal(a.gather(1, "f32"), b.gather(1, "f32"))
        with pytest.raises(TypeError, match="not both"):
            store.session(1, cache_bytes=1 << 20, cache_mb=1)
        with pytest.raises(ValueError, match="cache_bytes 0"):
            store.session(1, cache_bytes=0)
        rc = engram.RowCache(store, 2 << 20)
        assert (1 << 20) < rc.info()["bytes"] <= 2 << 20  # bytes, not MiB
        rc.close()


def test_every_public_function_has_type_hints():
    pkg = os.path.dirname(engram.__file__)
    assert os.path.exists(os.path.join(pkg, "py.typed"))
    missing = []
    for cls in (engram.Config, engram.Store, engram.Session, engram.RowCache, engram.CacheSim, engram.IoStats,
                engram.Hasher):
        for name, fn in inspect.getmembers(cls):
            if name.startswith("_") and name not in ("__init__",):
                continue
            f = fn.fget if isinstance(fn, property) else fn
            if not inspect.isfunction(f) or f.__module__ != cls.__module__:
                continue
            sig = inspect.signature(f)
            if sig.return_annotation is inspect.Signature.empty:
                missing.append(f"{cls.__name__}.{name} return")
            for p in sig.parameters.values():
                if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty and \
                        p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    missing.append(f"{cls.__name__}.{name}({p.name})")
    for f in (engram.library_version, engram.library_path):
        if inspect.signature(f).return_annotation is inspect.Signature.empty:
            missing.append(f.__name__)
    assert not missing, missing
