#!/usr/bin/env python3
"""Train a small CNN on scikit-learn's digits data set (8x8 images, bundled:
no download), data-parallel over W workers.

  through kvsd (W workers, S servers):
      deploy/kvs-launch -n 2 -s 1 -- python3 examples/train_digits.py
  through PyTorch DDP (gloo) on the same shards, W local processes:
      python3 examples/train_digits.py --backend ddp --workers 2
  one process, no communication (give it W times the per-worker batch):
      python3 examples/train_digits.py --backend none --batch 64

Each epoch draws one permutation of the training set (from --seed and the
epoch); worker r of W takes every W-th sample from position r (its shard) and
at step t its batch is shard[t*B:(t+1)*B].  Together the W batches of step t
are exactly permutation[t*W*B:(t+1)*W*B], the batch one process with W*B
samples per step takes, so with the same seed the runs compute the same
gradients (up to the order of float additions).

kvsd: every parameter is a string key (its name); a hook on each parameter
pushes its gradient the moment the backward pass produces it (pushpull,
priority = position in the forward pass: the first layer, needed first by
the next forward pass, highest) and pulls the sum of all workers into a
buffer; after the backward pass one wait_all, then every worker takes the
same SGD step.  Rank 0 prints loss (mean over all workers' samples), test
accuracy and the training time of each epoch.
"""
import argparse
import json
import os
import socket
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def load_data():
    """Digits as (N, 1, 8, 8) float32 in [0, 1]; a fixed 80/20 split."""
    from sklearn.datasets import load_digits
    d = load_digits()
    x = torch.from_numpy((d.images / 16.0).astype(np.float32)).unsqueeze(1)
    y = torch.from_numpy(d.target.astype(np.int64))
    order = torch.from_numpy(np.random.RandomState(0).permutation(len(y)))
    n_test = len(y) // 5
    te, tr = order[:n_test], order[n_test:]
    return x[tr], y[tr], x[te], y[te]


# ---- how gradients are summed ---------------------------------------------------

class NoSync:
    """One process: the gradient of the loss is already the whole batch's."""

    rank, workers = 0, 1

    def setup(self, model):
        pass

    def backward(self, loss_sum, global_batch):
        (loss_sum / global_batch).backward()

    def total(self, values):
        return values

    def close(self):
        pass


class KvsdSync:
    """Gradients through kvsd: one pushpull per parameter from a hook."""

    def __init__(self, bucket=0):
        self.bucket, self.pending, self.pending_bytes = bucket, [], 0
        try:
            import kvsd
        except ImportError:  # a source tree: the package is in ../python
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                            "..", "python"))
            import kvsd
        self.kv = kvsd.create("dist_sync")
        self.rank, self.workers = self.kv.rank, self.kv.num_workers

    def setup(self, model):
        kv = self.kv
        named = list(model.named_parameters())
        self.names = [n for n, _ in named]
        self.params = [p for _, p in named]
        # rank 0's initial weights become everyone's
        kv.init(self.names, [p.detach() for p in self.params])
        kv.pull(self.names, out=[p.detach() for p in self.params])
        kv.wait_all()
        kv.init("loss", np.zeros(2))
        self.sums = [torch.empty_like(p) for p in self.params]
        n = len(self.params)
        for i, p in enumerate(self.params):
            p.register_hook(self._hook(self.names[i], self.sums[i], n - i))

    def _hook(self, name, out, priority):
        kv = self.kv

        def push(grad):
            if not grad.is_contiguous():
                grad = grad.contiguous()
            if self.bucket <= 0:
                kv.pushpull(name, grad, out=out, priority=priority)   # grad is kept alive
                return
            self.pending.append((name, grad, out, priority))
            self.pending_bytes += grad.numel() * grad.element_size()
            if self.pending_bytes >= self.bucket:
                self._flush()
        return push

    def _flush(self):
        """--bucket: the gradients gathered so far in one call (one message
        per server where the library fuses small keys)."""
        if self.pending:
            names, grads, outs, prios = zip(*self.pending)
            self.kv.pushpull(list(names), list(grads), out=list(outs), priority=max(prios))
            self.pending, self.pending_bytes = [], 0

    def backward(self, loss_sum, global_batch):
        (loss_sum / global_batch).backward()   # the hooks push as gradients appear
        self._flush()
        self.kv.wait_all()
        for p, s in zip(self.params, self.sums):
            p.grad = s

    def total(self, values):
        a = np.array(values, np.float64)
        self.kv.pushpull("loss", a)
        self.kv.wait("loss")
        return a.tolist()

    def close(self):
        self.kv.close()


