"""Row-sparse keys from Python: a 2x2 job on loopback (kvs-launch) whose
workers (tests/python/sparse_worker.py) push (ids, rows) pairs and
torch.sparse_coo tensors, pull rows with row_sparse_pull, and check every
element against a dense reference, and every user error."""
import os

import pytest

from conftest import PYTHON, ROOT, launch, worker_lines

WORKER = os.path.join(ROOT, "tests", "python", "sparse_worker.py")
W, S = 2, 2
CHECKS = ["pairs", "pushpull", "torch", "errors"]


@pytest.fixture(scope="module")
def job():
    r = launch(W, S, [PYTHON, WORKER], env=["MXNET_KVSTORE_BIGARRAY_BOUND=1000"])
    return r, [worker_lines(r.stdout, w) for w in range(W)]


@pytest.mark.parametrize("check", CHECKS)
def test_sparse(job, check):
    r, lines = job
    for w in range(W):
        mine = [l for l in lines[w] if l.split(":")[0].split()[-1] == check]
        assert mine == ["ok " + check], (
            "worker %d: %s\nlauncher exit %d\nstdout:\n%s\nstderr:\n%s"
            % (w, mine or "no report", r.returncode, r.stdout[-3000:], r.stderr[-3000:]))


def test_sparse_job_exit(job):
    r, _ = job
    assert r.returncode == 0, r.stderr[-3000:]
