"""engram.metrics() and engram.MetricsCollector: this process's libengram counters, as engram-stat top and
engram-stat metrics show them (libengram(3), METRICS), for an engine's own /metrics.

The counters are read from the process's stats segment (the file its sessions publish to; the library's own
reader takes a consistent snapshot without stopping any session), so reading them from a scrape thread never
enters a session. The families and labels are engram-stat metrics' (python/tests/test_metrics.py compares the two
on a live session).
"""
import ctypes
import os
from ctypes import c_char, c_int, c_uint8, c_uint32, c_uint64
from typing import Any, Dict, Iterator, List, Optional

from . import _lib
from ._errors import Error, error

STATS_LAYERS = 64        # ENGRAM_STATS_LAYERS
STATS_SESSIONS = 16      # ENGRAM_STATS_SESSIONS
STATS_WAIT_BUCKETS = 32  # ENGRAM_STATS_WAIT_BUCKETS
STATS_PREFIX = "engram-stats-"  # ENGRAM_STATS_PREFIX
STATS_LABELS_MAX = 8     # ENGRAM_STATS_LABELS_MAX
STATS_LABEL_NAME = 32    # ENGRAM_STATS_LABEL_NAME
STATS_LABEL_VALUE = 128  # ENGRAM_STATS_LABEL_VALUE
_LEAD_EDGES = 24  # engram-stat metrics' lead buckets: le = 2^b us, b < 24 (SV_LEAD_EDGES)

_LAYER_COUNTERS = ("rows", "ready", "not_ready", "misses", "requested", "units", "ios", "bytes", "wait_ns", "ram",
                   "disk_bytes")


class _Layer(ctypes.Structure):
    _fields_ = ([("layer_id", c_uint32), ("pad", c_uint32)] + [(k, c_uint64) for k in _LAYER_COUNTERS] +
                [("lead_hist", c_uint64 * _lib.LEAD_BUCKETS), ("row_cache", c_uint64), ("gathers", c_uint64),
                 ("wait_hist", c_uint64 * STATS_WAIT_BUCKETS)])


_SESSION_COUNTERS = ("steps", "inflight", "backlog", "thread_cpu_ns")
_REMOTE = ("remote_rows", "remote_bytes", "remote_fallbacks", "remote_errors", "remote_timeouts", "remote_absent",
           "remote_bad", "remote_node_failures")
_RC = ("rc_slots", "rc_filled", "rc_record_bytes", "rc_hits", "rc_misses", "rc_inserts")


class _Session(ctypes.Structure):
    _fields_ = ([("set_id", c_uint8 * 16), ("set_path", c_char * 128), ("n_layers", c_uint32), ("mode", c_uint32)] +
                [(k, c_uint64) for k in _SESSION_COUNTERS] + [("has_remote", c_uint32), ("has_row_cache", c_uint32)] +
                [("closed", c_uint32), ("pad", c_uint32)] +
                [(k, c_uint64) for k in _REMOTE + _RC] + [("layers", _Layer * STATS_LAYERS)])


class _Label(ctypes.Structure):
    _fields_ = [("name", c_char * STATS_LABEL_NAME), ("value", c_char * STATS_LABEL_VALUE)]


class _Process(ctypes.Structure):
    _fields_ = [("pid", c_int), ("stale", c_int), ("start_time", c_uint64), ("unpublished", c_uint64),
                ("run", c_uint64), ("n_labels", ctypes.c_uint), ("labels", _Label * STATS_LABELS_MAX),
                ("n_sessions", ctypes.c_uint), ("sessions", _Session * STATS_SESSIONS)]


def _layer_dict(v: _Layer) -> Dict[str, Any]:
    d = {"layer_id": v.layer_id}
    d.update({k: getattr(v, k) for k in _LAYER_COUNTERS})
    d.update(row_cache=v.row_cache, gathers=v.gathers, lead_hist=list(v.lead_hist), wait_hist=list(v.wait_hist))
    return d


def _add(into: Dict[str, Any], d: Dict[str, Any]) -> None:
    for k, v in d.items():
        if k == "layer_id":
            continue
        into[k] = [a + b for a, b in zip(into[k], v)] if isinstance(v, list) else into[k] + v


PID_MAX = 1 << 30  # what engram-stat top and metrics accept as a PID operand


