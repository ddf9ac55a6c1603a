"""kvsd.Store: one kvs_store of libkvs.

Every method may be called from any thread (the C API is thread-safe);
close() must be the last call.  push, pull and pushpull return once the
operation is queued: the arrays they were given are kept alive by the store
until a wait that covers them (wait on one of the call's keys, wait_all or
close) has returned, so a temporary such as kv.push(k, grad * 2) is safe.
Reading or writing those arrays before that wait is undefined, as in C.
"""
import atexit
import numbers
import os
import re
import threading
import weakref
from ctypes import byref, c_uint64

from . import _arrays, _errors, _keys, _lib
from ._lib import KvsArray, lib

_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1
_live = weakref.WeakSet()


_KEY_IN_TEXT = re.compile(r"\bkey (\d+)")


def _priority(p):
    if type(p) is int and _INT_MIN <= p <= _INT_MAX:
        return p
    if isinstance(p, bool) or not isinstance(p, numbers.Integral):
        raise TypeError("priority must be an int, not %s" % type(p).__name__)
    p = int(p)
    if not _INT_MIN <= p <= _INT_MAX:
        raise ValueError("priority %d is outside a C int (%d .. %d)" % (p, _INT_MIN, _INT_MAX))
    return p


# The C arguments.  One key (the common case: a hook per gradient) costs one
# small ctypes object each; a list is filled element by element (the
# fastest way ctypes offers: about 1 us per array).

def _c_keys(ks):
    if len(ks) == 1:
        return byref(c_uint64(ks[0]))
    return (c_uint64 * len(ks))(*ks)


def _c_arrays(views):
    if len(views) == 1:
        v = views[0]
        return byref(KvsArray(v[0], v[1], v[2], v[3]))
    arr = (KvsArray * len(views))()
    for i, v in enumerate(views):
        arr[i] = KvsArray(v[0], v[1], v[2], v[3])
    return arr


