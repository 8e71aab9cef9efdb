"""engram.Store: a shard file, or every shard of a manifest, mapped read-only and shared."""
import ctypes
import os
import weakref
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

import numpy as np

from . import _arrays, _lib, _out
from ._config import Config, PathLike, fspath
from ._errors import Error, about
from ._handle import Handle
from ._lib import lib

if TYPE_CHECKING:
    from ._rowcache import RowCache
    from ._session import Session


class Store(Handle):
    """A shard file or a manifest's shards, opened read-only and shared (MAP_SHARED), its headers and metadata
    checksums validated. Immutable: any number of threads may use one Store at once, each with its own sessions.

    close() (or leaving a `with` block) unmaps it; it refuses while a session of the store is open or another
    thread is inside a call on it. Without close(), the store is closed when the last reference to it (from the
    program, its sessions or its config) goes."""

    def __init__(self, path: PathLike) -> None:
        ptr = ctypes.c_void_p()
        with about(path):
            lib.engram_open(ctypes.byref(ptr), fspath(path, "path"), 0)
        self._path = os.fsdecode(path)
        self._open(ptr.value, lib.engram_close, f"store '{self._path}'")
        self._config = None
        si = _lib.new(_lib.StoreInfo)
        lib.engram_store_info(self._ptr, ctypes.byref(si))
        self._set_id = bytes(si.set_id)  # which row caches serve this store
        self._shards = tuple(lib.engram_store_shard_path(self._ptr, i).decode(errors="surrogateescape")
                             for i in range(lib.engram_store_num_shards(self._ptr)))

    @property
    def path(self) -> str:
        return self._path

    @property
    def shards(self) -> Tuple[str, ...]:
        """Shard files of the store: the one opened, or every shard its manifest names, in order."""
        return self._shards

    @property
    def config(self) -> Config:
        """The hash config stored in the shards (an engram.Config that keeps this store alive)."""
        cfg = self._config() if self._config is not None else None
        if cfg is None:
            with self._use() as ptr:
                cfg = Config._of_store(lib.engram_store_config(ptr), self, f"'{self._path}'")
            self._config = weakref.ref(cfg)
        return cfg

    def info(self) -> Dict[str, Any]:
        """What `engram-stat info` shows, as a dict: the config, the shards, one dict per table piece (layer, rows,
        dtype, record size, codec...) and the totals."""
        cfg = self.config
        with self._use() as ptr:
            si = _lib.new(_lib.StoreInfo)
            lib.engram_store_info(ptr, ctypes.byref(si))
            tables = []
            for i in range(lib.engram_store_num_tables(ptr)):
                ti = _lib.new(_lib.TableInfo)
                lib.engram_store_table_info(ptr, i, ctypes.byref(ti))
                t = {name: getattr(ti, name) for name, _ in _lib.TableInfo._fields_ if name != "size"}
                for k in ("path", "dtype", "codec"):
                    t[k] = t[k].decode(errors="surrogateescape")
                t["shuffled"] = bool(t["shuffled"])
                tables.append(t)
        raw = sum(t["raw_bytes"] for t in tables)
        stored = sum(t["stored_bytes"] for t in tables)
        return {
            "path": self._path,
            "config": {
                "family": cfg.family,
                "layer_ids": list(cfg.layer_ids),
                "max_ngram": cfg.max_ngram,
                "heads": cfg.heads,
                "head_dim": cfg.head_dim,
                "columns": cfg.columns,
                "table_rows": list(cfg.table_rows),
                "raw_vocab": cfg.raw_vocab,
                "compressed_vocab": cfg.compressed_vocab,
                "pad_id": cfg.pad_id,
                "compressed_pad": cfg.compressed_pad,
            },
            "row_scale": si.row_scale,
            "shards": list(self._shards),
            "tables": tables,
            "n_shards": si.n_shards,
            "n_tables": si.n_tables,
            "n_layers": si.n_layers,
            "raw_bytes": raw,
            "stored_bytes": stored,
            "codec_ratio": raw / stored if stored else 0.0,
            "file_bytes": si.file_bytes,
            "set_id": bytes(si.set_id).hex(),
            "created_unix": si.created_unix,
            "writer": si.writer.decode(errors="replace") if si.writer else "",
            # where the packer got the token map: "tokenizer.json", ".npy", "none" (a family without one: raw ids),
            # or "" for shards that do not say
            "token_map": {
                "source": (si.token_map_source or b"").decode(errors="replace"),
                "name": (si.token_map_name or b"").decode(errors="surrogateescape"),
                "sha256": bytes(si.token_map_sha256).hex() if any(si.token_map_sha256) else None,
            },
            # where the hash parameters came from: "config json", "gguf keys", or "" when the shards do not say;
            # and the constants a GGUF stored that were found equal to the library's derivation
            "config_source": {
                "source": (si.config_source or b"").decode(errors="replace"),
                "name": (si.config_name or b"").decode(errors="surrogateescape"),
                "gguf_checked": (si.gguf_checked or b"").decode(errors="replace").split(),
            },
            # shards without table data (engram-pack --metadata-only): rows come from a session's remote tier
            "no_data_shards": si.no_data_shards,
        }

    def preload(self, layer: Optional[int] = None) -> None:
        """Read the tables of one layer (a model layer id) or of all (None) into the page cache in file order and
        map them (engram_preload): blocking, in the calling thread; other threads may gather meanwhile."""
        index = -1 if layer is None else self.config.layer_index(layer)
        with self._use() as ptr:
            lib.engram_preload(ptr, index)

    def verify(self) -> None:
        """Check every checksum: metadata and each data block of each shard (reads all the data). Returns None when
        all match; raises engram.Error (errno ECORRUPT) otherwise, whose failures attribute lists every message
        (each names the file, table and block)."""
        failures = []

        def report(arg, msg):
            failures.append(msg.decode(errors="replace"))
            return 0

        cb = _lib.REPORT(report)
        try:
            with self._use() as ptr:
                lib.engram_verify(ptr, cb, None)
        except Error as e:
            e.failures = failures
            raise

    def row_bytes(self, layer: int, dtype: Any) -> int:
        """Bytes one gathered row of the layer takes in dtype (as Session.gather takes it: 'native', 'bf16', 'f32',
        numpy or torch dtypes)."""
        index = self.config.layer_index(layer)
        with self._use() as ptr:
            return lib.engram_out_row_bytes(ptr, index, _out.kind_of_dtype(dtype))

    def gather_rows(self, layer: int, rows: Any, dtype: Any = None, *, out: Any = None,
                    as_tensor: Optional[bool] = None) -> Any:
        """Table rows of a layer read straight from the shards (engram_gather_rows: synchronous, no session, no
        cache; thread-safe): an independent read path to check a session's rows against. rows of any shape [...,
        k] give [..., k x head_dim] or [..., k, head_dim] (f32, bf16), [..., k, record bytes] (native); dtype, out
        and as_tensor as in Session.gather()."""
        from ._session import _ROWS_WHAT, rows_out
        cfg = self.config
        li = cfg.layer_index(layer)
        kind = _out.resolve(dtype, out)
        as_tensor = _out.tensor_default(dtype, out, as_tensor)
        r = _arrays.rows(rows)
        with self._use() as ptr:
            rb = lib.engram_out_row_bytes(ptr, li, kind)
            res, addr, _keep = rows_out(cfg, rb, kind, r, out, as_tensor, (_ROWS_WHAT, _out.label(kind), r.size, layer))
            lib.engram_gather_rows(ptr, li, r.ctypes.data, r.size, kind, addr, r.size * rb)
        return res

    def read_row(self, layer: int, row: int) -> bytes:
        """One row's stored record (native bytes: payload, then the E8M0 scales of F8_E4M3), read synchronously
        (engram_read_row)."""
        li = self.config.layer_index(layer)
        r = _lib.as_index(row, "row")
        if r < 0 or r >= 1 << 64:
            raise ValueError(f"row {r} is not a row number")
        with self._use() as ptr:
            size = lib.engram_out_row_bytes(ptr, li, _lib.OUT_NATIVE)
            buf = ctypes.create_string_buffer(max(size, 1))
            rc = lib.engram_read_row(ptr, li, r, buf, size)
        return buf.raw[:rc]

    def session(self, max_seqs: int = 1, *, mode: str = "direct", queue_depth: Optional[int] = None,
                cache_bytes: Optional[int] = None, cache_mb: Optional[int] = None, uring: bool = True,
                prefetch: bool = True, sqpoll: bool = False, row_cache: "Optional[RowCache]" = None,
                page_cache_bytes: Optional[int] = None, page_cache_mb: Optional[int] = None,
                refuse_negative: bool = False, remote: Optional[str] = None,
                remote_timeout_ms: Optional[int] = None, publish_stats: bool = True,
                stats_labels: Optional[Dict[str, str]] = None) -> "Session":
        """A new engram.Session on this store (see Session). Options after max_seqs are keyword-only.
        max_seqs: sequence slots; mode: 'direct' (the default) or 'pagecache'; queue_depth: reads in flight at
        most (default 128); cache_bytes: the private cache in bytes (default 256 MiB; cache_mb: the same in MiB);
        uring=False: the pread thread pool instead of io_uring; prefetch=False: push only hashes and every row is
        read when gathered; sqpoll=True: io_uring submission by a kernel thread; row_cache: an engram.RowCache of
        this store's table set, looked up first (rows it lacks are read with O_DIRECT and kept there);
        page_cache_bytes (page_cache_mb): in page-cache mode, the page cache the session may count on (default half
        of physical memory); refuse_negative=True: negative token ids raise ValueError in push, push_batch,
        prefetch_next and seed (by default they are hashed as they are, the reference demo's rule); remote:
        'redis://HOST:PORT' of a Redis Cluster loaded with this set (engram-stat remote-load): rows no RAM tier
        holds come from it, from the shard when it cannot give them; remote_timeout_ms: the longest any wait on it
        lasts (default 1000); publish_stats=False: its counters are not published for engram-stat top and
        metrics (engram.metrics(); ENGRAM_STATS=0 turns publishing off for every session); stats_labels: labels of
        this process's series ({"engine": "vllm-0", "model": "qwen38"}: libengram(3), METRICS; with those of
        ENGRAM_STATS_LABELS), a label the library refuses raises ValueError."""
        from ._session import Session
        return Session(self, max_seqs, mode=mode, queue_depth=queue_depth, cache_bytes=cache_bytes,
                       cache_mb=cache_mb, uring=uring, prefetch=prefetch, sqpoll=sqpoll, row_cache=row_cache,
                       page_cache_bytes=page_cache_bytes, page_cache_mb=page_cache_mb,
                       refuse_negative=refuse_negative, remote=remote, remote_timeout_ms=remote_timeout_ms,
                       publish_stats=publish_stats, stats_labels=stats_labels)

    def __repr__(self) -> str:
        return f"<engram.Store '{self._path}'{' (closed)' if self.closed else ''}>"
