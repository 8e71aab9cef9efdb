"""Arguments as the C API takes them: integer arrays in (the buffers gathers write: _out.py).

Every check raises ValueError (wrong value, size, shape, layout) or TypeError (wrong kind of object or element
type) before the library is called, so the library never writes past a buffer or reads a wrapped-around value.
"""
import ctypes

import numpy as np


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
