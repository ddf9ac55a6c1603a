"""kvsd: the Python binding of libkvs, kvsd's worker library.

    import numpy as np, kvsd

    with kvsd.create("dist_sync") as kv:          # reads DMLC_* like the C library
        w = np.zeros(4, np.float32)
        kv.init("w", w)                            # rank 0's value wins
        kv.pushpull("w", np.full(4, kv.rank + 1, np.float32), out=w)
        kv.wait("w")                               # w now holds the sum over workers

Store methods (kvsd.Store):
    kv.rank, kv.num_workers, kv.num_servers
    kv.init(key, value)                       synchronous
    kv.push(key, value, priority=0)           asynchronous
    kv.pull(key, out, priority=0)             asynchronous; several outs = broadcast
    kv.pushpull(key, value, out=None, priority=0)   out=None: in place
    kv.wait(key), kv.wait_all()               raise the first error they waited for
    kv.on_complete(key, fn)                   fn(error or None) on the completion thread
                                              once key is done (see Store.on_complete)
    kv.barrier(), kv.set_optimizer(spec), kv.close()   (also: with ... as kv)

key: an int (0 .. 2**64-1), a str (see kvsd.key_of), or a list of them;
value/out: an array, or a list with one entry per key (each an array or a
list of arrays).  Arrays: C-contiguous NumPy arrays and anything with
__array_interface__ or the buffer protocol, CPU and CUDA torch.Tensors (their
own memory), and device arrays with __cuda_array_interface__ or __dlpack__;
dtypes float16, bfloat16, float32, float64, int32, int64.  Anything else is
a TypeError naming the dtype, raised before anything is queued.  The store
keeps the arrays of push/pull/pushpull alive until a wait covers them;
reading an output before then is undefined.

PyTorch: kvsd.torch (DistributedOptimizer, broadcasts, a DDP comm hook).

Errors: kvsd.Error (.code, .name, .message) and one subclass per libkvs error
code: PeerDead, Timeout, ConfigError, NoKey, ShapeError, ...; each is also
kvsd.<C name> (kvsd.KVS_EPEERDEAD is kvsd.PeerDead).

The library: $KVS_LIBRARY, else the libkvs.so that `make install` put next
to this package (PREFIX/lib), else build/libkvs.so of a source tree, else
the dynamic linker's search path.  kvsd.library names the file loaded.
"""
from . import _errors, _keys, _lib
from ._arrays import BFLOAT16, FLOAT16, FLOAT32, FLOAT64, INT32, INT64, KVS_CPU
from ._errors import Error, KeyCollision
from ._store import Store, create

__version__ = "0.1.0"
library = _lib.path
# the version of the libkvs that was loaded (None for one without kvs_version)
library_version = (_lib.text(_lib.lib.kvs_version()) if hasattr(_lib.lib, "kvs_version")
                   else None)
key_of = _keys.of_str

errors = dict(_errors.by_name)   # C name -> class, every code the library knows
for _cname, _cls in _errors.by_name.items():
    globals()[_cname] = _cls
    globals()[_cls.__name__] = _cls
del _cname, _cls


def strerror(code):
    """kvs_strerror(code): the library's words for an error code."""
    return _lib.text(_lib.lib.kvs_strerror(int(code)))


def errname(code):
    """kvs_errname(code): "KVS_EPEERDEAD", ..."""
    return _lib.text(_lib.lib.kvs_errname(int(code)))


__all__ = ["create", "Store", "Error", "KeyCollision", "key_of", "strerror", "errname",
           "errors", "library", "library_version", "KVS_CPU", "FLOAT32", "FLOAT64", "FLOAT16", "BFLOAT16",
           "INT32", "INT64"] + sorted(set(c.__name__ for c in _errors.by_name.values()))
