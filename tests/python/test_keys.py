"""String keys: one documented mapping to 64-bit keys; collisions found."""
import subprocess

import numpy as np
import pytest

import kvsd
from conftest import job_env


def test_documented_mapping():
    # BLAKE2b-64 of "" is e4a6a0577479b2b4 (reference test vector); read
    # little-endian with bit 63 set:
    assert kvsd.key_of("") == 0xb4b2797457a0a6e4
    assert kvsd.key_of("w") == 0xa0925082a2286b9e
    assert kvsd.key_of("fc1.weight") == 0xaff720685851010a
    assert kvsd.key_of("ключ") == 0xa0c885d1912dd44c    # UTF-8 bytes
    for s in ("a", "b", "layer.0.weight", "x" * 1000):
        assert kvsd.key_of(s) >> 63 == 1


def test_same_in_every_process():
    """Not Python's hash(): the same under any PYTHONHASHSEED."""
    code = "import kvsd; print(kvsd.key_of('conv1.bias'), hash('conv1.bias'))"
    seen = set()
    for seed in ("1", "2"):
        env = job_env()
        env["PYTHONHASHSEED"] = seed
        out = subprocess.run(["/usr/bin/python3", "-c", code], env=env, check=True,
                             capture_output=True, text=True).stdout.split()
        seen.add(int(out[0]))
        assert int(out[0]) == kvsd.key_of("conv1.bias")
    assert len(seen) == 1


def test_string_and_int_keys_together(local):
    local.init(["a", 7, "b"], [np.zeros(2), np.zeros(3), np.zeros(4)])
    local.push(["b", "a", 7], [np.full(4, 2.0), np.full(2, 1.0), np.full(3, 3.0)])
    outs = [np.zeros(2), np.zeros(3), np.zeros(4)]
    local.pull(["a", 7, "b"], out=outs)
    local.wait(["a", 7, "b"])
    assert [o.tolist() for o in outs] == [[1, 1], [3, 3, 3], [2, 2, 2, 2]]
    # the 64-bit key is the same key
    o = np.zeros(2)
    local.pull(kvsd.key_of("a"), out=o)
    local.wait("a")
    assert o.tolist() == [1, 1]


@pytest.fixture
def colliding(monkeypatch):
    """Make 'left' and 'right' (and the int 2**63 + 5) share one 64-bit key."""
    from kvsd import _keys
    real = _keys.of_str

    def fake(s):
        return (1 << 63) + 5 if s in ("left", "right") else real(s)
    monkeypatch.setattr(_keys, "of_str", fake)


def test_collision_in_one_init(local, colliding):
    with pytest.raises(kvsd.KeyCollision, match="'left' and 'right' both map to 64-bit key "
                                                "0x8000000000000005") as ei:
        local.init(["left", "right"], [np.zeros(1), np.zeros(1)])
    assert ei.value.code == kvsd.InvalidArgument.code
    # nothing was initialised
    with pytest.raises(kvsd.NoKey):
        local.pull("left", out=np.zeros(1))


def test_collision_across_inits_and_with_ints(local, colliding):
    local.init("left", np.zeros(1))
    local.init("left", np.zeros(1))           # the same name again is fine
    with pytest.raises(kvsd.KeyCollision, match="key 'right' maps to 64-bit key "
                                                "0x8000000000000005, which init gave to "
                                                "key 'left'"):
        local.init("right", np.zeros(1))
    with pytest.raises(kvsd.KeyCollision, match="'left' and 9223372036854775813"):
        local.init((1 << 63) + 5, np.zeros(1))
    with pytest.raises(kvsd.KeyCollision, match="which init gave to key 'left'"):
        local.push("right", np.zeros(1))


def test_int_key_then_colliding_string(local, colliding):
    local.init((1 << 63) + 5, np.zeros(1))
    with pytest.raises(kvsd.KeyCollision):
        local.init("left", np.zeros(1))
