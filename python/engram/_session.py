"""engram.Session: one engine loop's addressing, prefetch and gathers (engram_session_*)."""
import contextlib
import ctypes
import errno
import threading
import weakref
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

import numpy as np

from . import _arrays, _lib, _out
from ._errors import error
from ._handle import NoCopy
from ._lib import MODE_DIRECT, MODE_PAGECACHE, OUT_NATIVE, lib
from ._rowcache import RowCache
from ._stats import IoStats

if TYPE_CHECKING:
    from ._config import Config
    from ._store import Store

ArrayLike = Any  # a sequence or numpy array of integers (numpy.typing.ArrayLike where numpy has it)
_MODES = {"pagecache": MODE_PAGECACHE, "direct": MODE_DIRECT}
_UINT_MAX = 0xFFFFFFFF
_UINT64_MAX = (1 << 64) - 1
_GATHER_WHAT = "a {} gather of layer {} ({} positions)"
_ROWS_WHAT = "a {} gather of {} rows of layer {}"

# the calls of the hot path, looked up once
_begin = lib.engram_session_begin
_push = lib.engram_session_push
_push_batch = lib.engram_session_push_batch
_prefetch_next = lib.engram_session_prefetch_next
_gather_bytes = lib.engram_session_gather_bytes
_gather = lib.engram_session_gather


def _count(value, what, allow_none):
    if value is None and allow_none:
        return 0
    v = _lib.as_index(value, what, "a positive integer")
    if v < 1 or v > _UINT_MAX:
        raise ValueError(f"{what} {v} is not a positive 32-bit number")
    return v


def _labels(labels):
    """stats_labels ({name: value}) as the library takes them ("NAME=VALUE,..."), or None; the library checks
    the names and values (ValueError from it names the label)."""
    if labels is None:
        return None
    if not isinstance(labels, dict):
        raise TypeError(f"stats_labels must be a dict of str to str, not {type(labels).__name__}")
    parts = []
    for k, v in labels.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"stats_labels: {k!r}: names and values must be str")
        if "=" in k or "," in k or "," in v or "\0" in k + v:
            raise ValueError(f"stats_labels: {k!r}={v!r}: '=' in a name, ',' or a NUL character")
        parts.append(f"{k}={v}")
    return ",".join(parts).encode()


def _size(nbytes, mb, what):
    """A size option given in bytes (what_bytes) or in MiB (what_mb, the alias); 0 when neither (the default)."""
    if nbytes is not None and mb is not None:
        raise TypeError(f"give {what}_bytes or {what}_mb, not both")
    if mb is not None:
        v = _lib.as_index(mb, f"{what}_mb", "a positive integer")
        if v < 1:
            raise ValueError(f"{what}_mb {v} is not a positive size")
        return v << 20
    if nbytes is None:
        return 0
    v = _lib.as_index(nbytes, f"{what}_bytes", "a positive integer")
    if v < 1 or v > _UINT64_MAX:
        raise ValueError(f"{what}_bytes {v} is not a positive 64-bit size")
    return v


def _destroy(ptr: int, *_parents: Any) -> None:
    """A session's finalizer: the parents (its store and row cache) stay alive until it has run."""
    lib.engram_session_destroy(ptr)


def _busy():
    return RuntimeError("engram.Session used by two threads at once: a session belongs to one thread at a time")


