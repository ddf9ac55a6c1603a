"""From the arrays users have to kvs_array views.

view(obj, writable, what) returns (data, count, dtype, device, keep): the
address, element count, kvs_dtype code and device (KVS_CPU = -1 for host
memory) of a C-contiguous array, and the object that must stay alive while
the library may touch the memory.  Anything else raises TypeError (an
unsupported dtype or a non-contiguous layout: the message names the dtype)
or ValueError (a read-only output) before anything is queued.

Accepted, in the order they are tried:
  - numpy.ndarray (and subclasses);
  - torch.Tensor, CPU or CUDA (the tensor's own memory; device from
    tensor.device; a CUDA tensor waits for torch's current stream of its
    device unless that is the legacy default stream; a CPU tensor's storage
    is held and marked not resizable, as tensor.numpy() does: _pin_cpu);
  - __cuda_array_interface__ (CuPy, Numba, ...): device id from the
    object's __dlpack_device__(), else its .device (.id / .index / int), else
    the CUDA driver's pointer attributes; its `stream` is waited for in the
    device's own context (_cuda.sync_stream);
  - __array_interface__ (viewed through NumPy, no copy);
  - __dlpack__ (CPU, CUDA, CUDA host and managed memory; device id from the
    DLPack tensor);
  - the buffer protocol (array.array, memoryview, bytearray, ...).
A CUDA device ordinal becomes a kvsd device number through KVS_DEVICES
(kvsd_device).
"""
import ctypes
import os
import sys

import numpy as np

KVS_CPU = -1
FLOAT32, FLOAT64, FLOAT16, BFLOAT16, INT32, INT64 = range(6)
SUPPORTED = "float16, bfloat16, float32, float64, int32, int64"

_NP_CODES = {
    np.dtype(np.float32): FLOAT32,
    np.dtype(np.float64): FLOAT64,
    np.dtype(np.float16): FLOAT16,
    np.dtype(np.int32): INT32,
    np.dtype(np.int64): INT64,
}
_BY_NAME = {"float32": FLOAT32, "float64": FLOAT64, "float16": FLOAT16,
            "bfloat16": BFLOAT16, "int32": INT32, "int64": INT64}
_ITEMSIZE = {FLOAT32: 4, FLOAT64: 8, FLOAT16: 2, BFLOAT16: 2, INT32: 4, INT64: 8}


def _label(what):
    return what() if callable(what) else what


def _unsupported(what, dtype_name):
    return TypeError("%s: dtype %s is not supported (supported: %s)"
                     % (_label(what), dtype_name, SUPPORTED))


def _noncontig(what, dtype_name, detail):
    return TypeError("%s: array of dtype %s is not C-contiguous (%s); pass a contiguous copy "
                     "(numpy.ascontiguousarray, tensor.contiguous())"
                     % (_label(what), dtype_name, detail))


def _readonly(what, dtype_name):
    return ValueError("%s: array of dtype %s is read-only but is an output"
                      % (_label(what), dtype_name))


def _np_code(dt):
    code = _NP_CODES.get(dt)
    if code is None and dt.isnative and dt.name == "bfloat16" and dt.itemsize == 2:
        code = BFLOAT16  # an extension dtype such as ml_dtypes.bfloat16
    return code


def _from_numpy(a, writable, what, keep):
    dt = a.dtype
    code = _np_code(dt)
    if code is None:
        raise _unsupported(what, dt.str if not dt.isnative else dt.name)
    if not a.flags.c_contiguous:
        raise _noncontig(what, dt.name, "shape %s, strides %s" % (a.shape, a.strides))
    if writable and not a.flags.writeable:
        raise _readonly(what, dt.name)
    return (a.ctypes.data, a.size, code, KVS_CPU, keep)


