"""kvsd.Error and its subclasses: made from the library's own error list."""
import ctypes
import os
import pickle
import re
import subprocess

import numpy as np
import pytest

import kvsd
from conftest import ROOT, job_env
from kvsd import _errors, _lib


def header_codes():
    """(name, value) of every X(...) line of KVS_ERRNO_MAP in include/kvs.h."""
    text = open(os.path.join(ROOT, "include", "kvs.h")).read()
    block = text[text.index("#define KVS_ERRNO_MAP"):]
    block = block[:block.index("typedef enum kvs_err")]
    return [(m.group(1), int(m.group(2)))
            for m in re.finditer(r"X\((KVS_E\w+),\s*(-\d+),", block)]


def test_every_code_of_kvs_h_has_a_class():
    codes = header_codes()
    assert len(codes) >= 15
    for name, value in codes:
        cls = kvsd.errors[name]
        assert cls.code == value and cls.name == name
        assert getattr(kvsd, name) is cls
        assert issubclass(cls, kvsd.Error)
        assert cls.__doc__ == "%s (%d): %s." % (name, value, kvsd.strerror(value))
    assert set(kvsd.errors) == {n for n, _ in codes}


def test_friendly_names():
    assert kvsd.PeerDead is kvsd.KVS_EPEERDEAD
    assert kvsd.Timeout is kvsd.KVS_ETIMEDOUT
    assert kvsd.ConfigError is kvsd.KVS_ECONFIG
    assert kvsd.NoKey is kvsd.KVS_ENOKEY and issubclass(kvsd.NoKey, LookupError)
    assert issubclass(kvsd.ShapeError, ValueError)
    assert issubclass(kvsd.InvalidArgument, ValueError)
    assert issubclass(kvsd.KeyCollision, kvsd.InvalidArgument)
    # every friendly name belongs to a code the library has
    for cname, (pyname, _) in _errors._FRIENDLY.items():
        assert cname in kvsd.errors, "%s names a code libkvs does not have" % cname
        assert getattr(kvsd, pyname).name == cname


def test_error_fields_and_pickle():
    e = kvsd.errors["KVS_EPEERDEAD"]("worker 1 (node 11) is dead")
    assert (e.code, e.name, e.message) == (-7, "KVS_EPEERDEAD", "worker 1 (node 11) is dead")
    assert str(e) == "KVS_EPEERDEAD: worker 1 (node 11) is dead"
    assert isinstance(e, kvsd.PeerDead)
    e2 = pickle.loads(pickle.dumps(e))
    assert type(e2) is kvsd.PeerDead and e2.message == e.message and e2.code == -7
    assert kvsd.Timeout().message == kvsd.strerror(-8)
    unknown = _errors.from_code(-999, "?")
    assert type(unknown) is kvsd.Error and unknown.name == "KVS_E?"


def test_bad_store_type_is_invalid_argument():
    with pytest.raises(kvsd.InvalidArgument, match="unknown store type 'bogus'") as ei:
        kvsd.create("bogus")
    assert ei.value.code == -1 and ei.value.name == "KVS_EINVAL"
    with pytest.raises(TypeError):
        kvsd.create(3)


@pytest.mark.parametrize("var,value", [("DMLC_NUM_WORKER", "two"),
                                       ("PS_HEARTBEAT_TIMEOUT", "soon"),
                                       ("DMLC_PS_ROOT_PORT", "99999")])
def test_bad_environment_is_config_error(monkeypatch, var, value):
    for k, v in {"DMLC_ROLE": "worker", "DMLC_PS_ROOT_URI": "127.0.0.1",
                 "DMLC_PS_ROOT_PORT": "1", "DMLC_NUM_SERVER": "1",
                 "DMLC_NUM_WORKER": "1"}.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv(var, value)
    with pytest.raises(kvsd.ConfigError) as ei:
        kvsd.create("dist_sync")
    e = ei.value
    assert e.code == -3 and e.name == "KVS_ECONFIG"
    assert "%s='%s'" % (var, value) in e.message


def test_shape_and_nokey_from_the_library(local):
    local.init("w", np.zeros(4, np.float32))
    with pytest.raises(kvsd.ShapeError, match=r"key \d+ \('w'\): push value has 3 float32") as ei:
        local.push("w", np.zeros(3, np.float32))
    assert ei.value.code == -6
    with pytest.raises(kvsd.ShapeError, match="float64"):
        local.push("w", np.zeros(4, np.float64))
    with pytest.raises(kvsd.NoKey):
        local.pull(12345, out=np.zeros(4, np.float32))


def test_set_optimizer_passes_through(local):
    """kvsd gives kvs_set_optimizer's answer, whatever this libkvs says."""
    raw = _lib.lib.kvs_create(b"local", ctypes.byref(h := _lib.c_store_p()))
    assert raw == 0
    try:
        for spec in ("sgd lr=0.1", "no-such-optimizer"):
            rc = _lib.lib.kvs_set_optimizer(h, spec.encode())
            if rc == 0:
                local.set_optimizer(spec)
            else:
                with pytest.raises(kvsd.Error) as ei:
                    local.set_optimizer(spec)
                assert ei.value.code == rc
    finally:
        _lib.lib.kvs_close(h)
    with pytest.raises(TypeError):
        local.set_optimizer(None)


