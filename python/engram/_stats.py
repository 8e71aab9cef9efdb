"""engram.IoStats: a session's I/O counters (struct engram_io_stats), each field documented."""
import ctypes
from typing import Any, Dict, List, NamedTuple


class IoStats(NamedTuple):
    """Session.stats(): the I/O counters of one layer or all, for a step or since the session started (struct
    engram_io_stats, engram_session_stats(3)). A named tuple: fields by name (st.rows, or st["rows"] as the dict
    of earlier versions gave them), _asdict() for a dict. rows = ready + not_ready + misses."""
    rows: int
    ready: int
    not_ready: int
    misses: int
    requested: int
    units: int
    ios: int
    bytes: int
    wait_ns: int
    lead_hist: List[int]
    ram: int
    disk_bytes: int
    thread_cpu_ns: int
    straddled: int
    read_busy_ns: int

    def __getitem__(self, key: Any) -> Any:  # st["rows"] as well as st[0]
        if isinstance(key, str):
            return getattr(self, key)
        return tuple.__getitem__(self, key)

    @classmethod
    def _of(cls, st: ctypes.Structure) -> "IoStats":
        return cls(*((list(v) if isinstance(v, ctypes.Array) else v) for v in (getattr(st, k) for k in cls._fields)))

    def as_dict(self) -> Dict[str, Any]:
        return dict(self._asdict())


_DOCS = {
    "rows": "rows gathered: ready + not_ready + misses",
    "ready": "rows whose bytes were in memory when the gather call began (after collecting the reads completed by "
             "then, before any waiting)",
    "not_ready": "rows requested before the gather whose read had not completed when it began",
    "misses": "rows not in memory and not being read when the gather began: never requested (read then), or, in "
              "page-cache mode, on a page the session had brought in and the kernel dropped since",
    "requested": "rows requested by push or prefetch",
    "units": "distinct pages or zstd blocks requested (after deduplication)",
    "ios": "reads issued, the gather's own included",
    "bytes": "bytes those reads bring in (a page-cache read of one byte brings its page)",
    "wait_ns": "nanoseconds gather spent waiting for reads",
    "lead_hist": "the lead each gathered row's read needed, from its request to its completion: a histogram of "
                 "engram.LEAD_BUCKETS buckets (bucket 0: under 1 us; bucket b >= 1: [2^e (1 + q/4), 2^e (1 + (q+1)/4)) "
                 "us, e = (b - 1) // 4, q = (b - 1) % 4)",
    "ram": "rows gathered whose bytes were in RAM with no disk read on their behalf in this step (row cache, "
           "private cache, or a page the page cache held)",
    "disk_bytes": "bytes read from the disk: direct reads, page-cache reads of pages not cached, pages a gather "
                  "faulted in",
    "thread_cpu_ns": "CPU nanoseconds the session's own threads (its I/O thread, and the pread pool's workers "
                     "where io_uring is refused) have used: in the session's totals of all layers only (stats() "
                     "with no layer and step=False), 0 elsewhere",
    "straddled": "of units, those of rows that straddle a 4 KiB page of a table indexed in place (a GGUF's own "
                 "rows): each one read of the row's two pages, counted so in bytes and disk_bytes",
    "read_busy_ns": "nanoseconds the session had reads in flight (ios / read_busy_ns: the pace the disk was read "
                    "at while it was read): in the session's totals of all layers only, like thread_cpu_ns",
}
for _name, _doc in _DOCS.items():
    getattr(IoStats, _name).__doc__ = _doc
assert set(_DOCS) == set(IoStats._fields)
