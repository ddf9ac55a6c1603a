"""kvsd.torch: with W workers on disjoint shards, the parameters after N
steps equal one process's with the whole batch (float64 model: to 1e-12),
for DistributedOptimizer, server_update and the DDP comm hook (which also
equals DDP with gloo on the same shards); SGD with momentum and Adam;
W = 2 and 3.  Then the error paths: a differing model, a dead peer, and
broadcast_optimizer_state.  The workers are tests/python/torch_worker.py;
one job runs many trainings (one after the other) to keep the time down."""
import os
import subprocess

import numpy as np
import pytest

from conftest import PYTHON, ROOT, job_env, launch, worker_lines

torch = pytest.importorskip("torch")

WORKER = os.path.join(ROOT, "tests", "python", "torch_worker.py")
TOL = 1e-12
# trainings of one job with plain sums (server_update needs a job of its own)
PLAIN_RUNS = ["opt:sgd", "opt:adam", "hook:sgd", "hook:adam", "opt:sgd:clip", "opt:sgd:accum",
              "opt:adam:sum"]
SINGLE_RUNS = ["single:sgd", "single:adam", "single:mxadam", "single:adamw", "single:sgd:clip",
               "single:sgd:accum"]


def load(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def results(out, runs, W):
    return {r: [load("%s-%s.%d.npz" % (out, r.replace(":", "-"), w)) for w in range(W)]
            for r in runs}


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("single") / "p")
    r = subprocess.run([PYTHON, WORKER, "train", "--runs", ",".join(SINGLE_RUNS), "--out", out],
                       env=job_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    return {k: v[0] for k, v in results(out, SINGLE_RUNS, 1).items()}


def kvsd_job(tmp_path_factory, W, runs):
    out = str(tmp_path_factory.mktemp("kvsd") / "p")
    r = launch(W, 2, [PYTHON, WORKER, "train", "--runs", ",".join(runs), "--out", out],
               timeout=400)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return results(out, runs, W)


@pytest.fixture(scope="module", params=[2, 3])
def W(request):
    return request.param


@pytest.fixture(scope="module")
def plain(tmp_path_factory, W):
    return kvsd_job(tmp_path_factory, W, PLAIN_RUNS)


@pytest.fixture(scope="module")
def gloo(tmp_path_factory, W):
    d = tmp_path_factory.mktemp("gloo")
    out, init = str(d / "p"), "file://" + str(d / "init")
    runs = ["gloo:sgd", "gloo:adam"]
    procs = []
    for w in range(W):
        env = job_env()
        env.update(RANK=str(w), WORLD_SIZE=str(W), KVS_TEST_INIT=init)
        procs.append(subprocess.Popen([PYTHON, WORKER, "train", "--runs", ",".join(runs),
                                       "--out", out], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    for p in procs:
        o, _ = p.communicate(timeout=300)
        assert p.returncode == 0, o
    return results(out, runs, W)


def close(got, want, tol=TOL):
    assert sorted(got) == sorted(want)
    for k in want:
        d = np.abs(got[k] - want[k]).max()
        assert d <= tol, "%s: differs by %g (> %g)" % (k, d, tol)


def test_training_moves_the_parameters(single):
    from torch_worker import make_model
    start = {n: p.detach().numpy() for n, p in make_model(0).named_parameters()}
    for run, got in single.items():
        assert max(np.abs(got[k] - start[k]).max() for k in start) > 1e-3, run


@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_distributed_optimizer_equals_one_process(plain, single, opt):
    for got in plain["opt:" + opt]:
        close(got, single["single:" + opt])


@pytest.mark.parametrize("opt", ["sgd", "adam"])
def test_comm_hook_equals_one_process_and_ddp_gloo(plain, gloo, single, opt):
    for got, g in zip(plain["hook:" + opt], gloo["gloo:" + opt]):
        close(got, single["single:" + opt])
        close(got, g)


def test_clip_between_synchronize_and_step(plain, single):
    """synchronize(), clip the averaged gradients, step() inside
    skip_synchronize(): the same as clipping the whole batch's gradient."""
    for got in plain["opt:sgd:clip"]:
        close(got, single["single:sgd:clip"])


def test_backward_passes_per_step(plain, single):
    """Two backward passes per step, summed locally, sent once."""
    for got in plain["opt:sgd:accum"]:
        close(got, single["single:sgd:accum"])


def test_op_sum(plain, single):
    for got in plain["opt:adam:sum"]:
        close(got, single["single:adam"])


def test_server_update_sgd_equals_one_process(tmp_path_factory, W, single):
    for got in kvsd_job(tmp_path_factory, W, ["server:sgd"])["server:sgd"]:
        close(got, single["single:sgd"])


def test_server_update_adam_equals_one_process(tmp_path_factory, W, single):
    """The servers' Adam is MXNet's (epsilon outside the bias correction):
    equal to that rule in one process, and within 1e-3 of torch's Adam."""
    for got in kvsd_job(tmp_path_factory, W, ["server:adam"])["server:adam"]:
        close(got, single["single:mxadam"])
        close(got, single["single:adam"], 1e-3)


def test_server_update_adamw_equals_one_process(tmp_path_factory, W, single):
    """The servers' adamw is torch.optim.AdamW's rule (float64 model: float64
    on the servers)."""
    for got in kvsd_job(tmp_path_factory, W, ["server:adamw"])["server:adamw"]:
        close(got, single["single:adamw"])


@pytest.mark.parametrize("what", ["extra", "shape"])
def test_differing_model_names_the_parameter(what):
    r = launch(2, 1, [PYTHON, WORKER, "mismatch", "--what", what], timeout=120)
    lines = [worker_lines(r.stdout, w) for w in range(2)]
    errs = [l for ls in lines for l in ls if l.startswith("error: ")]
    assert len(errs) == 2, r.stdout + r.stderr
    if what == "extra":
        # worker 1's extra layer is '2.weight' and '2.bias'
        assert all("'2.weight'" in e or "'2.bias'" in e for e in errs), errs
        assert any("worker 1 has parameter '2.weight'" in e for e in errs), errs
    else:
        assert all("'0.weight'" in e and "(16, 6)" in e and "(15, 6)" in e for e in errs), errs


def test_dead_peer_during_step_raises_peer_dead():
    r = launch(2, 1, [PYTHON, WORKER, "deadpeer"],
               env=["PS_HEARTBEAT_INTERVAL=0.2", "PS_HEARTBEAT_TIMEOUT=2"], timeout=120)
    w0 = worker_lines(r.stdout, 0)
    ok = [l for l in w0 if l.startswith("ok deadpeer ")]
    assert ok, r.stdout[-3000:] + r.stderr[-3000:]
    assert "worker 1" in ok[0], ok[0]
    assert float(ok[0].split()[2]) < 30, ok[0]


def test_compressed_gradients_exact_broadcasts():
    """DistributedOptimizer(compression=...): the gradients go through the
    codec, kvsd.torch's own collectives (the model check, the broadcast) stay
    exact, and the parameters stay the same on every worker."""
    r = launch(2, 1, [PYTHON, WORKER, "compressed"], timeout=180)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    digests = []
    for w in range(2):
        lines = worker_lines(r.stdout, w)
        assert "broadcast exact" in lines, lines
        steps = [l for l in lines if l.startswith("step ")]
        assert len(steps) == 5 and all(" codec yes " in l for l in steps), steps
        assert sum(int(l.split()[-1]) for l in steps) > 0, steps  # some values went out
        digests += [l for l in lines if l.startswith("params ")]
    assert len(digests) == 2 and digests[0] == digests[1], digests


def test_broadcast_optimizer_state():
    """The root's Adam state (moments, step) and options (lr, betas) reach
    every worker; the next step is then the same everywhere (roots 0 and 2)."""
    r = launch(3, 2, [PYTHON, WORKER, "optstate", "--root", "0,2"], timeout=180)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for root in (0, 2):
        st = [[l for l in worker_lines(r.stdout, w) if l.startswith("state %d " % root)]
              for w in range(3)]
        af = [[l for l in worker_lines(r.stdout, w) if l.startswith("after %d " % root)]
              for w in range(3)]
        assert all(len(s) == 1 for s in st), r.stdout
        assert st[0] == st[1] == st[2], st
        assert "lr=0.01 betas=(0.8, 0.9)" in st[0][0], st[0]
        assert ".step=3 " in st[0][0] and ".exp_avg_sq=" in st[0][0], st[0]
        assert af[0] == af[1] == af[2] and af[0], af
