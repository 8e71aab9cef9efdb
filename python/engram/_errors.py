"""engram.Error: a failed library call, with its errno and the library's message naming the file; its subclasses
by errno (FileNotFound, IsADirectory, PermissionDenied: also the builtin OSError subclasses of that errno)."""
import contextlib
import errno as _errno
import os
import stat
from typing import Any, Iterator, Optional

from ._lib import lib

# The ENGRAM_E* codes of engram.h, as positive numbers (Error.errno holds them as it holds errno values).
ERRNO_BASE = 10000
EMAGIC = ERRNO_BASE + 1    # not an engram file (bad magic)
EENDIAN = ERRNO_BASE + 2   # engram file of the other byte order
EVERSION = ERRNO_BASE + 3  # format version this library cannot read
ETRUNC = ERRNO_BASE + 4    # file shorter than its own structures say
ECORRUPT = ERRNO_BASE + 5  # checksum mismatch or inconsistent structure
ECONFIG = ERRNO_BASE + 6   # hash config missing fields or inconsistent
EPARSE = ERRNO_BASE + 7    # malformed input file (JSON, .npy, safetensors)
ETOKMAP = ERRNO_BASE + 8   # token map does not fit the config
ESHAPE = ERRNO_BASE + 9    # tensor shape does not fit the config
EDTYPE = ERRNO_BASE + 10   # unsupported or mismatched element type
ENODATA = ERRNO_BASE + 11  # a metadata-only shard: rows come from a remote tier only
EFORKED = ERRNO_BASE + 12  # a session made before this process forked, used in the child

errorcode = {EMAGIC: "EMAGIC", EENDIAN: "EENDIAN", EVERSION: "EVERSION", ETRUNC: "ETRUNC", ECORRUPT: "ECORRUPT",
             ECONFIG: "ECONFIG", EPARSE: "EPARSE", ETOKMAP: "ETOKMAP", ESHAPE: "ESHAPE", EDTYPE: "EDTYPE",
             ENODATA: "ENODATA", EFORKED: "EFORKED"}


class Error(OSError):
    """A libengram call failed. errno is the error's number (an errno value, or one of engram.EMAGIC ...
    engram.EDTYPE); strerror is the library's message, which names the file and the problem; name is the
    symbolic name ('ENOENT', 'ECORRUPT')."""

    @property
    def name(self) -> str:
        return errorcode.get(self.errno) or _errno.errorcode.get(self.errno, str(self.errno))

    def __str__(self) -> str:
        return f"[{self.name}] {self.strerror}"


class InvalidArgument(Error, ValueError):
    """The library refused an argument (-EINVAL): a bad slot, a repeated slot, a token id beyond the token map, a
    row beyond the table. Also a ValueError, as the binding's own argument checks raise."""


class FileNotFound(Error, FileNotFoundError):
    """ENOENT: a file the call names does not exist (filename says which). Also a FileNotFoundError."""


class IsADirectory(Error, IsADirectoryError):
    """EISDIR: a path that should be a file is a directory. Also an IsADirectoryError."""


class PermissionDenied(Error, PermissionError):
    """EACCES or EPERM. Also a PermissionError."""


_BY_ERRNO = {_errno.EINVAL: InvalidArgument, _errno.ENOENT: FileNotFound, _errno.EISDIR: IsADirectory,
             _errno.EACCES: PermissionDenied, _errno.EPERM: PermissionDenied}


def error(rc: int, filename: Optional[Any] = None) -> Error:
    """The exception for a negative return code of the calling thread's latest failed call: engram.Error or its
    subclass for that errno, with filename set when given. Codes this binding has no name for (a newer library's,
    such as ENGRAM_EFORKED) are an engram.Error all the same, with the library's message."""
    msg = lib.engram_last_error() or lib.engram_strerror(rc) or b"unknown error"
    cls = _BY_ERRNO.get(-rc, Error)
    if filename is None:
        return cls(-rc, msg.decode(errors="replace"))
    return cls(-rc, msg.decode(errors="replace"), os.fsdecode(filename))


def path_error(rc: int, path: Any) -> Error:
    """error() for a call that opened path: a directory the library refuses as not a file (EINVAL) is EISDIR."""
    if rc == -_errno.EINVAL:
        try:
            if stat.S_ISDIR(os.stat(path).st_mode):
                msg = (lib.engram_last_error() or b"").decode(errors="replace") or f"'{os.fsdecode(path)}'"
                return IsADirectory(_errno.EISDIR, f"{msg} (a directory)", os.fsdecode(path))
        except (OSError, ValueError, TypeError):
            pass
    return error(rc, path)


@contextlib.contextmanager
def about(name: Any, is_path: bool = True) -> Iterator[None]:
    """A library call that failed inside the block (its errcheck raised engram.Error) raised again naming the file
    name (path_error), or, is_path False, the object name (a row cache's segment) as its filename."""
    try:
        yield
    except Error as e:
        raise (path_error(-e.errno, name) if is_path else error(-e.errno, name)) from None