def _as_pid(pid: Optional[int]) -> int:
    """This process's pid for None, else pid as an int: TypeError when not an integer (a bool neither), ValueError
    when not a process id (1 .. 2^30)."""
    if pid is None:
        return os.getpid()
    n = _lib.as_index(pid, "pid")
    if not 1 <= n <= PID_MAX:
        raise ValueError(f"pid {n} is not a process id (1 to {PID_MAX})")
    return n


def _read(path: str) -> _Process:
    p = _Process()
    try:
        _lib.lib.engram_stats_read(path.encode(), ctypes.byref(p))
    except Error as e:  # the errcheck's, raised again naming the file
        raise error(-e.errno, filename=path) from None
    return p


def _segment_of(pid: int) -> Optional[_Process]:
    """The segment of process pid (ENGRAM_STATS_PREFIX<pid>-<run>): the live one, else a stale one, else None.
    Processes of the same pid in other PID namespaces sharing the directory: ValueError (engram-stat metrics tells
    them apart by their run label)."""
    d = _lib.lib.engram_stats_dir().decode()
    try:
        names = sorted(n for n in os.listdir(d) if n.startswith(f"{STATS_PREFIX}{pid}-"))
    except FileNotFoundError:
        return None
    found = [_read(os.path.join(d, n)) for n in names]
    live = [p for p in found if not p.stale]
    if len(live) > 1:
        raise ValueError(f"pid {pid}: {len(live)} live processes of that pid publish in {d} (in other PID "
                         "namespaces); engram-stat metrics tells them apart by their run label")
    return live[0] if live else found[-1] if found else None


def metrics(pid: Optional[int] = None) -> Dict[str, Any]:
    """The counters of this process's sessions (or of process pid, another of this user's), summed by table set
    and layer as engram-stat top -1 --json gives them, those of closed sessions included (a counter only goes up
    while the process lives): {"pid", "run", "labels" (the process's: {name: value}), "stale", "sessions" (open),
    "thread_cpu_ns", "sets": [{"set", "path", "mode", "sessions", "steps", "reads_inflight", "reads_backlog",
    "remote" (None or a dict), "row_cache" (None or a dict), "layers": [{"layer_id", "rows", "ready", ...,
    "lead_hist", "wait_hist"}]}]}. A process that never published (publishing off: ENGRAM_STATS=0,
    Session(publish_stats=False)) has no sets. A pid that is not an integer (or is a bool) raises TypeError, one
    that is not a process id (1 to 2^30) ValueError."""
    pid = _as_pid(pid)
    out = {"pid": pid, "run": None, "labels": {}, "stale": False, "sessions": 0, "thread_cpu_ns": 0, "sets": []}
    if pid == os.getpid():  # this process's own segment, whatever others of its pid elsewhere publish
        own = _lib.lib.engram_stats_path()
        p: Optional[_Process] = _read(own.decode()) if own is not None else None
    else:
        p = _segment_of(pid)
    if p is None:
        return out
    out.update(stale=bool(p.stale), sessions=p.unpublished, run=f"{p.run:016x}",
               labels={lb.name.decode(): lb.value.decode() for lb in p.labels[:p.n_labels]})
    sets: Dict[str, Dict[str, Any]] = {}
    for s in p.sessions[:p.n_sessions]:
        out["thread_cpu_ns"] += s.thread_cpu_ns
        key = bytes(s.set_id[:8]).hex()
        t = sets.get(key)
        if t is None:
            t = sets[key] = {"set": key, "path": s.set_path.decode(errors="replace"),
                             "mode": "pagecache" if s.mode == _lib.MODE_PAGECACHE else "direct", "sessions": 0,
                             "steps": 0, "reads_inflight": 0, "reads_backlog": 0, "remote": None, "row_cache": None,
                             "layers": []}
        t["sessions"] += not s.closed
        out["sessions"] += not s.closed
        t["steps"] += s.steps
        t["reads_inflight"] += s.inflight
        t["reads_backlog"] += s.backlog
        if s.has_remote:
            r = {k[len("remote_"):]: getattr(s, k) for k in _REMOTE}
            if t["remote"] is None:
                t["remote"] = r
            else:
                _add(t["remote"], r)
        if s.has_row_cache and (t["row_cache"] is None or s.rc_slots >= t["row_cache"]["slots"]):
            t["row_cache"] = {"slots": s.rc_slots, "filled": s.rc_filled, "record_bytes": s.rc_record_bytes,
                              "hits": s.rc_hits, "misses": s.rc_misses, "inserts": s.rc_inserts}
        for v in s.layers[:s.n_layers]:
            d = _layer_dict(v)
            have = next((x for x in t["layers"] if x["layer_id"] == d["layer_id"]), None)
            if have is None:
                t["layers"].append(d)
            else:
                _add(have, d)
    out["sets"] = list(sets.values())
    return out


