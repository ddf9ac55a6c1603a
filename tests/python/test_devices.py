"""Device arrays end to end on simulated devices (KVS_SIM_DEVICES: device
memory is host memory, so no GPU is needed): the device id each object
carries (__cuda_array_interface__ with __dlpack_device__ / .device, or a
DLPack capsule) is the device libkvs sums and broadcasts on."""
import numpy as np
import pytest

import kvsd
from test_arrays import FakeCuda, FakeDLPack


@pytest.fixture
def devstore(monkeypatch):
    monkeypatch.setenv("KVS_SIM_DEVICES", "4")
    try:
        kv = kvsd.create("device")
    except kvsd.NotSupported as e:
        pytest.skip("this libkvs has no device store: %s" % e)
    yield kv
    kv.close()


@pytest.mark.parametrize("how", ["dlpack_device", "cupy", "torch"])
def test_push_on_four_devices_pull_on_four(devstore, how):
    n = 1000
    devstore.init("w", FakeCuda(np.zeros(n, np.float32), 0, how))
    grads = [np.full(n, d + 1, np.float32) for d in range(4)]
    outs = [np.zeros(n, np.float32) for _ in range(4)]
    devstore.push("w", [FakeCuda(g, d, how) for d, g in enumerate(grads)])
    devstore.pull("w", out=[FakeCuda(o, d, how) for d, o in enumerate(outs)])
    devstore.wait("w")
    for o in outs:
        assert np.array_equal(o, np.full(n, 10, np.float32))


def test_dlpack_device_arrays(devstore):
    n = 64
    devstore.init(7, FakeDLPack(np.zeros(n, np.float32), device_type=2, device_id=1))
    srcs = [np.full(n, 2.0 ** d, np.float32) for d in range(3)]
    fakes = [FakeDLPack(s, device_type=2, device_id=d) for d, s in enumerate(srcs)]
    out = np.zeros(n, np.float32)
    devstore.pushpull(7, fakes, out=[FakeDLPack(out, device_type=2, device_id=3)])
    devstore.wait(7)
    assert np.array_equal(out, np.full(n, 7.0, np.float32))
    assert all(f.deleted == 1 for f in fakes)   # released at the wait


def test_device_beyond_the_simulated_ones(devstore):
    devstore.init(8, np.zeros(4, np.float32))
    with pytest.raises(kvsd.Error) as ei:
        devstore.push(8, FakeCuda(np.zeros(4, np.float32), 9))
    assert "9" in ei.value.message
