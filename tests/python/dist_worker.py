"""A worker of the multi-process tests (run under kvs-launch by test_dist.py).

    dist_worker.py sums      every data check; one line per check:
                             "ok NAME" or "FAIL NAME: why"
    dist_worker.py deadpeer  worker 1 leaves without closing; worker 0 must
                             see kvsd.PeerDead
    dist_worker.py badenv    a bad variable makes create() raise ConfigError

Every worker runs the same checks in the same order (the operations are
collective); values are checked element by element against exact sums.
"""
import gc
import os
import sys
import time
import traceback
import weakref

import numpy as np

import kvsd

DTYPES = [np.float16, np.float32, np.float64, np.int32, np.int64]


def report(name, fn, *args):
    try:
        fn(*args)
        print("ok %s" % name, flush=True)
    except Exception as e:  # noqa: every failure is a line of the report
        print("FAIL %s: %s: %s" % (name, type(e).__name__, e), flush=True)
        traceback.print_exc()


def pattern(dtype, n, rank, rnd):
    """What worker rank pushes in round rnd: small integers (exact in
    float16), negatives, and for int64 values beyond 2**53."""
    v = (np.arange(n) % 50 - 20) * (rank + 1) + rnd
    if dtype == np.int64:
        return v.astype(np.int64) + np.int64(1 << 55) * (rank + 1)
    return v.astype(dtype)


def expected(dtype, n, W, rnd):
    s = sum(pattern(dtype, n, r, rnd).astype(np.int64 if dtype == np.int64 else np.float64)
            for r in range(W))
    return s.astype(dtype)


