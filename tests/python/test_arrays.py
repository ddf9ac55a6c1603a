"""Array conversion: what is accepted, what it becomes, what is refused (and
that a refusal queues nothing)."""
import array
import ctypes
import gc
import weakref

import numpy as np
import pytest

import kvsd
from kvsd import _arrays

DTYPES = [(np.float16, kvsd.FLOAT16), (np.float32, kvsd.FLOAT32), (np.float64, kvsd.FLOAT64),
          (np.int32, kvsd.INT32), (np.int64, kvsd.INT64)]


@pytest.mark.parametrize("dt,code", DTYPES)
def test_numpy_view(dt, code):
    a = np.arange(12, dtype=dt).reshape(3, 4)
    data, count, c, dev, keep = _arrays.view(a, True, "x")
    assert (data, count, c, dev) == (a.ctypes.data, 12, code, kvsd.KVS_CPU)
    assert keep is a


@pytest.mark.parametrize("dt", [np.uint8, np.int8, np.int16, np.uint32, np.uint64, np.bool_,
                                np.complex64, np.float128 if hasattr(np, "float128") else
                                np.longdouble, np.object_])
def test_unsupported_dtype_named(dt):
    a = np.zeros(3, dtype=dt)
    with pytest.raises(TypeError, match="dtype %s is not supported" % np.dtype(dt).name):
        _arrays.view(a, False, "push value for key 1")


def test_big_endian_refused_by_its_name():
    a = np.zeros(3, dtype=">f4")
    with pytest.raises(TypeError, match="dtype >f4 is not supported"):
        _arrays.view(a, False, "v")


@pytest.mark.parametrize("make", [lambda a: a[::2], lambda a: a.reshape(4, 4).T,
                                  lambda a: a.reshape(4, 4)[:, 1:3]])
def test_non_contiguous_names_dtype(make):
    a = make(np.zeros(16, np.float64))
    with pytest.raises(TypeError, match="push value for key 'w': array of dtype float64 is "
                                        "not C-contiguous"):
        _arrays.view(a, False, lambda: "push value for key 'w'")


def test_contiguous_views_and_odd_shapes():
    a = np.zeros((4, 4), np.float32)
    assert _arrays.view(a[1:3], False, "x")[1] == 8            # rows of a C array
    assert _arrays.view(a[:, :1].reshape(4, 1)[:1], False, "x")[1] == 1
    assert _arrays.view(np.float32(3) * np.ones(()), False, "x")[1] == 1   # 0-d
    assert _arrays.view(np.zeros((0, 5), np.int32), False, "x")[1] == 0


def test_readonly_output_refused():
    a = np.zeros(3, np.float32)
    a.flags.writeable = False
    assert _arrays.view(a, False, "in")[1] == 3
    with pytest.raises(ValueError, match="read-only"):
        _arrays.view(a, True, "pull output")


def test_not_an_array():
    for obj in ([1.0, 2.0], 3.0, "abc", None):
        with pytest.raises(TypeError, match="is not an array"):
            _arrays.view(obj, False, "x")


def test_buffer_protocol():
    a = array.array("f", [1, 2, 3])
    data, count, code, dev, keep = _arrays.view(a, True, "x")
    assert (count, code, dev) == (3, kvsd.FLOAT32, kvsd.KVS_CPU)
    assert data == a.buffer_info()[0]
    d = array.array("d", [1, 2])
    assert _arrays.view(memoryview(d), False, "x")[2] == kvsd.FLOAT64
    with pytest.raises(TypeError, match="dtype uint8 is not supported"):
        _arrays.view(bytearray(8), False, "x")
    with pytest.raises(ValueError, match="read-only"):
        _arrays.view(memoryview(array.array("f", [1])).toreadonly(), True, "x")
    with pytest.raises(TypeError, match="not C-contiguous"):
        _arrays.view(memoryview(array.array("i", range(8)))[::2], False, "x")


class ArrayInterface:
    """A foreign CPU array: only __array_interface__."""

    def __init__(self, base, typestr=None, strides=None, shape=None):
        self.base = base
        ai = dict(base.__array_interface__)
        if typestr:
            ai["typestr"] = typestr
        if shape is not None:
            ai["shape"] = shape
        ai["strides"] = strides
        self.__array_interface__ = ai


def test_array_interface():
    base = np.arange(6, dtype=np.int64)
    o = ArrayInterface(base)
    data, count, code, dev, keep = _arrays.view(o, True, "x")
    assert (data, count, code) == (base.ctypes.data, 6, kvsd.INT64)
    with pytest.raises(TypeError, match="not C-contiguous"):
        _arrays.view(ArrayInterface(base, strides=(16,), shape=(3,)), False, "x")
    with pytest.raises(TypeError, match="dtype uint16 is not supported"):
        _arrays.view(ArrayInterface(base, typestr="<u2"), False, "x")


