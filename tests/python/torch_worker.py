"""A worker of the kvsd.torch tests (run under kvs-launch by test_torch.py,
or alone for the single-process reference and the DDP-gloo runs).

    torch_worker.py train --runs RUN,RUN,... --out FILE
        RUN: MODE:OPT[:VARIANT], OPT sgd, adam or mxadam, VARIANT clip,
        accum or sum (see RUNS_HELP); MODE:
           single  (one process, the whole batch: the reference)
           opt     (kvsd.torch.DistributedOptimizer)
           server  (DistributedOptimizer(server_update=True))
           hook    (DDP with kvsd.torch.allreduce_hook)
           gloo    (DDP with gloo; RANK, WORLD_SIZE, KVS_TEST_INIT set by the test)
        Writes FILE-MODE-OPT[-VARIANT].<rank>.npz with the parameters after
        the last step of each run.
    torch_worker.py mismatch   worker 1's model differs; prints the errors
    torch_worker.py deadpeer   worker 1 dies before backward; worker 0's
                               step() must raise kvsd.PeerDead
    torch_worker.py optstate --root R,R   broadcast_optimizer_state from each R
    torch_worker.py compressed   DistributedOptimizer(compression="2bit ...")
                               on a float32 model that differs per worker:
                               broadcast_parameters, then STEPS steps

Data: step s draws a global batch of G = 12 samples from seed 1000 + s;
worker r of W takes samples r, r + W, ... (disjoint shards whose union is
the batch).  The model is float64, so sums differ from one process's only
in the order of additions.
"""
import argparse
import os
import sys
import time
import traceback

import numpy as np
import torch
import torch.nn as nn

G = 12
STEPS = 5


def make_model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 8), nn.Tanh(),
                         nn.Linear(8, 3)).double()


def batch(step):
    g = torch.Generator().manual_seed(1000 + step)
    return (torch.randn(G, 6, generator=g, dtype=torch.float64),
            torch.randn(G, 3, generator=g, dtype=torch.float64))


class MxAdam(torch.optim.Optimizer):
    """The servers' Adam (kvs.h: MXNet's rule; epsilon outside the bias
    correction), for the reference of server_update with Adam."""

    def __init__(self, params, lr, wd, b1=0.9, b2=0.999, eps=1e-8):
        super().__init__(params, dict(lr=lr, wd=wd, b1=b1, b2=b2, eps=eps))

    @torch.no_grad()
    def step(self, closure=None):
        for g in self.param_groups:
            for p in g["params"]:
                st = self.state[p]
                if not st:
                    st["t"], st["m"], st["v"] = 0, torch.zeros_like(p), torch.zeros_like(p)
                st["t"] += 1
                t = st["t"]
                grad = p.grad + g["wd"] * p
                st["m"].mul_(g["b1"]).add_((1 - g["b1"]) * grad)
                st["v"].mul_(g["b2"]).add_((1 - g["b2"]) * grad * grad)
                lr_t = g["lr"] * (1 - g["b2"] ** t) ** 0.5 / (1 - g["b1"] ** t)
                p.sub_(lr_t * st["m"] / (st["v"].sqrt() + g["eps"]))


def make_opt(name, params):
    if name == "mxadam":
        return MxAdam(params, lr=0.02, wd=1e-3)
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.1, momentum=0.9, weight_decay=1e-3)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=0.02, weight_decay=1e-2)
    return torch.optim.Adam(params, lr=0.02, weight_decay=1e-3)


def save(model, out, rank):
    np.savez(out + ".%d.npz" % rank,
             **{n: p.detach().numpy() for n, p in model.named_parameters()})


RUNS_HELP = """a run is MODE:OPT[:VARIANT]; VARIANT: clip (synchronize, clip to
0.05, step in skip_synchronize), accum (2 backward passes per step), sum
(op=Sum, each worker's loss divided by W)"""


def train_one(run, kvt, rank, W, out):
    mode, opt_name, *variant = run.split(":")
    variant = variant[0] if variant else ""
    accum = 2 if variant == "accum" else 1
    # workers other than 0 start from other weights: the broadcast must fix them
    model = make_model(0 if mode in ("single", "gloo") else rank)
    fwd = model
    opt = make_opt(opt_name, model.parameters())
    if mode in ("opt", "server"):
        opt = kvt.DistributedOptimizer(opt, model.named_parameters(),
                                       backward_passes_per_step=accum,
                                       op=kvt.Sum if variant == "sum" else kvt.Average,
                                       server_update=mode == "server")
    elif mode == "hook":
        from torch.nn.parallel import DistributedDataParallel as DDP
        kvt.broadcast_parameters(model.state_dict(), root_rank=0)
        fwd = DDP(model)
        fwd.register_comm_hook(None, kvt.allreduce_hook)
    elif mode == "gloo":
        from torch.nn.parallel import DistributedDataParallel as DDP
        fwd = DDP(model)
    for step in range(STEPS):
        x, y = batch(step)
        x, y = x[rank::W], y[rank::W]
        opt.zero_grad()
        for k in range(accum):
            xs, ys = x[k::accum], y[k::accum]
            loss = ((fwd(xs) - ys) ** 2).mean() / accum
            if variant == "sum":
                loss = loss / W
            loss.backward()
        if variant == "clip":
            if mode in ("opt", "server"):
                opt.synchronize()
                nn.utils.clip_grad_norm_(model.parameters(), 0.05)
                with opt.skip_synchronize():
                    opt.step()
            else:
                nn.utils.clip_grad_norm_(model.parameters(), 0.05)
                opt.step()
        else:
            opt.step()
    save(model, "%s-%s" % (out, run.replace(":", "-")), rank)


