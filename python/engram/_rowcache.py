"""engram.RowCache: RAM that holds rows, not pages (engram_rowcache_*)."""
import ctypes
import grp
import os
from typing import TYPE_CHECKING, Any, Dict, Optional, Union

from . import _lib
from ._config import PathLike, fspath
from ._errors import about
from ._handle import Handle
from ._lib import lib

if TYPE_CHECKING:
    from ._store import Store

_UINT64_MAX = (1 << 64) - 1
_GID_MAX = (1 << 32) - 1


def _gid(group: Union[str, int]) -> int:
    """group= as a gid: a group name (looked up in the group database) or a gid."""
    if isinstance(group, str):
        try:
            return grp.getgrnam(group).gr_gid
        except KeyError:
            raise ValueError(f"row cache group '{group}' is not a group of this system") from None
    gid = _lib.as_index(group, "group", "a group name (str) or a gid (int)")
    if not 0 <= gid <= _GID_MAX:
        raise ValueError(f"row cache group {gid} is not a gid (0 to {_GID_MAX})")
    return gid


class RowCache(Handle):
    """RAM for the rows of one table set: sessions given it (Store.session(row_cache=...)) look rows up there
    first, read the others with O_DIRECT and keep them. RowCache(store, nbytes, name=None) (or mb=M for M MiB
    instead of nbytes): private to this process (name None), or the POSIX shared-memory segment name
    ("/something") that every process of the node opening that name maps: the first creates it with nbytes, later
    ones attach to it as it is (the size is then ignored) and must serve the same table set. A segment outlives
    its processes until RowCache.remove(name).

    group= (a group name or a gid; with a name only) shares the segment with the members of that group, who may
    be other users (ENGRAM_ROWCACHE_GROUP): it is created mode 0660 in that group, of which this process must be
    a member (else PermissionDenied, EPERM), and attached only when it belongs to that group and others may not
    write it. Without group=, a segment is attached only when this user owns it and neither its group nor
    others may write it, so a group's segment is refused (PermissionDenied, EACCES). With name None, group= is
    an InvalidArgument (a private cache has no group).

    Any number of threads and sessions may use one RowCache at once (the library's lookups and inserts are
    lock-free across threads and processes); close() refuses while a session using it is open or another thread
    is inside a call on it. Without close() it goes with its last reference (its sessions keep it). Not copyable
    or picklable: open it by name in each process."""

    _HOW = "open it by name in each process (engram.RowCache(store, nbytes, name='/...'))"

    def __init__(self, store: "Store", nbytes: Optional[int] = None, name: Optional[PathLike] = None, *,
                 mb: Optional[int] = None, group: Optional[Union[str, int]] = None) -> None:
        if (nbytes is None) == (mb is None):
            raise TypeError("RowCache needs its size: nbytes (bytes) or mb (MiB), not both")
        if nbytes is not None:
            nbytes = _lib.as_index(nbytes, "nbytes", "a positive integer")
        else:
            nbytes = _lib.as_index(mb, "mb", "a positive integer") << 20
        if nbytes <= 0 or nbytes > _UINT64_MAX:
            raise ValueError(f"row cache size {nbytes} bytes is not a positive 64-bit size")
        opts = _lib.new(_lib.RowCacheOptions)
        opts.bytes = nbytes
        if group is not None:
            opts.flags = _lib.ROWCACHE_GROUP
            opts.group = _gid(group)
        ptr = ctypes.c_void_p()
        bname = None if name is None else fspath(name, "name")
        with store._use() as sp:
            lib.engram_rowcache_open_options(ctypes.byref(ptr), sp, bname, ctypes.byref(opts))
            self._set_id = store._set_id
        self._name = None if name is None else os.fsdecode(name)
        self._open(ptr.value, lib.engram_rowcache_close,
                   "private row cache" if name is None else f"row cache '{self._name}'")

    @property
    def name(self) -> Optional[str]:
        """The shared segment's name, or None for a private row cache."""
        return self._name

    def info(self) -> Dict[str, Any]:
        """Its geometry and counters as a dict (every field of struct engram_rowcache_info): bytes, slots, ways,
        record_bytes, slot_bytes, overhead_per_row, rows held now, and the hits, misses and inserts of every
        process since it was created."""
        ri = _lib.new(_lib.RowCacheInfo)
        with self._use() as ptr:
            lib.engram_rowcache_info(ptr, ctypes.byref(ri))
        d = {k: getattr(ri, k) for k, _ in _lib.RowCacheInfo._fields_ if k != "size"}
        d["name"] = (d["name"] or b"").decode(errors="surrogateescape")
        return d

    @staticmethod
    def remove(name: PathLike) -> None:
        """Remove a shared row cache's name; processes that have it mapped keep it until they close it."""
        with about(name, is_path=False):
            lib.engram_rowcache_remove(fspath(name, "name"))

    def __repr__(self) -> str:
        return f"<engram.RowCache {self._what}{' (closed)' if self.closed else ''}>"
