"""A worker of tests/python/test_compress.py: a one-hidden-layer network on
scikit-learn's digits in NumPy, data-parallel through kvsd with the gradient
compression given on the command line (a spec, or "dict:2bit:T" for MXNet's
dict form).  Every step each worker pushes its batch gradient and pulls the
sum (pushpull); every worker takes the same SGD step with it.  Rank 0 prints
RESULT {"acc": test accuracy in percent}."""
import json
import sys

import numpy as np

import kvsd


def main():
    spec = sys.argv[1]
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    if spec.startswith("dict:"):
        _, kind, t = spec.split(":")
        spec = {"type": kind, "threshold": float(t)}
    from sklearn.datasets import load_digits
    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = d.target
    cut = int(0.8 * len(x))
    xtr, ytr, xte, yte = x[:cut], y[:cut], x[cut:], y[cut:]
    kv = kvsd.create("dist_sync")
    if spec != "off":
        kv.set_gradient_compression(spec)
    rank, nw = kv.rank, kv.num_workers
    rng = np.random.default_rng(5)
    params = {"w1": (rng.standard_normal((64, 64)) * 0.1).astype(np.float32),
              "b1": np.zeros(64, np.float32),
              "w2": (rng.standard_normal((64, 10)) * 0.1).astype(np.float32),
              "b2": np.zeros(10, np.float32)}
    names = sorted(params)
    kv.init(names, [params[n] for n in names])
    kv.pull(names, out=[params[n] for n in names])
    kv.wait(names)
    batch, lr = 16, 0.5
    sums = {n: np.zeros_like(params[n]) for n in names}
    for epoch in range(epochs):
        order = np.random.default_rng(epoch).permutation(len(xtr))[rank::nw]
        for s in range(len(order) // batch):
            idx = order[s * batch:(s + 1) * batch]
            xb, yb = xtr[idx], ytr[idx]
            h = np.maximum(xb @ params["w1"] + params["b1"], 0)
            z = h @ params["w2"] + params["b2"]
            p = np.exp(z - z.max(1, keepdims=True))
            p /= p.sum(1, keepdims=True)
            p[np.arange(len(yb)), yb] -= 1
            p /= len(yb)
            dh = (p @ params["w2"].T) * (h > 0)
            grads = {"w2": h.T @ p, "b2": p.sum(0), "w1": xb.T @ dh, "b1": dh.sum(0)}
            g = [np.ascontiguousarray(grads[n], np.float32) for n in names]
            kv.pushpull(names, g, out=[sums[n] for n in names])
            kv.wait(names)
            for n in names:
                params[n] -= lr * sums[n] / nw
    h = np.maximum(xte @ params["w1"] + params["b1"], 0)
    acc = float((np.argmax(h @ params["w2"] + params["b2"], 1) == yte).mean() * 100)
    if rank == 0:
        print("RESULT " + json.dumps({"acc": acc}), flush=True)
    kv.close()


if __name__ == "__main__":
    main()
