"""Loading libengram.so and declaring its functions and structs to ctypes: the one mirror of include/engram.h.

The library is found, in this order:
  1. $ENGRAM_LIBDIR/libengram.so.0 when ENGRAM_LIBDIR is set (`make check` points it at the build directory);
     a directory without the library is an ImportError, never a fall-back to another copy;
  2. the LIBDIR recorded by `make install` in engram/_install.py;
  3. the dynamic loader's own search for the soname libengram.so.0 (LD_LIBRARY_PATH, ld.so.cache).
libengram-pack.so.0 (engram_config_load_tokenizer) is loaded from the same place, and only when first needed,
so that a serving process maps none of the packer.

ctypes.CDLL releases the GIL around every foreign call: other Python threads run while a call waits or copies.
"""
import ctypes
import os
import threading
from ctypes import POINTER, c_char_p, c_double, c_int, c_int64, c_size_t, c_uint, c_uint8, c_uint32, c_uint64, c_void_p

SONAME = "libengram.so.0"
PACK_SONAME = "libengram-pack.so.0"
VERSION_MAJOR = 0  # of the soname above; engram_version_number() / 10000 must match

# enum engram_out, enum engram_mode, ENGRAM_SESSION_* flags
OUT_NATIVE, OUT_BF16, OUT_F32 = 0, 1, 2
MODE_DIRECT, MODE_PAGECACHE = 0, 1
SESSION_NO_URING, SESSION_NO_PREFETCH, SESSION_SQPOLL, SESSION_NO_STATS = 1, 2, 4, 8
LEAD_BUCKETS = 96  # ENGRAM_LEAD_BUCKETS
STATS_STEP = 1  # ENGRAM_STATS_STEP
REWIND_MAX = 32  # ENGRAM_REWIND_MAX
SEQ_STATE_MAX = 24 + 9 * (REWIND_MAX + 15)  # ENGRAM_SEQ_STATE_MAX
SEED_START = 1  # ENGRAM_SEED_START
ROWCACHE_GROUP = 1  # ENGRAM_ROWCACHE_GROUP


class StoreInfo(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("n_shards", c_uint),
        ("n_tables", c_uint),
        ("n_layers", c_uint),
        ("set_id", c_uint8 * 16),
        ("row_scale", c_uint64),
        ("raw_bytes", c_uint64),
        ("stored_bytes", c_uint64),
        ("file_bytes", c_uint64),
        ("created_unix", c_uint64),
        ("writer", c_char_p),
        ("token_map_source", c_char_p),
        ("token_map_name", c_char_p),
        ("token_map_sha256", c_uint8 * 32),
        ("config_source", c_char_p),
        ("config_name", c_char_p),
        ("gguf_checked", c_char_p),
        ("no_data_shards", c_uint),
    ]


class TableInfo(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("path", c_char_p),
        ("shard_index", c_uint),
        ("layer_index", c_uint),
        ("layer_id", c_int),
        ("row_begin", c_uint64),
        ("row_count", c_uint64),
        ("dtype", c_char_p),
        ("head_dim", c_uint),
        ("record_size", c_uint),
        ("rows_per_page", c_uint),
        ("codec", c_char_p),
        ("shuffled", c_int),
        ("block_pages", c_uint),
        ("raw_bytes", c_uint64),
        ("stored_bytes", c_uint64),
        ("data_offset", c_uint64),
    ]


class SessionOptions(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("max_seqs", c_uint),
        ("mode", c_uint32),
        ("cache_bytes", c_uint64),
        ("queue_depth", c_uint),
        ("flags", c_uint),
        ("row_cache", c_void_p),
        ("page_cache_bytes", c_uint64),
        ("remote", c_char_p),
        ("remote_timeout_ms", c_uint),
        ("stats_labels", c_char_p),
    ]


class RemoteStats(ctypes.Structure):
    """struct engram_remote_stats: Session.remote_stats() returns every field."""
    _fields_ = [(name, c_size_t if name == "size" else c_uint64) for name in (
        "size", "rows", "bytes", "fallbacks", "errors", "timeouts", "absent", "bad", "wire_bytes", "node_failures",
        "moved", "ask", "max_outage_ms")]


