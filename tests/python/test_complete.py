"""Store.on_complete (kvs_on_complete) on the local store: the callback runs
once, on another thread, with None; the arrays of the call are released;
bad arguments and a closed store raise.  (Dist jobs: test_torch.py's DDP
hook, and the integration tests callbacks_2x3 and kill_worker_callback_1x2.)"""
import threading
import weakref

import numpy as np
import pytest

import kvsd


def test_callback_runs_once_on_another_thread(local):
    local.init("a", np.zeros(5, np.float32))
    v = np.arange(5, dtype=np.float32)
    local.pushpull("a", v)
    got, ev = [], threading.Event()

    def cb(err):
        got.append((err, threading.get_ident(), v.copy()))
        ev.set()
    local.on_complete("a", cb)
    assert ev.wait(10)
    local.wait("a")
    assert len(got) == 1
    err, tid, val = got[0]
    assert err is None and tid != threading.get_ident()
    assert val.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_callback_releases_the_arrays(local):
    local.init("b", np.zeros(3, np.float64))
    ev = threading.Event()
    x = np.ones(3)
    ref = weakref.ref(x)
    local.push("b", x)
    del x
    local.on_complete("b", lambda err: ev.set())
    assert ev.wait(10)
    # the store dropped its reference before calling back
    assert ref() is None


def test_many_keys_each_called(local):
    keys = ["k%d" % i for i in range(20)]
    local.init(keys, [np.zeros(2, np.int64) for _ in keys])
    seen, lock, ev = [], threading.Lock(), threading.Event()

    def make(k):
        def cb(err):
            with lock:
                seen.append((k, err))
                if len(seen) == len(keys):
                    ev.set()
        return cb
    for k in keys:
        local.push(k, np.full(2, 3, np.int64))
        local.on_complete(k, make(k))
    assert ev.wait(10)
    assert sorted(seen) == sorted((k, None) for k in keys)


def test_bad_arguments(local):
    with pytest.raises(TypeError):
        local.on_complete("a", "not callable")
    with pytest.raises(TypeError):
        local.on_complete(1.5, lambda e: None)


def test_closed_store():
    kv = kvsd.create("local")
    kv.close()
    with pytest.raises(kvsd.Error) as e:
        kv.on_complete("a", lambda err: None)
    assert e.value.name == "KVS_ECLOSED"


def test_close_runs_registered_callbacks():
    kv = kvsd.create("local")
    kv.init("c", np.zeros(2))
    got = []
    kv.on_complete("c", lambda err: got.append(err))
    kv.close()
    assert got == [None]
