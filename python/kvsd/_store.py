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

from . import _arrays, _errors, _keys, _lib, _sparse
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


def compression_spec(spec):
    """The spec string of a compression given as a string, None, or MXNet's
    dict form {'type': '2bit', 'threshold': 0.5} ({'type': 'topk', 'ratio':
    0.01}; 'pull': False or 0 keeps the servers' replies in float32);
    TypeError / ValueError for anything else (libkvs checks the words and
    values)."""
    if spec is None:
        return "none"
    if isinstance(spec, str):
        return spec
    if not isinstance(spec, dict):
        raise TypeError("a gradient compression is a str such as '2bit threshold=0.5' or a "
                        "dict such as {'type': '2bit', 'threshold': 0.5}, not %s"
                        % type(spec).__name__)
    if "type" not in spec or not isinstance(spec["type"], str):
        raise ValueError("gradient compression %r: 'type' (a str: 2bit, 1bit, topk, fp16, "
                         "none) is missing" % (spec,))
    words = [spec["type"]]
    for name, value in spec.items():
        if name == "type":
            continue
        if name == "pull" and (value is True or value is False or value in (0, 1)):
            words.append("pull=%d" % int(value))
            continue
        if not isinstance(name, str) or not isinstance(value, numbers.Real) or \
                isinstance(value, bool):
            raise ValueError("gradient compression %r: setting %r=%r is not a name and a "
                             "number" % (spec, name, value))
        words.append("%s=%r" % (name, float(value)))
    return " ".join(words)


