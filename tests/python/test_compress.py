"""Gradient compression from Python: MXNet's dict form and spec strings,
the errors, and a small network on scikit-learn's digits (2 workers, NumPy)
that reaches the same test accuracy (within 1 point) with 2-bit compression
as without (compress_worker.py)."""
import json
import os
import sys

import pytest

import kvsd
from kvsd._store import compression_spec
from conftest import ROOT, launch, worker_lines

WORKER = os.path.join(ROOT, "tests", "python", "compress_worker.py")


def test_spec_forms():
    assert compression_spec(None) == "none"
    assert compression_spec("1bit") == "1bit"
    assert compression_spec({"type": "2bit", "threshold": 0.5}) == "2bit threshold=0.5"
    assert compression_spec({"type": "topk", "ratio": 0.01}) == "topk ratio=0.01"
    assert compression_spec({"type": "2bit", "pull": False}) == "2bit pull=0"
    assert compression_spec({"type": "1bit", "pull": 1}) == "1bit pull=1"
    with pytest.raises(ValueError, match="'type'"):
        compression_spec({"threshold": 0.5})
    with pytest.raises(ValueError, match="threshold"):
        compression_spec({"type": "2bit", "threshold": "high"})
    with pytest.raises(TypeError, match="dict"):
        compression_spec(0.5)


def test_local_store_refuses(local):
    assert local.is_capable("compression") is False
    with pytest.raises(kvsd.Error, match="dist_sync"):
        local.set_gradient_compression({"type": "2bit", "threshold": 0.5})
    with pytest.raises(kvsd.Error, match="'3bit'"):
        local.set_gradient_compression("3bit")
    with pytest.raises(kvsd.Error, match="pull=2"):
        local.set_gradient_compression({"type": "2bit", "pull": 2})


def accuracy(spec):
    r = launch(2, 1, [sys.executable, WORKER, spec, "10"], timeout=120)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = [l for l in worker_lines(r.stdout, 0) if l.startswith("RESULT ")]
    assert res, r.stdout[-3000:]
    return json.loads(res[-1][len("RESULT "):])["acc"]


def test_2bit_converges_like_uncompressed():
    plain = accuracy("off")
    twobit = accuracy("dict:2bit:0.01")   # MXNet's {'type': '2bit', 'threshold': 0.01}
    assert plain >= 88.0, plain
    assert abs(twobit - plain) <= 1.0, (twobit, plain)
