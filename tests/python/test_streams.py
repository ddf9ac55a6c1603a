"""The stream handshake on simulated devices (KVS_SIM_DEVICES: device memory is
host memory): a CUDA torch tensor is read only after torch's current stream
for its device has drained; a __cuda_array_interface__ object's `stream` is
waited for in its own device's context, on any thread; KVS_DEVICES renumbers
the devices arrays name.

The streams are fakes whose pending work is real: until the library waits
for them, the array still holds stale values, so a sum that read too early
is wrong, not merely unrecorded."""
import ctypes
import sys
import threading
import types

import numpy as np
import pytest

import kvsd
from kvsd import _arrays, _cuda
from test_arrays import FakeCuda


class FakeStream:
    """A side stream with one kernel queued: it writes `values` into `base`
    when the stream is synchronised."""

    def __init__(self, handle, base=None, values=None):
        self.cuda_stream = handle
        self.base, self.values = base, values
        self.synced = 0

    def synchronize(self):
        self.synced += 1
        if self.base is not None:
            self.base[:] = self.values


def fake_torch(monkeypatch, streams):
    """A torch module with just what kvsd's conversion touches; streams:
    device index -> the current FakeStream of that device."""
    torch = types.ModuleType("torch")

    class dtype:
        def __init__(self, name):
            self.name = name

        def __str__(self):
            return "torch." + self.name

    for n in ("float32", "float64", "float16", "bfloat16", "int32", "int64"):
        setattr(torch, n, dtype(n))
    torch.strided = object()

    class device:
        def __init__(self, index):
            self.type, self.index = "cuda", index

        def __str__(self):
            return "cuda:%d" % self.index

    class Tensor:
        def __init__(self, base, index):
            self.base = base
            self.dtype = torch.float32
            self.layout = torch.strided
            self.device = device(index)
            self.shape = base.shape

        def is_contiguous(self):
            return True

        def data_ptr(self):
            return self.base.ctypes.data

        def numel(self):
            return self.base.size

    torch.Tensor = Tensor
    torch.cuda = types.SimpleNamespace(
        current_stream=lambda d: streams[d.index],
        current_device=lambda: 0)
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setattr(_arrays, "_torch_codes", None)
    return torch


@pytest.fixture
def devstore(monkeypatch):
    monkeypatch.setenv("KVS_SIM_DEVICES", "4")
    monkeypatch.delenv("KVS_DEVICES", raising=False)
    kv = kvsd.create("device")
    yield kv
    kv.close()


def test_torch_tensor_waits_for_the_side_stream(devstore, monkeypatch):
    n = 1000
    grads = [np.zeros(n, np.float32) for _ in range(2)]   # stale until the streams run
    streams = {1: FakeStream(0x5a1de, grads[0], np.arange(n, dtype=np.float32)),
               2: FakeStream(0x5a1df, grads[1], np.full(n, 3, np.float32))}
    torch = fake_torch(monkeypatch, streams)
    devstore.init("w", np.zeros(n, np.float32))
    devstore.push("w", [torch.Tensor(grads[0], 1), torch.Tensor(grads[1], 2)])
    out = np.zeros(n, np.float32)
    devstore.pull("w", out=out)
    devstore.wait("w")
    assert streams[1].synced == 1 and streams[2].synced == 1
    assert np.array_equal(out, np.arange(n, dtype=np.float32) + 3)


def test_torch_default_stream_needs_no_wait(devstore, monkeypatch):
    # torch's legacy default stream (handle 0): the library's own work on
    # the legacy default stream already comes after it
    n = 16
    s = FakeStream(0)
    torch = fake_torch(monkeypatch, {0: s})
    devstore.init(3, np.zeros(n, np.float32))
    devstore.push(3, torch.Tensor(np.full(n, 2, np.float32), 0))
    out = np.zeros(n, np.float32)
    devstore.pull(3, out=out)
    devstore.wait(3)
    assert s.synced == 0
    assert np.array_equal(out, np.full(n, 2, np.float32))


def test_torch_output_waits_too(devstore, monkeypatch):
    # a pull into a tensor still being read on a side stream waits for it
    n = 8
    s = FakeStream(0x77)
    torch = fake_torch(monkeypatch, {3: s})
    devstore.init(4, np.full(n, 6, np.float32))
    out = np.zeros(n, np.float32)
    devstore.pull(4, out=torch.Tensor(out, 3))
    devstore.wait(4)
    assert s.synced == 1
    assert np.array_equal(out, np.full(n, 6, np.float32))


