"""What a gather writes into: the output type (dtype= names, numpy and torch dtypes, or the type of out=), the
caller's buffer checked for element type, layout and shape before any write, or a new numpy array or torch tensor.

Output types (enum engram_out): 'f32' float32; 'bf16' bfloat16 (a torch.bfloat16 tensor, or its bit patterns as
numpy uint16 / int16, or ml_dtypes' bfloat16); 'native' the stored record's bytes (uint8 / int8).
"""
import sys
from typing import Any, Optional, Sequence, Tuple

import numpy as np

from . import _arrays
from ._lib import OUT_BF16, OUT_F32, OUT_NATIVE

NAMES = {"native": OUT_NATIVE, "bf16": OUT_BF16, "bfloat16": OUT_BF16, "f32": OUT_F32, "float32": OUT_F32}
_LABEL = {OUT_NATIVE: "native", OUT_BF16: "bf16", OUT_F32: "f32"}
_NP_NEW = {OUT_NATIVE: np.dtype(np.uint8), OUT_BF16: np.dtype(np.uint16), OUT_F32: np.dtype(np.float32)}
_TORCH_NEW = {OUT_NATIVE: "uint8", OUT_BF16: "bfloat16", OUT_F32: "float32"}

# Output element types each gather type may write into: numpy dtypes (by number, native byte order),
# buffer-protocol formats, torch dtypes.
_OUT_NP = {
    OUT_F32: frozenset({np.dtype(np.float32).num}),
    OUT_BF16: frozenset({np.dtype(np.uint16).num, np.dtype(np.int16).num}),
    OUT_NATIVE: frozenset({np.dtype(np.uint8).num, np.dtype(np.int8).num}),
}
_OUT_FMT = {OUT_F32: ("f",), OUT_BF16: ("H", "h"), OUT_NATIVE: ("B", "b", "c")}
_OUT_TORCH = {OUT_F32: ("torch.float32",), OUT_BF16: ("torch.bfloat16", "torch.int16"),
              OUT_NATIVE: ("torch.uint8", "torch.int8")}
_OUT_WANT = {OUT_F32: "float32", OUT_BF16: "uint16, int16 or bfloat16 (bf16 bit patterns)",
             OUT_NATIVE: "uint8 or int8 (record bytes)"}
_ACCEPTED = ("'native', 'bf16' / 'bfloat16', 'f32' / 'float32', numpy.float32, numpy.uint16 (bf16 bits), "
             "numpy.uint8 (native), torch.float32, torch.bfloat16, torch.uint8")

_torch_mod = None
_torch_tried = False


def torch_module():
    """torch when importable (imported on first need), else None."""
    global _torch_mod, _torch_tried
    if _torch_mod is None and not _torch_tried:
        _torch_tried = True
        try:
            import torch
            _torch_mod = torch
        except ImportError:
            _torch_mod = None
    return _torch_mod if _torch_mod is not None else sys.modules.get("torch")


def _is_torch_dtype(x: Any) -> bool:
    return type(x).__module__ == "torch" and type(x).__name__ == "dtype"


def label(kind: int) -> str:
    return _LABEL[kind]


def kind_of_dtype(dtype: Any) -> int:
    """enum engram_out of a dtype= value; ValueError for one no gather writes."""
    if type(dtype) is str:
        k = NAMES.get(dtype)
    elif _is_torch_dtype(dtype):
        k = {"torch.float32": OUT_F32, "torch.bfloat16": OUT_BF16, "torch.uint8": OUT_NATIVE}.get(str(dtype))
    else:
        try:
            dt = np.dtype(dtype)
        except TypeError:
            dt = None
        k = None
        if dt is not None and dt.isnative:
            k = {np.dtype(np.float32): OUT_F32, np.dtype(np.uint16): OUT_BF16, np.dtype(np.uint8): OUT_NATIVE}.get(dt)
            if dt.name == "bfloat16" and dt.itemsize == 2:
                k = OUT_BF16
    if k is None:
        raise ValueError(f"dtype {dtype!r} is not one of {_ACCEPTED}")
    return k


def _kind_of_out(out: Any) -> Optional[int]:
    """The output type out's element type implies, or None when it implies none."""
    if isinstance(out, np.ndarray):
        dt = out.dtype
        for k, nums in _OUT_NP.items():
            if dt.isnative and dt.num in nums:
                return k
        return OUT_BF16 if dt.name == "bfloat16" and dt.itemsize == 2 else None
    if hasattr(out, "data_ptr") and hasattr(out, "dtype"):
        for k, names in _OUT_TORCH.items():
            if str(out.dtype) in names:
                return k
        return None
    try:
        m = memoryview(out)
    except TypeError:
        return None
    f = m.format.lstrip("@=<")
    for k, fmts in _OUT_FMT.items():
        if f in fmts and not m.format.startswith((">", "!")):
            return k
    return None


def resolve(dtype: Any, out: Any) -> int:
    """The output type of a gather: dtype when given, else out's element type, else bf16."""
    if dtype is not None:
        return kind_of_dtype(dtype)
    if out is None:
        return OUT_BF16
    k = _kind_of_out(out)
    if k is None:
        desc = getattr(out, "dtype", None) or type(out).__name__
        raise ValueError(f"out is {desc}: no gather writes it; give a float32, bfloat16 (or uint16/int16 bits) or "
                         f"uint8 buffer, or dtype=")
    return k


