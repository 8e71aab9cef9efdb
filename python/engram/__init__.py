"""libengram for Python: serve Engram n-gram memory tables (DeepSeek-V4.1) from shard files to an engine.

    import engram
    store = engram.Store("v41.engram")              # a shard or a manifest; share it between threads
    s = store.session(max_seqs=64)                  # one per engine thread
    s.begin(); s.push_batch(slots, next_tokens)     # hashes the step's tokens, submits the reads
    emb = s.gather(14, "bf16", out=buf)             # layer id 14: [positions, columns x head_dim]

A ctypes binding over libengram.so: no compiler at install or import. ctypes.CDLL releases the GIL around each
library call, so calls that wait or copy (Config.rows, Store.preload, Store.verify, Session.push, push_batch,
prefetch_next, gather, gather_rows, prefetch_rows) let other Python threads run.

Threads (as in libengram(3)): a Config, a Store and a RowCache may be used by any number of threads at once. A
Session belongs to one thread at a time: use one per engine thread, all on one Store; a session entered by a
second thread while in use raises RuntimeError instead of corrupting it.

Errors: a failed library call raises engram.Error, an OSError whose errno is the error number (errno.ENOENT ...,
or engram.EMAGIC ... engram.EDTYPE) and whose strerror is the library's message naming the file and the
problem, with filename set where a path was given; by errno its subclasses engram.FileNotFound (also a
FileNotFoundError), engram.IsADirectory (IsADirectoryError), engram.PermissionDenied (PermissionError) and,
for arguments the library refuses (-EINVAL), engram.InvalidArgument (also a ValueError). Arguments the binding
can check first (types, shapes of out= buffers, layer ids, NUL bytes in paths) raise ValueError or TypeError
before the library is called. Options are keyword-only; sizes are in bytes (cache_bytes; cache_mb as a MiB
alias). No object can be copied or pickled (TypeError: open the store by path in each process).

Layers are named by model layer id (cfg.layer_ids, e.g. (1, 14) for DeepSeek-V4.1), as the model names them.
"""
from ._errors import (ECONFIG, ECORRUPT, EDTYPE, EENDIAN, EFORKED, EMAGIC, ENODATA, EPARSE, ESHAPE, ETOKMAP,
                      ETRUNC, EVERSION, Error, FileNotFound, InvalidArgument, IsADirectory, PermissionDenied)
from ._cachesim import CacheSim
from ._config import Config
from ._hasher import Hasher
from ._lib import REWIND_MAX, SEQ_STATE_MAX
from ._lib import lib as _cdll
from ._metrics import MetricsCollector, metrics
from ._rowcache import RowCache
from ._session import Session
from ._stats import IoStats
from ._store import Store

__version__ = "0.1.0"

__all__ = ["Config", "Hasher", "Store", "Session", "RowCache", "CacheSim", "IoStats", "metrics", "MetricsCollector", "Error", "InvalidArgument", "FileNotFound",
           "IsADirectory", "PermissionDenied", "REWIND_MAX", "SEQ_STATE_MAX", "library_version", "library_path",
           "EMAGIC", "EENDIAN", "EVERSION", "ETRUNC", "ECORRUPT", "ECONFIG", "EPARSE", "ETOKMAP", "ESHAPE", "EDTYPE",
           "ENODATA", "EFORKED"]


def library_version() -> str:
    """Version of the libengram actually loaded ("0.1.0")."""
    return _cdll.engram_version().decode()


def library_path() -> str:
    """File libengram was loaded from."""
    from ._lib import path
    return path()