class IoStats(ctypes.Structure):
    """struct engram_io_stats. Fields the lead appends go here, in header order: Session.stats() returns them all."""
    _fields_ = [
        ("size", c_size_t),
        ("rows", c_uint64),
        ("ready", c_uint64),
        ("not_ready", c_uint64),
        ("misses", c_uint64),
        ("requested", c_uint64),
        ("units", c_uint64),
        ("ios", c_uint64),
        ("bytes", c_uint64),
        ("wait_ns", c_uint64),
        ("lead_hist", c_uint64 * LEAD_BUCKETS),
        ("ram", c_uint64),
        ("disk_bytes", c_uint64),
        ("thread_cpu_ns", c_uint64),
        ("straddled", c_uint64),
        ("read_busy_ns", c_uint64),
    ]


class RowCacheInfo(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("bytes", c_uint64),
        ("slots", c_uint64),
        ("ways", c_uint),
        ("record_bytes", c_uint),
        ("slot_bytes", c_uint),
        ("overhead_per_row", c_double),
        ("rows", c_uint64),
        ("hits", c_uint64),
        ("misses", c_uint64),
        ("inserts", c_uint64),
        ("name", c_char_p),
    ]


class RowCacheOptions(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("bytes", c_uint64),
        ("flags", c_uint),
        ("group", c_uint),
    ]


class CacheSimOptions(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("staging_bytes", c_uint64),
        ("hot_bytes", c_uint64),
        ("hot_layers", POINTER(c_uint)),
        ("hot_rows", POINTER(c_uint64)),
        ("n_hot", c_uint64),
    ]


class CacheSimResult(ctypes.Structure):
    _fields_ = [
        ("size", c_size_t),
        ("policy", c_uint32),
        ("budget_bytes", c_uint64),
        ("lookups", c_uint64),
        ("ram", c_uint64),
        ("hot_hits", c_uint64),
        ("pages", c_uint64),
        ("staging_bytes", c_uint64),
        ("row_slots", c_uint64),
        ("ways", c_uint),
        ("slot_bytes", c_uint),
        ("hot_rows", c_uint64),
        ("reads", c_uint64),
        ("read_bytes", c_uint64),
        ("straddled", c_uint64),
        ("unit_bytes", c_uint64),
    ]


def new(struct):
    """A zeroed caller-allocated struct with its size field set (ENGRAM_INIT)."""
    s = struct()
    s.size = ctypes.sizeof(struct)
    return s


STRUCTS = {
    "engram_store_info": StoreInfo,
    "engram_table_info": TableInfo,
    "engram_session_options": SessionOptions,
    "engram_io_stats": IoStats,
    "engram_rowcache_info": RowCacheInfo,
    "engram_rowcache_options": RowCacheOptions,
    "engram_cachesim_options": CacheSimOptions,
    "engram_cachesim_result": CacheSimResult,
}

_p = c_void_p  # opaque handles and caller buffers
_pp = POINTER(c_void_p)
REPORT = ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p)

