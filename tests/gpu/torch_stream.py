"""The Python binding with torch CUDA tensors on a side stream (run by
tests/gpu/run.sh on a GPU machine; exit 0 pass, 1 fail, 77 skip).

A side stream holds a long kernel (torch.cuda._sleep) followed by the fill of
the gradient, so the gradient's memory is stale for a while: a push that
does not wait for torch's current stream sums stale memory.  Then the same
through __cuda_array_interface__ (its `stream` field) from a thread that
never used CUDA, and a pull into a tensor on the side stream."""
import sys
import threading

try:
    import torch
except ImportError:
    print("SKIP torch is not installed")
    sys.exit(77)
if not torch.cuda.is_available():
    print("SKIP torch sees no CUDA device")
    sys.exit(77)

import kvsd

n = 1 << 24
dev = torch.device("cuda", 0)
kv = kvsd.create("device")
kv.init("w", torch.zeros(n, device=dev))
side = torch.cuda.Stream(dev)
with torch.cuda.stream(side):
    g = torch.empty(n, device=dev)
    torch.cuda._sleep(int(5e8))        # about a quarter second of GPU time
    g.fill_(3.0)
    kv.push("w", g)                    # must wait for the side stream
    out = torch.zeros(n, device=dev)
    kv.pull("w", out=out)
    kv.wait("w")
torch.cuda.synchronize()
ok1 = bool(torch.equal(out, torch.full_like(out, 3.0)))


class CAI:
    """Only __cuda_array_interface__, version 3 with the stream that writes
    it (torch's own may be version 2, without a stream); no device field:
    kvsd asks the driver which device holds the pointer."""
    def __init__(self, t, stream):
        self.t = t
        cai = dict(t.__cuda_array_interface__)
        cai.update(version=3, stream=stream.cuda_stream)
        self.__cuda_array_interface__ = cai


with torch.cuda.stream(side):
    h = torch.empty(n, device=dev)
    torch.cuda._sleep(int(5e8))
    h.fill_(4.0)
    wrapped = CAI(h, side)
errors = []


def push():                            # a thread that never used CUDA
    try:
        kv.push("w", wrapped)
        kv.wait("w")
    except Exception as e:             # noqa: reported below
        errors.append(e)


t = threading.Thread(target=push)
t.start()
t.join()
out2 = torch.zeros(n, device=dev)
kv.pull("w", out=out2)
kv.wait("w")
torch.cuda.synchronize()
ok2 = not errors and bool(torch.equal(out2, torch.full_like(out2, 4.0)))
kv.close()
print("%s torch side stream: %s; __cuda_array_interface__ stream from a fresh thread: %s"
      % ("PASS" if ok1 and ok2 else "FAIL", "exact" if ok1 else "STALE",
         "exact" if ok2 else (errors[0] if errors else "STALE")))
sys.exit(0 if ok1 and ok2 else 1)