class Store:
    """A connection to a kvsd job (or a local store).  Make one with
    kvsd.create(); see the package docstring for the methods."""

    def __init__(self, handle, store_type):
        self._h = handle
        self.type = store_type
        self._rank = lib.kvs_rank(handle)
        self._num_workers = lib.kvs_num_workers(handle)
        self._num_servers = lib.kvs_num_servers(handle)
        self._local_rank = lib.kvs_local_rank(handle)
        self._local_size = lib.kvs_local_size(handle)
        self._lock = threading.Lock()
        self._pending = []   # (sequence number, keys of the call, objects to keep)
        self._seq = 0
        self._names = {}     # 64-bit key -> the int or str that init gave for it
        self._callbacks = {}  # token -> (fn, 64-bit key, call number), for on_complete
        self._token = 0
        self._trampoline = None  # the C function pointer of on_complete (kept alive)
        self._rsp = {}        # 64-bit key -> row length, for row-sparse keys (_sparse.py)
        _live.add(self)

    # ---- what the job looks like -------------------------------------------

    @property
    def rank(self):
        """This worker's rank, 0 .. num_workers - 1.  In an elastic job
        (KVS_ELASTIC=1) it changes when a call raises
        kvsd.MembershipChanged."""
        h = self._h
        if h is not None:
            self._rank = lib.kvs_rank(h)
        return self._rank

    @property
    def num_workers(self):
        """The number of workers (in an elastic job: of the membership the
        program has seen; see rank)."""
        h = self._h
        if h is not None:
            self._num_workers = lib.kvs_num_workers(h)
        return self._num_workers

    @property
    def num_servers(self):
        """Servers of the job (0 for a local store)."""
        return self._num_servers

    @property
    def local_rank(self):
        """This worker's rank among the workers of its host, 0 .. local_size - 1
        (KVS_LOCAL_RANK / LOCAL_RANK when given); 0 for a local store.  Use it
        to pick this process's GPU."""
        return self._local_rank

    @property
    def local_size(self):
        """Workers of the job on this host (its local group); 1 for a local
        store or a worker alone on its host."""
        return self._local_size

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
        if self._row_sparse(key):
            return _sparse.push(self, key, value, priority)
        ks, vs, _ = self._flatten(key, value, "push value", False)
        n = len(ks)
        rc = lib.kvs_push(h, n, _c_keys(ks), _c_arrays(vs), priority)
        if rc:
            raise self._err(rc)
        self._keep(ks, vs)

    # ---- row-sparse keys (_sparse.py) -------------------------------------------

    def _row_sparse(self, key):
        """True when key (or the first of a list) was made by init_row_sparse."""
        if not self._rsp:
            return False
        k = key[0] if isinstance(key, (list, tuple)) and key else key
        try:
            return self._key(k) in self._rsp
        except (TypeError, ValueError):
            return False

    def init_row_sparse(self, key, value, row_len=None):
        """Initialise row-sparse key(s): value is the whole table, a 2-D array
        of rows x row_len (or a flat one with row_len given).  Afterwards
        push and pushpull take (ids, rows) pairs or torch.sparse_coo tensors
        for the key, and row_sparse_pull pulls rows.  Synchronous."""
        _sparse.init(self, key, value, row_len)

    def row_sparse_pull(self, key, ids, out, priority=0):
        """Pull rows ids (int64, distinct, any order) of a row-sparse key into
        out (len(ids) x row_len; row i of out is row ids[i]).  Asynchronous:
        read out after wait(key).  priority is checked and taken for MXNet's
        signature; row-sparse pulls go at priority 0."""
        _priority(priority)
        _sparse.pull(self, key, ids, out)

    def broadcast(self, key, value, out, priority=0):
        """MXNet's kv.broadcast: init(key, value), then pull(key, out) (out may
        be value).  Every worker calls it with the same keys; out holds rank
        0's values after wait()."""
        self.init(key, value)
        self.pull(key, out, priority)

    # kvs_capability in kvs.h
    CAPABILITIES = {"optimizer": 1, "pushpull": 2, "broadcast": 3, "device_store": 4,
                    "async": 5, "compression": 6, "row_sparse": 7}

    def is_capable(self, capability):
        """True when the store supports capability, one of CAPABILITIES
        ("optimizer", "pushpull", "broadcast", "device_store", "async",
        "compression", "row_sparse"); ValueError for any other name."""
        cap = self.CAPABILITIES.get(str(capability).lower())
        if cap is None:
            raise ValueError("unknown capability %r: expected one of %s" % (
                capability, ", ".join(sorted(self.CAPABILITIES))))
        rc = lib.kvs_is_capable(self._handle(), cap)
        if rc < 0:
            raise self._err(rc)
        return rc == 1

    _GROUPS = {"server": 2, "worker": 4, "all": 6}

    def num_dead_node(self, group="all"):
        """How many nodes of group ("server", "worker", "all", or ps-lite's
        mask 2, 4, 6) the scheduler has declared dead (MXNet's
        kv.num_dead_node)."""
        mask = self._GROUPS.get(group) if isinstance(group, str) else group
        if not isinstance(mask, numbers.Integral) or isinstance(mask, bool) or mask not in (2, 4, 6):
            raise ValueError("node group %r: expected 'server', 'worker', 'all' or 2, 4, 6" % (
                group,))
        rc = lib.kvs_num_dead_node(self._handle(), int(mask))
        if rc < 0:
            raise self._err(rc)
        return rc

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
        if self._row_sparse(key):
            return _sparse.pushpull(self, key, value, out, priority)
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

    def on_complete(self, key, fn):
        """Call fn(error) once no operation on key is unfinished: the
        non-blocking form of wait(key) (kvs_on_complete).  error is None, or
        the kvsd.Error that wait(key) would have raised.  fn runs on the
        store's completion thread (one per store, never the caller's), one
        call at a time, holding the GIL: keep it short (set a Future, put on
        a queue) and do not call wait on another key, wait_all, barrier,
        close or a collective from it.  An exception in fn is printed and
        dropped.  close() runs every callback still registered."""
        h = self._handle()
        if not callable(fn):
            raise TypeError("on_complete needs a callable, not %s" % type(fn).__name__)
        if getattr(lib, "kvs_on_complete", None) is None:
            raise _errors.by_name["KVS_ENOTSUP"](
                "%s has no kvs_on_complete(): it is an older libkvs" % _lib.path)
        kk = self._key(key)
        with self._lock:
            if self._trampoline is None:
                self._trampoline = _lib.COMPLETE_FN(self._completed)
            self._token += 1
            token = self._token
            self._callbacks[token] = (fn, kk, self._seq)
        rc = lib.kvs_on_complete(h, kk, self._trampoline, token)
        if rc:
            with self._lock:
                del self._callbacks[token]
            raise self._err(rc)

    def _completed(self, key, err, token):
        """(the completion thread) kvs_on_complete's call."""
        try:
            with self._lock:
                fn, kk, upto = self._callbacks.pop(token)
            exc = self._err(err) if err else None  # this thread's message describes err
            self._release(upto, kk)
            fn(exc)
        except BaseException:  # noqa: nothing above this frame could report it
            import traceback
            traceback.print_exc()

    def barrier(self):
        """Block until every worker of the job has entered the barrier."""
        rc = lib.kvs_barrier(self._handle())
        if rc:
            raise self._err(rc)

    def set_optimizer(self, spec):
        """Set the servers' optimizer, e.g. "sgd learning_rate=0.1 momentum=0.9"
        or "adamw learning_rate=0.001 wd=0.01 lr_scheduler=warmup_cosine
        warmup_steps=1000 total_steps=100000" (sgd, nag, adam, adagrad,
        rmsprop, adamw, lamb; lr_scheduler factor, warmup_cosine,
        warmup_linear, poly)
        (MXNet's names; passed unchanged to kvs_set_optimizer, see kvs.h).
        Collective: every worker calls it; rank 0's spec decides."""
        if not isinstance(spec, str):
            raise TypeError("an optimizer spec is a str such as 'sgd lr=0.1', not %s"
                            % type(spec).__name__)
        rc = lib.kvs_set_optimizer(self._handle(), spec.encode("utf-8"))
        if rc:
            raise self._err(rc)

    def set_gradient_compression(self, spec):
        """Compress this worker's pushes (kvs_set_gradient_compression): a
        spec string ("2bit threshold=0.5", "1bit", "topk ratio=0.01", "fp16",
        "none") or MXNet's dict ({'type': '2bit', 'threshold': 0.5}).  Call it
        before the first push, with the same spec on every worker."""
        rc = lib.kvs_set_gradient_compression(self._handle(),
                                              compression_spec(spec).encode("utf-8"))
        if rc:
            raise self._err(rc)

    def compression_exempt(self, keys):
        """Exempt a key or a list of keys (int or str) from this store's
        gradient compression (kvs_compression_exempt): their pushes are summed
        exactly, as for broadcasts and counters.  Before each key's first
        push, with the same keys on every worker."""
        ks = [self._key(k) for k in (keys if isinstance(keys, (list, tuple)) else [keys])]
        if not ks:
            return
        rc = lib.kvs_compression_exempt(self._handle(), len(ks), _c_keys(ks))
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
    docs/ref/env.md from the environment, as the C library does; a dist store
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