# name: (restype, argtypes)
_FUNCS = {
    "engram_version_number": (c_uint, []),
    "engram_version": (c_char_p, []),
    "engram_strerror": (c_char_p, [c_int]),
    "engram_last_error": (c_char_p, []),
    "engram_free": (None, [_p]),
    "engram_config_load": (c_int, [_pp, c_char_p, c_char_p]),
    "engram_config_free": (None, [_p]),
    "engram_config_num_layers": (c_uint, [_p]),
    "engram_config_layer_id": (c_int, [_p, c_uint]),
    "engram_config_layer_index": (c_int, [_p, c_int]),
    "engram_config_max_ngram": (c_uint, [_p]),
    "engram_config_num_heads": (c_uint, [_p]),
    "engram_config_head_dim": (c_uint, [_p]),
    "engram_config_columns": (c_uint, [_p]),
    "engram_config_table_rows": (c_uint64, [_p, c_uint]),
    "engram_config_addressed_rows": (c_uint64, [_p, c_uint]),
    "engram_config_prime": (c_uint64, [_p, c_uint, c_uint]),
    "engram_config_multiplier": (c_uint64, [_p, c_uint, c_uint]),
    "engram_config_raw_vocab": (c_uint64, [_p]),
    "engram_config_compressed_vocab": (c_uint64, [_p]),
    "engram_config_pad_id": (c_int64, [_p]),
    "engram_config_compressed_pad": (c_int64, [_p]),
    "engram_config_family": (c_int, [_p]),
    "engram_family_name": (c_char_p, [c_int]),
    "engram_hasher_create": (c_int, [_pp, _p, c_uint]),
    "engram_hasher_destroy": (None, [_p]),
    "engram_hasher_push": (c_int, [_p, c_uint, _p, _p, c_size_t, _p]),
    "engram_hasher_push_batch": (c_int, [_p, _p, _p, _p, c_size_t, _p]),
    "engram_hasher_reset": (c_int, [_p, c_uint]),
    "engram_hasher_rewind": (c_int, [_p, c_uint, c_size_t]),
    "engram_hasher_seed": (c_int, [_p, c_uint, _p, _p, c_size_t, c_uint]),
    "engram_hasher_export": (c_int, [_p, c_uint, _p, c_size_t]),
    "engram_hasher_import": (c_int, [_p, c_uint, _p, c_size_t]),
    "engram_open": (c_int, [_pp, c_char_p, c_uint]),
    "engram_close": (None, [_p]),
    "engram_store_config": (_p, [_p]),
    "engram_store_info": (c_int, [_p, POINTER(StoreInfo)]),
    "engram_store_num_tables": (c_uint, [_p]),
    "engram_store_table_info": (c_int, [_p, c_uint, POINTER(TableInfo)]),
    "engram_store_num_shards": (c_uint, [_p]),
    "engram_store_shard_path": (c_char_p, [_p, c_uint]),
    "engram_preload": (c_int, [_p, c_int]),
    "engram_verify": (c_int, [_p, REPORT, _p]),
    "engram_out_row_bytes": (c_size_t, [_p, c_uint, c_int]),
    "engram_rowcache_open": (c_int, [_pp, _p, c_char_p, c_uint64, c_uint]),
    "engram_rowcache_open_options": (c_int, [_pp, _p, c_char_p, POINTER(RowCacheOptions)]),
    "engram_rowcache_close": (None, [_p]),
    "engram_rowcache_remove": (c_int, [c_char_p]),
    "engram_rowcache_info": (c_int, [_p, POINTER(RowCacheInfo)]),
    "engram_cachesim_create": (c_int, [_pp, _p, c_int, c_uint64, POINTER(CacheSimOptions)]),
    "engram_cachesim_destroy": (None, [_p]),
    "engram_cachesim_policy_name": (c_char_p, [c_int]),
    "engram_cachesim_begin": (c_int, [_p, c_uint]),
    "engram_cachesim_push": (c_int, [_p, c_uint, _p, c_size_t]),
    "engram_cachesim_gather": (c_int, [_p, c_uint, _p, c_size_t]),
    "engram_cachesim_result": (c_int, [_p, POINTER(CacheSimResult)]),
    "engram_session_create": (c_int, [_pp, _p, POINTER(SessionOptions)]),
    "engram_session_destroy": (None, [_p]),
    "engram_session_backend": (c_char_p, [_p]),
    "engram_session_begin": (c_int, [_p]),
    "engram_session_push": (c_int, [_p, c_uint, _p, _p, c_size_t]),
    "engram_session_push_batch": (c_int, [_p, _p, _p, _p, c_size_t]),
    "engram_session_reset": (c_int, [_p, c_uint]),
    "engram_session_positions": (c_size_t, [_p]),
    "engram_session_rows": (_p, [_p, c_uint]),
    "engram_session_gather_bytes": (c_size_t, [_p, c_uint, c_int]),
    "engram_session_gather": (c_int, [_p, c_uint, c_int, _p, c_size_t]),
    "engram_session_prefetch_next": (c_int, [_p, _p, _p, _p, c_size_t]),
    "engram_session_prefetch_rows": (c_int, [_p, c_uint, _p, c_size_t]),
    "engram_session_gather_rows": (c_int, [_p, c_uint, _p, c_size_t, c_int, _p, c_size_t]),
    "engram_session_stats": (c_int, [_p, c_int, c_uint, POINTER(IoStats)]),
    "engram_session_rewind": (c_int, [_p, c_uint, c_size_t]),
    "engram_session_seed": (c_int, [_p, c_uint, _p, _p, c_size_t, c_uint]),
    "engram_session_export": (c_int, [_p, c_uint, _p, c_size_t]),
    "engram_session_import": (c_int, [_p, c_uint, _p, c_size_t]),
    "engram_gather_rows": (c_int, [_p, c_uint, _p, c_size_t, c_int, _p, c_size_t]),
    "engram_read_row": (c_int, [_p, c_uint, c_uint64, _p, c_size_t]),
    "engram_session_remote_stats": (c_int, [_p, POINTER(RemoteStats)]),
    # the stats segments' reader (exported in the private node for engram.metrics(); its struct: _metrics.py)
    "engram_stats_dir": (c_char_p, []),
    "engram_stats_path": (c_char_p, []),
    "engram_stats_read": (c_int, [c_char_p, _p]),
}

