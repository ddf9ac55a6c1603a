"""examples/torch: the kvsd script differs from the plain one by at most two
added or changed lines, and both train (the plain one alone, the kvsd one
under kvs-launch with 2 workers)."""
import difflib
import os
import re
import subprocess

import pytest

from conftest import PYTHON, ROOT, job_env, launch, worker_lines

pytest.importorskip("torch")

PLAIN = os.path.join(ROOT, "examples", "torch", "train.py")
KVSD = os.path.join(ROOT, "examples", "torch", "train_kvsd.py")
EPOCH = re.compile(r"^epoch (\d+) loss ([0-9.]+) accuracy ([0-9.]+)$")


def changed_lines(a, b):
    """Lines added or changed from a to b (a changed line counts once)."""
    n = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op != "equal":
            n += max(i2 - i1, j2 - j1)
    return n


def test_two_lines():
    a = open(PLAIN).read().splitlines()
    b = open(KVSD).read().splitlines()
    assert changed_lines(a, b) <= 2, "\n".join(difflib.unified_diff(a, b, lineterm=""))
    assert any("kvsd.torch" in l and "init()" in l for l in b)
    assert any("DistributedOptimizer(" in l for l in b)


def trained(lines):
    eps = [EPOCH.match(l) for l in lines]
    eps = [(int(m.group(1)), float(m.group(2)), float(m.group(3))) for m in eps if m]
    assert len(eps) == 6, lines[-20:]
    first, last = eps[0], eps[-1]
    assert last[1] < first[1] / 2, eps
    assert last[2] >= 0.85, eps


def test_plain_trains():
    r = subprocess.run([PYTHON, PLAIN], env=job_env(), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    trained(r.stdout.splitlines())


def test_kvsd_trains_under_kvs_launch():
    r = launch(2, 1, [PYTHON, KVSD], timeout=300)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for w in range(2):
        trained(worker_lines(r.stdout, w))