def train(a):
    import kvsd.torch as kvt
    runs = a.runs.split(",")
    modes = set(r.split(":")[0] for r in runs)
    if modes & {"opt", "server", "hook"}:
        kvt.init()
        rank, W = kvt.rank(), kvt.size()
        if "hook" in modes:
            kvt.init_process_group()
    elif "gloo" in modes:
        import torch.distributed as dist
        rank, W = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        dist.init_process_group("gloo", init_method=os.environ["KVS_TEST_INIT"], rank=rank,
                                world_size=W)
    else:
        rank, W = 0, 1
    for run in runs:
        train_one(run, kvt, rank, W, a.out)
    if kvt.is_initialized():
        kvt.shutdown()
    print("done train", flush=True)


def mismatch(a):
    import kvsd.torch as kvt
    kvt.init()
    r = kvt.rank()
    if a.what == "shape":
        model = nn.Sequential(nn.Linear(6, 16 if r == 0 else 15), nn.Linear(16 if r == 0 else 15, 3))
    else:  # worker 1 has one more layer
        layers = [nn.Linear(6, 4), nn.Linear(4, 3)] + ([nn.Linear(3, 3)] if r == 1 else [])
        model = nn.Sequential(*layers)
    try:
        kvt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                 model.named_parameters())
        print("no error", flush=True)
    except ValueError as e:
        print("error: %s" % e, flush=True)
    kvt.shutdown()


def deadpeer(a):
    import kvsd
    import kvsd.torch as kvt
    kvt.init()
    model = make_model(0)
    opt = kvt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   model.named_parameters())
    if kvt.rank() == 1:
        print("leaving without close", flush=True)
        os._exit(0)
    x, y = batch(0)
    ((model(x) - y) ** 2).mean().backward()
    t0 = time.time()
    try:
        opt.step()
        print("no error", flush=True)
    except kvsd.PeerDead as e:
        print("ok deadpeer %.2f %s" % (time.time() - t0, e), flush=True)
    try:
        kvt.shutdown()
    except kvsd.Error:
        pass


def optstate(a):
    import kvsd.torch as kvt
    kvt.init()
    for root in a.root.split(","):
        optstate_from(kvt, int(root))
    kvt.shutdown()


def optstate_from(kvt, root):
    """Worker root trains 3 steps; the others have fresh optimizers with
    another lr; after the broadcast every worker prints the same digest."""
    r = kvt.rank()
    model = make_model(0)
    opt = torch.optim.Adam(model.parameters(), lr=0.01 if r == root else 0.5,
                           betas=(0.8, 0.9) if r == root else (0.9, 0.999))
    if r == root:
        for step in range(3):
            x, y = batch(step)
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()
    kvt.broadcast_parameters(model.state_dict(), root_rank=root)
    kvt.broadcast_optimizer_state(opt, root_rank=root)
    sd = opt.state_dict()
    parts = ["lr=%r betas=%r" % (sd["param_groups"][0]["lr"], tuple(sd["param_groups"][0]["betas"]))]
    for pid in sorted(sd["state"]):
        for k in sorted(sd["state"][pid]):
            v = sd["state"][pid][k]
            v = v.double().sum().item() if torch.is_tensor(v) else v
            parts.append("%d.%s=%.17g" % (pid, k, v))
    parts.append("w=%.17g" % sum(p.detach().sum().item() for p in model.parameters()))
    print("state %d " % root + " ".join(parts), flush=True)
    # and the next step is the same everywhere
    x, y = batch(7)
    opt.zero_grad()
    ((model(x) - y) ** 2).mean().backward()
    opt.step()
    print("after %d %.17g" % (root, sum(p.detach().sum().item() for p in model.parameters())),
          flush=True)


def compressed(a):
    """Every worker starts from another model; with the gradients
    compressed, broadcast_parameters still makes rank 0's everyone's,
    exactly (kvsd.torch's own keys are exempt); each step's averaged
    gradient is made of the codec's values (k T / W, |k| <= W); the
    parameters stay the same bits on every worker."""
    import hashlib

    import kvsd.torch as kvt
    kvt.init()
    rank, W, T = kvt.rank(), kvt.size(), 0.01
    model = make_model(seed=rank).float()
    opt = kvt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   model.named_parameters(),
                                   compression="2bit threshold=%g" % T)
    kvt.broadcast_parameters(model.state_dict(), root_rank=0)
    ref = make_model(seed=0).float()
    same = all(torch.equal(p, q) for p, q in zip(model.parameters(), ref.parameters()))
    print("broadcast %s" % ("exact" if same else "differs"), flush=True)
    for step in range(STEPS):
        x, y = batch(step)
        opt.zero_grad()
        ((model(x[rank::W].float()) - y[rank::W].float()) ** 2).mean().backward()
        opt.synchronize()
        k = torch.cat([p.grad.flatten() for p in model.parameters()]).double() * W / T
        codec = bool((k - k.round()).abs().max() < 1e-3 and k.abs().max() <= W + 1e-3)
        print("step %d codec %s nonzero %d" % (step, "yes" if codec else "no",
                                               int((k.round() != 0).sum())), flush=True)
        with opt.skip_synchronize():
            opt.step()
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().numpy().tobytes())
    print("params %s" % h.hexdigest(), flush=True)
    kvt.shutdown()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario")
    ap.add_argument("--runs", default="single:sgd", help=RUNS_HELP)
    ap.add_argument("--out", default="")
    ap.add_argument("--what", default="extra")
    ap.add_argument("--root", default="0")
    a = ap.parse_args()
    torch.set_num_threads(1)
    try:
        {"train": train, "mismatch": mismatch, "deadpeer": deadpeer, "optstate": optstate,
         "compressed": compressed}[a.scenario](a)
    except Exception:
        traceback.print_exc()
        sys.exit(1)


if __name__ == "__main__":
    main()
