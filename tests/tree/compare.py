#!/usr/bin/env python3
"""Compare kvs-topo's planner with the MXNet-like reference planner.

usage: tests/tree/compare.py KVS_TOPO FILE.json [FILE.json ...]
Prints one markdown row per topology and mode:
load / load over the fractional packing bound / trees / rounds / planning ms,
ours (weighted plans) then the reference, and a summary (how often ours is
better, equal, worse)."""
import json, subprocess, sys, tempfile, os

def run(topo, path, mode, ref):
    cmd = [topo, "plan", "--topologies", path, "--mode", mode, "--json"] + (["--reference"] if ref else [])
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    plans = json.loads(out)["results"]
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(out)
    sc = subprocess.run([topo, "score", "--topologies", path, "--trees", f.name, "--json"],
                        capture_output=True, text=True).stdout
    os.unlink(f.name)
    return plans, json.loads(sc)["scores"]

def fmt(p, s):
    if not s["valid"]:
        return "invalid | | | | %.1f" % p["time_ms"]
    return "%.4g | %.4f | %d | %d | %.1f" % (s["load"], s["ratio"], s["trees"], s["rounds"],
                                             p["time_ms"])

def main():
    topo, files = sys.argv[1], sys.argv[2:]
    print("| topology | mode | load | ratio | trees | rounds | ms | ref load | ref ratio | ref trees | ref rounds | ref ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    better = equal = worse = 0
    worst_ms = {}
    for path in files:
        for mode in ("kl", "backtrack"):
            po, so = run(topo, path, mode, False)
            pr, sr = run(topo, path, mode, True)
            for a, b, c, d in zip(po, so, pr, sr):
                print("| %s | %s | %s | %s |" % (a["topology"], mode, fmt(a, b), fmt(c, d)))
                n = a["n"]
                worst_ms[n] = max(worst_ms.get(n, 0), a["time_ms"])
                if not b["valid"] or not d["valid"]:
                    continue
                x, y = b["load"], d["load"]
                if x < y * (1 - 1e-9): better += 1
                elif x > y * (1 + 1e-9): worse += 1
                else: equal += 1
    print()
    print("reduce_load_time vs reference: better %d, equal %d, worse %d" % (better, equal, worse))
    print("max planning time by N (ms): " + ", ".join("N=%d: %.1f" % (k, v) for k, v in sorted(worst_ms.items())))

main()
