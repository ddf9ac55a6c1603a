"""A worker of tests/python/test_elastic.py: kvsd.torch.elastic training of a
small MLP on 10 Gaussian blobs (16 features, seeded: no download), under
kvs-launch with KVS_ELASTIC=1.

  elastic_worker.py WANT EPOCHS [--die-at EPOCH.BATCH]

Worker DMLC_WORKER_ID=2 with --die-at SIGKILLs itself at that step in its
first life (a file in $KVS_TEST_DIR marks it); kvs-launch --restarts starts
it again and it joins the running job.  The members train while the epoch
is below EPOCHS or fewer than WANT workers are in (every member decides
alike from the synced state) and until one whole epoch ran with WANT, so a
joiner trains before the end.  Each
worker prints "accuracy A changes C workers W epochs E" at the end."""
import os
import signal
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import kvsd
import kvsd.torch as kt

B = 16
N_TRAIN, N_TEST, D, K = 1536, 512, 16, 10


def blobs(seed):
    rng = np.random.default_rng(seed)
    centers = np.random.default_rng(7).normal(0, 2.0, (K, D))
    y = rng.integers(0, K, N_TRAIN + N_TEST)
    x = centers[y] + rng.normal(0, 1.5, (len(y), D))
    x, y = torch.tensor(x, dtype=torch.float32), torch.tensor(y)
    return x[:N_TRAIN], y[:N_TRAIN], x[N_TRAIN:], y[N_TRAIN:]


def main():
    want, epochs = int(sys.argv[1]), int(sys.argv[2])
    die_at = None
    if len(sys.argv) > 4 and sys.argv[3] == "--die-at":
        e, b = sys.argv[4].split(".")
        die_at = (int(e), int(b))
    mark = os.path.join(os.environ.get("KVS_TEST_DIR", "."), "died")
    first_life = not os.path.exists(mark)
    dies = die_at is not None and os.environ.get("DMLC_WORKER_ID") == "2" and first_life
    xtr, ytr, xte, yte = blobs(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(D, 32), nn.ReLU(), nn.Linear(32, K))
    kt.init()
    opt = kt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9),
                                  named_parameters=model.named_parameters())
    state = kt.elastic.State(model, opt, epoch=0, batch=0, full=0)

    @kt.elastic.run
    def train(state):
        while (state.epoch < epochs or state.full < 1) and state.epoch < 200:
            W, r = kt.size(), kt.rank()
            perm = torch.randperm(N_TRAIN, generator=torch.Generator().manual_seed(state.epoch))
            shard = perm[r::W]
            steps = (N_TRAIN // W) // B  # the same on every member
            while state.batch < steps:
                if dies and (state.epoch, state.batch) == die_at:
                    open(mark, "w").close()
                    print("dying at epoch %d batch %d" % die_at, flush=True)
                    os.kill(os.getpid(), signal.SIGKILL)
                idx = shard[state.batch * B:(state.batch + 1) * B]
                opt.zero_grad()
                F.cross_entropy(model(xtr[idx]), ytr[idx]).backward()
                opt.step()
                state.batch += 1
                state.commit()
            state.batch = 0
            state.epoch += 1
            state.full = state.full + 1 if W == want else 0  # epochs in a row with all in
            state.commit()

    train(state)
    with torch.no_grad():
        acc = (model(xte).argmax(1) == yte).float().mean().item()
    print("accuracy %.4f changes %d workers %d epochs %d joiner %d" % (
        acc, train.membership_changes, kt.size(), state.epoch, int(not first_life)), flush=True)
    kt.shutdown()


if __name__ == "__main__":
    main()
