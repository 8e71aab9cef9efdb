"""engram.metrics() and engram.MetricsCollector: this process's counters from its stats segment, equal to the
sessions' own stats, and the collector's families equal to engram-stat metrics' for the same process."""
import os
import re
import subprocess

import numpy as np
import pytest

import engram
from conftest import run, tool


@pytest.fixture
def segments(tmp_path, monkeypatch):
    d = tmp_path / "segments"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("ENGRAM_STATS_DIR", str(d))
    monkeypatch.delenv("ENGRAM_STATS", raising=False)
    return d


def in_child(fn):
    """Run fn in a forked child, a process whose stats segment is its own: a process keeps one segment for its
    life (in the directory of its first published session), its closed sessions' counters in it."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            fn()
        except BaseException:
            import traceback
            os.write(w, traceback.format_exc().encode())
            code = 1
        os._exit(code)
    os.close(w)
    with os.fdopen(r) as f:
        msg = f.read()
    _, status = os.waitpid(pid, 0)
    assert status == 0, msg


def own_segment():
    p = engram._lib.lib.engram_stats_path()
    return p and os.path.basename(p.decode())


def _gather(s, cfg, steps):
    for k in range(steps):
        s.begin()
        s.push_batch(np.arange(2), np.array([k % 7, (3 * k + 1) % 7]))
        for lid in cfg.layer_ids:
            s.gather(lid, "f32")


def test_metrics_equal_the_sessions_stats(packed, segments):
    path = packed("tiny-f32")

    def body():
        store = engram.Store(path)
        a, b = store.session(2), store.session(2)
        _gather(a, store.config, 6)
        _gather(b, store.config, 4)
        m = engram.metrics()
        assert m["pid"] == os.getpid() and not m["stale"] and m["sessions"] == 2 and m["labels"] == {}
        (s,) = m["sets"]
        assert s["sessions"] == 2 and s["steps"] == 10 and s["path"] == store.path
        want = {}
        for ly in s["layers"]:
            sa, sb = a.stats(ly["layer_id"]), b.stats(ly["layer_id"])
            for k in ("rows", "ready", "not_ready", "misses", "ram", "ios", "disk_bytes", "wait_ns"):
                assert ly[k] == getattr(sa, k) + getattr(sb, k), k
            assert ly["gathers"] == 10 and sum(ly["wait_hist"]) == 10
            want[ly["layer_id"]] = ly["rows"]
        a.close()
        b.close()
        # closed: no session open, every counter kept (they only go up while the process lives)
        m = engram.metrics()
        (s,) = m["sets"]
        assert m["sessions"] == 0 and s["sessions"] == 0 and s["steps"] == 10
        assert {ly["layer_id"]: ly["rows"] for ly in s["layers"]} == want
        assert os.listdir(segments) == [own_segment()]

    in_child(body)


def test_publish_stats_false_publishes_nothing(packed, segments):
    path = packed("tiny-f32")

    def body():
        store = engram.Store(path)
        s = store.session(2, publish_stats=False)
        _gather(s, store.config, 2)
        assert engram.metrics()["sets"] == [] and not os.listdir(segments)

    in_child(body)


def test_labels(packed, segments, monkeypatch):
    path = packed("tiny-f32")
    monkeypatch.setenv("ENGRAM_STATS_LABELS", "engine=vllm-0")

    def body():
        store = engram.Store(path)
        s = store.session(2, stats_labels={"model": "qwen38"})
        assert engram.metrics()["labels"] == {"engine": "vllm-0", "model": "qwen38"}
        for bad, err in (({"pid": "1"}, ValueError), ({"model": "other"}, ValueError), ({"a,b": "c"}, ValueError),
                         ({"a": 1}, TypeError), ("engine=x", TypeError)):
            with pytest.raises(err):
                store.session(1, stats_labels=bad)
        s.close()

    in_child(body)


def _samples(text):
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            m = re.match(r'([a-z_]+)(?:\{(.*)\})? (\S+)$', line)
            out[(m.group(1), frozenset(re.findall(r'([a-z_]+)="([^"]*)"', m.group(2) or "")))] = float(m.group(3))
    return out


def _families(text):
    """{family: (type, help)} of an exposition's HELP and TYPE lines."""
    help_ = dict(re.findall(r'^# HELP (\S+) (.*)$', text, re.M))
    return {name: (kind, help_.get(name)) for name, kind in re.findall(r'^# TYPE (\S+) (\S+)$', text, re.M)}


# engram-stat metrics' families about the other processes' segments: a process's own collector has none
TOOL_ONLY = {"engram_stats_segments_stale", "engram_stats_segments_unreadable"}


