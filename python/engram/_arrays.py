"""Arguments as the C API takes them: integer arrays in, and caller buffers (out=) checked before any write.

Every check raises ValueError (wrong value, size, shape, layout) or TypeError (wrong kind of object or element
type) before the library is called, so the library never writes past a buffer or reads a wrapped-around value.
"""
import ctypes

import numpy as np

from ._lib import OUT_BF16, OUT_F32, OUT_NATIVE

_INT64 = np.dtype(np.int64)
_UINT = np.dtype(np.uintc)
_UINT64 = np.dtype(np.uint64)
_UINT8 = np.dtype(np.uint8)
_BOOL = np.dtype(np.bool_)
_UINT_MAX = 0xFFFFFFFF
_INT64_MAX = 0x7FFFFFFFFFFFFFFF


def _integers(x, what):
    a = np.asarray(x)
    if a.ndim != 1:
        raise ValueError(f"{what} must be one-dimensional, not of shape {a.shape}")
    if a.dtype.kind not in "iu":
        if a.size == 0:
            return a.astype(np.int64)
        if a.dtype.kind == "O":
            raise ValueError(f"{what} must be integers that fit 64 bits")
        raise TypeError(f"{what} must be integers, not {a.dtype}")
    return a


def tokens(x, what="tokens"):
    """Token ids as a C-contiguous int64 array (no copy when they are one)."""
    if type(x) is np.ndarray and x.dtype == _INT64 and x.ndim == 1 and x.flags.c_contiguous:
        return x
    a = _integers(x, what)
    if a.dtype.kind == "u" and a.dtype.itemsize == 8 and a.size and int(a.max()) > _INT64_MAX:
        raise ValueError(f"{what}: {int(a.max())} does not fit int64")
    return np.ascontiguousarray(a, dtype=np.int64)


def slots(x, what="seqs"):
    """Sequence slots as a C-contiguous array of C unsigned (the library checks them against max_seqs)."""
    if type(x) is np.ndarray and x.dtype == _UINT and x.ndim == 1 and x.flags.c_contiguous:
        return x
    a = _integers(x, what)
    if a.size and (int(a.min()) < 0 or int(a.max()) > _UINT_MAX):
        raise ValueError(f"{what}: slot {int(a.min()) if int(a.min()) < 0 else int(a.max())} is not a slot number")
    return np.ascontiguousarray(a, dtype=np.uintc)


def slot(seq):
    """One sequence slot as an int that C unsigned holds without wrapping."""
    try:
        s = seq.__index__()
    except AttributeError:
        raise TypeError(f"seq must be an integer, not {type(seq).__name__}") from None
    if s < 0 or s > _UINT_MAX:
        raise ValueError(f"seq {s} is not a slot number")
    return s


def rows(x, what="rows"):
    """Table rows as a C-contiguous uint64 array of any shape."""
    if type(x) is np.ndarray and x.dtype == _UINT64 and x.flags.c_contiguous:
        return x
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        if a.size == 0:
            return a.astype(np.uint64)
        raise TypeError(f"{what} must be integers, not {a.dtype}")
    if a.dtype.kind == "i" and a.size and int(a.min()) < 0:
        raise ValueError(f"{what}: row {int(a.min())} is negative")
    return np.asarray(a, dtype=np.uint64, order="C")  # keeps a 0-d array 0-d, unlike ascontiguousarray


def mask(x, n):
    """None, or a C-contiguous uint8 array of n values 0 (dead) and 1 (live) from bools or integers 0/1."""
    if x is None:
        return None
    if type(x) is np.ndarray and x.dtype == _BOOL and x.ndim == 1 and x.flags.c_contiguous:
        a = x.view(np.uint8)
    else:
        a = np.asarray(x)
        if a.ndim != 1:
            raise ValueError(f"mask must be one-dimensional, not of shape {a.shape}")
        if a.dtype.kind == "b":
            a = np.ascontiguousarray(a).view(np.uint8)
        elif a.dtype.kind in "iu" or a.size == 0:
            if a.size and ((a != 0) & (a != 1)).any():
                bad = a[(a != 0) & (a != 1)][0]
                raise ValueError(f"mask value {bad} is not 0 or 1")
            a = np.ascontiguousarray(a, dtype=np.uint8)
        else:
            raise TypeError(f"mask must be bools or integers 0/1, not {a.dtype}")
    if a.shape[0] != n:
        raise ValueError(f"mask has {a.shape[0]} values for {n} tokens")
    return a


