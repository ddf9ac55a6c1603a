"""A worker of test_torch_inflight.py: torch CPU tensors given to push and
pull are changed while the operations are in flight.  Worker 0 pushes and
pulls keys "a" and "b" (4 MiB each: memory glibc gives back to the system
when freed) while worker 1 holds the rounds open; it then tries to grow the
pull output of "a" (resize_ must be refused: the library writes into that
memory; the sums are read through a view made before, since torch may leave
the tensor's own sizes changed by a refused resize_), drops its only reference to the output of "b" and to the pushed
tensor of "b" and allocates over them, and grows a pushed tensor of "c";
only then does worker 1 push (file go in $INFLIGHT_DIR).  Every wait
returns, the output of "a" holds the exact sums, and the process lives.
Prints "ok NAME" per check, "FAIL NAME: why" otherwise."""
import gc
import os
import sys
import time

import numpy as np
import torch

import kvsd

N = 1 << 20
DIR = os.environ["INFLIGHT_DIR"]


def main():
    kv = kvsd.create("dist_sync")
    r, W = kv.rank, kv.num_workers
    for k in ("a", "b", "c"):
        kv.init(k, torch.zeros(N))
    kv.barrier()
    go = os.path.join(DIR, "go")
    if r != 0:
        end = time.monotonic() + 60
        while not os.path.exists(go):
            if time.monotonic() > end:
                print("FAIL go: worker 0 never said go")
                return 1
            time.sleep(0.01)
        for k in ("a", "b", "c"):
            kv.push(k, torch.full((N,), float(r + 1)))
            kv.pull(k, out=torch.zeros(N))
        kv.wait_all()
        print("ok pushed")
        kv.close()
        return 0
    fails = 0
    out_a = torch.zeros(N)
    kv.push("a", torch.full((N,), 1.0))
    kv.pull("a", out=out_a)
    view_a = out_a[:]   # torch may leave out_a's sizes changed by a refused resize_
    try:
        out_a.resize_(16 * N)
        print("FAIL resize-output: resize_ of an output in flight was allowed")
        fails += 1
    except RuntimeError as e:
        print("ok resize-output refused: %s" % str(e).splitlines()[0])
    out_b, in_b = torch.zeros(N), torch.full((N,), 1.0)
    kv.push("b", in_b)
    kv.pull("b", out=out_b)
    del out_b, in_b
    gc.collect()
    junk = [torch.full((N,), 7.0) for _ in range(8)]
    in_c = torch.full((N,), 1.0)
    kv.push("c", in_c)
    kv.pull("c", out=torch.zeros(N))
    try:
        in_c.resize_(16 * N)
        print("FAIL resize-input: resize_ of a pushed tensor in flight was allowed")
        fails += 1
    except RuntimeError as e:
        print("ok resize-input refused: %s" % str(e).splitlines()[0])
    open(go, "w").close()
    kv.wait(["a", "b", "c"])
    want = float(sum(w + 1 for w in range(W)))
    bad = int((view_a.numpy() != want).sum())
    if bad:
        print("FAIL sums: %d of %d elements of a differ from %g" % (bad, N, want))
        fails += 1
    else:
        print("ok sums")
    if any(float(j[0]) != 7.0 or float(j[-1]) != 7.0 for j in junk):
        print("FAIL junk: memory allocated after the del was written")
        fails += 1
    else:
        print("ok junk")
    kv.close()
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