def same(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, "%d of %d elements differ, first at %d: %r != %r" % (
        bad.size, got.size, bad[0], got[bad[0]], want[bad[0]])


# ---- the sums scenario --------------------------------------------------------

def check_local_group(kv):
    # every worker of this job runs on one host (kvs-launch, loopback): one
    # local group, local ranks in the order of the global ranks
    assert kv.local_size == kv.num_workers, (kv.local_size, kv.num_workers)
    assert kv.local_rank == kv.rank, (kv.local_rank, kv.rank)

def check_dtype(kv, dtype, n, key):
    W = kv.num_workers
    kv.init(key, np.zeros(n, dtype))
    out = np.empty(n, dtype)
    kv.pull(key, out=out)
    kv.wait(key)
    same(out, np.zeros(n, dtype))
    for rnd in range(3):
        kv.push(key, pattern(dtype, n, kv.rank, rnd), priority=rnd)
        out = np.full(n, 99, dtype)
        kv.pull(key, out=out)
        kv.wait(key)
        same(out, expected(dtype, n, W, rnd))


def check_lists(kv):
    W = kv.num_workers
    keys = [201, 202, 203]
    spec = [(np.float32, 10), (np.int64, 3000), (np.float16, 1)]
    kv.init(keys, [np.zeros(n, d) for d, n in spec])
    kv.push(keys, [pattern(d, n, kv.rank, 1) for d, n in spec])
    outs = [np.zeros(n, d) for d, n in spec]
    kv.pull(keys, out=outs)
    kv.wait_all()
    for (d, n), o in zip(spec, outs):
        same(o, expected(d, n, W, 1))


def check_strings(kv):
    W = kv.num_workers
    names = ["conv1.weight", "conv1.bias", "fc.weight"]
    sizes = [288, 32, 5000]
    kv.init(names, [np.zeros(n, np.float32) for n in sizes])
    for rnd in range(2):
        kv.push(names, [pattern(np.float32, n, kv.rank, rnd) for n in sizes])
        outs = [np.zeros(n, np.float32) for n in sizes]
        kv.pull(names, out=outs)
        kv.wait(names)
        for n, o in zip(sizes, outs):
            same(o, expected(np.float32, n, W, rnd))
    # the 64-bit key is the string's key on every worker
    o = np.zeros(32, np.float32)
    kv.pull(kvsd.key_of("conv1.bias"), out=o)
    kv.wait("conv1.bias")
    same(o, expected(np.float32, 32, W, 1))


def check_broadcast(kv):
    W = kv.num_workers
    kv.init(301, np.zeros(2000, np.float64))
    kv.push(301, pattern(np.float64, 2000, kv.rank, 0))
    outs = [np.zeros(2000) for _ in range(3)]
    kv.pull(301, out=outs)
    kv.wait(301)
    for o in outs:
        same(o, expected(np.float64, 2000, W, 0))


def check_api(kv):
    # broadcast: rank 0's values reach every worker, outputs aliasing or not
    n = 3001
    mine = pattern(np.float32, n, kv.rank, 7)
    out = np.full(n, -1, np.float32)
    kv.broadcast("bcast.w", mine, out=out)
    kv.wait("bcast.w")
    same(out, pattern(np.float32, n, 0, 7))
    both = pattern(np.float64, 5, kv.rank, 3)
    kv.broadcast(["bcast.a", "bcast.b"], [both, both.copy()], out=[both, both])
    kv.wait_all()
    same(both, pattern(np.float64, 5, 0, 3))
    try:
        kv.broadcast("bcast.w", np.zeros(n - 1, np.float32), out=np.zeros(n - 1, np.float32))
        kv.wait_all()
        raise AssertionError("broadcast with a changed count: no error")
    except kvsd.Error as e:
        assert e.name == "KVS_ESHAPE", e
    want = {"optimizer": True, "pushpull": True, "broadcast": True, "device_store": False,
            "async": False, "compression": True, "row_sparse": True}
    got = {c: kv.is_capable(c) for c in want}
    assert got == want, got
    assert kv.is_capable("OPTIMIZER") is True
    for bad in ("sparse", "", None):
        try:
            kv.is_capable(bad)
            raise AssertionError("is_capable(%r): no error" % (bad,))
        except ValueError as e:
            assert "capability" in str(e), e
    assert [kv.num_dead_node(g) for g in ("server", "worker", "all", 2, 4, 6)] == [0] * 6
    for bad in (0, 1, 8, "scheduler", True, 2.0):
        try:
            kv.num_dead_node(bad)
            raise AssertionError("num_dead_node(%r): no error" % (bad,))
        except ValueError as e:
            assert "node group" in str(e), e


def check_pushpull(kv):
    W = kv.num_workers
    kv.init("pp", np.zeros(70000, np.float32))   # 280 KB: direct copies where possible
    a = pattern(np.float32, 70000, kv.rank, 2)
    kv.pushpull("pp", a)                         # in place
    kv.wait("pp")
    same(a, expected(np.float32, 70000, W, 2))
    b = pattern(np.float32, 70000, kv.rank, 3)
    o = np.zeros(70000, np.float32)
    kv.pushpull("pp", b, out=o)
    kv.wait("pp")
    same(o, expected(np.float32, 70000, W, 3))
    same(b, pattern(np.float32, 70000, kv.rank, 3))   # the value is not touched
    # two values summed locally, three outputs: a push and a pull
    v = [pattern(np.float32, 70000, kv.rank, 0), pattern(np.float32, 70000, kv.rank, 1)]
    outs = [np.zeros(70000, np.float32) for _ in range(3)]
    kv.pushpull("pp", v, out=outs)
    kv.wait("pp")
    want = (expected(np.float32, 70000, W, 0).astype(np.float64) +
            expected(np.float32, 70000, W, 1)).astype(np.float32)
    for o in outs:
        same(o, want)


def check_local_sum(kv):
    W = kv.num_workers
    kv.init(401, np.zeros(100, np.int32))
    kv.push(401, [pattern(np.int32, 100, kv.rank, 0), pattern(np.int32, 100, kv.rank, 5)])
    o = np.zeros(100, np.int32)
    kv.pull(401, out=o)
    kv.wait(401)
    same(o, expected(np.int32, 100, W, 0) + expected(np.int32, 100, W, 5))


def check_priorities(kv):
    """Many keys in flight at once with different priorities (higher first
    under the p3 van); every sum must still be exact."""
    W = kv.num_workers
    keys = list(range(500, 516))
    sizes = [3000 * (i + 1) for i in range(len(keys))]
    kv.init(keys, [np.zeros(n, np.float32) for n in sizes])
    for rnd in range(2):
        outs = []
        for i, (k, n) in enumerate(zip(keys, sizes)):
            prio = [-(1 << 31), -3, 0, 7, (1 << 31) - 1][i % 5]
            o = np.zeros(n, np.float32)
            kv.pushpull(k, pattern(np.float32, n, kv.rank, rnd), out=o, priority=prio)
            outs.append(o)
        kv.wait_all()
        for n, o in zip(sizes, outs):
            same(o, expected(np.float32, n, W, rnd))


def check_keep_alive(kv):
    W = kv.num_workers
    kv.init(601, np.zeros(50000, np.float32))
    kv.push(601, pattern(np.float32, 50000, kv.rank, 0) * 1)   # a temporary
    o = np.zeros(50000, np.float32)
    ro = weakref.ref(o)
    kv.pull(601, out=o)
    del o
    gc.collect()
    assert ro() is not None, "the output was freed before its wait"
    kv.wait(601)
    got = ro()
    assert got is None, "the output is still held after its wait"


def check_errors(kv):
    W = kv.num_workers
    # a key nobody initialised: the server says so, at the wait
    kv.pull("never-initialised", out=np.zeros(3, np.float32))
    try:
        kv.wait("never-initialised")
        raise AssertionError("no error for a key nobody initialised")
    except kvsd.NoKey as e:
        assert e.code == -5 and e.name == "KVS_ENOKEY", e
    kv.init(701, np.zeros(10, np.float32))
    try:
        kv.push(701, np.zeros(11, np.float32))
        raise AssertionError("a push of 11 elements to a 10-element key was accepted")
    except kvsd.ShapeError:
        pass
    try:
        kv.push(701, np.zeros(20, np.float32)[::2])
        raise AssertionError("a strided push was accepted")
    except TypeError as e:
        assert "float32" in str(e)
    try:
        kv.pull([701, 701], out=[np.zeros(10, np.float32), np.zeros(10, np.uint8)])
        raise AssertionError("a uint8 output was accepted")
    except TypeError as e:
        assert "uint8" in str(e)
    # none of these was queued: the next round is the first one
    kv.push(701, pattern(np.float32, 10, kv.rank, 0))
    o = np.zeros(10, np.float32)
    kv.pull(701, out=o)
    kv.wait(701)
    same(o, expected(np.float32, 10, W, 0))


def check_torch(kv):
    import torch
    W = kv.num_workers
    t = torch.zeros(1000, dtype=torch.float32)
    kv.init("torch", t)
    g = torch.from_numpy(pattern(np.float32, 1000, kv.rank, 4))
    kv.pushpull("torch", g)
    kv.wait("torch")
    same(g.numpy(), expected(np.float32, 1000, W, 4))


def sums():
    with kvsd.create("dist_sync") as kv:
        assert kv.num_workers == int(os.environ["DMLC_NUM_WORKER"])
        assert kv.rank == int(os.environ["DMLC_WORKER_ID"])
        for i, d in enumerate(DTYPES):
            for j, n in enumerate((7, 5000)):
                report("sum-%s-%d" % (np.dtype(d).name, n), check_dtype, kv, d, n, 100 + 2 * i + j)
        report("list-of-keys", check_lists, kv)
        report("string-keys", check_strings, kv)
        report("broadcast-pull", check_broadcast, kv)
        report("pushpull", check_pushpull, kv)
        report("local-sum", check_local_sum, kv)
        report("priorities", check_priorities, kv)
        report("keep-alive", check_keep_alive, kv)
        report("errors", check_errors, kv)
        report("api", check_api, kv)
        report("torch", check_torch, kv)
        report("barrier", kv.barrier)
        report("local-group", check_local_group, kv)


# ---- a dead peer ------------------------------------------------------------

def deadpeer():
    kv = kvsd.create("dist_sync")
    kv.init("g", np.zeros(100, np.float32))
    kv.barrier()
    if kv.rank == 1:
        print("leaving without close", flush=True)
        os._exit(0)
    t0 = time.monotonic()
    try:
        for _ in range(100000):   # the rounds complete only while worker 1 lives
            a = np.ones(100, np.float32)
            kv.pushpull("g", a)
            kv.wait("g")
        print("FAIL deadpeer: no error", flush=True)
        return
    except kvsd.PeerDead as e:
        took = time.monotonic() - t0
        assert e.code == -7 and e.name == "KVS_EPEERDEAD", e
        print("ok deadpeer-raised %.2f s: %s" % (took, e.message), flush=True)
    try:
        kv.push("g", np.ones(100, np.float32))
        kv.wait_all()
        print("FAIL deadpeer-after: no error", flush=True)
    except kvsd.PeerDead:
        print("ok deadpeer-after", flush=True)
    end = time.monotonic() + 30   # the scheduler's notice may trail the error
    while kv.num_dead_node("worker") == 0 and time.monotonic() < end:
        time.sleep(0.02)
    print("ok deadpeer-count workers %d servers %d all %d" % (
        kv.num_dead_node("worker"), kv.num_dead_node("server"), kv.num_dead_node()), flush=True)
    try:
        kv.close()
    except kvsd.Error:
        pass
    print("ok deadpeer-closed", flush=True)


# ---- a bad environment --------------------------------------------------------

def badenv():
    good = os.environ["PS_HEARTBEAT_TIMEOUT"] if "PS_HEARTBEAT_TIMEOUT" in os.environ else None
    os.environ["PS_HEARTBEAT_TIMEOUT"] = "soon"
    try:
        kvsd.create("dist_sync")
        print("FAIL badenv: create accepted PS_HEARTBEAT_TIMEOUT=soon", flush=True)
    except kvsd.ConfigError as e:
        assert e.code == -3 and "PS_HEARTBEAT_TIMEOUT='soon'" in e.message, e
        print("ok badenv-config-error: %s" % e.message, flush=True)
    if good is None:
        del os.environ["PS_HEARTBEAT_TIMEOUT"]
    else:
        os.environ["PS_HEARTBEAT_TIMEOUT"] = good
    with kvsd.create("dist_sync") as kv:   # the job itself is fine
        kv.barrier()
    print("ok badenv-then-good", flush=True)


if __name__ == "__main__":
    {"sums": sums, "deadpeer": deadpeer, "badenv": badenv}[sys.argv[1]]()