def _c_contiguous(shape, strides, itemsize):
    """strides (in units where one element is itemsize) describe a C-contiguous
    layout of shape?  Dimensions of extent 1 may have any stride."""
    if strides is None:
        return True
    for n in shape:
        if n == 0:
            return True
    expect = itemsize
    for n, s in zip(reversed(shape), reversed(strides)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def _count(shape):
    c = 1
    for n in shape:
        c *= int(n)
    return c


# ---- device numbers ----------------------------------------------------------

def kvsd_device(ordinal, what):
    """The kvsd device of CUDA device `ordinal`: itself, or with KVS_DEVICES
    set (kvsd device i = its i-th entry) the first entry naming it."""
    if ordinal == KVS_CPU:
        return ordinal
    sel = os.environ.get("KVS_DEVICES", "").strip()
    if not sel:
        return ordinal
    try:
        entries = [int(x) for x in sel.split(",")]
    except ValueError:
        return ordinal   # the library rejects the value with its own message
    if ordinal in entries:
        return entries.index(ordinal)
    raise TypeError("%s: the array is on CUDA device %d, which KVS_DEVICES=%s does not select"
                    % (_label(what), ordinal, sel))


# ---- torch ---------------------------------------------------------------

_torch_codes = None


def _is_torch(obj):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _torch_name(t):
    return str(t.dtype).replace("torch.", "")


def _from_torch(t, writable, what):
    global _torch_codes
    if _torch_codes is None:
        torch = sys.modules["torch"]
        _torch_codes = {torch.float32: FLOAT32, torch.float64: FLOAT64, torch.float16: FLOAT16,
                        torch.bfloat16: BFLOAT16, torch.int32: INT32, torch.int64: INT64}
    code = _torch_codes.get(t.dtype)
    if code is None:
        raise _unsupported(what, _torch_name(t))
    if not t.is_contiguous():   # (a sparse tensor raises here too; see below)
        raise _noncontig(what, _torch_name(t), "shape %s, strides %s"
                         % (tuple(t.shape), t.stride()))
    dev = t.device
    keep = t
    if dev.type == "cpu":
        device = KVS_CPU
        keep = (t, _pin_cpu(t))
    elif dev.type == "cuda":
        device = dev.index if dev.index is not None else sys.modules["torch"].cuda.current_device()
        from . import _cuda
        _cuda.sync_torch(t, what)
        device = kvsd_device(device, what)
    else:
        raise TypeError("%s: tensor of dtype %s is on a %s device; kvsd takes host (cpu) and "
                        "CUDA memory" % (_label(what), _torch_name(t), dev.type))
    return (t.data_ptr(), t.numel(), code, device, keep)


def _pin_cpu(t):
    """Keep a CPU tensor's memory where it is while the library may touch it:
    a NumPy view of an alias of the tensor holds its storage (the tensor may
    be deleted, or set_() to another storage) and, as for tensor.numpy(),
    torch marks that storage not resizable, so resize_() of the tensor (or of
    any view of it) beyond its size raises instead of freeing the memory
    under a push or a pull in flight.  The mark stays after the wait."""
    torch = sys.modules["torch"]
    a = t.detach()
    if a.dtype == torch.bfloat16:   # NumPy has no bfloat16: the same bytes as int16
        a = a.view(torch.int16)
    return a.numpy()


def _from_torch_checked(t, writable, what):
    """_from_torch, with a clear error for layouts that have no strides."""
    torch = sys.modules["torch"]
    if t.layout is not torch.strided:
        raise TypeError("%s: tensor of dtype %s has layout %s; only dense (strided) tensors "
                        "can be pushed or pulled" % (_label(what), _torch_name(t), t.layout))
    return _from_torch(t, writable, what)


# ---- __cuda_array_interface__ ----------------------------------------------

_KDL_CPU, _KDL_CUDA, _KDL_CUDA_HOST, _KDL_CUDA_MANAGED = 1, 2, 3, 13
_KDL_NAMES = {1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal",
              9: "vpi", 10: "rocm", 11: "rocm_host", 12: "ext_dev", 13: "cuda_managed",
              14: "oneapi", 15: "webgpu", 16: "hexagon"}


def _device_of(obj, ptr, what):
    """The CUDA device id of a __cuda_array_interface__ object."""
    dd = getattr(obj, "__dlpack_device__", None)
    if dd is not None:
        dtype, did = dd()
        dtype = int(dtype)
        if dtype in (_KDL_CUDA, _KDL_CUDA_MANAGED):
            return int(did)
        if dtype == _KDL_CUDA_HOST:
            return KVS_CPU
        raise TypeError("%s: __dlpack_device__() says device type %s, but the object "
                        "exports __cuda_array_interface__"
                        % (_label(what), _KDL_NAMES.get(dtype, dtype)))
    dev = getattr(obj, "device", None)
    if dev is not None:
        for attr in ("id", "index"):        # CuPy: .id; torch: .index
            v = getattr(dev, attr, None)
            if isinstance(v, int):
                return v
        if isinstance(dev, int):
            return dev
    from . import _cuda
    did = _cuda.pointer_device(ptr)
    if did is None:
        raise TypeError("%s: cannot tell which CUDA device holds the array (it has no "
                        "__dlpack_device__ or .device, and the CUDA driver is not available "
                        "to ask)" % _label(what))
    return did


def _from_cai(obj, cai, writable, what):
    try:
        typestr = cai["typestr"]
        shape = tuple(cai["shape"])
        ptr, readonly = cai["data"]
    except (KeyError, TypeError, ValueError):
        raise TypeError("%s: malformed __cuda_array_interface__ (needs typestr, shape, data)"
                        % _label(what)) from None
    try:
        dt = np.dtype(typestr)
    except TypeError:
        raise _unsupported(what, repr(typestr)) from None
    code = _np_code(dt)
    if code is None:
        raise _unsupported(what, dt.name if dt.isnative else typestr)
    if cai.get("mask") is not None:
        raise TypeError("%s: masked __cuda_array_interface__ arrays are not supported"
                        % _label(what))
    strides = cai.get("strides")
    if not _c_contiguous(shape, strides, dt.itemsize):
        raise _noncontig(what, dt.name, "shape %s, strides %s" % (shape, tuple(strides)))
    if writable and readonly:
        raise _readonly(what, dt.name)
    device = _device_of(obj, ptr, what)
    stream = cai.get("stream")
    if stream is not None and device != KVS_CPU:
        from . import _cuda
        _cuda.sync_stream(int(stream), device, what)
    device = kvsd_device(device, what)
    return (ptr or 0, _count(shape), code, device, obj)


# ---- DLPack ------------------------------------------------------------------

class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DLDeleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _DLDeleter)]


