"""kvsd.torch: data-parallel PyTorch through kvsd, in Horovod's conventions.

An existing training script switches with two lines:

    import kvsd.torch as kvt; kvt.init()
    optimizer = kvt.DistributedOptimizer(optimizer, model.named_parameters())

and runs under the launcher: deploy/kvs-launch -n W -s S -- python3 train.py.
DistributedOptimizer broadcasts worker 0's parameters and optimizer state
when it is made (broadcast_parameters / broadcast_optimizer_state do it
explicitly, from any root), pushes every gradient the moment backward
produces it and averages (op=Average) or sums (op=Sum) over the workers
before the wrapped optimizer steps.

    init(store_type="dist_sync"), shutdown(), is_initialized()
    rank(), size(), local_rank(), local_size(), store()
    DistributedOptimizer(optimizer, named_parameters=None,
                         backward_passes_per_step=1, op=Average,
                         server_update=False, broadcast=True, compression=None)
    broadcast_parameters(params, root_rank=0)
    broadcast_optimizer_state(optimizer, root_rank=0)
    broadcast_object(obj, root_rank=0)      (JSON-able values)
    allreduce_hook(state, bucket)           DDP communication hook
    init_process_group()                    a one-process gloo group for DDP

Keys are derived from parameter names ("kvsd.torch/grad/<name>"); at
construction every worker's names, shapes and dtypes are compared, and a
worker whose model differs gets a ValueError naming the parameter.  Errors
of the job arrive as kvsd.Error subclasses: a dead peer during step()
raises kvsd.PeerDead within the heartbeat timeout.

Threads: the gradient hooks run on the autograd thread and only queue
pushes; step()/synchronize() wait on the caller's thread; allreduce_hook's
futures are completed on the store's completion thread (kvs_on_complete).
See docs/guide/pytorch.md.
"""
import contextlib
import json
import os
import threading
import warnings

import numpy as np
import torch

from . import _errors, _lib
from ._store import create as _create

__all__ = ["init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
           "store", "Average", "Sum", "DistributedOptimizer", "broadcast_parameters",
           "broadcast_optimizer_state", "broadcast_object", "allreduce_hook",
           "init_process_group"]


class ReduceOp:
    """How the workers' gradients combine: Average or Sum."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "kvsd.torch.%s" % self.name


Average = ReduceOp("Average")
Sum = ReduceOp("Sum")

_PREFIX = "kvsd.torch/"
# torch dtypes libkvs sums as they are; others travel as int32 (exact)
_NATIVE = {torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64}
_AS_INT32 = {torch.bool, torch.uint8, torch.int8, torch.int16}


class _State:
    def __init__(self):
        self.lock = threading.RLock()
        self.kv = None
        self.keys = set()    # str keys this process has initialised
        self.seq = 0         # collective calls made (broadcast_object, gather)
        self.server_update = False  # a server-side optimizer is set: plain sums are over


_st = _State()


# ---- the job ------------------------------------------------------------------

def init(store_type="dist_sync"):
    """Join the job described by the environment (kvs-launch sets it).
    Calling it again does nothing.  Returns the kvsd.Store."""
    with _st.lock:
        if _st.kv is None:
            _st.kv = _create(store_type)
            _st.keys = set()
            _st.seq = 0
            _st.server_update = False
        return _st.kv


def is_initialized():
    return _st.kv is not None


def store():
    """The kvsd.Store of init() (ValueError before init)."""
    kv = _st.kv
    if kv is None:
        raise ValueError("kvsd.torch is not initialised: call kvsd.torch.init() first")
    return kv


def shutdown():
    """Wait for outstanding operations and leave the job.  After it, init()
    may join again."""
    with _st.lock:
        kv, _st.kv = _st.kv, None
    if kv is not None:
        kv.close()


def _elastic():
    """KVS_ELASTIC=1 (as libkvs reads it): workers may leave and join."""
    return os.environ.get("KVS_ELASTIC", "0").strip().lower() in ("1", "true", "yes", "on")


def rank():
    """This worker's rank, 0 .. size() - 1."""
    return store().rank


