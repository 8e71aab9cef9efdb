"""engram.Error: a failed library call, with its errno and the library's message naming the file."""
import errno as _errno

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
EFORKED = ERRNO_BASE + 11  # a session made before this process forked, used in the child

errorcode = {EMAGIC: "EMAGIC", EENDIAN: "EENDIAN", EVERSION: "EVERSION", ETRUNC: "ETRUNC", ECORRUPT: "ECORRUPT",
             ECONFIG: "ECONFIG", EPARSE: "EPARSE", ETOKMAP: "ETOKMAP", ESHAPE: "ESHAPE", EDTYPE: "EDTYPE",
             EFORKED: "EFORKED"}


class Error(OSError):
    """A libengram call failed. errno is the error's number (an errno value, or one of engram.EMAGIC ...
    engram.EDTYPE); strerror is the library's message, which names the file and the problem; name is the
    symbolic name ('ENOENT', 'ECORRUPT')."""

    @property
    def name(self):
        return errorcode.get(self.errno) or _errno.errorcode.get(self.errno, str(self.errno))

    def __str__(self):
        return f"[{self.name}] {self.strerror}"


class InvalidArgument(Error, ValueError):
    """The library refused an argument (-EINVAL): a bad slot, a repeated slot, a token id beyond the token map, a
    row beyond the table. Also a ValueError, as the binding's own argument checks raise."""


def error(rc):
    """The exception for a negative return code of the calling thread's latest failed call."""
    msg = lib.engram_last_error() or lib.engram_strerror(rc) or b"unknown error"
    cls = InvalidArgument if rc == -_errno.EINVAL else Error
    return cls(-rc, msg.decode(errors="replace"))
