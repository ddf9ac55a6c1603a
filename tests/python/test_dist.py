"""Multi-process tests: real jobs (scheduler, servers, Python workers) started
by deploy/kvs-launch on loopback; the workers are tests/python/dist_worker.py.
One job runs many checks; each check is one test here, for each van."""
import os

import pytest

from conftest import PYTHON, ROOT, launch, worker_lines

WORKER = os.path.join(ROOT, "tests", "python", "dist_worker.py")
W, S = 2, 2
CHECKS = (["sum-%s-%d" % (d, n) for d in ("float16", "float32", "float64", "int32", "int64")
           for n in (7, 5000)] +
          ["list-of-keys", "string-keys", "broadcast-pull", "pushpull", "local-sum",
           "priorities", "keep-alive", "errors", "torch", "api", "barrier", "local-group"])
VANS = {
    # small keys on one server, keys from 1000 elements split over both
    "zmq": ["MXNET_KVSTORE_BIGARRAY_BOUND=1000"],
    # priority send queues; every key cut into slices of 1000 elements
    "p3": ["DMLC_PS_VAN_TYPE=p3", "MXNET_KVSTORE_SLICE_THRESHOLD=1000"],
}


@pytest.fixture(scope="module", params=sorted(VANS))
def sums_job(request):
    r = launch(W, S, [PYTHON, WORKER, "sums"], env=VANS[request.param])
    return r, [worker_lines(r.stdout, w) for w in range(W)]


@pytest.mark.parametrize("check", CHECKS)
def test_sums(sums_job, check):
    r, lines = sums_job
    for w in range(W):
        mine = [l for l in lines[w] if l.split(":")[0].split()[-1] == check]
        assert mine == ["ok " + check], (
            "worker %d: %s\nlauncher exit %d\nstdout:\n%s\nstderr:\n%s"
            % (w, mine or "no report", r.returncode, r.stdout[-3000:], r.stderr[-3000:]))


def test_sums_job_exit(sums_job):
    r, _ = sums_job
    assert r.returncode == 0, r.stderr[-3000:]


def test_dead_peer_raises_peer_dead():
    """Worker 1 exits without closing; worker 0's blocked round, and every
    call after it, raises kvsd.PeerDead naming the node, within the
    heartbeat timeout."""
    r = launch(2, 1, [PYTHON, WORKER, "deadpeer"],
               env=["PS_HEARTBEAT_INTERVAL=0.2", "PS_HEARTBEAT_TIMEOUT=2"], timeout=120)
    w0 = worker_lines(r.stdout, 0)
    ok = [l for l in w0 if l.startswith("ok deadpeer-raised")]
    assert ok, "stdout:\n%s\nstderr:\n%s" % (r.stdout[-3000:], r.stderr[-3000:])
    assert "worker 1" in ok[0]
    took = float(ok[0].split()[2])
    assert took < 30, ok[0]
    assert "ok deadpeer-after" in w0 and "ok deadpeer-closed" in w0, w0
    assert "ok deadpeer-count workers 1 servers 0 all 1" in w0, w0
    assert worker_lines(r.stdout, 1) == ["leaving without close"]


def test_bad_environment_raises_config_error():
    r = launch(2, 1, [PYTHON, WORKER, "badenv"])
    for w in range(2):
        lines = worker_lines(r.stdout, w)
        assert any(l.startswith("ok badenv-config-error: PS_HEARTBEAT_TIMEOUT='soon'")
                   for l in lines), (w, r.stdout, r.stderr)
        assert "ok badenv-then-good" in lines, (w, r.stdout, r.stderr)
    assert r.returncode == 0, r.stderr


def test_readme_example(tmp_path):
    """The README's Python example, as printed there, under kvs-launch."""
    text = open(os.path.join(ROOT, "README.md")).read()
    start = text.index("```python\n# sum.py") + len("```python\n")
    script = tmp_path / "sum.py"
    script.write_text(text[start:text.index("```", start)])
    r = launch(2, 2, [PYTHON, str(script)])
    assert r.returncode == 0, r.stdout + r.stderr
    for w in range(2):
        assert worker_lines(r.stdout, w) == ["worker %d of 2: w[0] = 3.0" % w]