def size():
    """The number of workers."""
    return store().num_workers


def _env_int(names, lo, hi_name, hi):
    """The first of names set in the environment, as an int in lo .. hi."""
    for n in names:
        v = os.environ.get(n)
        if v is None or v == "":
            continue
        try:
            x = int(v, 10)
        except ValueError:
            x = None
        if x is None or x < lo or (hi is not None and x > hi):
            allowed = "an integer >= %d" % lo if hi is None else "an integer %d .. %d (%s)" % (
                lo, hi, hi_name)
            raise _errors.by_name["KVS_ECONFIG"]("%s='%s': expected %s" % (n, v, allowed))
        return x, n
    return None, None


def local_size():
    """Workers on this host: the library's count where it has one, else
    KVS_LOCAL_SIZE, else torchrun's LOCAL_WORLD_SIZE, else 1."""
    f = getattr(_lib.lib, "kvs_local_size", None)
    if f is not None:
        n = f(store()._handle())
        if n < 0:
            raise _errors.from_code(n, _lib.last_error())
        return n
    n, _ = _env_int(("KVS_LOCAL_SIZE", "LOCAL_WORLD_SIZE"), 1, None, None)
    return 1 if n is None else n


def local_rank():
    """This worker's rank among the workers of its host (0 .. local_size()
    - 1): the library's where it has one, else KVS_LOCAL_RANK, else
    torchrun's LOCAL_RANK, else 0."""
    f = getattr(_lib.lib, "kvs_local_rank", None)
    if f is not None:
        r = f(store()._handle())
        if r < 0:
            raise _errors.from_code(r, _lib.last_error())
        return r
    n = local_size()
    r, _ = _env_int(("KVS_LOCAL_RANK", "LOCAL_RANK"), 0, "below the local size", n - 1)
    return 0 if r is None else r


# ---- tensors as the store wants them -------------------------------------------

def _wire(t, what):
    """(the contiguous tensor the store reads or writes, conversion back or
    None).  Types libkvs does not have travel as int32, exactly."""
    if t.device.type != "cpu" and t.device.type != "cuda":
        raise TypeError("%s: a %s tensor; kvsd takes CPU and CUDA tensors" % (what, t.device))
    if t.dtype in _NATIVE:
        return (t if t.is_contiguous() else t.contiguous()), None
    if t.dtype in _AS_INT32:
        return t.to(torch.int32).contiguous(), t.dtype
    raise TypeError("%s: dtype %s is not supported (float16, bfloat16, float32, float64, "
                    "int32, int64, and bool/uint8/int8/int16 as int32)" % (what, t.dtype))


def _ensure_keys(kv, names, tensors, values=False, gradients=False):
    """Initialise the keys of names not initialised yet (collective: every
    worker calls with the same names in the same order), with zeros, or
    with the tensors themselves (values=True: rank 0's win).  Keys of
    anything but gradients (gradients=False) are exempt from the store's
    gradient compression.  Returns the full key strings."""
    keys = [_PREFIX + n for n in names]
    new = [(k, t) for k, t in zip(keys, tensors) if k not in _st.keys]
    if new:
        if not gradients:  # sums of these must be exact whatever the compression
            kv.compression_exempt([k for k, _ in new])
        kv.init([k for k, _ in new], [t if values else torch.zeros_like(t) for _, t in new])
        _st.keys.update(k for k, _ in new)
    return keys


def _plain_sums(what):
    """The store of init(), which must still sum plainly."""
    kv = store()
    if _st.server_update:
        raise ValueError("%s: the servers run an optimizer (server_update=True), so every "
                         "push updates weights; this job cannot sum anything else" % what)
    return kv


def _int64_of_bytes(b):
    pad = (-len(b)) % 8
    return np.frombuffer(b + b"\0" * pad, dtype=np.int64).copy()


