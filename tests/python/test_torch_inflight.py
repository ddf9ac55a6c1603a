"""CPU tensors given to push and pull stay valid until the wait returns:
resize_ of one in flight (which would free its memory under the library,
and crashed the worker with KVS_CMA=0) raises, and dropping the last
reference to one changes nothing (the package holds it).  Both data paths:
through the socket (KVS_CMA=0) and by reference (KVS_CMA=1).  The worker is
tests/python/inflight_worker.py."""
import os

import pytest

from conftest import PYTHON, ROOT, launch, worker_lines

pytest.importorskip("torch")

WORKER = os.path.join(ROOT, "tests", "python", "inflight_worker.py")


@pytest.mark.parametrize("cma", ["0", "1"])
def test_tensors_in_flight(tmp_path, cma):
    r = launch(2, 1, [PYTHON, WORKER], env=["KVS_CMA=" + cma, "INFLIGHT_DIR=%s" % tmp_path],
               timeout=120)
    w0, w1 = worker_lines(r.stdout, 0), worker_lines(r.stdout, 1)
    why = "exit %d\nstdout:\n%s\nstderr:\n%s" % (r.returncode, r.stdout[-3000:],
                                                   r.stderr[-3000:])
    assert [l.split(":")[0] for l in w0] == ["ok resize-output refused", "ok resize-input refused",
                                              "ok sums", "ok junk"], why
    assert w1 == ["ok pushed"], why
    assert r.returncode == 0, why