def compare_with_engram_stat(prometheus_client):
    """The collector's exposition against engram-stat metrics' for this process: the same families (name, type and
    HELP), every one but the tool-only two, and every sample but the CPU time equal. Returns the collector's
    samples."""
    reg = prometheus_client.CollectorRegistry()
    reg.register(engram.MetricsCollector())
    text = prometheus_client.generate_latest(reg).decode()
    tool_text = run(tool("engram-stat"), "metrics", str(os.getpid()), env=dict(os.environ)).stdout
    theirs_fams = _families(tool_text)
    assert TOOL_ONLY <= set(theirs_fams)
    assert _families(text) == {k: v for k, v in theirs_fams.items() if k not in TOOL_ONLY}
    mine, theirs = _samples(text), _samples(tool_text)
    mine = {k: v for k, v in mine.items() if not k[0].endswith("_created")}
    theirs = {k: v for k, v in theirs.items() if k[0] not in TOOL_ONLY}
    assert mine and any(k[0] == "engram_rows_total" and v > 0 for k, v in mine.items())
    # the same samples, and every value but the CPU time (sampled by the I/O thread between the two reads) the
    # tool's, exactly
    assert set(mine) == set(theirs)
    for k, v in mine.items():
        if k[0] != "engram_thread_cpu_seconds_total":
            assert theirs[k] == pytest.approx(v, rel=1e-9, abs=1e-12), k
    return mine


def _sample_names(samples, pid_set):
    return {k[0] for k in samples if ("set", pid_set) in k[1]}


def test_collector_equals_engram_stat_metrics(packed, segments):
    prometheus_client = pytest.importorskip("prometheus_client")
    path = packed("tiny-f32")

    def body():
        store = engram.Store(path)
        s = store.session(2, stats_labels={"engine": "vllm-0", "model": "qwen 3.8 é"})
        _gather(s, store.config, 5)
        s.begin()  # publishes every layer: the segment now holds what both read
        mine = compare_with_engram_stat(prometheus_client)
        m = engram.metrics()
        (st,) = m["sets"]
        names = _sample_names(mine, st["set"])
        # a set without a remote tier or a row cache has none of their samples (as in the tool)
        assert "engram_set_info" in names and not {n for n in names
                                                   if n.startswith(("engram_remote_", "engram_row_cache_"))}
        proc = {("pid", str(os.getpid())), ("run", m["run"]), ("engine", "vllm-0"), ("model", "qwen 3.8 é")}
        assert mine[("engram_set_info", frozenset(proc | {("set", st["set"]), ("path", store.path)}))] == 1

    in_child(body)


def test_collector_equals_engram_stat_metrics_with_a_row_cache(packed, segments):
    prometheus_client = pytest.importorskip("prometheus_client")
    path = packed("tiny-f32")

    def body():
        store = engram.Store(path)
        rc = engram.RowCache(store, mb=1)
        s = store.session(2, mode="direct", row_cache=rc)
        _gather(s, store.config, 9)  # the keys repeat every 7 steps: rows found in the row cache
        s.begin()
        mine = compare_with_engram_stat(prometheus_client)
        m = engram.metrics()
        (st,) = m["sets"]
        key = frozenset({("pid", str(os.getpid())), ("run", m["run"]), ("set", st["set"])})
        r = st["row_cache"]
        assert r["hits"] > 0 and r["slots"] > 0 and r["record_bytes"] > 0
        for name, v in (("engram_row_cache_hits_total", r["hits"]), ("engram_row_cache_misses_total", r["misses"]),
                        ("engram_row_cache_inserts_total", r["inserts"]), ("engram_row_cache_slots", r["slots"]),
                        ("engram_row_cache_bytes", r["slots"] * r["record_bytes"])):
            assert mine[(name, key)] == v, name
        assert not {n for n in _sample_names(mine, st["set"]) if n.startswith("engram_remote_")}
        s.close()
        rc.close()

    in_child(body)


def test_a_planted_segment_is_an_error(segments):
    bad = segments / "engram-stats-4242-00000000000000ab"
    bad.write_bytes(b"not a segment" * 10)
    bad.chmod(0o600)
    with pytest.raises(engram.Error) as e:
        engram.metrics(4242)
    assert str(bad) in str(e.value)
    bad.chmod(0o644)
    with pytest.raises(engram.PermissionDenied):
        engram.metrics(4242)


@pytest.mark.parametrize("bad", [True, False, 1.0, "1", b"1", None.__class__, [1]])
def test_metrics_pid_not_an_integer(bad, segments):
    with pytest.raises(TypeError, match="pid must be an integer"):
        engram.metrics(bad)
    with pytest.raises(TypeError, match="pid must be an integer"):
        engram.MetricsCollector(bad)


@pytest.mark.parametrize("bad", [0, -1, -os.getpid(), 2**30 + 1, 2**64, np.int64(-5)])
def test_metrics_pid_not_a_process_id(bad, segments):
    with pytest.raises(ValueError, match=f"pid {int(bad)} is not a process id"):
        engram.metrics(bad)
    with pytest.raises(ValueError, match=f"pid {int(bad)} is not a process id"):
        engram.MetricsCollector(bad)


def test_metrics_pid_integer_types(segments):
    # numpy's integers are integers; a process without a segment (a child that opens no session; this process's
    # own segment stays while it lives, with its closed sessions' counters) has no sets
    child = subprocess.Popen(["sleep", "30"])
    try:
        for pid in (child.pid, np.int32(child.pid), 2**30):
            m = engram.metrics(pid)
            assert m["pid"] == int(pid) and type(m["pid"]) is int and m["sets"] == []
    finally:
        child.kill()
        child.wait()