class Store:
    """A connection to a kvsd job (or a local store).  Make one with
    kvsd.create(); see the package docstring for the methods."""

    def __init__(self, handle, store_type):
        self._h = handle
        self.type = store_type
        self._rank = lib.kvs_rank(handle)
        self._num_workers = lib.kvs_num_workers(handle)
        self._num_servers = lib.kvs_num_servers(handle)
        self._lock = threading.Lock()
        self._pending = []   # (sequence number, keys of the call, objects to keep)
        self._seq = 0
        self._names = {}     # 64-bit key -> the int or str that init gave for it
        _live.add(self)

    # ---- what the job looks like -------------------------------------------

    @property
    def rank(self):
        """This worker's rank, 0 .. num_workers - 1."""
        return self._rank

    @property
    def num_workers(self):
        return self._num_workers

    @property
    def num_servers(self):
        """Servers of the job (0 for a local store)."""
        return self._num_servers

    def __repr__(self):
        state = "closed" if self._h is None else "rank %d of %d, %d server(s)" % (
            self._rank, self._num_workers, self._num_servers)
        return "<kvsd.Store %s: %s>" % (self.type, state)

    # ---- keys and values -----------------------------------------------------

    def _handle(self):
        h = self._h
        if h is None:
            raise _errors.by_name["KVS_ECLOSED"]("this kvsd.Store is closed")
        return h

    def _err(self, rc):
        """The exception for rc, with the calling thread's message; a 64-bit
        key that init gave a string name is followed by that name."""
        msg = _lib.last_error()
        if self._names and "key " in msg:
            def name(m):
                n = self._names.get(int(m.group(1)))
                return m.group(0) + (" (%r)" % n if isinstance(n, str) else "")
            msg = _KEY_IN_TEXT.sub(name, msg)
        return _errors.from_code(rc, msg)

    def _key(self, k):
        """The 64-bit key of an int or str key."""
        if type(k) is int:
            if 0 <= k <= _keys.MAX:
                return k
            raise ValueError("key %d is outside 0 .. 2**64-1" % k)
        if type(k) is str:
            h = _keys.of_str(k)
            owner = self._names.get(h)
            if owner is not None and owner != k:
                raise _errors.KeyCollision(
                    "key %r maps to 64-bit key %#x, which init gave to key %r" % (k, h, owner))
            return h
        if isinstance(k, str):
            return self._key(str(k))
        if isinstance(k, numbers.Integral) and not isinstance(k, bool):
            return self._key(int(k))
        raise TypeError("a key is an int or a str, not %s" % type(k).__name__)

    def _flatten(self, key, value, what, writable):
        """(key, value) as the C API wants them: one 64-bit key per array.
        A key given several arrays (a list) appears once per array."""
        ks, vs, names = [], [], []
        if isinstance(key, (list, tuple)):
            if not isinstance(value, (list, tuple)) or len(value) != len(key):
                raise ValueError("%s: %d keys need a list of %d values (one per key, each an "
                                 "array or a list of arrays), got %s"
                                 % (what, len(key), len(key), type(value).__name__ if not
                                    isinstance(value, (list, tuple)) else len(value)))
            for k, v in zip(key, value):
                self._add(ks, vs, names, k, v, what, writable)
        else:
            self._add(ks, vs, names, key, value, what, writable)
        return ks, vs, names

    def _add(self, ks, vs, names, k, v, what, writable):
        kk = self._key(k)
        if isinstance(v, (list, tuple)):
            if not v:
                raise ValueError("%s for key %r: an empty list" % (what, k))
            for j, x in enumerate(v):
                vs.append(_arrays.view(x, writable,
                                       lambda j=j: "%s %d for key %r" % (what, j, k)))
                ks.append(kk)
                names.append(k)
        else:
            vs.append(_arrays.view(v, writable, lambda: "%s for key %r" % (what, k)))
            ks.append(kk)
            names.append(k)

    # ---- keeping arrays alive ------------------------------------------------

    def _keep(self, ks, objs):
        with self._lock:
            self._seq += 1
            self._pending.append((self._seq, ks, objs))

    def _release(self, upto, key=None):
        """Drop what the calls numbered <= upto (on key, if given) kept."""
        with self._lock:
            old = self._pending
            if key is None:
                self._pending = [p for p in old if p[0] > upto]
            else:
                self._pending = [p for p in old if p[0] > upto or key not in p[1]]
        del old  # arrays (and DLPack deleters) are released here, outside the lock

    def _mark(self):
        with self._lock:
            return self._seq

    # ---- the operations -------------------------------------------------------

    def init(self, key, value):
        """Initialise key(s): every worker calls it with the same keys; worker
        rank 0's values become the initial values.  Synchronous."""
        h = self._handle()
        ks, vs, names = self._flatten(key, value, "init value", False)
        taken = {}
        for kk, name in zip(ks, names):
            owner = self._names.get(kk, taken.get(kk))
            if owner is not None and owner != name:
                raise _errors.KeyCollision(
                    "keys %r and %r both map to 64-bit key %#x" % (owner, name, kk))
            taken[kk] = name
        n = len(ks)
        rc = lib.kvs_init(h, n, _c_keys(ks), _c_arrays(vs))
        if rc:
            raise self._err(rc)
        self._names.update(taken)

    def push(self, key, value, priority=0):
        """Push value(s) for key(s); several arrays for one key are summed
        first.  Asynchronous: see wait()."""
        h = self._handle()
        priority = _priority(priority)
        ks, vs, _ = self._flatten(key, value, "push value", False)
        n = len(ks)
        rc = lib.kvs_push(h, n, _c_keys(ks), _c_arrays(vs), priority)
        if rc:
            raise self._err(rc)
        self._keep(ks, vs)

    def pull(self, key, out, priority=0):
        """Pull key(s) into out; several outputs for one key all receive the
        value (broadcast).  Asynchronous: read out only after wait()."""
        h = self._handle()
        priority = _priority(priority)
        ks, os_, _ = self._flatten(key, out, "pull output", True)
        n = len(ks)
        rc = lib.kvs_pull(h, n, _c_keys(ks), _c_arrays(os_), priority)
        if rc:
            raise self._err(rc)
        self._keep(ks, os_)

    def pushpull(self, key, value, out=None, priority=0):
        """Push value(s) and pull the round's result into out (out=None: into
        value, in place).  One message and one reply per key part when every
        key has as many outputs as values; otherwise a push and a pull."""
        h = self._handle()
        priority = _priority(priority)
        if out is None:
            ks, vs, _ = self._flatten(key, value, "pushpull value", True)
            ko, os_ = ks, vs
        else:
            ks, vs, _ = self._flatten(key, value, "pushpull value", False)
            ko, os_, _ = self._flatten(key, out, "pushpull output", True)
        n = len(ks)
        karr = _c_keys(ks)
        varr = _c_arrays(vs)
        if ko is ks or ko == ks:
            rc = lib.kvs_pushpull(h, n, karr, varr, varr if os_ is vs else _c_arrays(os_),
                                  priority)
            if rc:
                raise self._err(rc)
            self._keep(ks, (vs, os_))
            return
        rc = lib.kvs_push(h, n, karr, varr, priority)
        if rc:
            raise self._err(rc)
        self._keep(ks, vs)
        m = len(ko)
        rc = lib.kvs_pull(h, m, _c_keys(ko), _c_arrays(os_), priority)
        if rc:
            raise self._err(rc)
        self._keep(ko, os_)

    def wait(self, key):
        """Block until every operation issued so far on key (or on each key
        of a list) has completed; release the arrays they were given.
        Raises the first error of those operations not reported before."""
        h = self._handle()
        keys = key if isinstance(key, (list, tuple)) else (key,)
        first = None
        for k in keys:
            kk = self._key(k)
            upto = self._mark()
            rc = lib.kvs_wait(h, kk)
            if rc and first is None:
                first = self._err(rc)
            self._release(upto, kk)
        if first is not None:
            raise first

    def wait_all(self):
        """Block until every operation issued so far has completed; release
        every array they were given.  Raises the first unreported error."""
        h = self._handle()
        upto = self._mark()
        rc = lib.kvs_wait_all(h)
        err = self._err(rc) if rc else None
        self._release(upto)
        if err is not None:
            raise err

    def barrier(self):
        """Block until every worker of the job has entered the barrier."""
        rc = lib.kvs_barrier(self._handle())
        if rc:
            raise self._err(rc)

    def set_optimizer(self, spec):
        """Set the servers' optimizer, e.g. "sgd learning_rate=0.1 momentum=0.9"
        (MXNet's names; passed unchanged to kvs_set_optimizer, see kvs.h).
        Collective: every worker calls it; rank 0's spec decides."""
        if not isinstance(spec, str):
            raise TypeError("an optimizer spec is a str such as 'sgd lr=0.1', not %s"
                            % type(spec).__name__)
        rc = lib.kvs_set_optimizer(self._handle(), spec.encode("utf-8"))
        if rc:
            raise self._err(rc)

    def set_optimizer_key(self, key, settings):
        """Per-key multipliers, e.g. "lr_mult=0.1 wd_mult=0" (collective)."""
        if not isinstance(settings, str):
            raise TypeError("settings are a str such as 'lr_mult=0.1', not %s"
                            % type(settings).__name__)
        rc = lib.kvs_set_optimizer_key(self._handle(), self._key(key), settings.encode("utf-8"))
        if rc:
            raise self._err(rc)

    def _dir_call(self, fn, directory):
        if not isinstance(directory, (str, bytes)) and not hasattr(directory, "__fspath__"):
            raise TypeError("a checkpoint directory is a path, not %s"
                            % type(directory).__name__)
        rc = fn(self._handle(), os.fsencode(directory))
        if rc:
            raise self._err(rc)

    def save(self, directory):
        """Checkpoint the servers' state into directory (kvs_save): collective,
        between rounds; returns once every server's file is durable."""
        self._dir_call(lib.kvs_save, directory)

    def load(self, directory):
        """Restore a checkpoint after init (kvs_load): collective; all or
        nothing."""
        self._dir_call(lib.kvs_load, directory)

    def close(self):
        """Wait for outstanding operations, leave the job and free the store.
        Raises the first unreported error (the store is closed anyway).
        Closing a closed store does nothing."""
        with self._lock:
            h, self._h = self._h, None
        if h is None:
            return
        rc = lib.kvs_close(h)
        err = self._err(rc) if rc else None
        self._release(self._mark())
        _live.discard(self)
        if err is not None:
            raise err

    @property
    def closed(self):
        return self._h is None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.close()
        else:
            try:
                self.close()
            except _errors.Error:
                pass  # the exception that ended the block is the one to see

    def __del__(self):
        if getattr(self, "_h", None) is not None:
            try:
                self.close()
            except Exception:  # noqa: nothing to report to from a finaliser
                pass


def create(store_type="dist_sync"):
    """Create a store: "dist_sync" (default), "dist_async", "local", or any
    other type kvs_create accepts.  Reads DMLC_* and the other variables of
    the README from the environment, as the C library does; a dist store
    returns once this worker has joined the job."""
    if not isinstance(store_type, str):
        raise TypeError("store type is a str such as 'dist_sync', not %s"
                        % type(store_type).__name__)
    h = _lib.c_store_p()
    rc = lib.kvs_create(store_type.encode("utf-8"), byref(h))
    if rc:
        raise _errors.from_code(rc)
    return Store(h.value, store_type)


@atexit.register
def _close_all():
    for s in list(_live):
        try:
            s.close()
        except Exception:  # noqa: the interpreter is exiting
            pass