_PACK_FUNCS = {
    "engram_config_load_tokenizer": (c_int, [_pp, c_char_p, c_char_p]),
}


def _raise_negative(result, func, args):
    """errcheck of every function returning an int: a negative result is raised as engram.Error (or the subclass
    for its errno) with the calling thread's message, so that no caller can drop a failure. A caller that names
    a file catches it and raises path_error() (the message is still the thread's)."""
    if result < 0:
        from ._errors import error
        raise error(result)
    return result


def _declare(dll, funcs):
    for name, (restype, argtypes) in funcs.items():
        f = getattr(dll, name)
        f.restype = restype
        f.argtypes = argtypes
        if restype is c_int:
            f.errcheck = _raise_negative


def _locate():
    """Path (or soname) to load, and what to call it in messages."""
    libdir = os.environ.get("ENGRAM_LIBDIR")
    if libdir:
        path = os.path.join(os.path.abspath(libdir), SONAME)
        if not os.path.exists(path):
            raise ImportError(f"engram: ENGRAM_LIBDIR is '{libdir}', which has no {SONAME}")
        return path, path
    try:
        from . import _install
    except ImportError:
        return SONAME, f"{SONAME} (the dynamic loader's search path; set ENGRAM_LIBDIR to choose a directory)"
    path = os.path.join(_install.LIBDIR, SONAME)
    return path, path


def _load():
    where, what = _locate()
    try:
        dll = ctypes.CDLL(where)
    except OSError as e:
        raise ImportError(f"engram: cannot load {what}: {e}") from None
    try:
        _declare(dll, _FUNCS)
    except AttributeError as e:
        raise ImportError(f"engram: {what} lacks a function this binding needs: {e}") from None
    major = dll.engram_version_number() // 10000
    if major != VERSION_MAJOR:
        raise ImportError(f"engram: {what} is libengram {dll.engram_version().decode()}, this binding wants "
                          f"{VERSION_MAJOR}.x")
    return dll, where


lib, _where = _load()


def path():
    """The file libengram was loaded from (as /proc/self/maps shows it: symbolic links resolved)."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split(maxsplit=5)[-1].strip()
                if os.path.basename(p).startswith("libengram.so"):
                    return p
    except OSError:
        pass
    return _where


_pack = None
_pack_lock = threading.Lock()


def pack():
    """libengram-pack, loaded on first use from where libengram came from."""
    global _pack
    with _pack_lock:
        if _pack is None:
            where = os.path.join(os.path.dirname(_where), PACK_SONAME) if os.sep in _where else PACK_SONAME
            try:
                dll = ctypes.CDLL(where)
                _declare(dll, _PACK_FUNCS)
            except (OSError, AttributeError) as e:
                raise ImportError(f"engram: cannot load {where} (needed for tokenizer.json): {e}") from None
            _pack = dll
        return _pack


def as_index(value, what, kind="an integer"):
    """value as a Python int if it is an integer type (numpy's included, bool not); TypeError naming what."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise TypeError(f"{what} must be {kind}, not {type(value).__name__}")
    return value.__index__()