def test_set_optimizer_new_specs(local):
    """adamw, lamb and the warmup/decay schedules: a good spec reaches the
    local store's answer (not supported), a bad one names its word."""
    for spec in ("adamw learning_rate=0.001 wd=0.01",
                 "lamb wd=0.01 lower_bound=0.1 upper_bound=10 bias_correction=0",
                 "adam lr_scheduler=warmup_cosine warmup_steps=10 total_steps=100",
                 "sgd momentum=0.9 lr_scheduler=poly total_steps=50 power=1.5 final_lr=0.001",
                 "lamb lr_scheduler=warmup_linear warmup_steps=5 total_steps=20"):
        with pytest.raises(kvsd.NotSupported):
            local.set_optimizer(spec)
    for spec, word in (("adamw momentum=0.9", "'momentum=0.9'"),
                       ("lamb lower_bound=x", "'lower_bound=x'"),
                       ("sgd lr_scheduler=cosine", "'lr_scheduler=cosine'"),
                       ("adam lr_scheduler=poly warmup_steps=5", "total_steps=N"),
                       ("adam lr_scheduler=warmup_linear total_steps=4 warmup_steps=4",
                        "'warmup_steps=4'"),
                       ("adam power=2", "'power'")):
        with pytest.raises(kvsd.InvalidArgument) as ei:
            local.set_optimizer(spec)
        assert word in str(ei.value), (spec, str(ei.value))


def test_closed_store():
    kv = kvsd.create("local")
    kv.close()
    kv.close()                       # twice is fine
    assert kv.closed
    for call in (lambda: kv.push(1, np.zeros(1)), lambda: kv.wait_all(), lambda: kv.barrier(),
                 lambda: kv.init(1, np.zeros(1))):
        with pytest.raises(kvsd.Closed):
            call()


def test_context_manager_closes():
    with kvsd.create("local") as kv:
        assert kv.rank == 0 and kv.num_workers == 1 and kv.num_servers == 0
    assert kv.closed
    with pytest.raises(RuntimeError):
        with kvsd.create("local") as kv2:
            raise RuntimeError("body")
    assert kv2.closed


def test_argument_errors(local):
    local.init(1, np.zeros(2))
    with pytest.raises(ValueError, match="2 keys need a list of 2 values"):
        local.push([1, 2], np.zeros(2))
    with pytest.raises(ValueError, match="empty list"):
        local.push(1, [])
    with pytest.raises(TypeError, match="priority must be an int"):
        local.push(1, np.zeros(2), priority=1.5)
    with pytest.raises(ValueError, match="outside a C int"):
        local.push(1, np.zeros(2), priority=1 << 31)
    with pytest.raises(TypeError, match="a key is an int or a str"):
        local.push(1.0, np.zeros(2))
    with pytest.raises(ValueError, match="outside 0 .. 2\\*\\*64-1"):
        local.push(-1, np.zeros(2))
    local.push(np.int64(1), np.zeros(2), priority=np.int32(3))   # NumPy integers are ints


def test_library_location_and_kvs_library(tmp_path):
    """KVS_LIBRARY names the library; a wrong one is an ImportError saying so;
    without it the source tree's build/libkvs.so is found by itself."""
    env = job_env()
    code = "import kvsd; print(kvsd.library)"
    env["KVS_LIBRARY"] = str(tmp_path / "nope.so")
    r = subprocess.run(["/usr/bin/python3", "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "KVS_LIBRARY='%s' does not load" % env["KVS_LIBRARY"] in r.stderr
    del env["KVS_LIBRARY"]
    r = subprocess.run(["/usr/bin/python3", "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == os.path.join(ROOT, "build", "libkvs.so")


def test_version_matches_the_header():
    text = open(os.path.join(ROOT, "include", "kvs.h")).read()
    parts = [re.search(r"#define KVS_VERSION_%s (\d+)" % p, text).group(1)
             for p in ("MAJOR", "MINOR", "PATCH")]
    assert kvsd.__version__ == ".".join(parts)
    if kvsd.library_version is not None:
        assert kvsd.library_version == kvsd.__version__


def test_server_only_calls_on_the_local_store(local, tmp_path):
    """Per-key multipliers and checkpoints need servers: KVS_ENOTSUP (-4)."""
    for call in (lambda: local.set_optimizer_key(1, "lr_mult=0.1"),
                 lambda: local.save(tmp_path), lambda: local.load(str(tmp_path))):
        with pytest.raises(kvsd.Error) as ei:
            call()
        assert ei.value.code == -4
    with pytest.raises(TypeError):
        local.save(None)
    with pytest.raises(TypeError):
        local.set_optimizer_key(1, None)
