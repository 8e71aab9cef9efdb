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
problem; arguments the library refuses (-EINVAL) raise engram.InvalidArgument, also a ValueError. Arguments the
binding can check first (types, shapes, sizes of out= buffers, layer ids) raise ValueError or TypeError before
the library is called.

Layers are named by model layer id (cfg.layer_ids, e.g. (1, 14) for DeepSeek-V4.1), as the model names them.
"""
from ._errors import (ECONFIG, ECORRUPT, EDTYPE, EENDIAN, EFORKED, EMAGIC, EPARSE, ESHAPE, ETOKMAP, ETRUNC, EVERSION,
                      Error, InvalidArgument)
from ._cachesim import CacheSim
from ._config import Config
from ._lib import lib as _cdll
from ._rowcache import RowCache
from ._session import Session
from ._store import Store

__version__ = "0.1.0"

__all__ = ["Config", "Store", "Session", "RowCache", "CacheSim", "Error", "InvalidArgument", "library_version", "library_path",
           "EMAGIC", "EENDIAN", "EVERSION", "ETRUNC", "ECORRUPT", "ECONFIG", "EPARSE", "ETOKMAP", "ESHAPE", "EDTYPE", "EFORKED"]


def library_version():
    """Version of the libengram actually loaded ("0.1.0")."""
    return _cdll.engram_version().decode()


def library_path():
    """File libengram was loaded from."""
    from ._lib import path
    return path()