_capsule_get = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get.restype = ctypes.c_void_p
_capsule_get.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
_capsule_set_name.restype = ctypes.c_int
_capsule_set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
# PyCapsule_SetName keeps the pointer: this bytes object lives as long as the module
_USED_NAME = b"used_dltensor"

_DL_KINDS = {0: "int", 1: "uint", 2: "float", 3: "opaque", 4: "bfloat", 5: "complex", 6: "bool"}
_DL_CODES = {(2, 32): FLOAT32, (2, 64): FLOAT64, (2, 16): FLOAT16, (4, 16): BFLOAT16,
             (0, 32): INT32, (0, 64): INT64}


class DLPackHolder:
    """Owns a consumed DLManagedTensor; calls its deleter when released."""

    __slots__ = ("_addr", "_deleter", "source")

    def __init__(self, addr, deleter, source):
        self._addr = addr
        self._deleter = deleter
        self.source = source

    def release(self):
        d, self._deleter = self._deleter, None
        if d:
            d(self._addr)

    def __del__(self):
        self.release()


def _from_dlpack(obj, writable, what):
    cap = obj.__dlpack__()
    if not _capsule_is_valid(cap, b"dltensor"):
        raise TypeError("%s: %s.__dlpack__() did not return a 'dltensor' capsule"
                        % (_label(what), type(obj).__name__))
    addr = _capsule_get(cap, b"dltensor")
    mt = _DLManagedTensor.from_address(addr)
    t = mt.dl_tensor
    dt = (t.dtype.code, t.dtype.bits)
    name = "%s%d" % (_DL_KINDS.get(t.dtype.code, "code%d-" % t.dtype.code), t.dtype.bits)
    if t.dtype.lanes != 1:
        name += "x%d" % t.dtype.lanes
    code = _DL_CODES.get(dt) if t.dtype.lanes == 1 else None
    if code is None:
        raise _unsupported(what, name)  # the capsule, not renamed, frees the tensor
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else None
    if not _c_contiguous(shape, strides, 1):
        raise _noncontig(what, name, "shape %s, strides %s (elements)" % (shape, strides))
    dtype = t.device.device_type
    if dtype in (_KDL_CPU, _KDL_CUDA_HOST):
        device = KVS_CPU
    elif dtype in (_KDL_CUDA, _KDL_CUDA_MANAGED):
        device = kvsd_device(t.device.device_id, what)
    else:
        raise TypeError("%s: DLPack array of dtype %s is on a %s device; kvsd takes host and "
                        "CUDA memory" % (_label(what), name, _KDL_NAMES.get(dtype, dtype)))
    data = (t.data or 0) + t.byte_offset
    count = _count(shape)
    holder = DLPackHolder(addr, mt.deleter, obj)
    if _capsule_set_name(cap, _USED_NAME) != 0:
        holder._deleter = None
        raise TypeError("%s: cannot take the DLPack capsule" % _label(what))
    return (data, count, code, device, holder)


# ---- everything ----------------------------------------------------------------

def view(obj, writable, what):
    """See the module docstring.  what: a label for messages (or a callable
    returning one, called only on error)."""
    if isinstance(obj, np.ndarray):
        return _from_numpy(obj, writable, what, obj)
    if _is_torch(obj):
        return _from_torch_checked(obj, writable, what)
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:   # also what a CPU torch.Tensor raises
        cai = None
    except Exception:        # noqa: a property that refuses
        cai = None
    if cai is not None:
        return _from_cai(obj, cai, writable, what)
    if hasattr(obj, "__array_interface__"):
        try:
            a = np.asarray(obj)
        except (TypeError, ValueError) as e:
            raise TypeError("%s: its __array_interface__ is not usable: %s"
                            % (_label(what), e)) from None
        return _from_numpy(a, writable, what, (a, obj))
    if hasattr(obj, "__dlpack__"):
        return _from_dlpack(obj, writable, what)
    try:
        mv = memoryview(obj)
    except TypeError:
        mv = None
    if mv is not None:
        try:
            a = np.asarray(mv)
        except (TypeError, ValueError, NotImplementedError):
            raise _unsupported(what, "of buffer format %r" % mv.format) from None
        return _from_numpy(a, writable, what, (a, obj))
    raise TypeError("%s: %s is not an array; pass a NumPy array, a torch.Tensor, or an object "
                    "with __array_interface__, __cuda_array_interface__, __dlpack__ or the "
                    "buffer protocol" % (_label(what), type(obj).__name__))
