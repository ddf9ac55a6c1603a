"""kvsd.torch.elastic (KVS_ELASTIC=1): 3 workers train a small MLP; in one
job worker 2 SIGKILLs itself in the middle of epoch 1 and kvs-launch
--restarts starts it again, so that it joins the running job.  Training
goes on the whole time (every survivor catches kvsd.MembershipChanged,
restores its last commit and syncs from rank 0), every worker ends with 3
members, and the accuracy is that of an undisturbed run (within 0.02, and at
least 0.9).  Also: kvsd.MembershipChanged is the class of KVS_EMEMBERSHIP."""
import os
import re

import pytest

from conftest import PYTHON, ROOT, launch

torch = pytest.importorskip("torch")

WORKER = os.path.join(ROOT, "tests", "python", "elastic_worker.py")
ENV = ["KVS_ELASTIC=1", "KVS_MIN_WORKERS=2"]


def test_membership_changed_class():
    import kvsd
    assert kvsd.MembershipChanged is kvsd.KVS_EMEMBERSHIP
    assert issubclass(kvsd.MembershipChanged, kvsd.Error)
    assert kvsd.MembershipChanged.code == -22
    import kvsd.torch as kt
    assert kt.elastic.MembershipChanged is kvsd.MembershipChanged


def results(r):
    lines = re.findall(r"^\[worker (\d)\] accuracy ([0-9.]+) changes (\d+) workers (\d+) "
                       r"epochs (\d+) joiner (\d)$", r.stdout, re.M)
    return [(int(w), float(a), int(c), int(n), int(e), int(j)) for w, a, c, n, e, j in lines]


def test_elastic_kill_and_rejoin(tmp_path):
    base = launch(3, 1, [PYTHON, WORKER, "3", "4"], env=ENV + ["KVS_TEST_DIR=%s" % tmp_path],
                  timeout=240)
    assert base.returncode == 0, base.stdout[-3000:] + base.stderr[-3000:]
    undisturbed = results(base)
    assert len(undisturbed) == 3, base.stdout[-3000:]
    acc0 = undisturbed[0][1]
    assert all(a == acc0 and c == 0 and n == 3 for _, a, c, n, _, _ in undisturbed)
    assert acc0 >= 0.9

    d = tmp_path / "disturbed"
    d.mkdir()
    r = launch(3, 1, [PYTHON, WORKER, "3", "4", "--die-at", "1.5"],
               env=ENV + ["KVS_TEST_DIR=%s" % d], timeout=240, restarts=1)
    out = r.stdout[-4000:] + r.stderr[-4000:]
    assert r.returncode == 0, out
    assert "worker 2 failed: killed by signal 9 (SIGKILL); restarting it" in r.stderr, out
    assert "[worker 2] dying at epoch 1 batch 5" in r.stdout, out
    got = results(r)
    assert len(got) == 3, out
    survivors = [g for g in got if g[5] == 0]
    joiner = [g for g in got if g[5] == 1]
    assert len(survivors) == 2 and len(joiner) == 1, out
    for w, acc, changes, n, epochs, _ in got:
        assert n == 3, out          # everyone ends with 3 members
        assert epochs >= 4, out
        assert acc >= 0.9 and acc >= acc0 - 0.02, (acc, acc0, out)
    for s in survivors:
        assert s[2] >= 1, out       # they caught MembershipChanged and went on
    # the members end with the same model: one accuracy
    assert len(set(g[1] for g in got)) == 1, out