class FakeDriver:
    """The driver calls _cuda makes, recording which context was current
    for each stream wait; a wait runs the stream's pending writes."""

    def __init__(self, pending):
        self.stack, self.waits, self.retained, self.pending = [], [], [], pending

    def cuDeviceGet(self, ref, ordinal):
        ref._obj.value = ordinal
        return 0

    def cuDevicePrimaryCtxRetain(self, ref, dev):
        ref._obj.value = 0x1000 + dev.value
        self.retained.append(dev.value)
        return 0

    def cuDevicePrimaryCtxRelease(self, dev):
        self.retained.remove(dev.value)
        return 0

    def cuCtxPushCurrent(self, ctx):
        self.stack.append(ctx.value)
        return 0

    def cuCtxPopCurrent(self, ref):
        ref._obj.value = self.stack.pop()
        return 0

    def cuStreamSynchronize(self, handle):
        h = handle.value
        self.waits.append((self.stack[-1] if self.stack else None, h))
        if h in self.pending:
            base, values = self.pending.pop(h)
            base[:] = values
        return 0

    def cuPointerGetAttribute(self, ref, attr, ptr):
        return 1


def test_cuda_array_interface_stream_in_its_devices_context(devstore, monkeypatch):
    n = 500
    a, b = np.zeros(n, np.float32), np.zeros(n, np.float32)
    drv = FakeDriver({0xbeef: (a, np.full(n, 4, np.float32)),
                      0x1: (b, np.full(n, 5, np.float32))})
    monkeypatch.setattr(_cuda, "_load", lambda: drv)
    devstore.init(9, np.zeros(n, np.float32))
    done = []

    def worker():   # a thread that never touched CUDA
        devstore.push(9, [FakeCuda(a, 2, stream=0xbeef), FakeCuda(b, 3, stream=1)])
        done.append(True)

    t = threading.Thread(target=worker)
    t.start()
    t.join(60)
    assert done
    out = np.zeros(n, np.float32)
    devstore.pull(9, out=out)
    devstore.wait(9)
    # each wait ran in the primary context of the array's device, and the
    # context stack and retains are balanced afterwards
    assert drv.waits == [(0x1002, 0xbeef), (0x1003, 0x1)]
    assert drv.stack == [] and drv.retained == []
    assert np.array_equal(out, np.full(n, 9, np.float32))


def test_stream_wait_failure_is_a_clear_error(devstore, monkeypatch):
    drv = FakeDriver({})
    drv.cuStreamSynchronize = lambda h: 700
    monkeypatch.setattr(_cuda, "_load", lambda: drv)
    devstore.init(10, np.zeros(4, np.float32))
    with pytest.raises(TypeError, match=r"cuStreamSynchronize\(0x42\) on CUDA device 1 failed "
                                        r"with CUDA error 700"):
        devstore.push(10, FakeCuda(np.zeros(4, np.float32), 1, stream=0x42))
    assert drv.stack == [] and drv.retained == []


def test_stream_without_driver(devstore, monkeypatch):
    monkeypatch.setattr(_cuda, "_load", lambda: None)
    devstore.init(11, np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="names CUDA stream 0x42 to wait for, but the CUDA driver "
                                        "is not available"):
        devstore.push(11, FakeCuda(np.zeros(4, np.float32), 1, stream=0x42))


def test_kvs_devices_renumbers(monkeypatch):
    # KVS_DEVICES=2,3: CUDA devices 2 and 3 are kvsd devices 0 and 1
    monkeypatch.setenv("KVS_SIM_DEVICES", "4")
    monkeypatch.setenv("KVS_DEVICES", "2,3")
    kv = kvsd.create("device")
    try:
        n = 64
        kv.init(1, np.zeros(n, np.float32))
        assert _arrays.view(FakeCuda(np.zeros(n, np.float32), 3), False, "x")[3] == 1
        kv.push(1, [FakeCuda(np.full(n, 1, np.float32), 2),
                    FakeCuda(np.full(n, 2, np.float32), 3)])
        out = np.zeros(n, np.float32)
        kv.pull(1, out=FakeCuda(out, 3))
        kv.wait(1)
        assert np.array_equal(out, np.full(n, 3, np.float32))
        with pytest.raises(TypeError, match="on CUDA device 0, which KVS_DEVICES=2,3 does not "
                                            "select"):
            kv.push(1, FakeCuda(np.zeros(n, np.float32), 0))
    finally:
        kv.close()


def test_kvs_devices_rejected(monkeypatch):
    monkeypatch.setenv("KVS_SIM_DEVICES", "4")
    monkeypatch.setenv("KVS_DEVICES", "1,4")
    with pytest.raises(kvsd.Error) as ei:
        kvsd.create("device")
    assert "KVS_DEVICES='1,4': device 4 does not exist" in ei.value.message
    monkeypatch.setenv("KVS_DEVICES", "1;2")
    with pytest.raises(kvsd.Error) as ei:
        kvsd.create("device")
    assert "KVS_DEVICES='1;2': expected a comma-separated list" in ei.value.message
