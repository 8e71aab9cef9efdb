"""engram.Session(remote=...): rows from a Redis Cluster, bit-exact against the local shard, and a metadata-only
shard's store. The cluster is scripts/remote-tests' (it sets ENGRAM_REMOTE_URL, ENGRAM_REMOTE_FULL and
ENGRAM_REMOTE_META); without it (python-check alone) the cluster tests skip."""
import os

import numpy as np
import pytest

from conftest import fortunes
# segments: the fixture giving this process's stats segment a directory of its own
from test_metrics import compare_with_engram_stat, in_child, segments  # noqa: F401

import engram

URL = os.environ.get("ENGRAM_REMOTE_URL")
FULL = os.environ.get("ENGRAM_REMOTE_FULL")
META = os.environ.get("ENGRAM_REMOTE_META")
needs_cluster = pytest.mark.skipif(not URL, reason="no cluster (scripts/remote-tests runs these)")


def test_remote_must_be_a_string(packed):
    with engram.Store(packed("tiny-v41", "raw")) as store:
        with pytest.raises(TypeError, match="remote must be a str"):
            store.session(remote=5)
        with store.session() as s:
            assert s.remote_stats() is None


def test_a_refused_cluster_names_the_node(packed):
    with engram.Store(packed("tiny-v41", "raw")) as store:
        with pytest.raises(engram.Error, match="127.0.0.1:1"):
            store.session(remote="redis://127.0.0.1:1", remote_timeout_ms=200)


@needs_cluster
def test_remote_rows_are_the_shards():
    tok = fortunes()
    with engram.Store(FULL) as full, engram.Store(META) as meta:
        assert meta.info()["no_data_shards"] == 1 and full.info()["no_data_shards"] == 0
        assert meta.info()["set_id"] == full.info()["set_id"]
        layers = full.config.layer_ids
        with meta.session(8, remote=URL) as s, full.session(8) as ref:
            for step in range(6):
                t = tok[step * 8:(step + 1) * 8] % full.config.raw_vocab
                for sess in (s, ref):
                    sess.begin()
                    sess.push_batch(np.arange(len(t)), t)
                for layer in layers:
                    for d in ("native", "bf16", "f32"):
                        a = s.gather(layer, d, as_tensor=False)
                        assert np.array_equal(a, ref.gather(layer, d, as_tensor=False))
            r = s.remote_stats()
            assert r["rows"] > 0 and r["fallbacks"] == 0 and r["errors"] == 0 and r["timeouts"] == 0
            assert r["wire_bytes"] > r["bytes"]


@needs_cluster
def test_a_metadata_only_store_has_no_rows_without_a_cluster():
    with engram.Store(META) as meta, meta.session() as s:
        with pytest.raises(engram.Error) as e:
            s.gather_rows(meta.config.layer_ids[0], np.array([0], dtype=np.uint64), "native")
        assert e.value.errno == engram.ENODATA
        assert "holds no table data" in e.value.strerror


@needs_cluster
def test_the_collector_gives_the_remote_tiers_families_as_engram_stat(segments):
    prometheus_client = pytest.importorskip("prometheus_client")
    tok = fortunes()

    def body():  # in a process of its own: a process keeps one segment (test_metrics.in_child)
        with engram.Store(META) as meta, meta.session(8, remote=URL) as s:
            for step in range(4):
                s.begin()
                s.push_batch(np.arange(8), tok[step * 8:(step + 1) * 8] % meta.config.raw_vocab)
                for layer in meta.config.layer_ids:
                    s.gather(layer, "native", as_tensor=False)
            s.begin()  # publishes every layer
            mine = compare_with_engram_stat(prometheus_client)
            m = engram.metrics()
            (st,) = m["sets"]
            r = st["remote"]
            assert r is not None and r["rows"] > 0 and r["bytes"] > 0
            key = {("pid", str(os.getpid())), ("run", m["run"]), ("set", st["set"])}
            assert mine[("engram_remote_rows_total", frozenset(key))] == r["rows"]
            assert mine[("engram_remote_bytes_total", frozenset(key))] == r["bytes"]
            assert mine[("engram_remote_node_failures_total", frozenset(key))] == r["node_failures"]
            for kind in ("absent", "bad", "node", "timeout"):
                assert ("engram_remote_errors_total", frozenset(key | {("kind", kind)})) in mine

    in_child(body)
