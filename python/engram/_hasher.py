"""engram.Hasher: addressing alone (engram_hasher_*), with each slot's sequence state: token ids to table rows
without a store's reads, for an engine that gathers rows its own way or checks a session's addresses."""
import ctypes
from typing import Any, Optional

import numpy as np

from . import _arrays, _lib
from ._config import Config
from ._handle import Handle
from ._lib import lib


class Hasher(Handle):
    """Hasher(config, max_seqs=1): sequence slots that keep their last max_ngram - 1 tokens across pushes, as a
    Session's do, and write the rows pushes address: push() and push_batch() return numpy uint64 [layers,
    positions, columns] (the row inside each layer's table). rewind(), seed(), export_state() and import_state()
    as Session's (engram_session_rewind(3)). Belongs to one thread at a time (a second thread gets
    RuntimeError). A hasher on a store's config keeps that store from closing until the hasher is closed."""

    _EXCLUSIVE = True
    _HOW = "make a Hasher in each process from its own config, and move slots with export_state/import_state"

    def __init__(self, config: Config, max_seqs: int = 1) -> None:
        if not isinstance(config, Config):
            raise TypeError(f"config must be an engram.Config, not {type(config).__name__}")
        n = _lib.as_index(max_seqs, "max_seqs", "a positive integer")
        if n < 1 or n > 0xFFFFFFFF:
            raise ValueError(f"max_seqs {n} is not a positive 32-bit number")
        self._cfg = config
        self._max_seqs = n
        ptr = ctypes.c_void_p()
        with config._use() as cp:
            lib.engram_hasher_create(ctypes.byref(ptr), cp, n)
            if config._store is not None:
                config._store._adopt(self)  # the store's config must outlive the hasher
        self._open(ptr.value, lib.engram_hasher_destroy, f"hasher of {n} slots on {config._what}")

    @property
    def config(self) -> Config:
        return self._cfg

    @property
    def max_seqs(self) -> int:
        return self._max_seqs

    def _rows(self, n: int) -> np.ndarray:
        return np.empty((len(self._cfg.layer_ids), n, self._cfg.columns), dtype=np.uint64)

    def push(self, seq: int, tokens: Any, mask: Optional[Any] = None) -> np.ndarray:
        """Push tokens (raw ids) into slot seq: their rows, uint64 [layers, positions, columns]."""
        s = _arrays.slot(seq)
        t = _arrays.tokens(tokens)
        m = _arrays.mask(mask, t.shape[0])
        out = self._rows(t.shape[0])
        with self._use() as ptr:
            lib.engram_hasher_push(ptr, s, t.ctypes.data, None if m is None else m.ctypes.data, t.shape[0],
                                   out.ctypes.data)
        return out

    def push_batch(self, seqs: Any, tokens: Any, mask: Optional[Any] = None) -> np.ndarray:
        """One token into each of distinct slots seqs: their rows, uint64 [layers, len(seqs), columns]."""
        sl = _arrays.slots(seqs)
        t = _arrays.tokens(tokens)
        if t.shape[0] != sl.shape[0]:
            raise ValueError(f"{t.shape[0]} tokens for {sl.shape[0]} seqs")
        m = _arrays.mask(mask, sl.shape[0])
        out = self._rows(sl.shape[0])
        with self._use() as ptr:
            lib.engram_hasher_push_batch(ptr, sl.ctypes.data, t.ctypes.data,
                                         None if m is None else m.ctypes.data, sl.shape[0], out.ctypes.data)
        return out

    def reset(self, seq: int) -> None:
        """Forget slot seq's history: its next token starts a sequence."""
        s = _arrays.slot(seq)
        with self._use() as ptr:
            lib.engram_hasher_reset(ptr, s)

    def rewind(self, seq: int, n: int) -> None:
        """Forget the last n positions pushed into slot seq (Session.rewind)."""
        s = _arrays.slot(seq)
        k = _lib.as_index(n, "n")
        if k < 0:
            raise ValueError(f"n {k} is negative")
        with self._use() as ptr:
            lib.engram_hasher_rewind(ptr, s, k)

    def seed(self, seq: int, tokens: Any, mask: Optional[Any] = None, *, start: bool = False) -> None:
        """Give slot seq its history back (Session.seed)."""
        s = _arrays.slot(seq)
        t = _arrays.tokens(tokens)
        m = _arrays.mask(mask, t.shape[0])
        with self._use() as ptr:
            lib.engram_hasher_seed(ptr, s, t.ctypes.data if t.size else None,
                                   None if m is None or not m.size else m.ctypes.data, t.shape[0],
                                   _lib.SEED_START if start else 0)

    def export_state(self, seq: int) -> bytes:
        """Slot seq's state as bytes (Session.export_state; the same string, for any slot of either)."""
        s = _arrays.slot(seq)
        buf = ctypes.create_string_buffer(_lib.SEQ_STATE_MAX)
        with self._use() as ptr:
            rc = lib.engram_hasher_export(ptr, s, buf, _lib.SEQ_STATE_MAX)
        return buf.raw[:rc]

    def import_state(self, seq: int, state: bytes) -> None:
        """Make slot seq's state the one export_state() gave (Session.import_state)."""
        s = _arrays.slot(seq)
        if not isinstance(state, (bytes, bytearray, memoryview)):
            raise TypeError(f"state must be bytes from export_state(), not {type(state).__name__}")
        b = bytes(state)
        with self._use() as ptr:
            lib.engram_hasher_import(ptr, s, b, len(b))

    def __repr__(self) -> str:
        return f"<engram.Hasher {self._what}{' (closed)' if self.closed else ''}>"