class DdpSync:
    """Gradients through torch.distributed (gloo) and DistributedDataParallel."""

    def __init__(self, rank, workers):
        import torch.distributed as dist
        self.dist = dist
        dist.init_process_group("gloo", rank=rank, world_size=workers)
        self.rank, self.workers = rank, workers

    def setup(self, model):
        from torch.nn.parallel import DistributedDataParallel
        self.ddp = DistributedDataParallel(model)   # broadcasts rank 0's weights

    def backward(self, loss_sum, global_batch):
        # DDP averages over the workers: the mean over this worker's batch
        (loss_sum / (global_batch // self.workers)).backward()

    def total(self, values):
        t = torch.tensor(values, dtype=torch.float64)
        self.dist.all_reduce(t)
        return t.tolist()

    def close(self):
        self.dist.destroy_process_group()


# ---- training -----------------------------------------------------------------

def train(sync, args):
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    xtr, ytr, xte, yte = load_data()
    model = Net()
    sync.setup(model)
    forward = sync.ddp if isinstance(sync, DdpSync) else model
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    W, B = sync.workers, args.batch
    G = W * B
    steps = len(ytr) // G
    if steps == 0:
        raise SystemExit("train_digits: %d workers x batch %d is more than the %d training "
                         "samples" % (W, B, len(ytr)))
    if sync.rank == 0:
        print("train_digits: backend %s, %d worker(s), batch %d per worker (%d per step), "
              "%d steps per epoch, %d train / %d test samples"
              % (args.backend, W, B, G, steps, len(ytr), len(yte)), flush=True)
    history = []
    for epoch in range(args.epochs):
        perm = torch.randperm(len(ytr), generator=torch.Generator().manual_seed(
            args.seed * 1000 + epoch))
        shard = perm[sync.rank::W]
        model.train()
        t0 = time.perf_counter()
        loss_total = 0.0
        for s in range(steps):
            idx = shard[s * B:(s + 1) * B]
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(forward(xtr[idx]), ytr[idx], reduction="sum")
            sync.backward(loss, G)
            opt.step()
            loss_total += loss.item()
        took = time.perf_counter() - t0
        loss_sum, n = sync.total([loss_total, steps * B])
        model.eval()
        with torch.no_grad():
            acc = (model(xte).argmax(1) == yte).float().mean().item() * 100
        history.append({"epoch": epoch + 1, "loss": loss_sum / n, "acc": acc, "time": took})
        if sync.rank == 0:
            print("epoch %2d  loss %.4f  test accuracy %6.2f%%  time %.3f s"
                  % (epoch + 1, loss_sum / n, acc, took), flush=True)
    if sync.rank == 0 and args.json:
        times = [h["time"] for h in history[1:]] or [history[0]["time"]]
        print("RESULT " + json.dumps({
            "backend": args.backend, "workers": W, "batch": B, "seed": args.seed,
            "final_acc": history[-1]["acc"], "final_loss": history[-1]["loss"],
            "median_epoch_s": float(np.median(times)), "epochs": history}), flush=True)
    sync.close()


def ddp_worker(rank, workers, port, args):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    train(DdpSync(rank, workers), args)


def main():
    ap = argparse.ArgumentParser(
        description="Train a small CNN on scikit-learn's digits, data-parallel through kvsd "
                    "(under kvs-launch), PyTorch DDP (gloo), or in one process.",
        epilog="kvsd: deploy/kvs-launch -n 2 -s 1 -- python3 examples/train_digits.py")
    ap.add_argument("--backend", choices=("kvsd", "ddp", "none"), default="kvsd",
                    help="kvsd (run it under kvs-launch), ddp (starts --workers processes), "
                         "none (one process)")
    ap.add_argument("--workers", type=int, default=2,
                    help="ddp: number of processes (kvsd takes it from the job)")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32, help="samples per worker per step")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    ap.add_argument("--bucket", type=int, default=0, metavar="BYTES",
                    help="kvsd: gather gradients until BYTES are ready, then push them in one "
                         "call (0: one call per gradient, as the backward pass makes it)")
    ap.add_argument("--json", action="store_true",
                    help="end with a line 'RESULT {json}' (rank 0)")
    args = ap.parse_args()
    if args.epochs < 1 or args.batch < 1 or args.workers < 1 or args.threads < 1:
        ap.error("--epochs, --batch, --workers and --threads must be positive")
    if args.backend == "kvsd":
        if not os.environ.get("DMLC_ROLE"):
            ap.error("--backend kvsd runs as a worker of a kvsd job: start it with "
                     "deploy/kvs-launch -n W -s S -- python3 %s" % sys.argv[0])
        train(KvsdSync(args.bucket), args)
    elif args.backend == "ddp":
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_gloo_available():
            sys.exit("train_digits: this PyTorch build has no torch.distributed gloo backend")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        import torch.multiprocessing as mp
        mp.spawn(ddp_worker, args=(args.workers, port, args), nprocs=args.workers)
    else:
        train(NoSync(), args)


if __name__ == "__main__":
    main()
