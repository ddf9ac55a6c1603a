"""The CUDA driver calls the array conversion may need, loaded only when a
device array arrives that does not say which device it is on, or that names
a stream to wait for.  Machines without CUDA never load anything here.

Stream waits run in the array's own device's primary context (pushed for
the call and popped after), so they work on any thread, whatever context
is current there, also on a thread that never used CUDA."""
import ctypes

_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
_driver = None
_tried = False


def _fn(d, *names):
    """The first of names that the driver exports (the _v2 entry points
    first, as cuda.h maps them)."""
    for n in names:
        f = getattr(d, n, None)
        if f is not None:
            return f
    raise AttributeError(names[0])


class _Driver:
    """The driver entry points used here, found once."""

    def __init__(self, d):
        self.cuPointerGetAttribute = d.cuPointerGetAttribute
        self.cuPointerGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
        self.cuStreamSynchronize = d.cuStreamSynchronize
        self.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
        self.cuDeviceGet = d.cuDeviceGet
        self.cuDeviceGet.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.cuDevicePrimaryCtxRetain = d.cuDevicePrimaryCtxRetain
        self.cuDevicePrimaryCtxRetain.argtypes = [ctypes.c_void_p, ctypes.c_int]
        self.cuDevicePrimaryCtxRelease = _fn(d, "cuDevicePrimaryCtxRelease_v2",
                                             "cuDevicePrimaryCtxRelease")
        self.cuDevicePrimaryCtxRelease.argtypes = [ctypes.c_int]
        self.cuCtxPushCurrent = _fn(d, "cuCtxPushCurrent_v2", "cuCtxPushCurrent")
        self.cuCtxPushCurrent.argtypes = [ctypes.c_void_p]
        self.cuCtxPopCurrent = _fn(d, "cuCtxPopCurrent_v2", "cuCtxPopCurrent")
        self.cuCtxPopCurrent.argtypes = [ctypes.c_void_p]


def _load():
    global _driver, _tried
    if not _tried:
        _tried = True
        try:
            d = ctypes.CDLL("libcuda.so.1")
            d.cuInit.argtypes = [ctypes.c_uint]
            if d.cuInit(0) == 0:
                _driver = _Driver(d)
        except (OSError, AttributeError):
            _driver = None
    return _driver


def pointer_device(ptr):
    """The device ordinal of CUDA memory at ptr, or None if it cannot be told."""
    d = _load()
    if d is None or not ptr:
        return None
    ordinal = ctypes.c_int(-1)
    if d.cuPointerGetAttribute(ctypes.byref(ordinal), _CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                               ctypes.c_void_p(ptr)) != 0:
        return None
    return ordinal.value


def sync_stream(stream, device, what):
    """Wait for the work queued on a __cuda_array_interface__ stream (1: the
    legacy default stream, 2: the per-thread default stream, else a
    cudaStream_t) of CUDA device ordinal `device`, in that device's primary
    context, so the library reads finished data and its writes come after
    the stream's reads."""
    label = what() if callable(what) else what
    d = _load()
    if d is None:
        raise TypeError("%s: the array names CUDA stream %#x to wait for, but the CUDA driver "
                        "is not available" % (label, stream))
    handle = {1: 0x1, 2: 0x2}.get(stream, stream)
    dev = ctypes.c_int(-1)
    ctx = ctypes.c_void_p()
    rc = d.cuDeviceGet(ctypes.byref(dev), device)
    if rc == 0:
        rc = d.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
    if rc != 0:
        raise TypeError("%s: cannot enter the context of CUDA device %d to wait for stream %#x "
                        "(CUDA error %d)" % (label, device, stream, rc))
    try:
        rc = d.cuCtxPushCurrent(ctx)
        if rc != 0:
            raise TypeError("%s: cuCtxPushCurrent for CUDA device %d failed with CUDA error %d"
                            % (label, device, rc))
        try:
            rc = d.cuStreamSynchronize(ctypes.c_void_p(handle))
        finally:
            d.cuCtxPopCurrent(ctypes.byref(ctypes.c_void_p()))
    finally:
        d.cuDevicePrimaryCtxRelease(dev)
    if rc != 0:
        raise TypeError("%s: cuStreamSynchronize(%#x) on CUDA device %d failed with CUDA "
                        "error %d" % (label, stream, device, rc))


def sync_torch(t, what):
    """Order the library's use of CUDA tensor t after the work queued on
    torch's current stream for t's device: wait for that stream unless it is
    the legacy default stream (the library's own work queues behind that
    one anyway).  torch enters the tensor's device itself."""
    torch = __import__("sys").modules["torch"]
    s = torch.cuda.current_stream(t.device)
    if getattr(s, "cuda_stream", None) in (0, None):
        return
    try:
        s.synchronize()
    except RuntimeError as e:
        label = what() if callable(what) else what
        raise TypeError("%s: waiting for torch's current stream on %s failed: %s"
                        % (label, t.device, e)) from None