# Output element types each gather type may write into: numpy dtypes (by number, native byte order),
# buffer-protocol formats, torch dtypes.
_OUT_NP = {
    OUT_F32: frozenset({np.dtype(np.float32).num}),
    OUT_BF16: frozenset({np.dtype(np.uint16).num, np.dtype(np.int16).num}),
    OUT_NATIVE: frozenset({_UINT8.num, np.dtype(np.int8).num}),
}
_OUT_FMT = {OUT_F32: ("f",), OUT_BF16: ("H", "h"), OUT_NATIVE: ("B", "b", "c")}
_OUT_TORCH = {OUT_F32: ("torch.float32",), OUT_BF16: ("torch.bfloat16", "torch.int16"),
              OUT_NATIVE: ("torch.uint8", "torch.int8")}
_OUT_WANT = {OUT_F32: "float32", OUT_BF16: "uint16, int16 or bfloat16 (bf16 bit patterns)",
             OUT_NATIVE: "uint8 or int8 (record bytes)"}


def _np_dtype_ok(dt, kind):
    if not dt.isnative:
        return False
    # numpy has no bfloat16; ml_dtypes' is a 2-byte type named bfloat16
    return dt.num in _OUT_NP[kind] or (kind == OUT_BF16 and dt.name == "bfloat16" and dt.itemsize == 2)


def _size_error(got, nbytes, what):
    return ValueError(f"out holds {got} bytes; {what[0].format(*what[1:])} writes {nbytes}")


def _type_error(got, kind, what):
    return ValueError(f"out is {got}; {what[0].format(*what[1:])} needs {_OUT_WANT[kind]}")


def export(buf, nbytes):
    """Address of a writable C-contiguous buffer, and the ctypes object that holds its export (so that it cannot
    be resized or freed) while the library writes."""
    if nbytes == 0:
        return None, None
    keep = ctypes.c_char.from_buffer(buf)
    return ctypes.addressof(keep), keep


def address(a):
    """Address of a C-contiguous input array (None when empty), and what keeps it valid during the call."""
    if a.nbytes == 0:
        return None, None
    if a.flags.writeable:
        keep = ctypes.c_char.from_buffer(a)  # the fastest way to an array's address
        return ctypes.addressof(keep), keep
    return a.ctypes.data, a


def out_address(out, kind, nbytes, what):
    """Address of the caller's buffer for a write of nbytes, and an object to keep alive until the write ends.
    The buffer must be writable, C-contiguous, of an element type that fits the output type, and exactly
    nbytes long. what: (format, args...) naming the write in messages."""
    if isinstance(out, np.ndarray):
        if not _np_dtype_ok(out.dtype, kind):
            raise _type_error(out.dtype, kind, what)
        if not out.flags.c_contiguous:
            raise ValueError("out is not C-contiguous")
        if not out.flags.writeable:
            raise ValueError("out is read-only")
        if out.nbytes != nbytes:
            raise _size_error(out.nbytes, nbytes, what)
        return export(out, nbytes)
    if hasattr(out, "data_ptr") and hasattr(out, "is_contiguous") and hasattr(out, "element_size"):
        return _torch_address(out, kind, nbytes, what), out
    try:
        m = memoryview(out)
    except TypeError:
        m = None
    if m is not None:
        if m.readonly:
            raise ValueError("out is read-only")
        if not m.c_contiguous:
            raise ValueError("out is not C-contiguous")
        if m.format.lstrip("@=<") not in _OUT_FMT[kind] or m.format.startswith((">", "!")):
            raise _type_error(f"of elements of format '{m.format}'", kind, what)
        if m.nbytes != nbytes:
            raise _size_error(m.nbytes, nbytes, what)
        return export(m, nbytes)
    if hasattr(out, "__array_interface__"):
        a = np.asarray(out)
        if a.__array_interface__["data"][0] != out.__array_interface__["data"][0]:
            raise TypeError(f"out ({type(out).__name__}) is not a buffer numpy can write in place")
        return out_address(a, kind, nbytes, what)
    raise TypeError(f"out must be a writable C-contiguous buffer (numpy array, memoryview, bytearray, torch tensor), "
                    f"not {type(out).__name__}")


def _torch_address(t, kind, nbytes, what):
    dt = str(t.dtype)
    if dt not in _OUT_TORCH[kind]:
        raise ValueError(f"out is {dt}; {what[0].format(*what[1:])} needs {' or '.join(_OUT_TORCH[kind])}")
    if t.device.type != "cpu":
        raise ValueError(f"out is on {t.device}; the library writes host memory (a CPU tensor, pinned or not)")
    if not t.is_contiguous():
        raise ValueError("out is not contiguous")
    if t.requires_grad:
        raise ValueError("out requires grad; gather into a tensor that does not")
    got = t.numel() * t.element_size()
    if got != nbytes:
        raise _size_error(got, nbytes, what)
    return t.data_ptr()
