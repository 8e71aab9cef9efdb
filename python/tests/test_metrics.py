"""engram.metrics() and engram.MetricsCollector: this process's counters from its stats segment, equal to the
sessions' own stats, and the collector's families equal to engram-stat metrics' for the same process."""
import os
import re

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


def _gather(s, cfg, steps):
    for k in range(steps):
        s.begin()
        s.push_batch(np.arange(2), np.array([k % 7, (3 * k + 1) % 7]))
        for lid in cfg.layer_ids:
            s.gather(lid, "f32")


def test_metrics_equal_the_sessions_stats(packed, segments):
    store = engram.Store(packed("tiny-f32"))
    a, b = store.session(2), store.session(2)
    _gather(a, store.config, 6)
    _gather(b, store.config, 4)
    m = engram.metrics()
    assert m["pid"] == os.getpid() and not m["stale"] and m["sessions"] == 2
    (s,) = m["sets"]
    assert s["sessions"] == 2 and s["steps"] == 10 and s["path"] == store.path
    for ly in s["layers"]:
        sa, sb = a.stats(ly["layer_id"]), b.stats(ly["layer_id"])
        for k in ("rows", "ready", "not_ready", "misses", "ram", "ios", "disk_bytes", "wait_ns"):
            assert ly[k] == getattr(sa, k) + getattr(sb, k), k
        assert ly["gathers"] == 10 and sum(ly["wait_hist"]) == 10
    a.close()
    b.close()
    assert engram.metrics()["sets"] == [] and not os.listdir(segments)


def test_publish_stats_false_publishes_nothing(packed, segments):
    store = engram.Store(packed("tiny-f32"))
    s = store.session(2, publish_stats=False)
    _gather(s, store.config, 2)
    assert engram.metrics()["sets"] == [] and not os.listdir(segments)


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
    store = engram.Store(packed("tiny-f32"))
    s = store.session(2)
    _gather(s, store.config, 5)
    s.begin()  # publishes every layer: the segment now holds what both read
    mine = compare_with_engram_stat(prometheus_client)
    (st,) = engram.metrics()["sets"]
    names = _sample_names(mine, st["set"])
    # a set without a remote tier or a row cache has none of their samples (as in the tool)
    assert "engram_set_info" in names and not {n for n in names if n.startswith(("engram_remote_", "engram_row_cache_"))}
    assert mine[("engram_set_info", frozenset({("pid", str(os.getpid())), ("set", st["set"]),
                                               ("path", store.path)}))] == 1


def test_collector_equals_engram_stat_metrics_with_a_row_cache(packed, segments):
    prometheus_client = pytest.importorskip("prometheus_client")
    store = engram.Store(packed("tiny-f32"))
    rc = engram.RowCache(store, mb=1)
    s = store.session(2, mode="direct", row_cache=rc)
    _gather(s, store.config, 9)  # the keys repeat every 7 steps: rows found in the row cache
    s.begin()
    mine = compare_with_engram_stat(prometheus_client)
    (st,) = engram.metrics()["sets"]
    key = frozenset({("pid", str(os.getpid())), ("set", st["set"])})
    r = st["row_cache"]
    assert r["hits"] > 0 and r["slots"] > 0 and r["record_bytes"] > 0
    for name, v in (("engram_row_cache_hits_total", r["hits"]), ("engram_row_cache_misses_total", r["misses"]),
                    ("engram_row_cache_inserts_total", r["inserts"]), ("engram_row_cache_slots", r["slots"]),
                    ("engram_row_cache_bytes", r["slots"] * r["record_bytes"])):
        assert mine[(name, key)] == v, name
    assert not {n for n in _sample_names(mine, st["set"]) if n.startswith("engram_remote_")}
    s.close()
    rc.close()


def test_a_planted_segment_is_an_error(segments):
    bad = segments / "engram-stats-4242"
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
    # numpy's integers are integers; a process without a segment has no sets
    for pid in (os.getpid(), np.int32(os.getpid()), 2**30):
        m = engram.metrics(pid)
        assert m["pid"] == int(pid) and type(m["pid"]) is int and m["sets"] == []
