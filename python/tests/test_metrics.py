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


def test_collector_equals_engram_stat_metrics(packed, segments):
    prometheus_client = pytest.importorskip("prometheus_client")
    store = engram.Store(packed("tiny-f32"))
    s = store.session(2)
    _gather(s, store.config, 5)
    s.begin()  # publishes every layer: the segment now holds what both read
    reg = prometheus_client.CollectorRegistry()
    reg.register(engram.MetricsCollector())
    mine = _samples(prometheus_client.generate_latest(reg).decode())
    theirs = _samples(run(tool("engram-stat"), "metrics", str(os.getpid()), env=dict(os.environ)).stdout)
    mine = {k: v for k, v in mine.items() if not k[0].endswith("_created")}
    assert mine and any(k[0] == "engram_rows_total" and v > 0 for k, v in mine.items())
    # every sample but the CPU time (sampled by the I/O thread between the two reads) is the tool's, exactly
    for k, v in mine.items():
        if k[0] != "engram_thread_cpu_seconds_total":
            assert theirs.get(k) == pytest.approx(v, rel=1e-9, abs=1e-12), k


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
