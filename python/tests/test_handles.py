"""Handles that cannot crash: every public object of the binding refuses copy, deepcopy and pickle with a TypeError
that says what to do; survives close, double close and use after close with a clear error; and is used from a
second thread while a gather runs without harm. The crash reproducers run in a child interpreter, so that a
segfault fails the test instead of ending the run."""
import copy
import pickle
import subprocess
import sys
import threading

import numpy as np
import pytest

from conftest import BUILD, ROOT, fixture, fortunes

import engram


def _objects(store, synthetic_path):
    """Every kind of public object the binding hands out, fresh: name -> object."""
    cfg_file = engram.Config(fixture("ref/v41/v41.config.json"), token_map=fixture("ref/v41/v41.token_map.npy"))
    return {
        "Store": engram.Store(synthetic_path),
        "Config": cfg_file,
        "Config of a store": store.config,
        "Session": store.session(2),
        "RowCache": engram.RowCache(store, 1 << 20),
        "CacheSim": engram.CacheSim(store, "row", 1 << 20),
        "Hasher": engram.Hasher(store.config, 2),
        "Hasher of a file config": engram.Hasher(cfg_file),
    }


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_no_object_can_be_copied_or_pickled(synthetic, how):
    do = {"copy": copy.copy, "deepcopy": copy.deepcopy,
          "pickle": lambda o: pickle.dumps(o, protocol=pickle.HIGHEST_PROTOCOL)}[how]
    with engram.Store(synthetic) as store:
        objs = _objects(store, synthetic)
        for name, o in objs.items():
            with pytest.raises(TypeError) as e:
                do(o)
            msg = str(e.value)
            assert f"cannot {how}" in msg and type(o).__name__ in msg, (name, msg)
            # it says what to do instead
            assert "in each process" in msg or "per thread" in msg, (name, msg)
            for p in (0, 2):
                if how == "pickle":
                    with pytest.raises(TypeError):
                        pickle.dumps(o, protocol=p)
        for name in ("CacheSim", "RowCache", "Session", "Hasher", "Store"):
            objs[name].close()
    # closed ones refuse alike
    for name in ("CacheSim", "RowCache", "Session", "Hasher", "Store"):
        with pytest.raises(TypeError):
            do(objs[name])


def _run_child(code):
    """Run code in a fresh interpreter on this build's library; its exit status and output."""
    env = {"ENGRAM_LIBDIR": BUILD, "PYTHONPATH": f"{ROOT}/python", "PYTHONDONTWRITEBYTECODE": "1"}
    import os
    for k in ("LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS", "PATH"):
        if k in os.environ:
            env[k] = os.environ[k]
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


def test_issue_reproducer_ends_in_type_error_not_a_crash(synthetic):
    """The reproducer of the segfault: copy a session, drop the original, use the copy."""
    p = _run_child(f"""
import copy, gc, engram
st = engram.Store({synthetic!r}); s = st.session()
for obj in (st, s, st.config, engram.RowCache(st, 1 << 20), engram.CacheSim(st, "page", 1 << 20)):
    try:
        c = copy.copy(obj)
    except TypeError as e:
        print("refused", type(obj).__name__)
    else:
        print("copied", type(obj).__name__)
del s; gc.collect()
st2 = engram.Store({synthetic!r}); s2 = st2.session(); s2.close(); s2.close()
try:
    s2.begin()
except ValueError as e:
    print("closed:", e)
""")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("refused") == 5 and "copied" not in p.stdout, p.stdout
    assert "closed: session is closed" in p.stdout


def test_a_store_and_its_sessions_dying_in_one_garbage_cycle(synthetic):
    """A store, its row cache and a session unreachable together (a failed test's traceback, an engine object that
    refers to itself): the collector finalizes them in any order, and the session is destroyed before its parents."""
    p = _run_child(f"""
import gc, numpy as np, engram
gc.disable()
for with_rc in (True, False, True, False):
    st = engram.Store({synthetic!r})
    rc = engram.RowCache(st, 1 << 20) if with_rc else None
    s = st.session(2, mode="direct", row_cache=rc)
    s.begin(); s.push_batch(np.arange(2), np.array([1, 2]))
    for lid in st.config.layer_ids:
        s.gather(lid, "f32")
    cycle = [st, rc, s]
    cycle.append(cycle)
    del st, rc, s, cycle
    gc.collect()
print("collected")
""")
    assert p.returncode == 0 and p.stdout == "collected\n", (p.returncode, p.stderr)


def test_close_double_close_and_use_after_close(synthetic):
    store = engram.Store(synthetic)
    s = store.session(1)
    rc = engram.RowCache(store, 1 << 20)
    sim = engram.CacheSim(store, "page", 1 << 20)
    cfg = store.config
    h = engram.Hasher(cfg)
    # a store with a session or a simulation open refuses to close
    with pytest.raises(RuntimeError, match="in use"):
        store.close()
    for o in (s, rc, sim, h):
        o.close()
        o.close()  # a second close is a no-op
        assert o.closed
    with pytest.raises(ValueError, match="closed"):
        s.begin()
    with pytest.raises(ValueError, match="closed"):
        s.push(0, [1, 2])
    with pytest.raises(ValueError, match="closed"):
        s.gather(14)
    with pytest.raises(ValueError, match="closed"):
        s.stats()
    with pytest.raises(ValueError, match="closed"):
        rc.info()
    with pytest.raises(ValueError, match="closed"):
        sim.begin()
    with pytest.raises(ValueError, match="closed"):
        sim.result()
    with pytest.raises(ValueError, match="closed"):
        h.push(0, [1, 2])
    store.close()
    store.close()
    with pytest.raises(ValueError, match="closed"):
        store.info()
    with pytest.raises(ValueError, match="closed"):
        store.session()
    # the store's config goes with the store: its addressing refuses, its constants stay readable
    with pytest.raises(ValueError, match="closed"):
        cfg.rows([1, 2, 3])
    assert cfg.columns == 24
    with pytest.raises(ValueError, match="closed"):
        engram.RowCache(store, 1 << 20)
    with pytest.raises(ValueError, match="closed"):
        engram.CacheSim(store, "page", 1 << 20)
    with pytest.raises(ValueError, match="closed"):
        engram.Hasher(cfg)