class Session(NoCopy):
    """One engine loop: each step, begin(); push() or push_batch() the step's new tokens (hashes them for every
    Engram layer and hands the reads of their rows to the session's I/O thread, which submits and completes them
    while the engine computes); then gather() each Engram layer, which waits only for reads not yet complete.
    Create with Store.session(). In a forked child, a session made before the fork raises engram.Error with
    errno engram.EFORKED: make a new one from the Store there.

    A session belongs to one thread at a time (a second thread calling in meanwhile gets RuntimeError, never a
    corrupted session); use one session per engine thread, all on one shared Store. Calls that wait or copy
    (push, push_batch, prefetch_next, gather, gather_rows, prefetch_rows) release the GIL.

    Its counters are published for engram-stat top and metrics (and engram.metrics()) unless publish_stats=False
    or ENGRAM_STATS=0 is in the environment (libengram(3), METRICS), with the process's labels: stats_labels
    ({"engine": "vllm-0"}) and ENGRAM_STATS_LABELS; a label the library refuses raises ValueError."""

    _HOW = ("make one session per thread with store.session(); in another process open the store by path "
            "(engram.Store(path)) and make its sessions there (a slot's history moves with export_state/import_state)")

    def __init__(self, store: "Store", max_seqs: int = 1, *, mode: str = "direct", queue_depth: Optional[int] = None,
                 cache_bytes: Optional[int] = None, cache_mb: Optional[int] = None, uring: bool = True,
                 prefetch: bool = True, sqpoll: bool = False, row_cache: Optional[RowCache] = None,
                 page_cache_bytes: Optional[int] = None, page_cache_mb: Optional[int] = None,
                 refuse_negative: bool = False, remote: Optional[str] = None,
                 remote_timeout_ms: Optional[int] = None, publish_stats: bool = True,
                 stats_labels: Optional[Dict[str, str]] = None) -> None:
        self._ptr = None
        o = _lib.new(_lib.SessionOptions)
        o.max_seqs = _count(max_seqs, "max_seqs", False)
        if mode not in _MODES:
            raise ValueError(f"mode {mode!r} is not 'pagecache' or 'direct'")
        o.mode = _MODES[mode]
        o.queue_depth = _count(queue_depth, "queue_depth", True)
        o.cache_bytes = _size(cache_bytes, cache_mb, "cache")
        o.flags = ((0 if uring else _lib.SESSION_NO_URING) | (0 if prefetch else _lib.SESSION_NO_PREFETCH) |
                   (_lib.SESSION_SQPOLL if sqpoll else 0) | (0 if publish_stats else _lib.SESSION_NO_STATS))
        o.page_cache_bytes = _size(page_cache_bytes, page_cache_mb, "page_cache")
        self._refuse_negative = bool(refuse_negative)
        if remote is not None and not isinstance(remote, str):
            raise TypeError(f"remote must be a str ('redis://HOST:PORT'), not {type(remote).__name__}")
        if remote is not None and "\0" in remote:
            raise ValueError("remote contains a NUL character")
        o.remote = remote.encode() if remote is not None else None
        o.remote_timeout_ms = _count(remote_timeout_ms, "remote_timeout_ms", True)
        o.stats_labels = _labels(stats_labels)
        self._remote = remote
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
            # per (layer index, output type): bytes of a row
            self._row_bytes = {(li, kind): lib.engram_out_row_bytes(sp, li, kind)
                               for li in range(len(cfg.layer_ids)) for kind in _out.NAMES.values()}
            lib.engram_session_create(ctypes.byref(ptr), sp, ctypes.byref(o))
            self._ptr = ptr.value
            # the finalizer holds the store and row cache: when all three die in one garbage cycle, the collector
            # runs finalizers in any order, and a store freed before its session's destroy is a use after free
            self._finalizer = weakref.finalize(self, _destroy, ptr.value, store, row_cache)
            self._finalizer.atexit = False
            store._adopt(self)
            if row_cache:
                row_cache._adopt(self)
        self._backend = lib.engram_session_backend(self._ptr).decode(errors="replace")

    def _enter(self) -> int:
        if not self._busy.acquire(False):
            raise _busy()
        if not self._ptr:
            self._busy.release()
            raise ValueError("session is closed")
        return self._ptr

    @property
    def store(self) -> "Store":
        return self._store

    @property
    def config(self) -> "Config":
        return self._cfg

    @property
    def max_seqs(self) -> int:
        return self._max_seqs

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def backend(self) -> str:
        """'io_uring' and the ring's features in use, or 'pread pool (<why>)'."""
        return self._backend

    @property
    def closed(self) -> bool:
        return not self._ptr

    def begin(self) -> None:
        """Start a step: the previous step's positions are dropped. engram.Error (errno engram.EFORKED) in a child
        process forked after the session was made, as every call of the session there."""
        ptr = self._enter()
        try:
            _begin(ptr)
        finally:
            self._busy.release()

    def _tokens(self, tokens: ArrayLike, refuse_negative: Optional[bool]) -> np.ndarray:
        """Token ids as int64, negative ones refused (ValueError) when asked here or by the session's option."""
        t = _arrays.tokens(tokens)
        if (self._refuse_negative if refuse_negative is None else refuse_negative) and t.size:
            i = int(np.argmin(t))
            if t[i] < 0:
                raise ValueError(f"token id {int(t[i])} at position {i} is negative (refused: a negative id would "
                                 f"address rows as the demo's rule keeps it; see refuse_negative)")
        return t

    def push(self, seq: int, tokens: ArrayLike, mask: Optional[ArrayLike] = None, *,
             refuse_negative: Optional[bool] = None) -> None:
        """Append the tokens (raw ids, 1-D) of sequence slot seq to the step and submit the reads of their rows for
        every layer. mask: None or one bool / 0-1 per token, 0 = dead. A bad slot or token id raises
        engram.InvalidArgument (a ValueError) and appends nothing. Negative ids are hashed as they are (the
        reference demo's rule) unless refuse_negative (None: the session's option) makes them a ValueError."""
        self._one_slot(_push, seq, tokens, mask, refuse_negative)

    def _one_slot(self, call, seq, tokens, mask, refuse_negative, *extra):
        """call(session, seq, tokens, mask, n, *extra) with the tokens of one slot, as the C API takes them."""
        s = _arrays.slot(seq)
        t = self._tokens(tokens, refuse_negative)
        m = _arrays.mask(mask, t.shape[0])
        ta, _tk = _arrays.address(t)
        ma, _mk = (None, None) if m is None else _arrays.address(m)
        ptr = self._enter()
        try:
            call(ptr, s, ta, ma, t.shape[0], *extra)
        finally:
            self._busy.release()

    def _batch(self, call, seqs, tokens, mask, refuse_negative):
        """call(session, seqs, tokens, mask, n) with one token for each of n slots, as the C API takes them."""
        s = _arrays.slots(seqs)
        t = self._tokens(tokens, refuse_negative)
        n = s.shape[0]
        if t.shape[0] != n:
            raise ValueError(f"{t.shape[0]} tokens for {n} seqs")
        m = _arrays.mask(mask, n)
        sa, _sk = _arrays.address(s)
        ta, _tk = _arrays.address(t)
        ma, _mk = (None, None) if m is None else _arrays.address(m)
        ptr = self._enter()
        try:
            call(ptr, sa, ta, ma, n)
        finally:
            self._busy.release()

    def push_batch(self, seqs: ArrayLike, tokens: ArrayLike, mask: Optional[ArrayLike] = None, *,
                   refuse_negative: Optional[bool] = None) -> None:
        """A decode step in one call: tokens[i] into slot seqs[i] (distinct slots, any order), appended to the
        step in that order, their reads submitted. seqs as a numpy.uintc array and tokens as int64 are used
        without a copy. A bad or repeated slot or a bad token id raises engram.InvalidArgument and appends
        nothing. refuse_negative as in push()."""
        self._batch(_push_batch, seqs, tokens, mask, refuse_negative)

    def prefetch_next(self, seqs: ArrayLike, tokens: ArrayLike, mask: Optional[ArrayLike] = None, *,
                      refuse_negative: Optional[bool] = None) -> None:
        """Speculative decoding: submit the reads of the rows that push_batch(seqs, tokens, mask) would address
        (drafts of each sequence's next token), without adding positions or changing any slot's history. Call it
        at the end of the step that proposed the drafts: a confirmed draft's push finds its reads done or in
        flight, a rejected one's reads were for nothing. Errors as push_batch."""
        self._batch(_prefetch_next, seqs, tokens, mask, refuse_negative)

    def reset(self, seq: int) -> None:
        """Forget slot seq's history: its next token starts a sequence."""
        s = _arrays.slot(seq)
        ptr = self._enter()
        try:
            lib.engram_session_reset(ptr, s)
        finally:
            self._busy.release()

    def rewind(self, seq: int, n: int) -> None:
        """Forget the last n positions pushed into slot seq (rejected speculative drafts): its next push hashes as
        if they had never been pushed. Up to engram.REWIND_MAX positions taken since the slot's reset, seed or
        import can go; beyond what the slot keeps, engram.Error (errno ERANGE) and nothing changes: give the tokens
        back with seed(). The step is not changed: positions already pushed in it stay, and gather() returns their
        rows as addressed; positions pushed after get rows of their own (engram_session_rewind(3))."""
        s = _arrays.slot(seq)
        k = _lib.as_index(n, "n")
        if k < 0:
            raise ValueError(f"n {k} is negative")
        ptr = self._enter()
        try:
            lib.engram_session_rewind(ptr, s, k)
        finally:
            self._busy.release()

    def seed(self, seq: int, tokens: "ArrayLike", mask: "Optional[ArrayLike]" = None, *, start: bool = False,
             refuse_negative: Optional[bool] = None) -> None:
        """Give slot seq its history back: the slot is reset and takes tokens (raw ids) as if they had been pushed,
        without positions, rows or reads. tokens are the sequence's last max_ngram - 1 tokens or more, or, with
        start=True, the whole sequence from its start (any number, none included)."""
        self._one_slot(lib.engram_session_seed, seq, tokens, mask, refuse_negative, _lib.SEED_START if start else 0)

    def export_state(self, seq: int) -> bytes:
        """Slot seq's whole state (what rewind can reach included) as a small versioned byte string tied to this
        hash config (engram_session_rewind(3), SEQUENCE STATE): for preemption and prefix caches. import_state()
        restores it into any slot of a session (or process) on the same config."""
        s = _arrays.slot(seq)
        buf = ctypes.create_string_buffer(_lib.SEQ_STATE_MAX)
        ptr = self._enter()
        try:
            rc = lib.engram_session_export(ptr, s, buf, _lib.SEQ_STATE_MAX)
        finally:
            self._busy.release()
        return buf.raw[:rc]

    def import_state(self, seq: int, state: bytes) -> None:
        """Make slot seq's state the one export_state() gave (any slot, any session of the same config). A string
        of another config, version or a corrupt one raises engram.Error (ECONFIG, EVERSION, ECORRUPT, ETRUNC,
        EMAGIC) and leaves the slot as it was."""
        s = _arrays.slot(seq)
        if not isinstance(state, (bytes, bytearray, memoryview)):
            raise TypeError(f"state must be bytes from export_state(), not {type(state).__name__}")
        b = bytes(state)
        ptr = self._enter()
        try:
            lib.engram_session_import(ptr, s, b, len(b))
        finally:
            self._busy.release()

    @property
    def positions(self) -> int:
        """Positions pushed in this step so far."""
        ptr = self._enter()
        try:
            return lib.engram_session_positions(ptr)
        finally:
            self._busy.release()

    def rows(self, layer: int) -> np.ndarray:
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

    def gather_bytes(self, layer: int, dtype: Any = "bf16") -> int:
        """Bytes gather(layer, dtype) writes at this point of the step."""
        li = self._cfg.layer_index(layer)
        kind = _out.kind_of_dtype(dtype)
        ptr = self._enter()
        try:
            return _gather_bytes(ptr, li, kind)
        finally:
            self._busy.release()

    def _shapes(self, li: int, kind: int, lead: Tuple[int, ...], k: int) -> list:
        """Shapes of k rows per index of lead: [..., k x head_dim] or [..., k, head_dim] (f32, bf16); [..., k,
        record bytes] or [..., k x record bytes] (native)."""
        rb = self._row_bytes[li, kind]
        if kind == OUT_NATIVE:
            return [lead + (k, rb), lead + (k * rb,)]
        hd = self._cfg.head_dim
        return [lead + (k * hd,), lead + (k, hd)]

    def gather(self, layer: int, dtype: Any = None, *, out: Any = None, as_tensor: Optional[bool] = None) -> Any:
        """The rows of a layer (model layer id) for every position of the step, in push order.

        dtype: 'bf16' / 'bfloat16' / torch.bfloat16 (numpy.uint16: the bit patterns), 'f32' / 'float32' /
        numpy.float32 / torch.float32, or 'native' / numpy.uint8 / torch.uint8 (the stored record, E8M0 scales
        after the F8_E4M3 payload). None: the type of out=, or bf16 without it.
        out: a writable C-contiguous CPU buffer (numpy array, torch tensor, memoryview) of the gather's shape,
        [positions, columns x head_dim] or [positions, columns, head_dim] ([positions, columns, record bytes] or
        [positions, columns x record bytes] for native), filled and returned; anything else is a ValueError naming
        both shapes. Without out=, a new result of the first shape: a torch.bfloat16 tensor for bf16 when torch is
        importable (numpy uint16 bit patterns otherwise), a numpy array for f32 and native, and whatever a numpy or
        torch dtype= names; as_tensor=True asks for a torch tensor of any type, as_tensor=False for numpy.
        Waits only for reads not yet complete, without the GIL."""
        li = self._cfg.layer_index(layer)
        kind = _out.resolve(dtype, out)
        as_tensor = _out.tensor_default(dtype, out, as_tensor)
        cols = self._cfg.columns
        ptr = self._enter()
        try:
            nbytes = _gather_bytes(ptr, li, kind)
            n = nbytes // (cols * self._row_bytes[li, kind])
            res, addr, _keep = _out.prepare(kind, self._shapes(li, kind, (n,), cols), nbytes, out, as_tensor,
                                            (_GATHER_WHAT, _out.label(kind), layer, n))
            _gather(ptr, li, kind, addr, nbytes)
            return res
        finally:
            self._busy.release()

    def prefetch_rows(self, layer: int, rows: ArrayLike) -> None:
        """Submit reads of table rows of a layer without adding positions (replay, speculation)."""
        li = self._cfg.layer_index(layer)
        r = _arrays.rows(rows)
        ptr = self._enter()
        try:
            lib.engram_session_prefetch_rows(ptr, li, r.ctypes.data, r.size)
        finally:
            self._busy.release()

    def gather_rows(self, layer: int, rows: ArrayLike, dtype: Any = None, *, out: Any = None,
                    as_tensor: Optional[bool] = None) -> Any:
        """Gather arbitrary table rows of a layer through the session's reads and cache. rows of shape [..., k]
        give [..., k x head_dim] or [..., k, head_dim] (f32, bf16), [..., k, record bytes] (native); dtype, out
        and as_tensor as in gather()."""
        li = self._cfg.layer_index(layer)
        kind = _out.resolve(dtype, out)
        as_tensor = _out.tensor_default(dtype, out, as_tensor)
        r = _arrays.rows(rows)
        res, addr, _keep = rows_out(self._cfg, self._row_bytes[li, kind], kind, r, out, as_tensor,
                                    (_ROWS_WHAT, _out.label(kind), r.size, layer))
        ptr = self._enter()
        try:
            lib.engram_session_gather_rows(ptr, li, r.ctypes.data, r.size, kind, addr, r.size * self._row_bytes[li, kind])
        finally:
            self._busy.release()
        return res

    def stats(self, layer: Optional[int] = None, step: bool = False) -> IoStats:
        """I/O counters (engram.IoStats: every field of struct engram_io_stats, each documented there) of one
        layer (model layer id) or all (None), for the current step (step=True) or since the session started."""
        li = -1 if layer is None else self._cfg.layer_index(layer)
        st = _lib.new(_lib.IoStats)
        ptr = self._enter()
        try:
            lib.engram_session_stats(ptr, li, _lib.STATS_STEP if step else 0, ctypes.byref(st))
        finally:
            self._busy.release()
        return IoStats._of(st)

    def remote_stats(self) -> Optional[Dict[str, int]]:
        """The remote tier's counters since the session started (every field of struct engram_remote_stats:
        rows, bytes, fallbacks, errors, timeouts, ...), or None for a session without remote=."""
        if self._remote is None:
            return None
        st = _lib.new(_lib.RemoteStats)
        ptr = self._enter()
        try:
            lib.engram_session_remote_stats(ptr, ctypes.byref(st))
        finally:
            self._busy.release()
        return {k: getattr(st, k) for k, _ in _lib.RemoteStats._fields_ if k != "size"}

    def close(self) -> None:
        """Destroy the session (its reads are collected first). RuntimeError while another thread is in a call."""
        if not self._busy.acquire(False):
            raise _busy()
        try:
            ptr, self._ptr = self._ptr, None
        finally:
            self._busy.release()
        if ptr:
            self._finalizer()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self._max_seqs} slots, {self._mode}, {self._backend}"
        return f"<engram.Session on '{self._store.path}': {state}>"


def rows_out(cfg: "Config", rb: int, kind: int, r: np.ndarray, out: Any, as_tensor: Optional[bool], what: Tuple):
    """The result, address and keeper of a gather of the rows r (any shape) of rb bytes each: [..., k x head_dim]
    or [..., k, head_dim] (f32, bf16), [..., k, rb] or [..., k x rb] (native); 0-d rows give one row."""
    if kind == OUT_NATIVE:
        shapes = [r.shape + (rb,)] + ([r.shape[:-1] + (r.shape[-1] * rb,)] if r.ndim else [])
    elif r.ndim:
        shapes = [r.shape[:-1] + (r.shape[-1] * cfg.head_dim,), r.shape + (cfg.head_dim,)]
    else:
        shapes = [(cfg.head_dim,)]
    return _out.prepare(kind, shapes, r.size * rb, out, as_tensor, what)
