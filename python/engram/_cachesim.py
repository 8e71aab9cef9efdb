"""engram.CacheSim: the share of row lookups RAM would serve, per RAM tier policy and budget, on rows alone
(engram_cachesim_*: the library's own cache code, no table data read, no I/O)."""
import ctypes
from typing import TYPE_CHECKING, Any, Dict, Iterable, Optional, Tuple

import numpy as np

from . import _lib
from ._handle import Handle
from ._lib import lib

if TYPE_CHECKING:
    from ._store import Store

POLICIES = {"page-lru": 0, "page": 1, "row": 2, "hot+row": 3}
_UINT64_MAX = (1 << 64) - 1


def _bytes(value: Any, what: str) -> int:
    v = _lib.as_index(value, what)
    if v < 0 or v > _UINT64_MAX:
        raise ValueError(f"{what} {value} is not a size in bytes")
    return v


class CacheSim(Handle):
    """CacheSim(store, policy, budget_bytes, *, staging_bytes=0, hot_rows=None, hot_bytes=0): one policy ("page-lru",
    "page", "row", "hot+row") at one budget of RAM, fed the steps of a schedule as a session meets them:
    begin(), push(rows) for each push of the step (rows as Config.rows gives them: [layers, positions, columns]),
    then gather(layer_id, rows) for each layer (that layer's rows of every push of the step, in push order);
    result() says how many lookups were served from RAM. hot_rows (hot+row): (layer_id, row) pairs ranked best
    first, as many as hot_bytes holds make the hot region. Belongs to one thread at a time; see
    engram_cachesim_create(3): a second thread calling in while one is inside raises RuntimeError."""

    _EXCLUSIVE = True

    def __init__(self, store: "Store", policy: str, budget_bytes: int, *, staging_bytes: int = 0,
                 hot_rows: Optional[Iterable[Tuple[int, int]]] = None, hot_bytes: int = 0) -> None:
        if policy not in POLICIES:
            raise ValueError(f"policy {policy!r} is not one of {', '.join(POLICIES)}")
        self._cfg = store.config
        o = _lib.new(_lib.CacheSimOptions)
        o.staging_bytes = _bytes(staging_bytes, "staging_bytes")
        o.hot_bytes = _bytes(hot_bytes, "hot_bytes")
        if hot_rows is not None:
            pairs = list(hot_rows)
            layers = np.array([self._cfg.layer_index(lid) for lid, _ in pairs], dtype=np.uintc)
            rows = np.array([_bytes(r, "a hot row") for _, r in pairs], dtype=np.uint64)
            o.hot_layers = layers.ctypes.data_as(ctypes.POINTER(ctypes.c_uint))
            o.hot_rows = rows.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64))
            o.n_hot = len(pairs)
        ptr = ctypes.c_void_p()
        with store._use() as sp:
            lib.engram_cachesim_create(ctypes.byref(ptr), sp, POLICIES[policy],
                                       _bytes(budget_bytes, "budget_bytes"), ctypes.byref(o))
            self._store = store  # the store must outlive the simulation
            store._adopt(self)
        self._open(ptr.value, lib.engram_cachesim_destroy, f"cache simulation '{policy}'")

    def begin(self, warmup: bool = False) -> None:
        """Start a step; warmup=True: its gathers fill the caches but are not counted."""
        with self._use() as ptr:
            lib.engram_cachesim_begin(ptr, 1 if warmup else 0)

    def _rows(self, rows: Any, shape_what: int) -> np.ndarray:
        a = np.ascontiguousarray(rows, dtype=np.uint64)
        if a.ndim != shape_what:
            raise ValueError(f"rows must have {shape_what} dimensions, not {a.ndim}")
        return a

    def push(self, rows: Any) -> None:
        """One push's rows of every layer: [layers, positions, columns] (Config.rows)."""
        a = self._rows(rows, 3)
        if a.shape[0] != len(self._cfg.layer_ids):
            raise ValueError(f"rows has {a.shape[0]} layers, the store {len(self._cfg.layer_ids)}")
        with self._use() as ptr:
            for li in range(a.shape[0]):
                lib.engram_cachesim_push(ptr, li, a[li].ctypes.data, a[li].size)

    def gather(self, layer_id: int, rows: Any) -> None:
        """One layer's gather of the step: its rows of every push, in push order ([positions, columns])."""
        li = self._cfg.layer_index(layer_id)
        a = self._rows(rows, 2)
        with self._use() as ptr:
            lib.engram_cachesim_gather(ptr, li, a.ctypes.data, a.size)

    def result(self) -> Dict[str, Any]:
        """Every field of struct engram_cachesim_result as a dict (policy by name), and ram_rate (ram / lookups).
        A RAM-served share, not readiness: whether the other rows' reads finish before their layer runs (the
        stall) only a real session measures (Session.stats(), engram-stat replay)."""
        r = _lib.new(_lib.CacheSimResult)
        with self._use() as ptr:
            lib.engram_cachesim_result(ptr, ctypes.byref(r))
        d = {k: getattr(r, k) for k, _ in _lib.CacheSimResult._fields_ if k != "size"}
        d["policy"] = lib.engram_cachesim_policy_name(d["policy"]).decode()
        d["ram_rate"] = d["ram"] / d["lookups"] if d["lookups"] else 0.0
        return d

    def __repr__(self) -> str:
        return f"<engram.CacheSim {self._what}{' (closed)' if self.closed else ''}>"
