"""Finding and loading libkvs, and the ctypes prototypes of include/kvs.h.

Where the library comes from, in this order:
  1. $KVS_LIBRARY, if set: that file and nothing else (an error if it does
     not load);
  2. LIBDIR/libkvs.so, LIBDIR as `make install` had it (written into the
     installed package as _installed.py), then libkvs.so next to this
     package as `make install PREFIX=P` lays it out:
     the package is P/lib/python3/site-packages/kvsd/, the library
     P/lib/libkvs.so;
  3. the source tree: python/kvsd/ -> build/libkvs.so;
  4. the dynamic linker's own search (LD_LIBRARY_PATH, ld.so.cache):
     libkvs.so.0, then libkvs.so.
"""
import ctypes
import os

c_store_p = ctypes.c_void_p


class KvsArray(ctypes.Structure):
    """struct kvs_array: a view of user memory."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("count", ctypes.c_uint64),
        ("dtype", ctypes.c_int),   # enum kvs_dtype
        ("device", ctypes.c_int),  # KVS_CPU (-1) or a device id
    ]


KVS_CPU = -1


def candidates():
    """The paths tried, in order (see the module docstring)."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:  # written by make install: the LIBDIR libkvs went to
        from . import _installed
        first = [os.path.join(_installed.LIBDIR, "libkvs.so")]
    except ImportError:
        first = []
    return first + [
        os.path.normpath(os.path.join(here, "..", "..", "..", "libkvs.so")),
        os.path.normpath(os.path.join(here, "..", "..", "build", "libkvs.so")),
        "libkvs.so.0",
        "libkvs.so",
    ]


def _load():
    explicit = os.environ.get("KVS_LIBRARY")
    if explicit:
        try:
            return ctypes.CDLL(explicit), explicit
        except OSError as e:
            raise ImportError("kvsd: KVS_LIBRARY='%s' does not load: %s" % (explicit, e)) from None
    tried = []
    for path in candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append("%s (no such file)" % path)
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("kvsd: cannot find libkvs; tried: %s. Build it with make, install it "
                      "with make install, or set KVS_LIBRARY to its path" % "; ".join(tried))


lib, path = _load()

_P = ctypes.POINTER
_ARR = _P(KvsArray)
_KEYS = _P(ctypes.c_uint64)
_sz = ctypes.c_size_t
_int = ctypes.c_int

_PROTOTYPES = {
    "kvs_create": (_int, [ctypes.c_char_p, _P(c_store_p)]),
    "kvs_init": (_int, [c_store_p, _sz, _KEYS, _ARR]),
    "kvs_push": (_int, [c_store_p, _sz, _KEYS, _ARR, _int]),
    "kvs_pull": (_int, [c_store_p, _sz, _KEYS, _ARR, _int]),
    "kvs_pushpull": (_int, [c_store_p, _sz, _KEYS, _ARR, _ARR, _int]),
    "kvs_wait": (_int, [c_store_p, ctypes.c_uint64]),
    "kvs_wait_all": (_int, [c_store_p]),
    "kvs_barrier": (_int, [c_store_p]),
    "kvs_rank": (_int, [c_store_p]),
    "kvs_num_workers": (_int, [c_store_p]),
    "kvs_num_servers": (_int, [c_store_p]),
    "kvs_broadcast": (_int, [c_store_p, _sz, _KEYS, _ARR, _ARR, _int]),
    "kvs_is_capable": (_int, [c_store_p, _int]),
    "kvs_num_dead_node": (_int, [c_store_p, _int]),
    "kvs_local_rank": (_int, [c_store_p]),
    "kvs_local_size": (_int, [c_store_p]),
    "kvs_set_optimizer": (_int, [c_store_p, ctypes.c_char_p]),
    "kvs_set_gradient_compression": (_int, [c_store_p, ctypes.c_char_p]),
    "kvs_compression_exempt": (_int, [c_store_p, _sz, _KEYS]),
    "kvs_set_optimizer_key": (_int, [c_store_p, ctypes.c_uint64, ctypes.c_char_p]),
    "kvs_save": (_int, [c_store_p, ctypes.c_char_p]),
    "kvs_load": (_int, [c_store_p, ctypes.c_char_p]),
    "kvs_close": (_int, [c_store_p]),
    "kvs_strerror": (ctypes.c_char_p, [_int]),
    "kvs_errname": (ctypes.c_char_p, [_int]),
    "kvs_last_error": (ctypes.c_char_p, []),
    "kvs_dtype_size": (_sz, [_int]),
    "kvs_dtype_name": (ctypes.c_char_p, [_int]),
}

for _name, (_res, _args) in _PROTOTYPES.items():
    try:
        _f = getattr(lib, _name)
    except AttributeError:
        raise ImportError("kvsd: %s has no %s(): it is not a libkvs of this version"
                          % (path, _name)) from None
    _f.restype = _res
    _f.argtypes = _args


# void (*kvs_complete_fn)(uint64_t key, int err, void *arg)
COMPLETE_FN = ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p)

# Functions of later libkvs versions: set up where the library has them.
_OPTIONAL = {
    "kvs_version": (ctypes.c_char_p, []),
    "kvs_on_complete": (_int, [c_store_p, ctypes.c_uint64, COMPLETE_FN, ctypes.c_void_p]),
    "kvs_local_rank": (_int, [c_store_p]),
    "kvs_local_size": (_int, [c_store_p]),
}
for _name, (_res, _args) in _OPTIONAL.items():
    _f = getattr(lib, _name, None)
    if _f is not None:
        _f.restype = _res
        _f.argtypes = _args


def text(b):
    """A C string from the library as str ('' for NULL)."""
    return b.decode("utf-8", "replace") if b else ""


def last_error():
    return text(lib.kvs_last_error())
