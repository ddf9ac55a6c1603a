"""The two CUDA driver calls the array conversion may need, loaded only when a
device array arrives that does not say which device it is on, or that names
a stream to wait for.  Machines without CUDA never load anything here."""
import ctypes

_CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
_driver = None
_tried = False


def _load():
    global _driver, _tried
    if not _tried:
        _tried = True
        try:
            d = ctypes.CDLL("libcuda.so.1")
            d.cuInit.argtypes = [ctypes.c_uint]
            d.cuPointerGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
            d.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
            if d.cuInit(0) == 0:
                _driver = d
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


def sync_stream(stream, what):
    """Wait for the work queued on a __cuda_array_interface__ stream (1: the
    legacy default stream, 2: the per-thread default stream, else a
    cudaStream_t), so the library reads finished data."""
    d = _load()
    if d is None:
        raise TypeError("%s: the array names CUDA stream %#x to wait for, but the CUDA driver "
                        "is not available" % (what() if callable(what) else what, stream))
    handle = {1: 0x1, 2: 0x2}.get(stream, stream)
    rc = d.cuStreamSynchronize(ctypes.c_void_p(handle))
    if rc != 0:
        raise TypeError("%s: cuStreamSynchronize(%#x) failed with CUDA error %d"
                        % (what() if callable(what) else what, stream, rc))
