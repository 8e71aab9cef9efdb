"""engram.Config: a hash config (layers, orders, heads, primes, multipliers, token map) and addressing."""
import contextlib
import ctypes
import os
import weakref
from typing import Any, Optional, Tuple, Union

import numpy as np

from . import _arrays, _lib
from ._errors import about
from ._handle import NoCopy
from ._lib import lib


PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


def fspath(p: Any, what: str) -> bytes:
    """A path argument as the bytes the C API takes; ValueError for an embedded NUL, which C would cut the path at
    (os.open refuses such paths alike)."""
    try:
        b = os.fsencode(p)
    except TypeError:
        raise TypeError(f"{what} must be a path (str, bytes or os.PathLike), not {type(p).__name__}") from None
    if b"\0" in b:
        raise ValueError(f"{what} {p!r} has an embedded NUL byte")
    return b


def _culprit(*paths: Any) -> Any:
    """The first path that is missing, a directory or unreadable: the one a failed load names (the first else)."""
    for p in paths:
        try:
            if os.path.isdir(p) or not os.access(p, os.R_OK):
                return p
        except (TypeError, ValueError):
            pass
    return paths[0]


class Config(NoCopy):
    """The hash config of an Engram model: which layers have tables, n-gram orders, heads, primes, multipliers,
    pad id and the compressed-token map. Immutable; any number of threads may use one Config at once.

    Config(config_json, token_map=None, tokenizer=None) loads the JSON (the Engram demo's EngramConfig fields, or
    a Hugging Face config.json) with the compressed-token map from a .npy file (token_map) or built from a
    Hugging Face tokenizer.json (tokenizer; this loads libengram-pack). A Qwen4-Exp config.json (Qwen3.8-Flash-
    Next, model_type qwen4_exp: family "qwen4-exp-ple") and a LongCat one (LongCat-Flash-Lite, model_type
    longcat_flash_ngram: family "longcat-flash-ngram") hash raw token ids: they take neither. Store.config is
    the config stored in a shard."""

    _HOW = "load it again in each process (engram.Config(path, ...)), or take store.config of a Store opened there"

    def __init__(self, config_json: PathLike, *, token_map: Optional[PathLike] = None,
                 tokenizer: Optional[PathLike] = None) -> None:
        if token_map is not None and tokenizer is not None:
            raise ValueError("Config takes one of token_map (a .npy file) and tokenizer (a tokenizer.json), not both")
        ptr = ctypes.c_void_p()
        cfg = fspath(config_json, "config_json")
        others = [p for p in (token_map, tokenizer) if p is not None]
        with about(_culprit(config_json, *others)):
            if tokenizer is not None:
                from ._lib import pack
                pack().engram_config_load_tokenizer(ctypes.byref(ptr), cfg, fspath(tokenizer, "tokenizer"))
            else:
                # no map: a Qwen4-Exp config (raw ids); a DeepSeek one is refused by the library (InvalidArgument)
                lib.engram_config_load(ctypes.byref(ptr), cfg,
                                       None if token_map is None else fspath(token_map, "token_map"))
        self._init(ptr.value, None, f"'{os.fsdecode(config_json)}'")
        self._finalizer = weakref.finalize(self, lib.engram_config_free, ptr.value)
        self._finalizer.atexit = False

    @classmethod
    def _of_store(cls, ptr, store, what):
        """The config a store owns: it keeps the store alive, and refuses use once the store is closed."""
        self = cls.__new__(cls)
        self._init(ptr, store, what)
        return self

    def _init(self, ptr, store, what):
        self._ptr = ptr
        self._store = store
        self._what = what
        n = lib.engram_config_num_layers(ptr)
        self._layer_ids = tuple(lib.engram_config_layer_id(ptr, i) for i in range(n))
        self._index = {lid: i for i, lid in enumerate(self._layer_ids)}
        self._columns = lib.engram_config_columns(ptr)
        self._head_dim = lib.engram_config_head_dim(ptr)
        self._max_ngram = lib.engram_config_max_ngram(ptr)
        self._heads = lib.engram_config_num_heads(ptr)
        self._table_rows = tuple(lib.engram_config_table_rows(ptr, i) for i in range(n))
        self._addressed_rows = tuple(lib.engram_config_addressed_rows(ptr, i) for i in range(n))
        self._primes = tuple(tuple(lib.engram_config_prime(ptr, i, c) for c in range(self._columns))
                             for i in range(n))
        self._multipliers = tuple(tuple(lib.engram_config_multiplier(ptr, i, k) for k in range(self._max_ngram))
                                  for i in range(n))
        self._raw_vocab = lib.engram_config_raw_vocab(ptr)
        self._compressed_vocab = lib.engram_config_compressed_vocab(ptr)
        self._pad_id = lib.engram_config_pad_id(ptr)
        self._compressed_pad = lib.engram_config_compressed_pad(ptr)
        self._family = lib.engram_family_name(lib.engram_config_family(ptr)).decode()

    @property
    def family(self) -> str:
        """The hash family: "deepseek-engram" (DeepSeek Engram: a compressed-token map, dead-token masks) or
        "qwen4-exp-ple" (Qwen4-Exp's PLE n-gram table: raw ids in [0, raw_vocab), pad_id its n-gram EOS, which
        begins every history and cuts it; layer_ids its ple_layer_ids, numbered from 1; table_rows padded to
        make_ngram_vocab_size_divisible_by) or "longcat-flash-ngram" (LongCat's n-gram embedding tables: raw ids in
        [0, raw_vocab); one layer, id 0, read at the input embedding, whose columns are the k x (n-1) tables in
        table order, primes(0) their sizes ratio x vocab + 2t + 1 (odd, not primes); pad_id the EOS, which cuts the
        history, a look-back across it or before the start reading the id 0, compressed_pad)."""
        return self._family

    @property
    def layer_ids(self) -> Tuple[int, ...]:
        """Model layer ids that have an Engram table, in config order (the layer arguments of this module)."""
        return self._layer_ids

    @property
    def columns(self) -> int:
        """Rows fetched per position and layer: (max_ngram - 1) x heads."""
        return self._columns

    @property
    def head_dim(self) -> int:
        """Elements per row."""
        return self._head_dim

    @property
    def max_ngram(self) -> int:
        """Largest n-gram order N (orders 2..N are hashed)."""
        return self._max_ngram

    @property
    def heads(self) -> int:
        """Heads per n-gram order."""
        return self._heads

    @property
    def table_rows(self) -> Tuple[int, ...]:
        """Rows of each layer's table, in layer_ids order: engram_num_embeddings when the config states it (a
        store's config: what its tables hold), else the sum of its primes (family "qwen4-exp-ple": rounded up to
        make_ngram_vocab_size_divisible_by)."""
        return self._table_rows

    @property
    def addressed_rows(self) -> Tuple[int, ...]:
        """Rows of each layer's table the hash addresses (the sum of its primes): at most table_rows; a table's
        rows beyond them (engram_num_embeddings above the prime sum) are stored and readable, never addressed."""
        return self._addressed_rows

    @property
    def raw_vocab(self) -> int:
        """Entries of the token map (raw token ids); a family without one: its vocabulary size."""
        return self._raw_vocab

    @property
    def compressed_vocab(self) -> int:
        """Distinct compressed ids of the token map."""
        return self._compressed_vocab

    @property
    def pad_id(self) -> int:
        """The raw pad id (families "qwen4-exp-ple" and "longcat-flash-ngram": the EOS)."""
        return self._pad_id

    @property
    def compressed_pad(self) -> int:
        return self._compressed_pad

    def layer_index(self, layer_id: int) -> int:
        """Position of a model layer id in layer_ids; ValueError when that layer has no Engram table."""
        if type(layer_id) is not int:
            layer_id = _lib.as_index(layer_id, "layer id")
        i = self._index.get(layer_id)
        if i is not None:
            return i
        raise ValueError(f"layer {layer_id} has no Engram table in {self._what} "
                         f"(layers {', '.join(map(str, self._layer_ids))})")

    def primes(self, layer_id: int) -> Tuple[int, ...]:
        """The layer's prime (modulus) of each column, column = (order - 2) x heads + head."""
        return self._primes[self.layer_index(layer_id)]

    def multipliers(self, layer_id: int) -> Tuple[int, ...]:
        """The layer's N odd multipliers."""
        return self._multipliers[self.layer_index(layer_id)]

    @contextlib.contextmanager
    def _use(self):
        if self._store is None:
            yield self._ptr
        else:
            with self._store._use():
                yield self._ptr

    def rows(self, tokens: Any, mask: Optional[Any] = None) -> np.ndarray:
        """Table rows that one sequence of raw token ids addresses: numpy uint64 [layers, positions, columns], the
        row inside each layer's table, as `engram-stat rows` prints them. mask (optional): one bool or 0/1 per
        token, 0 = dead (DeepSeek-V4.1's dead tokens)."""
        t = _arrays.tokens(tokens)
        n = t.shape[0]
        m = _arrays.mask(mask, n)
        out = np.empty((len(self._layer_ids), n, self._columns), dtype=np.uint64)
        h = ctypes.c_void_p()
        with self._use() as ptr:
            lib.engram_hasher_create(ctypes.byref(h), ptr, 1)
            try:
                lib.engram_hasher_push(h, 0, t.ctypes.data, None if m is None else m.ctypes.data, n,
                                       out.ctypes.data)
            finally:
                lib.engram_hasher_destroy(h)
        return out

    def __repr__(self) -> str:
        return (f"<engram.Config {self._what}: {self._family}, layers {list(self._layer_ids)}, orders "
                f"2..{self._max_ngram}, {self._heads} heads, head dim {self._head_dim}>")
