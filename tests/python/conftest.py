"""Shared set-up of the Python tests: the package from python/, the library
from $BUILD (default build/), helpers that run a job under kvs-launch."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, os.environ.get("BUILD", "build"))
PYTHON = sys.executable
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ.setdefault("KVS_LIBRARY", os.path.join(BUILD, "libkvs.so"))
os.environ.setdefault("KVS_BIN_DIR", BUILD)
# a dist store never comes from the environment of whoever runs the tests
for _v in list(os.environ):
    if _v.startswith("DMLC_"):
        del os.environ[_v]


def job_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "python") + (
        os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def launch(workers, servers, argv, env=(), timeout=180, restarts=0):
    """Run argv as the workers of a local job; returns the CompletedProcess
    (stdout and stderr as text).  A job that outlives timeout is killed and
    reported as a failure."""
    cmd = ["bash", os.path.join(ROOT, "deploy", "kvs-launch"), "-n", str(workers),
           "-s", str(servers), "--grace", "5"]
    if restarts:
        cmd += ["--restarts", str(restarts)]
    for kv in env:
        cmd += ["--env", kv]
    cmd += ["--"] + list(argv)
    p = subprocess.Popen(cmd, env=job_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.terminate()  # kvs-launch stops every process of the job on SIGTERM
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
        pytest.fail("job did not end within %d s: %s\nstdout:\n%s\nstderr:\n%s"
                    % (timeout, " ".join(cmd), out, err))
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def worker_lines(out, rank):
    """The lines worker rank printed, without the launcher's prefix."""
    p = "[worker %d] " % rank
    return [l[len(p):] for l in out.splitlines() if l.startswith(p)]


@pytest.fixture
def local():
    import kvsd
    kv = kvsd.create("local")
    yield kv
    kv.close()
