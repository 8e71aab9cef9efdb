"""Threads: library calls release the GIL; sessions of one Store run concurrently and give the rows one thread
gives; a session entered by a second thread refuses instead of corrupting; each thread's errors carry its own
message."""
import threading
import time

import numpy as np
import pytest

from conftest import fortunes

import engram


def _timed_gather(s, tokens, box):
    s.begin()
    s.push(0, tokens)
    box["t0"] = time.perf_counter()
    box["out"] = s.gather(14, "native")
    box["t1"] = time.perf_counter()


def test_other_threads_run_while_a_gather_waits(synthetic):
    """A direct-mode session without prefetch reads every row's unit inside gather (O_DIRECT, a fresh private
    cache): the gather waits on the disk for tens of milliseconds. Meanwhile this thread must keep running
    Python code: were the GIL held during the call, it could not run at all between the call's start and end."""
    tok = fortunes()
    with engram.Store(synthetic) as store:
        for attempt in range(6):
            n = 256 << attempt
            box, stamps = {}, []
            with store.session(1, mode="direct", prefetch=False) as s:
                w = threading.Thread(target=_timed_gather, args=(s, tok[20000 * attempt:][:n], box))
                w.start()
                while w.is_alive():
                    stamps.append(time.perf_counter())
                w.join()
                assert s.stats(14)["misses"] == n * 24
            d = box["t1"] - box["t0"]
            if d < 0.02:  # too quick to tell (a device that caches): more rows
                continue
            t = np.array(stamps)
            inside = ((t > box["t0"] + 0.1 * d) & (t < box["t1"] - 0.1 * d)).sum()
            # with the GIL released this thread runs throughout (millions of iterations a second)
            assert inside > 100, f"this thread ran {inside} times during a {d * 1e3:.0f} ms gather"
            return
    pytest.fail("no gather took 20 ms: cannot tell whether the GIL is released")


def _decode(store, seed, steps, results, spans, **options):
    rng = np.random.default_rng(seed)
    out = []
    t0 = time.perf_counter()
    with store.session(16, **options) as s:
        buf = np.empty((16, 24 * 256), np.uint16)
        for _ in range(steps):
            s.begin()
            s.push_batch(rng.permutation(16).astype(np.uintc), rng.integers(0, 128000, 16))
            for layer in (1, 14):
                s.gather(layer, "bf16", out=buf)
                out.append(int(buf.view(np.uint64).sum(dtype=np.uint64)))
    spans[seed] = (t0, time.perf_counter())
    results[seed] = out


@pytest.mark.parametrize("shared_row_cache", [False, True])
def test_sessions_of_one_store_run_concurrently(synthetic, shared_row_cache):
    """Two threads, a session each on one store (and, direct, one row cache both fill and read)."""
    steps = 150
    with engram.Store(synthetic) as store:
        alone, spans = {}, {}
        for seed in (1, 2):
            _decode(store, seed, steps, alone, spans)
        together, spans = {}, {}
        options = dict(mode="direct", row_cache=engram.RowCache(store, mb=4)) if shared_row_cache else {}
        ts = [threading.Thread(target=_decode, args=(store, seed, steps, together, spans), kwargs=options)
              for seed in (1, 2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    assert together == alone
    (a0, a1), (b0, b1) = spans[1], spans[2]
    assert a0 < b1 and b0 < a1, "the two sessions did not run at the same time"


def test_a_session_in_use_refuses_a_second_thread(synthetic):
    tok = fortunes()
    with engram.Store(synthetic) as store:
        for attempt in range(6):
            with store.session(1, mode="direct", prefetch=False) as s:
                box = {}
                w = threading.Thread(target=_timed_gather, args=(s, tok[30000 + 9000 * attempt:][:512 << attempt], box))
                w.start()
                while not s._busy.locked() and w.is_alive():
                    pass
                try:
                    s.begin()
                    refused = False
                except RuntimeError as e:
                    assert "one thread at a time" in str(e)
                    refused = True
                w.join()
                if refused:
                    # the session is intact: its gather finished and it serves the next step
                    assert box["out"].shape == (512 << attempt, 24, 264)
                    s.begin()
                    s.reset(0)
                    s.push(0, [1, 2])
                    np.testing.assert_array_equal(s.rows(1), store.config.rows([1, 2])[0])
                    return
    pytest.fail("never caught the worker inside a call")


def test_each_thread_gets_its_own_error_message(tmp_path):
    errors = {}

    def fail(k):
        msgs = []
        for _ in range(200):
            try:
                engram.Config(tmp_path / f"missing-{k}.json", token_map=tmp_path / "x.npy")
            except engram.Error as e:
                msgs.append(e.strerror)
        errors[k] = msgs

    ts = [threading.Thread(target=fail, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for k in range(4):
        assert len(errors[k]) == 200 and all(f"missing-{k}.json" in m for m in errors[k])