def test_torch_cpu_shares_memory(local):
    torch = pytest.importorskip("torch")
    t = torch.arange(8, dtype=torch.float32)
    data, count, code, dev, keep = _arrays.view(t, True, "x")
    assert (data, count, code, dev) == (t.data_ptr(), 8, kvsd.FLOAT32, -1)
    # kept: the tensor and a NumPy view holding its storage, now not resizable
    assert keep[0] is t and keep[1].__array_interface__["data"][0] == t.data_ptr()
    with pytest.raises(RuntimeError, match="not resizable"):
        t[:].resize_(1000)
    assert t.shape == (8,)
    local.init(5, t)
    out = torch.zeros(8)
    local.pull(5, out=out)
    local.wait(5)
    assert torch.equal(out, torch.arange(8, dtype=torch.float32))
    # a parameter (requires_grad) is used as it is, without a copy
    p = torch.nn.Parameter(torch.zeros(8))
    local.pull(5, out=p)
    local.wait(5)
    assert torch.equal(p.detach(), t)
    for dt, code in [(torch.float16, kvsd.FLOAT16), (torch.bfloat16, kvsd.BFLOAT16),
                     (torch.float64, kvsd.FLOAT64), (torch.int32, kvsd.INT32),
                     (torch.int64, kvsd.INT64)]:
        assert _arrays.view(torch.zeros(2, dtype=dt), False, "x")[2] == code
    with pytest.raises(TypeError, match="dtype uint8 is not supported"):
        _arrays.view(torch.zeros(2, dtype=torch.uint8), False, "x")
    with pytest.raises(TypeError, match="dtype float32 is not C-contiguous"):
        _arrays.view(torch.zeros(4, 4).t(), False, "x")
    with pytest.raises(TypeError, match="layout"):
        _arrays.view(torch.zeros(4, 4).to_sparse(), False, "x")


# ---- device arrays (no GPU here: objects that describe device memory) ----------

class FakeCuda:
    """An object that says it is a CUDA array (its memory is really host
    memory, which is never touched: the library refuses device memory in
    this build before reading it)."""

    def __init__(self, base, device=None, how="dlpack_device", typestr=None, strides=None,
                 readonly=False, stream=None):
        self.base = base
        self.__cuda_array_interface__ = {
            "shape": base.shape, "typestr": typestr or base.dtype.str,
            "data": (base.ctypes.data, readonly), "strides": strides, "version": 3,
            "stream": stream}
        if how == "dlpack_device":
            self.__dlpack_device__ = lambda: (2, device)
        elif how == "cupy":
            self.device = type("Device", (), {"id": device})()
        elif how == "torch":
            self.device = type("device", (), {"index": device, "type": "cuda"})()


@pytest.mark.parametrize("how", ["dlpack_device", "cupy", "torch"])
def test_cuda_array_interface_device_from_object(how):
    base = np.zeros((2, 3), np.float32)
    data, count, code, dev, keep = _arrays.view(FakeCuda(base, 3, how), True, "x")
    assert (data, count, code, dev) == (base.ctypes.data, 6, kvsd.FLOAT32, 3)


def test_cuda_array_interface_refusals():
    base = np.zeros(8, np.float64)
    with pytest.raises(TypeError, match="dtype uint8 is not supported"):
        _arrays.view(FakeCuda(np.zeros(4, np.uint8), 0), False, "x")
    with pytest.raises(TypeError, match="dtype float64 is not C-contiguous"):
        _arrays.view(FakeCuda(base[:4], 0, strides=(16,)), False, "x")
    assert _arrays.view(FakeCuda(base, 0, strides=(8,)), False, "x")[1] == 8
    with pytest.raises(ValueError, match="read-only"):
        _arrays.view(FakeCuda(base, 0, readonly=True), True, "x")
    # nothing says which device, and there is no CUDA driver to ask
    from kvsd import _cuda
    if _cuda.pointer_device(base.ctypes.data) is None:
        with pytest.raises(TypeError, match="cannot tell which CUDA device"):
            _arrays.view(FakeCuda(base, how="none"), False, "x")


def test_device_array_reaches_the_library_with_its_device(local):
    """The device id taken from the object is what libkvs receives: this
    build's library refuses device memory, naming the device."""
    local.init(1, np.zeros(6, np.float32))
    with pytest.raises(kvsd.DeviceError, match="device 5"):
        local.push(1, FakeCuda(np.zeros(6, np.float32), 5))