def broadcast_object(obj, root_rank=0):
    """root_rank's obj on every worker, through JSON (numbers, strings,
    bools, None, lists, dicts with str keys): every worker calls it; the
    others' obj is not read.  Tuples arrive as lists."""
    kv = _plain_sums("broadcast_object")
    _check_root(root_rank)
    me = kv.rank == root_rank
    data = json.dumps(obj).encode("utf-8") if me else b""
    n = np.array([len(data) if me else 0], np.int64)
    lk = _ensure_keys(kv, ["obj/len"], [torch.from_numpy(n)])[0]
    kv.pushpull(lk, n)
    kv.wait(lk)
    length = int(n[0])
    if length == 0:
        raise ValueError("broadcast_object: nothing from worker %d" % root_rank)
    words = (length + 7) // 8
    buf = _int64_of_bytes(data) if me else np.zeros(words, np.int64)
    dk = _ensure_keys(kv, ["obj/%d" % words], [torch.from_numpy(buf)])[0]
    kv.pushpull(dk, buf)
    kv.wait(dk)
    return json.loads(buf.tobytes()[:length].decode("utf-8"))


def _gather_object(obj):
    """Every worker's obj (JSON), as a list indexed by rank."""
    kv = _plain_sums("the model check")
    W, r = kv.num_workers, kv.rank
    data = json.dumps(obj).encode("utf-8")
    lens = np.zeros(W, np.int64)
    lens[r] = len(data)
    lk = _ensure_keys(kv, ["gather/len/%d" % W], [torch.from_numpy(lens)])[0]
    kv.pushpull(lk, lens)
    kv.wait(lk)
    words = int((lens.max() + 7) // 8)
    buf = np.zeros(W * words, np.int64)
    mine = _int64_of_bytes(data)
    buf[r * words:r * words + len(mine)] = mine
    dk = _ensure_keys(kv, ["gather/%d/%d" % (W, words)], [torch.from_numpy(buf)])[0]
    kv.pushpull(dk, buf)
    kv.wait(dk)
    raw = buf.tobytes()
    return [json.loads(raw[w * words * 8:w * words * 8 + int(lens[w])].decode("utf-8"))
            for w in range(W)]


def _object_of_rank0(obj):
    """Worker 0's obj (JSON) on every worker, through kvs_init alone (rank
    0's value wins; no push): usable before a server-side optimizer is set,
    when pushes to plain-sum keys and integer keys are no longer allowed.
    Every call takes new keys; the bytes travel as float64 values 0..255
    (exact)."""
    kv = store()
    data = json.dumps(obj).encode("utf-8")
    with _st.lock:
        _st.seq += 1
        seq = _st.seq
    n = np.array([float(len(data))])
    lk = _PREFIX + "rank0/%d/len" % seq
    kv.init(lk, n)
    _st.keys.add(lk)
    kv.pull(lk, n)
    kv.wait(lk)
    length = int(n[0])
    # rank 0's bytes (the others' are not read)
    mine = np.zeros(length, np.float64)
    if kv.rank == 0:
        mine[:] = np.frombuffer(data, np.uint8)
    key = _PREFIX + "rank0/%d/data" % seq
    kv.init(key, mine)
    _st.keys.add(key)
    kv.pull(key, mine)
    kv.wait(key)
    return json.loads(mine.astype(np.uint8).tobytes().decode("utf-8"))


def _check_root(root_rank):
    W = store().num_workers
    if isinstance(root_rank, bool) or not isinstance(root_rank, int) or not 0 <= root_rank < W:
        raise ValueError("root_rank=%r: expected a worker rank 0 .. %d" % (root_rank, W - 1))


def _broadcast_tensors(named, root_rank, tag):
    """Overwrite each tensor of named [(name, tensor)] with root_rank's, in
    place.  Collective; names and shapes must agree across workers."""
    kv = _plain_sums("a broadcast")
    _check_root(root_rank)
    named = [(n, t) for n, t in named if t.numel() > 0]
    if not named:
        return
    me = kv.rank == root_rank
    bufs, backs = [], []
    for n, t in named:
        w, back = _wire(t.detach(), "%s %r" % (tag, n))
        b = w.clone() if me else torch.zeros_like(w)
        bufs.append(b)
        backs.append(back)
    keys = _ensure_keys(kv, ["%s/%s" % (tag, n) for n, _ in named], bufs)
    kv.pushpull(keys, bufs)
    kv.wait(keys)
    with torch.no_grad():
        for (_, t), b, back in zip(named, bufs, backs):
            t.copy_(b if back is None else b.to(back))


def broadcast_parameters(params, root_rank=0):
    """Overwrite every tensor of params with root_rank's, in place: a
    state_dict() (parameters and buffers), named_parameters(), or a list of
    (name, tensor).  Collective: every worker calls it with the same names."""
    if isinstance(params, dict):
        items = sorted(params.items())
    else:
        items = list(params)
        if items and not (isinstance(items[0], tuple) and len(items[0]) == 2):
            raise ValueError("broadcast_parameters: expected a state_dict() or "
                             "named_parameters(), got a sequence of %s" % type(items[0]).__name__)
        items = sorted(items, key=lambda x: x[0])
    for n, t in items:
        if not torch.is_tensor(t):
            raise TypeError("broadcast_parameters: %r is a %s, not a tensor" % (n, type(t).__name__))
    _broadcast_tensors(items, root_rank, "param")


def broadcast_optimizer_state(optimizer, root_rank=0):
    """Make optimizer's state root_rank's on every worker: every tensor of
    the state (momentum buffers, Adam's moments and step), the scalars,
    and the param-group options (lr, momentum, betas, weight_decay, ...).
    Collective.  A worker whose optimizer has no state yet gets it created
    (the parameters are left as they were)."""
    if isinstance(optimizer, torch.optim.LBFGS):
        raise ValueError("broadcast_optimizer_state: LBFGS keeps its state outside "
                         "state_dict(); it is not supported")
    kv = store()
    sd = optimizer.state_dict()
    me = kv.rank == root_rank
    # root's skeleton: options per group, and per state entry a scalar or a
    # tensor's shape and dtype
    skel = None
    if me:
        groups = []
        for g in sd["param_groups"]:
            opts = {}
            for k, v in g.items():
                if k == "params":
                    continue
                if torch.is_tensor(v):
                    v = v.item()
                try:
                    json.dumps(v)
                except (TypeError, ValueError):
                    raise TypeError("broadcast_optimizer_state: option %r (%s) cannot be sent"
                                    % (k, type(v).__name__)) from None
                opts[k] = v
            groups.append(opts)
        state = {}
        for pid, st in sd["state"].items():
            ent = {}
            for k, v in st.items():
                if torch.is_tensor(v):
                    ent[k] = {"tensor": list(v.shape), "dtype": str(v.dtype).split(".")[-1]}
                elif v is None or isinstance(v, (bool, int, float, str)):
                    ent[k] = {"scalar": v}
                else:
                    raise TypeError("broadcast_optimizer_state: state %r of parameter %d is a "
                                    "%s" % (k, pid, type(v).__name__))
            state[str(pid)] = ent
        skel = {"groups": groups, "state": state}
    skel = broadcast_object(skel, root_rank)
    if len(skel["groups"]) != len(sd["param_groups"]):
        raise ValueError("broadcast_optimizer_state: worker %d's optimizer has %d param "
                         "group(s), this worker's %d" % (root_rank, len(skel["groups"]),
                                                          len(sd["param_groups"])))
    for g, opts in zip(optimizer.param_groups, skel["groups"]):
        for k, v in opts.items():
            old = g.get(k)
            if isinstance(old, tuple) and isinstance(v, list):
                v = tuple(v)
            if torch.is_tensor(old):
                old.fill_(v)
                continue
            g[k] = v
    # the tensors, in the order of the skeleton (the same on every worker)
    named, new_state = [], {}
    for pid in sorted(skel["state"], key=int):
        ent = {}
        mine = sd["state"].get(int(pid), {})
        for k in sorted(skel["state"][pid]):
            spec = skel["state"][pid][k]
            if "scalar" in spec:
                ent[k] = spec["scalar"]
                continue
            dtype = getattr(torch, spec["dtype"])
            t = mine.get(k)
            if not (torch.is_tensor(t) and list(t.shape) == spec["tensor"] and t.dtype == dtype):
                t = torch.zeros(spec["tensor"], dtype=dtype)
            else:
                t = t.clone()
            ent[k] = t
            named.append(("%s/%s" % (pid, k), t))
        new_state[int(pid)] = ent
    _broadcast_tensors(named, root_rank, "optstate")
    sd2 = optimizer.state_dict()
    sd2["state"] = new_state
    optimizer.load_state_dict(sd2)


# ---- checking that every worker has the same model --------------------------------

def _describe(t):
    return "shape %s, %s" % (tuple(t.shape), str(t.dtype).replace("torch.", ""))


def _check_same_model(named, rank0_only=False):
    """Compare [(name, tensor)] across workers; a ValueError naming the
    first parameter that differs (on every worker whose list differs from
    another's; rank0_only: on every worker whose list differs from worker
    0's, without a push)."""
    kv = store()
    mine = [[n, list(t.shape), str(t.dtype)] for n, t in named]
    if rank0_only:
        everyone = [_object_of_rank0(mine)]
    else:
        everyone = _gather_object(mine)
    me = {n: (s, d) for n, s, d in mine}
    for w, theirs in enumerate(everyone):
        if w == kv.rank or theirs == mine:
            continue
        th = {n: (s, d) for n, s, d in theirs}
        for n, s, d in mine:
            if n not in th:
                raise ValueError("kvsd.torch: parameter %r (%s, %s) of worker %d: worker %d "
                                 "has no parameter of that name; every worker must train the "
                                 "same model" % (n, tuple(s), d.replace("torch.", ""), kv.rank, w))
            if th[n] != (s, d):
                raise ValueError("kvsd.torch: parameter %r is %s, %s on worker %d but %s, %s on "
                                 "worker %d; every worker must train the same model"
                                 % (n, tuple(s), d.replace("torch.", ""), kv.rank,
                                    tuple(th[n][0]), th[n][1].replace("torch.", ""), w))
        for n, s, d in theirs:
            if n not in me:
                raise ValueError("kvsd.torch: worker %d has parameter %r (%s, %s), which worker "
                                 "%d does not; every worker must train the same model"
                                 % (w, n, tuple(s), d.replace("torch.", ""), kv.rank))
        raise ValueError("kvsd.torch: worker %d lists the parameters in another order than "
                         "worker %d (first difference at %r)" % (w, kv.rank, next(
                             (a[0] for a, b in zip(mine, theirs) if a != b), mine[-1][0])))


# ---- the optimizer -----------------------------------------------------------------

def _server_spec(optimizer, scale):
    """The kvs_set_optimizer spec that runs optimizer's update on the servers."""
    groups = optimizer.param_groups
    g = groups[0]
    for other in groups[1:]:
        if {k: v for k, v in other.items() if k != "params"} != \
           {k: v for k, v in g.items() if k != "params"}:
            raise ValueError("server_update: every param group must have the same options")
    if isinstance(optimizer, torch.optim.SGD):
        if g.get("dampening", 0) != 0 or g.get("nesterov", False) or g.get("maximize", False):
            raise ValueError("server_update: SGD with dampening, nesterov or maximize has no "
                             "server-side rule")
        return "sgd learning_rate=%r momentum=%r wd=%r rescale_grad=%r" % (
            float(g["lr"]), float(g.get("momentum", 0)), float(g.get("weight_decay", 0)), scale)
    if isinstance(optimizer, torch.optim.Adam) and not isinstance(optimizer, torch.optim.AdamW):
        if g.get("amsgrad", False) or g.get("maximize", False):
            raise ValueError("server_update: Adam with amsgrad or maximize has no server-side "
                             "rule")
        b1, b2 = g["betas"]
        return "adam learning_rate=%r beta1=%r beta2=%r epsilon=%r wd=%r rescale_grad=%r" % (
            float(g["lr"]), float(b1), float(b2), float(g["eps"]),
            float(g.get("weight_decay", 0)), scale)
    if isinstance(optimizer, torch.optim.AdamW):
        # the servers' adamw is torch.optim.AdamW's rule (kvs.h)
        if g.get("amsgrad", False) or g.get("maximize", False):
            raise ValueError("server_update: AdamW with amsgrad or maximize has no server-side "
                             "rule")
        b1, b2 = g["betas"]
        return "adamw learning_rate=%r beta1=%r beta2=%r epsilon=%r wd=%r rescale_grad=%r" % (
            float(g["lr"]), float(b1), float(b2), float(g["eps"]),
            float(g.get("weight_decay", 0)), scale)
    raise ValueError("server_update: the servers run SGD (with momentum, weight decay), Adam "
                     "and AdamW; %s is not among them" % type(optimizer).__name__)


class _DistributedOptimizer(torch.optim.Optimizer):
    """The methods mixed into the wrapped optimizer's class (see
    DistributedOptimizer)."""

    def __init__(self, params, named_parameters, backward_passes_per_step, op, server_update,
                 broadcast, state, compression=None):
        super(self.__class__, self).__init__(params)
        self.state.update(state)
        kv = store()
        if compression is not None:  # before this store's first push
            kv.set_gradient_compression(compression)
        if not isinstance(op, ReduceOp):
            raise ValueError("op=%r: expected kvsd.torch.Average or kvsd.torch.Sum" % (op,))
        if isinstance(backward_passes_per_step, bool) or not isinstance(
                backward_passes_per_step, int) or backward_passes_per_step < 1:
            raise ValueError("backward_passes_per_step=%r: expected an integer >= 1"
                             % (backward_passes_per_step,))
        all_params = [p for g in self.param_groups for p in g["params"]]
        if named_parameters is not None:
            named = list(named_parameters)
            if any(not (isinstance(x, tuple) and len(x) == 2) for x in named):
                raise ValueError("named_parameters must be (name, parameter) pairs, as "
                                 "model.named_parameters() gives")
            names = [n for n, _ in named]
            dups = sorted(set(n for n in names if names.count(n) > 1))
            if dups:
                raise ValueError("named_parameters: the name %r is given twice" % dups[0])
            by_id = {id(p): n for n, p in named}
            unnamed = [i for i, p in enumerate(all_params) if id(p) not in by_id]
            if unnamed:
                raise ValueError("named_parameters was given, but %d parameter(s) of the "
                                 "optimizer are not in it (the first: index %d, %s)"
                                 % (len(unnamed), unnamed[0], _describe(all_params[unnamed[0]])))
            order = {id(p): i for i, (_, p) in enumerate(named)}
        else:
            by_id = {id(p): "noname.%d" % i for i, p in enumerate(all_params)}
            order = {id(p): i for i, p in enumerate(all_params)}
        # parameter order = forward order (named_parameters' order): the
        # first layer, needed first by the next forward pass, gets the
        # highest priority
        self._params = sorted({id(p): p for p in all_params if p.requires_grad}.values(),
                              key=lambda p: order[id(p)])
        self._names = {p: by_id[id(p)] for p in self._params}
        for p in self._params:
            _wire(p.detach(), "parameter %r" % self._names[p])
        elastic = _elastic()
        if not elastic:  # (a joiner's collective nobody else would join)
            _check_same_model([(self._names[p], p) for p in self._params],
                              rank0_only=bool(server_update))
        self._kv = kv
        self._op = op
        self._passes = backward_passes_per_step
        self._server = bool(server_update)
        n = len(self._params)
        self._prio = {p: n - i for i, p in enumerate(self._params)}
        kind = "weight" if self._server else "grad"
        self._keys = dict(zip(self._params, _ensure_keys(
            kv, ["%s/%s" % (kind, self._names[p]) for p in self._params],
            [_wire(p.detach(), "")[0] for p in self._params], values=self._server,
            gradients=True)))
        if self._server:
            _st.server_update = True
            # the keys hold the weights: rank 0's initial values won; take them
            outs = [p.detach() if p.is_contiguous() else p.detach().clone() for p in self._params]
            keys = [self._keys[p] for p in self._params]
            kv.pull(keys, outs)
            kv.wait(keys)
            with torch.no_grad():
                for p, o in zip(self._params, outs):
                    if o.data_ptr() != p.data_ptr():
                        p.copy_(o)
            kv.set_optimizer(_server_spec(self, 1.0 / kv.num_workers if op is Average else 1.0))
            self._weights = {p: torch.empty_like(p, memory_format=torch.contiguous_format)
                             for p in self._params}
        elif broadcast and not elastic:  # elastic: kvsd.torch.elastic.State.sync does it
            broadcast_parameters([(self._names[p], p) for p in self._params], 0)
            broadcast_optimizer_state(self, 0)
        self._pending = {}    # parameter -> the buffer its sum arrives in
        self._failed = None   # the error of this step's first failed push
        self._delay = {p: self._passes for p in self._params}
        self._should_sync = True
        self._synchronized = False
        self._grad_accs = []
        self._register_hooks()

    # gradients are pushed from hooks on the parameters' grad accumulators,
    # which run once the accumulated gradient is in p.grad
    def _register_hooks(self):
        for p in self._params:
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
            acc.register_hook(self._make_hook(p))
            self._grad_accs.append(acc)

    def _make_hook(self, p):
        def hook(*_):
            if p in self._pending:
                raise AssertionError(
                    "kvsd.torch: the gradient of %r was computed again before step() or "
                    "synchronize(); with gradient accumulation pass backward_passes_per_step"
                    % self._names[p])
            self._delay[p] -= 1
            if self._delay[p] == 0:
                self._push(p)
        return hook

    def _push(self, p):
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        g = p.grad
        if not g.is_contiguous():
            g = g.contiguous()
        if self._server:
            out = self._weights[p]
        else:
            out = g
        if self._failed is not None:
            return  # the step is lost (kvsd.MembershipChanged): nothing more goes out
        try:
            self._kv.pushpull(self._keys[p], g, out=out, priority=self._prio[p])
        except _errors.Error as e:  # raised by synchronize(), not inside backward
            self._failed = e
            return
        self._pending[p] = g

    def _reset_step(self):
        """Forget this step's pushes (after a failed step)."""
        self._pending = {}
        self._failed = None
        for p in self._params:
            self._delay[p] = self._passes
        self._synchronized = False

    def synchronize(self):
        """Wait for the sums of this step's gradients (pushing those that
        backward did not produce: zeros), average them, and leave them in
        p.grad (server_update: the new weights in the parameters)."""
        for p in self._params:
            if p not in self._pending:
                self._push(p)
        first = self._failed
        pending = self._pending
        with torch.no_grad():
            for p in self._params:
                try:
                    self._kv.wait(self._keys[p])
                except _errors.Error as e:
                    if first is None:
                        first = e
                if first is not None or self._server:
                    continue  # (a lost step leaves the parameters as they were)
                # each sum is averaged while later ones are still on the wire
                g = pending[p]
                if self._op is Average:
                    g.div_(self._kv.num_workers)
                if g.data_ptr() != p.grad.data_ptr():
                    p.grad.copy_(g)
            if first is None and self._server:
                for p in self._params:
                    p.copy_(self._weights[p])
        self._reset_step()
        if first is not None:
            raise first
        self._synchronized = True

    @contextlib.contextmanager
    def skip_synchronize(self):
        """Inside it, step() does not synchronize: call synchronize() first
        yourself (to clip the averaged gradients, for example)."""
        self._should_sync = False
        try:
            yield
        finally:
            self._should_sync = True

    def step(self, closure=None):
        if self._should_sync:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "after optimizer.synchronize(): the gradients were averaged "
                              "once, not twice")
            else:
                self.synchronize()
        self._synchronized = False
        if self._server:
            return closure() if closure is not None else None
        return super(self.__class__, self).step(closure)

    def zero_grad(self, set_to_none=False):
        if self._pending:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize()")
        return super(self.__class__, self).zero_grad(set_to_none)


