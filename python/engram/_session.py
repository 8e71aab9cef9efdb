"""engram.Session: one engine loop's addressing, prefetch and gathers (engram_session_*)."""
import contextlib
import ctypes
import errno
import threading
import weakref

import numpy as np

from . import _arrays, _lib
from ._errors import error
from ._lib import MODE_DIRECT, MODE_PAGECACHE, OUT_BF16, OUT_F32, OUT_NATIVE, lib
from ._rowcache import RowCache

_KINDS = {"native": OUT_NATIVE, "bf16": OUT_BF16, "f32": OUT_F32}
_NP_OUT = {OUT_NATIVE: np.dtype(np.uint8), OUT_BF16: np.dtype(np.uint16), OUT_F32: np.dtype(np.float32)}
_MODES = {"pagecache": MODE_PAGECACHE, "direct": MODE_DIRECT}
_UINT_MAX = 0xFFFFFFFF
_GATHER_WHAT = "a {} gather of layer {} ({} positions)"
_ROWS_WHAT = "a {} gather of {} rows of layer {}"
_STATS_FIELDS = tuple(name for name, _ in _lib.IoStats._fields_ if name != "size")

# the calls of the hot path, looked up once
_begin = lib.engram_session_begin
_push = lib.engram_session_push
_push_batch = lib.engram_session_push_batch
_prefetch_next = lib.engram_session_prefetch_next
_gather_bytes = lib.engram_session_gather_bytes
_gather = lib.engram_session_gather


def out_kind(dtype):
    """'native', 'bf16' or 'f32' as enum engram_out."""
    k = _KINDS.get(dtype) if type(dtype) is str else None
    if k is None:
        raise ValueError(f"dtype {dtype!r} is not 'native', 'bf16' or 'f32'")
    return k


def _count(value, what, allow_none):
    if value is None and allow_none:
        return 0
    v = _lib.as_index(value, what, "a positive integer")
    if v < 1 or v > _UINT_MAX:
        raise ValueError(f"{what} {v} is not a positive 32-bit number")
    return v


def _busy():
    return RuntimeError("engram.Session used by two threads at once: a session belongs to one thread at a time")