def _while_gathering(store, s, fn, rc=None):
    """Run fn() in this thread while another thread is inside a slow gather of session s (direct mode, no
    prefetch: every row is read inside the call). Returns fn's result, or None if the worker was never caught
    inside."""
    tok = fortunes()
    for attempt in range(6):
        box = {}

        def work():
            s.begin()
            s.push(0, tok[9000 * attempt:][:512 << attempt])
            box["out"] = s.gather(14, "native")

        w = threading.Thread(target=work)
        w.start()
        while not s._busy.locked() and w.is_alive():
            pass
        caught = s._busy.locked()
        res = fn() if caught else None
        w.join()
        assert box["out"].shape == (512 << attempt, 24, 264)
        if caught:
            return res
    pytest.fail("never caught the worker inside a gather")


def test_every_object_from_a_second_thread_while_a_gather_runs(synthetic):
    with engram.Store(synthetic) as store:
        rc = engram.RowCache(store, 1 << 20)
        cfg = store.config
        with store.session(1, mode="direct", prefetch=False, row_cache=rc) as s:
            want = cfg.rows([5, 6, 7])

            def probe():
                out = {}
                for name, fn in (("session.begin", s.begin), ("session.close", s.close),
                                 ("session.push", lambda: s.push(0, [1])), ("store.close", store.close),
                                 ("rowcache.close", rc.close)):
                    try:
                        fn()
                        out[name] = "ran"
                    except RuntimeError as e:
                        out[name] = str(e)
                out["rows"] = cfg.rows([5, 6, 7])
                out["info"] = store.info()["n_layers"]
                out["rc"] = rc.info()["slots"]
                with engram.Store(synthetic) as other, other.session(1) as s2:
                    s2.begin()
                    s2.push(0, [5, 6, 7])
                    out["other"] = s2.rows(14)
                return out

            out = _while_gathering(store, s, probe)
            for name in ("session.begin", "session.close", "session.push"):
                assert "one thread at a time" in out[name], (name, out[name])
            assert "in use" in out["store.close"] and "in use" in out["rowcache.close"]
            np.testing.assert_array_equal(out["rows"], want)
            np.testing.assert_array_equal(out["other"], want[1])
            assert out["info"] == 2 and out["rc"] > 0
            # everything still works after
            s.begin()
            s.reset(0)
            s.push(0, [5, 6, 7])
            np.testing.assert_array_equal(s.rows(14), want[1])
        rc.close()


def test_a_cache_simulation_refuses_a_second_thread(synthetic):
    """CacheSim belongs to one thread at a time, as a Session: a second thread calling in gets RuntimeError."""
    with engram.Store(synthetic) as store, engram.CacheSim(store, "row", 1 << 20) as sim:
        rows = store.config.rows([1, 2, 3])
        res = {}

        def other():
            for name, fn in (("begin", sim.begin), ("push", lambda: sim.push(rows)),
                             ("gather", lambda: sim.gather(14, rows[1])), ("result", sim.result),
                             ("close", sim.close)):
                try:
                    fn()
                    res[name] = "ran"
                except RuntimeError as e:
                    res[name] = str(e)

        with sim._use():  # this thread is inside a call
            t = threading.Thread(target=other)
            t.start()
            t.join()
        for name in ("begin", "push", "gather", "result"):
            assert "one thread at a time" in res[name], (name, res[name])
        assert "in use" in res["close"] or "one thread" in res["close"]
        sim.begin()
        sim.push(rows)
        sim.gather(14, rows[1])
        assert sim.result()["lookups"] == 24 * 3


def test_paths_with_nul_are_refused(synthetic, tmp_path):
    for bad in (synthetic + "\0x", synthetic.encode() + b"\0x"):
        with pytest.raises(ValueError, match="NUL"):
            engram.Store(bad)
    with pytest.raises(ValueError, match="NUL"):
        engram.Config(fixture("ref/v41/v41.config.json") + "\0", token_map=fixture("ref/v41/v41.token_map.npy"))
    with pytest.raises(ValueError, match="NUL"):
        engram.Config(fixture("ref/v41/v41.config.json"), token_map=fixture("ref/v41/v41.token_map.npy") + "\0z")
    with pytest.raises(ValueError, match="NUL"):
        engram.RowCache.remove("/x\0z")
    with engram.Store(synthetic) as store:
        with pytest.raises(ValueError, match="NUL"):
            engram.RowCache(store, 1 << 20, name="/engram-test\0z")


def test_a_row_cache_is_shared_by_threads_but_not_closed_under_one(synthetic):
    """A RowCache is thread-safe (the library's lookups and inserts are): another thread's info() runs while one
    is inside a call, but close() then refuses, as a Session's second thread is refused, and nothing is freed
    under the call."""
    with engram.Store(synthetic) as store:
        rc = engram.RowCache(store, 1 << 20)
        res = {}

        def other():
            res["info"] = rc.info()["slots"]
            try:
                rc.close()
                res["close"] = "closed"
            except RuntimeError as e:
                res["close"] = str(e)

        with rc._use():  # this thread is inside a call
            t = threading.Thread(target=other)
            t.start()
            t.join()
            assert not rc.closed
        assert res["info"] > 0 and "in use" in res["close"]
        rc.close()
        assert rc.closed
