#!/usr/bin/env python3
"""bench/torch_bench.py - one worker of bench/torch-vs-gloo.sh: an MLP with
about 25 million float32 parameters (1024-4096-4096-1024-10) trained on
synthetic data, data-parallel through kvsd.torch (DistributedOptimizer, under
a kvsd job's DMLC_* environment) or through PyTorch DDP with gloo (RANK,
WORLD_SIZE, MASTER_ADDR, MASTER_PORT).  SGD with momentum; BATCH samples per
worker and step; WARMUP steps, then STEPS timed ones.  Worker 0 prints

    RESULT backend=kvsd workers=2 params=25192458 batch=32 steps=6 s=1.234 samples_per_s=311.2 \
        user_s=16.13 sys_s=3.80 minflt=320003 vcsw=1394 ivcsw=1581

(the last five: its process's CPU seconds, minor page faults and voluntary
and involuntary context switches over its whole life, getrusage)

    python3 bench/torch_bench.py kvsd|gloo [--batch 32] [--steps 6] [--warmup 2]
"""
import argparse
import os
import resource
import sys
import time

import torch
import torch.nn as nn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("backend", choices=["kvsd", "gloo"])
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                          nn.Linear(4096, 1024), nn.ReLU(), nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if a.backend == "kvsd":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
        import kvsd.torch as kvt
        kvt.init()
        rank, W = kvt.rank(), kvt.size()
        opt = kvt.DistributedOptimizer(opt, model.named_parameters())
        fwd = model
    else:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        dist.init_process_group("gloo")
        rank, W = dist.get_rank(), dist.get_world_size()
        fwd = DDP(model)
    g = torch.Generator().manual_seed(100 + rank)
    x = torch.randn(a.batch, 1024, generator=g)
    y = torch.randint(0, 10, (a.batch,), generator=g)
    loss_fn = nn.CrossEntropyLoss()
    t0 = None
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            t0 = time.perf_counter()
        opt.zero_grad()
        loss_fn(fwd(x), y).backward()
        opt.step()
    s = time.perf_counter() - t0
    n = sum(p.numel() for p in model.parameters())
    if rank == 0:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        print("RESULT backend=%s workers=%d params=%d batch=%d steps=%d s=%.3f samples_per_s=%.1f"
              " user_s=%.2f sys_s=%.2f minflt=%d vcsw=%d ivcsw=%d"
              % (a.backend, W, n, a.batch, a.steps, s, W * a.batch * a.steps / s,
                 ru.ru_utime, ru.ru_stime, ru.ru_minflt, ru.ru_nvcsw, ru.ru_nivcsw), flush=True)
    if a.backend == "kvsd":
        kvt.shutdown()
    else:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