class Session:
    """One engine loop: each step, begin(); push() or push_batch() the step's new tokens (hashes them for every
    Engram layer and hands the reads of their rows to the session's I/O thread, which submits and completes them
    while the engine computes); then gather() each Engram layer, which waits only for reads not yet complete.
    Create with Store.session(). In a forked child, a session made before the fork raises engram.Error with
    errno engram.EFORKED: make a new one from the Store there.

    A session belongs to one thread at a time (a second thread calling in meanwhile gets RuntimeError, never a
    corrupted session); use one session per engine thread, all on one shared Store. Calls that wait or copy
    (push, push_batch, prefetch_next, gather, gather_rows, prefetch_rows) release the GIL."""

    def __init__(self, store, max_seqs, mode, queue_depth, cache_mb, uring, prefetch, sqpoll, row_cache,
                 page_cache_mb):
        self._ptr = None
        o = _lib.new(_lib.SessionOptions)
        o.max_seqs = _count(max_seqs, "max_seqs", False)
        if mode not in _MODES:
            raise ValueError(f"mode {mode!r} is not 'pagecache' or 'direct'")
        o.mode = _MODES[mode]
        o.queue_depth = _count(queue_depth, "queue_depth", True)
        o.cache_bytes = _count(cache_mb, "cache_mb", True) << 20
        o.flags = ((0 if uring else _lib.SESSION_NO_URING) | (0 if prefetch else _lib.SESSION_NO_PREFETCH) |
                   (_lib.SESSION_SQPOLL if sqpoll else 0))
        o.page_cache_bytes = _count(page_cache_mb, "page_cache_mb", True) << 20
        if row_cache is not None and not isinstance(row_cache, RowCache):
            raise TypeError(f"row_cache must be an engram.RowCache, not {type(row_cache).__name__}")
        if row_cache is not None and row_cache._set_id != store._set_id:
            # the library takes the rows of any row cache for this store's: refuse another set's here
            raise ValueError(f"{row_cache._what} serves another table set than store '{store.path}'")
        self._store = store
        self._row_cache = row_cache
        self._cfg = cfg = store.config
        self._max_seqs = o.max_seqs
        self._mode = mode
        self._busy = threading.Lock()
        ptr = ctypes.c_void_p()
        with store._use() as sp, (row_cache._use() if row_cache else contextlib.nullcontext()) as rp:
            o.row_cache = rp
            # per (layer index, output type): numpy dtype, shape of a position, bytes of a position
            self._layout = {}
            for li in range(len(cfg.layer_ids)):
                for kind, dt in _NP_OUT.items():
                    rb = lib.engram_out_row_bytes(sp, li, kind)
                    tail = (cfg.columns, rb) if kind == OUT_NATIVE else (cfg.columns * cfg.head_dim,)
                    self._layout[li, kind] = (dt, tail, cfg.columns * rb, rb)
            rc = lib.engram_session_create(ctypes.byref(ptr), sp, ctypes.byref(o))
            if rc < 0:
                raise error(rc)
            self._ptr = ptr.value
            self._finalizer = weakref.finalize(self, lib.engram_session_destroy, ptr.value)
            self._finalizer.atexit = False
            store._adopt(self)
            if row_cache:
                row_cache._adopt(self)
        self._backend = lib.engram_session_backend(self._ptr).decode(errors="replace")

    def _enter(self):
        if not self._busy.acquire(False):
            raise _busy()
        if not self._ptr:
            self._busy.release()
            raise ValueError("session is closed")
        return self._ptr

    @property
    def store(self):
        return self._store

    @property
    def config(self):
        return self._cfg

    @property
    def max_seqs(self):
        return self._max_seqs

    @property
    def mode(self):
        return self._mode

    @property
    def backend(self):
        """'io_uring' and the ring's features in use, or 'pread pool (<why>)'."""
        return self._backend

    @property
    def closed(self):
        return not self._ptr

    def begin(self):
        """Start a step: the previous step's positions are dropped."""
        ptr = self._enter()
        try:
            _begin(ptr)
        finally:
            self._busy.release()

    def push(self, seq, tokens, mask=None):
        """Append the tokens (raw ids, 1-D) of sequence slot seq to the step and submit the reads of their rows for
        every layer. mask: None or one bool / 0-1 per token, 0 = dead. A bad slot or token id raises
        engram.InvalidArgument (a ValueError) and appends nothing."""
        s = _arrays.slot(seq)
        t = _arrays.tokens(tokens)
        m = _arrays.mask(mask, t.shape[0])
        ta, _tk = _arrays.address(t)
        ma, _mk = (None, None) if m is None else _arrays.address(m)
        ptr = self._enter()
        try:
            rc = _push(ptr, s, ta, ma, t.shape[0])
            if rc < 0:
                raise error(rc)
        finally:
            self._busy.release()

    def _batch(self, call, seqs, tokens, mask):
        """call(session, seqs, tokens, mask, n) with one token for each of n slots, as the C API takes them."""
        s = _arrays.slots(seqs)
        t = _arrays.tokens(tokens)
        n = s.shape[0]
        if t.shape[0] != n:
            raise ValueError(f"{t.shape[0]} tokens for {n} seqs")
        m = _arrays.mask(mask, n)
        sa, _sk = _arrays.address(s)
        ta, _tk = _arrays.address(t)
        ma, _mk = (None, None) if m is None else _arrays.address(m)
        ptr = self._enter()
        try:
            rc = call(ptr, sa, ta, ma, n)
            if rc < 0:
                raise error(rc)
        finally:
            self._busy.release()

    def push_batch(self, seqs, tokens, mask=None):
        """A decode step in one call: tokens[i] into slot seqs[i] (distinct slots, any order), appended to the
        step in that order, their reads submitted. seqs as a numpy.uintc array and tokens as int64 are used
        without a copy. A bad or repeated slot or a bad token id raises engram.InvalidArgument and appends
        nothing."""
        self._batch(_push_batch, seqs, tokens, mask)

    def prefetch_next(self, seqs, tokens, mask=None):
        """Speculative decoding: submit the reads of the rows that push_batch(seqs, tokens, mask) would address
        (drafts of each sequence's next token), without adding positions or changing any slot's history. Call it
        at the end of the step that proposed the drafts: a confirmed draft's push finds its reads done or in
        flight, a rejected one's reads were for nothing. Errors as push_batch."""
        self._batch(_prefetch_next, seqs, tokens, mask)

    def reset(self, seq):
        """Forget slot seq's history: its next token starts a sequence."""
        s = _arrays.slot(seq)
        ptr = self._enter()
        try:
            rc = lib.engram_session_reset(ptr, s)
            if rc < 0:
                raise error(rc)
        finally:
            self._busy.release()

    @property
    def positions(self):
        """Positions pushed in this step so far."""
        ptr = self._enter()
        try:
            return lib.engram_session_positions(ptr)
        finally:
            self._busy.release()

    def rows(self, layer):
        """The step's table rows of a layer (model layer id): a numpy uint64 copy [positions, columns]."""
        li = self._cfg.layer_index(layer)
        cols = self._cfg.columns
        ptr = self._enter()
        try:
            n = lib.engram_session_positions(ptr)
            if n == 0:
                return np.empty((0, cols), dtype=np.uint64)
            addr = lib.engram_session_rows(ptr, li)
            if not addr:
                raise error(-errno.EINVAL)
            return np.ctypeslib.as_array((ctypes.c_uint64 * (n * cols)).from_address(addr)).reshape(n, cols).copy()
        finally:
            self._busy.release()

    def gather_bytes(self, layer, dtype="bf16"):
        """Bytes gather(layer, dtype) writes at this point of the step."""
        li = self._cfg.layer_index(layer)
        kind = out_kind(dtype)
        ptr = self._enter()
        try:
            return _gather_bytes(ptr, li, kind)
        finally:
            self._busy.release()

    def gather(self, layer, dtype="bf16", out=None):
        """The rows of a layer (model layer id) for every position of the step, in push order. dtype 'bf16':
        uint16 [positions, columns x head_dim] holding bfloat16 bits; 'f32': float32, same shape; 'native':
        uint8 [positions, columns, record bytes] (the stored record, E8M0 scales after the F8_E4M3 payload).
        out: None (a new numpy array) or a writable C-contiguous buffer of exactly the bytes written (numpy array,
        memoryview, bytearray, CPU torch tensor of bfloat16 / float32 / uint8), which is filled and returned.
        Waits only for reads not yet complete, without the GIL."""
        li = self._cfg.layer_index(layer)
        kind = out_kind(dtype)
        ptr = self._enter()
        try:
            nbytes = _gather_bytes(ptr, li, kind)
            dt, tail, per_pos, _ = self._layout[li, kind]
            if out is None:
                res = np.empty((nbytes // per_pos,) + tail, dtype=dt)
                addr, _keep = _arrays.export(res, nbytes)
            else:
                addr, _keep = _arrays.out_address(out, kind, nbytes, (_GATHER_WHAT, dtype, layer, nbytes // per_pos))
                res = out
            rc = _gather(ptr, li, kind, addr, nbytes)
            if rc < 0:
                raise error(rc)
            return res
        finally:
            self._busy.release()

    def prefetch_rows(self, layer, rows):
        """Submit reads of table rows of a layer without adding positions (replay, speculation)."""
        li = self._cfg.layer_index(layer)
        r = _arrays.rows(rows)
        ptr = self._enter()
        try:
            rc = lib.engram_session_prefetch_rows(ptr, li, r.ctypes.data, r.size)
            if rc < 0:
                raise error(rc)
        finally:
            self._busy.release()

    def gather_rows(self, layer, rows, dtype="bf16", out=None):
        """Gather arbitrary table rows of a layer through the session's reads and cache. rows of shape [..., k]
        give [..., k x head_dim] (bf16 as uint16, f32) or [..., k, record bytes] (native); out as in gather()."""
        li = self._cfg.layer_index(layer)
        kind = out_kind(dtype)
        r = _arrays.rows(rows)
        dt, _, _, rb = self._layout[li, kind]
        if kind == OUT_NATIVE:
            shape = r.shape + (rb,)
        else:
            shape = r.shape[:-1] + (r.shape[-1] * self._cfg.head_dim,) if r.ndim else (self._cfg.head_dim,)
        nbytes = r.size * rb
        if out is None:
            res = np.empty(shape, dtype=dt)
            addr, _keep = _arrays.export(res, nbytes)
        else:
            addr, _keep = _arrays.out_address(out, kind, nbytes, (_ROWS_WHAT, dtype, r.size, layer))
            res = out
        ptr = self._enter()
        try:
            rc = lib.engram_session_gather_rows(ptr, li, r.ctypes.data, r.size, kind, addr, nbytes)
            if rc < 0:
                raise error(rc)
        finally:
            self._busy.release()
        return res

    def stats(self, layer=None, step=False):
        """I/O counters as a dict (every field of struct engram_io_stats; lead_hist as a list) of one layer (model
        layer id) or all (None), for the current step (step=True) or since the session started."""
        li = -1 if layer is None else self._cfg.layer_index(layer)
        st = _lib.new(_lib.IoStats)
        ptr = self._enter()
        try:
            rc = lib.engram_session_stats(ptr, li, 1 if step else 0, ctypes.byref(st))
            if rc < 0:
                raise error(rc)
        finally:
            self._busy.release()
        return {k: (list(v) if isinstance(v, ctypes.Array) else v) for k in _STATS_FIELDS for v in (getattr(st, k),)}

    def close(self):
        """Destroy the session (its reads are collected first). RuntimeError while another thread is in a call."""
        if not self._busy.acquire(False):
            raise _busy()
        try:
            ptr, self._ptr = self._ptr, None
        finally:
            self._busy.release()
        if ptr:
            self._finalizer()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self.closed else f"{self._max_seqs} slots, {self._mode}, {self._backend}"
        return f"<engram.Session on '{self._store.path}': {state}>"