def tensor_default(dtype: Any, out: Any, as_tensor: Optional[bool]) -> Optional[bool]:
    """as_tensor as given; else, without out=, what the dtype asks for: a torch dtype a tensor, a numpy dtype an
    array (None: the bf16 rule of prepare())."""
    if as_tensor is not None or out is not None or dtype is None or type(dtype) is str:
        return as_tensor
    return _is_torch_dtype(dtype)


def _shape_text(shape: Tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def _what(what: Tuple) -> str:
    return what[0].format(*what[1:])


def prepare(kind: int, shapes: Sequence[Tuple[int, ...]], nbytes: int, out: Any, as_tensor: Optional[bool],
            what: Tuple) -> Tuple[Any, Optional[int], Any]:
    """(result, address, keep): the buffer a gather of nbytes writes, its address (None when empty) and what keeps
    it valid until the write ends. shapes: the shapes out may have, the first the shape of a new result.
    out=None: a new numpy array, or a torch tensor (as_tensor True; as_tensor None and bf16 with torch importable).
    what: (format, args...) naming the gather in messages."""
    if out is None:
        torch = None
        if as_tensor or (as_tensor is None and kind == OUT_BF16):
            torch = torch_module()
            if torch is None and as_tensor:
                raise ValueError("as_tensor=True needs torch, which cannot be imported here")
        if torch is not None:
            t = torch.empty(shapes[0], dtype=getattr(torch, _TORCH_NEW[kind]))
            return t, (t.data_ptr() if nbytes else None), t
        res = np.empty(shapes[0], dtype=_NP_NEW[kind])
        addr, keep = _arrays.export(res, nbytes)
        return res, addr, keep
    if as_tensor is not None:
        raise ValueError("as_tensor= chooses the type of a new result: give it without out=")
    addr, keep, shape = _out_address(out, kind, what)
    shape = tuple(shape)
    if shape not in shapes:
        raise ValueError(f"out has shape {_shape_text(shape)}; {_what(what)} writes "
                         f"{' or '.join(_shape_text(tuple(s)) for s in shapes)}")
    got = _itemsize(out)
    for d in shape:
        got *= d
    if got != nbytes:  # cannot be, given the shape and element type; the library must never write past it
        raise ValueError(f"out holds {got} bytes; {_what(what)} writes {nbytes}")
    return out, (addr if nbytes else None), keep


def _itemsize(out: Any) -> int:
    if isinstance(out, np.ndarray):
        return out.itemsize
    if hasattr(out, "data_ptr") and hasattr(out, "element_size"):
        return out.element_size()
    if hasattr(out, "__array_interface__") and not _has_buffer(out):
        return np.asarray(out).itemsize
    return memoryview(out).itemsize


def _has_buffer(out: Any) -> bool:
    try:
        memoryview(out)
        return True
    except TypeError:
        return False


def _np_dtype_ok(dt: np.dtype, kind: int) -> bool:
    if not dt.isnative:
        return False
    # numpy has no bfloat16; ml_dtypes' is a 2-byte type named bfloat16
    return dt.num in _OUT_NP[kind] or (kind == OUT_BF16 and dt.name == "bfloat16" and dt.itemsize == 2)


def _type_error(got: Any, kind: int, what: Tuple) -> ValueError:
    return ValueError(f"out is {got}; {_what(what)} needs {_OUT_WANT[kind]}")


def _out_address(out: Any, kind: int, what: Tuple) -> Tuple[int, Any, Tuple[int, ...]]:
    """Address of the caller's buffer, an object to keep alive until the write ends, and the buffer's shape. The
    buffer must be writable, C-contiguous and of an element type that fits the output type."""
    if isinstance(out, np.ndarray):
        if not _np_dtype_ok(out.dtype, kind):
            raise _type_error(out.dtype, kind, what)
        if not out.flags.c_contiguous:
            raise ValueError(f"out is not C-contiguous (strides {out.strides}); {_what(what)} writes rows in order")
        if not out.flags.writeable:
            raise ValueError("out is read-only")
        addr, keep = _arrays.export(out, out.nbytes)
        return addr, keep, out.shape
    if hasattr(out, "data_ptr") and hasattr(out, "is_contiguous") and hasattr(out, "element_size"):
        return _torch_address(out, kind, what), out, tuple(out.shape)
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
        addr, keep = _arrays.export(m, m.nbytes)
        return addr, keep, m.shape
    if hasattr(out, "__array_interface__"):
        a = np.asarray(out)
        if a.__array_interface__["data"][0] != out.__array_interface__["data"][0]:
            raise TypeError(f"out ({type(out).__name__}) is not a buffer numpy can write in place")
        addr, keep, shape = _out_address(a, kind, what)
        return addr, (keep, out), shape
    raise TypeError(f"out must be a writable C-contiguous buffer (numpy array, memoryview, bytearray, torch tensor), "
                    f"not {type(out).__name__}")


def _torch_address(t: Any, kind: int, what: Tuple) -> int:
    dt = str(t.dtype)
    if dt not in _OUT_TORCH[kind]:
        raise ValueError(f"out is {dt}; {_what(what)} needs {' or '.join(_OUT_TORCH[kind])}")
    if t.device.type != "cpu":
        raise ValueError(f"out is on {t.device}; the library writes host memory (a CPU tensor, pinned or not)")
    if not t.is_contiguous():
        raise ValueError(f"out is not contiguous (strides {tuple(t.stride())}); {_what(what)} writes rows in order")
    if t.requires_grad:
        raise ValueError("out requires grad; gather into a tensor that does not")
    return t.data_ptr()