# DLPack: a hand-made DLManagedTensor in a capsule, as a CUDA library makes them

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class FakeDLPack:
    def __init__(self, base, device_type=2, device_id=1, code=2, bits=32, lanes=1,
                 strides=None):
        self.base = base
        self.deleted = 0
        self.shape = (ctypes.c_int64 * base.ndim)(*base.shape)
        self.strides = (ctypes.c_int64 * base.ndim)(*strides) if strides else None
        self.mt = _arrays._DLManagedTensor()
        t = self.mt.dl_tensor
        t.data = base.ctypes.data
        t.device.device_type, t.device.device_id = device_type, device_id
        t.ndim = base.ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, lanes
        t.shape = ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64))
        if self.strides is not None:
            t.strides = ctypes.cast(self.strides, ctypes.POINTER(ctypes.c_int64))

        def deleter(addr):
            self.deleted += 1
        self.cb = _arrays._DLDeleter(deleter)
        self.mt.deleter = self.cb

    def __dlpack__(self, stream=None):
        return _capsule_new(ctypes.addressof(self.mt), b"dltensor", None)

    def __dlpack_device__(self):
        return (self.mt.dl_tensor.device.device_type, self.mt.dl_tensor.device.device_id)


def test_dlpack_cuda_device_and_deleter():
    base = np.zeros((4, 2), np.float32)
    f = FakeDLPack(base, device_type=2, device_id=7)
    data, count, code, dev, keep = _arrays.view(f, True, "x")
    assert (data, count, code, dev) == (base.ctypes.data, 8, kvsd.FLOAT32, 7)
    assert f.deleted == 0
    del keep
    gc.collect()
    assert f.deleted == 1   # released exactly once, when the store lets go


@pytest.mark.parametrize("code,bits,lanes,name", [(1, 8, 1, "uint8"), (0, 16, 1, "int16"),
                                                  (2, 32, 4, "float32x4"), (5, 64, 1,
                                                                            "complex64")])
def test_dlpack_unsupported_named(code, bits, lanes, name):
    f = FakeDLPack(np.zeros(4, np.float32), code=code, bits=bits, lanes=lanes)
    with pytest.raises(TypeError, match="dtype %s is not supported" % name):
        _arrays.view(f, False, "x")
    assert f.deleted == 0   # not consumed: the capsule still owns it


def test_dlpack_refusals_and_types():
    base = np.zeros(8, np.float32)
    with pytest.raises(TypeError, match="dtype float32 is not C-contiguous"):
        _arrays.view(FakeDLPack(base[:4], strides=(2,)), False, "x")
    with pytest.raises(TypeError, match="rocm device"):
        _arrays.view(FakeDLPack(base, device_type=10), False, "x")
    assert _arrays.view(FakeDLPack(base, device_type=1), False, "x")[3] == kvsd.KVS_CPU
    assert _arrays.view(FakeDLPack(base, device_type=3), False, "x")[3] == kvsd.KVS_CPU
    assert _arrays.view(FakeDLPack(base, device_type=13, device_id=2), False, "x")[3] == 2
    assert _arrays.view(FakeDLPack(base, code=4, bits=16), False, "x")[2] == kvsd.BFLOAT16


class OnlyDLPack:
    """A CPU array that offers nothing but DLPack (NumPy as the producer)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_dlpack_cpu_round_trip(local):
    if not hasattr(np.ndarray, "__dlpack__"):
        pytest.skip("this NumPy does not export DLPack")
    src = np.arange(5, dtype=np.float64)
    local.init("d", OnlyDLPack(src))
    out = np.zeros(5)
    local.pull("d", out=OnlyDLPack(out))
    local.wait("d")
    assert np.array_equal(out, src)


def test_refused_array_queues_nothing(local):
    """A TypeError comes before anything is queued: the store's state is as
    if the call never happened."""
    local.init(9, np.ones(4, np.int32))
    good = np.full(4, 5, np.int32)
    with pytest.raises(TypeError):
        local.push([9, 9], [good, np.zeros(8, np.int32)[::2]])
    with pytest.raises(TypeError):
        local.pushpull(9, good, out=np.zeros(4, np.uint16))
    out = np.zeros(4, np.int32)
    local.pull(9, out=out)
    local.wait_all()
    assert out.tolist() == [1, 1, 1, 1]
    assert local._pending == []


def test_keep_alive_until_wait(local):
    local.init(3, np.zeros(1000, np.float32))
    a = np.ones(1000, np.float32)
    o = np.zeros(1000, np.float32)
    ra, ro = weakref.ref(a), weakref.ref(o)
    local.push(3, a)
    local.pull(3, out=o)
    del a, o
    gc.collect()
    assert ra() is not None and ro() is not None
    local.wait(4)                     # another key: covers neither
    gc.collect()
    assert ra() is not None and ro() is not None
    assert ro()[7] == 1.0
    local.wait(3)
    gc.collect()
    assert ra() is None and ro() is None


def test_keep_alive_wait_all_and_close():
    kv = kvsd.create("local")
    kv.init(["a", "b"], [np.zeros(2), np.zeros(3)])
    refs = []
    for k, n in (("a", 2), ("b", 3)):
        x = np.ones(n)
        refs.append(weakref.ref(x))
        kv.push(k, x)
        del x
    kv.wait_all()
    gc.collect()
    assert all(r() is None for r in refs)
    x = np.ones(2)
    r = weakref.ref(x)
    kv.push("a", x)
    del x
    kv.close()
    gc.collect()
    assert r() is None