# (family, help, layer field, scale): engram-stat metrics' per-layer counters (tools/metrics_prom.c)
_LAYER_FAMILIES = (
    ("engram_rows", "Rows gathered (engram_io_stats.rows).", "rows", 1),
    ("engram_rows_ready", "Rows whose bytes were in memory when their gather call began.", "ready", 1),
    ("engram_rows_not_ready", "Rows requested before the gather whose read had not completed when it began.",
     "not_ready", 1),
    ("engram_rows_missed", "Rows neither in memory nor being read when their gather began.", "misses", 1),
    ("engram_rows_requested", "Rows requested by push or prefetch.", "requested", 1),
    ("engram_units_requested", "Distinct pages or zstd blocks requested, after deduplication.", "units", 1),
    ("engram_reads", "Reads issued, a gather's own included.", "ios", 1),
    ("engram_read_bytes", "Bytes the reads brought in.", "bytes", 1),
    ("engram_disk_bytes", "Bytes read from the disk: direct reads, uncached page-cache reads, faulted pages.",
     "disk_bytes", 1),
    ("engram_gather_wait_seconds", "Time gathers spent waiting for reads not yet completed.", "wait_ns", 1e-9),
    ("engram_gathers", "Gather calls.", "gathers", 1),
)


# (kind, family, help, section, key): engram-stat metrics' per-set families (tools/metrics_prom.c set_fams), read from
# the set's dict (section None), its "remote" or its "row_cache" (sets without that section have no sample)
_SET_FAMILIES = (
    ("counter", "engram_steps", "Steps begun (engram_session_begin calls).", None, "steps"),
    ("gauge", "engram_reads_inflight", "Reads in flight.", None, "reads_inflight"),
    ("gauge", "engram_reads_backlog", "Reads waiting for a free request.", None, "reads_backlog"),
    ("counter", "engram_remote_rows", "Rows the remote tier gave, verified.", "remote", "rows"),
    ("counter", "engram_remote_bytes", "Row bytes the remote tier gave.", "remote", "bytes"),
    ("counter", "engram_remote_fallbacks", "Rows the remote tier could not give, read from the local shard.", "remote",
     "fallbacks"),
    ("counter", "engram_remote_node_failures", "Times a cluster node was given up on.", "remote", "node_failures"),
    ("gauge", "engram_row_cache_slots", "Rows the row cache can hold.", "row_cache", "slots"),
    ("gauge", "engram_row_cache_filled_slots", "Row cache slots ever filled.", "row_cache", "filled"),
    ("counter", "engram_row_cache_hits", "Row cache lookups that found their row (every process sharing it).",
     "row_cache", "hits"),
    ("counter", "engram_row_cache_misses", "Row cache lookups that did not (every process sharing it).", "row_cache",
     "misses"),
    ("counter", "engram_row_cache_inserts", "Rows inserted into the row cache (every process sharing it).",
     "row_cache", "inserts"),
)