def DistributedOptimizer(optimizer, named_parameters=None, backward_passes_per_step=1,
                         op=Average, server_update=False, broadcast=True, compression=None):
    """Wrap a torch.optim optimizer: gradients are pushed as backward
    produces them (P3 priority by parameter order), step() waits for their
    sums, averages (op=Average) or sums (op=Sum) them and steps.

    named_parameters: model.named_parameters() (keys come from the names;
    without it, from the parameters' order).  backward_passes_per_step=N:
    the gradients of N backward passes are summed locally, then sent once.
    server_update=True: the servers run the optimizer (SGD with momentum
    and weight decay, Adam or AdamW: translated into a kvs_set_optimizer spec),
    and step() copies the new weights into the parameters.  broadcast=True:
    worker 0's parameters and optimizer state become everyone's now.
    compression: the store's gradient compression ("2bit threshold=0.5",
    "1bit", "topk ratio=0.01", "fp16", or MXNet's dict form), set before the
    first push (Store.set_gradient_compression; docs/guide/compression.md).

    The result is an instance of the optimizer's own class (state_dict,
    param_groups, schedulers work as before) with synchronize() and
    skip_synchronize() added; its param groups and state are the wrapped
    optimizer's."""
    cls = type(optimizer.__class__.__name__, (optimizer.__class__,),
               dict(_DistributedOptimizer.__dict__))
    return cls(optimizer.param_groups, named_parameters, backward_passes_per_step, op,
               server_update, broadcast, optimizer.state, compression)


# ---- DDP ---------------------------------------------------------------------------

def init_process_group():
    """A one-process gloo group for DistributedDataParallel, whose
    communication then goes through allreduce_hook: DDP needs a process
    group to exist, kvsd does the work.  Broadcast the parameters yourself
    (broadcast_parameters(model.state_dict())) before wrapping the model."""
    import torch.distributed as dist
    if not dist.is_initialized():
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)


def allreduce_hook(state, bucket):
    """A DDP communication hook: model.register_comm_hook(None,
    kvsd.torch.allreduce_hook).  Sums the bucket over the workers through
    kvsd (each worker divides by size() first, as DDP's own hook) and
    returns a torch.futures.Future that the store's completion thread
    completes when the sum has arrived: no thread waits per bucket.  state
    may be None (the store of init()) or a kvsd.Store."""
    kv = state if state is not None else _plain_sums("allreduce_hook")
    t = bucket.buffer()
    try:
        params = bucket.parameters()
    except AttributeError:
        params = bucket.get_per_parameter_tensors()
    layout = ",".join("x".join(str(d) for d in p.shape) or "1" for p in params)
    key = "ddp/%d/%s/%s" % (bucket.index(), str(t.dtype).replace("torch.", ""), layout)
    full = _PREFIX + key
    if full not in _st.keys:
        _ensure_keys(kv, [key], [t], gradients=True)
    t.div_(kv.num_workers)
    fut = torch.futures.Future()
    # DDP's bucket 0 holds the last layers (their gradients are ready
    # first); the highest index holds the first layers, which the next
    # forward pass needs first: the highest priority (P3)
    kv.pushpull(full, t, priority=bucket.index())

    def done(err):
        if err is None:
            fut.set_result(t)
        else:
            fut.set_exception(err)
    kv.on_complete(full, done)
    return fut


# kvsd.torch.elastic: State and run, in Horovod's shape (python/kvsd/elastic.py)
from . import elastic  # noqa: E402  (it uses the functions above)