class MetricsCollector:
    """A prometheus_client collector of this process's libengram counters: the families of engram-stat metrics
    (engram_rows_total, engram_rows_ram_total{tier}, engram_gather_wait_seconds histogram, ...), labelled pid, run,
    the process's own labels, set and layer. An engine that serves /metrics with prometheus_client adds them with one call:

        prometheus_client.REGISTRY.register(engram.MetricsCollector())
    """

    def __init__(self, pid: Optional[int] = None) -> None:
        self._pid = None if pid is None else _as_pid(pid)  # a bad pid fails here, not at every scrape

    def describe(self) -> List[Any]:
        return []  # families depend on the sessions open at collect time: no pre-declared names

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
        m = metrics(self._pid)
        # the process's labels first (pid, run: pid alone may be another process's in another PID namespace; its
        # own labels), as engram-stat metrics writes them
        plab = ["pid", "run"] + list(m["labels"])
        pval = [str(m["pid"]), m["run"] or ""] + list(m["labels"].values())
        lab = plab + ["set", "layer"]
        rows = [(s, ly) for s in m["sets"] for ly in s["layers"]]
        for name, doc, key, scale in _LAYER_FAMILIES:
            f = CounterMetricFamily(name, doc, labels=lab)
            for s, ly in rows:
                f.add_metric([*pval, s["set"], str(ly["layer_id"])], ly[key] * scale)
            yield f
        f = CounterMetricFamily("engram_rows_ram", "Rows gathered from RAM with no read on their behalf in their step,"
                                " by tier.", labels=lab + ["tier"])
        for s, ly in rows:
            rc = min(ly["row_cache"], ly["ram"]) if s["row_cache"] is not None else 0
            if s["row_cache"] is not None:
                f.add_metric([*pval, s["set"], str(ly["layer_id"]), "row_cache"], rc)
            tier = "page_cache" if s["mode"] == "pagecache" else "private_cache"
            f.add_metric([*pval, s["set"], str(ly["layer_id"]), tier], ly["ram"] - rc)
        yield f
        h = HistogramMetricFamily("engram_gather_wait_seconds", "Each gather call's wait for reads not yet completed.",
                                  labels=lab)
        for s, ly in rows:
            c, buckets = 0, []
            for b in range(STATS_WAIT_BUCKETS - 1):
                c += ly["wait_hist"][b]
                buckets.append((repr((1 << b) * 1e-6), c))
            buckets.append(("+Inf", c + ly["wait_hist"][-1]))
            h.add_metric([*pval, s["set"], str(ly["layer_id"])], buckets, ly["wait_ns"] * 1e-9)
        yield h
        # the lead's quarter-octave buckets read at powers of two; the session keeps no sum, and prometheus_client
        # writes a _count only beside a _sum: the tool's _count (the +Inf bucket's) is added as a sample of its own
        h = HistogramMetricFamily("engram_read_lead_seconds", "The lead each gathered row's read needed: from its "
                                  "request to its completion.", labels=lab)
        for s, ly in rows:
            hist = ly["lead_hist"]
            buckets = [(repr((1 << b) * 1e-6), sum(hist[:4 * b + 1])) for b in range(_LEAD_EDGES)]
            buckets.append(("+Inf", sum(hist)))
            values = [*pval, s["set"], str(ly["layer_id"])]
            h.add_metric(values, buckets, None)
            h.add_sample("engram_read_lead_seconds_count", dict(zip(lab, values)), sum(hist))
        yield h
        for kind, name, doc, section, key in _SET_FAMILIES:
            f = (CounterMetricFamily if kind == "counter" else GaugeMetricFamily)(name, doc, labels=plab + ["set"])
            for s in m["sets"]:
                d = s if section is None else s[section]
                if d is not None:
                    f.add_metric([*pval, s["set"]], d[key])
            yield f
        g = GaugeMetricFamily("engram_row_cache_bytes", "The row cache's capacity in row bytes (slots x record).",
                              labels=plab + ["set"])
        for s in m["sets"]:
            if s["row_cache"] is not None:
                g.add_metric([*pval, s["set"]], s["row_cache"]["slots"] * s["row_cache"]["record_bytes"])
        yield g
        # errors by kind as the tool splits them: absent and bad of errors, the rest (a node down), and timeouts
        f = CounterMetricFamily("engram_remote_errors", "Rows the remote tier could not give, by kind.",
                                labels=plab + ["set", "kind"])
        for s in m["sets"]:
            r = s["remote"]
            if r is not None:
                for kind, v in (("absent", r["absent"]), ("bad", r["bad"]),
                                ("node", r["errors"] - r["absent"] - r["bad"]), ("timeout", r["timeouts"])):
                    f.add_metric([*pval, s["set"], kind], v)
        yield f
        g = GaugeMetricFamily("engram_set_info", "A table set a process serves: its first shard.",
                              labels=plab + ["set", "path"])
        for s in m["sets"]:
            g.add_metric([*pval, s["set"], s["path"]], 1)
        yield g
        g = GaugeMetricFamily("engram_sessions", "Sessions open.", labels=plab)
        g.add_metric(pval, m["sessions"])
        yield g
        c = CounterMetricFamily("engram_thread_cpu_seconds", "CPU time of the sessions' I/O threads.", labels=plab)
        c.add_metric(pval, m["thread_cpu_ns"] * 1e-9)
        yield c
