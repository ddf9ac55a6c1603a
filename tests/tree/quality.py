#!/usr/bin/env python3
"""Plan topologies with kvs-topo in both modes and check the quality targets.

usage: tests/tree/quality.py KVS_TOPO FILE.json [--markdown] [--extra ARGS]
For every topology and mode (kl, backtrack): the predicted bottleneck load of
the weighted plan over the fractional packing bound, the tree count and the
planning time.  Targets: load <= 1.10x the bound (<= 1.01x on all-to-all
uniform matrices), nothing above 1.5x, at most 4N trees, <= 50 ms.
Prints one row per family (worst ratio, median ratio, worst ms, most trees)
and the misses; exit status 1 when a quality target (not time) is missed."""
import json, subprocess, sys, statistics

def uniform(w):
    vals = {x for i, r in enumerate(w) for j, x in enumerate(r) if i != j}
    return len(vals) == 1 and 0 not in vals

def main():
    topo, path = sys.argv[1], sys.argv[2]
    md = "--markdown" in sys.argv
    extra = sys.argv[sys.argv.index("--extra") + 1].split() if "--extra" in sys.argv else []
    topos = {t["name"]: t for t in json.load(open(path))["topologies"]}
    rows, misses, slow = {}, [], []
    for mode in ("kl", "backtrack"):
        out = subprocess.run([topo, "plan", "--topologies", path, "--mode", mode, "--json"] + extra,
                             capture_output=True, text=True)
        for r in json.loads(out.stdout)["results"]:
            t = topos[r["topology"]]
            fam = t.get("family", t["name"].split("-")[0])
            if not r["ok"]:
                misses.append("%s %s: failed: %s" % (r["topology"], mode, r["error"]))
                continue
            ratio = r["load"] / r["lb_frac"]
            cap = 1.01 if uniform(t["weights"]) else 1.10
            rows.setdefault(fam, []).append((ratio, r["time_ms"], len(r["trees"]), t["n"]))
            if ratio > cap * (1 + 1e-9) or len(r["trees"]) > 4 * t["n"]:
                misses.append("%s %s: %.4fx the bound (target %.2f), %d trees" %
                              (r["topology"], mode, ratio, cap, len(r["trees"])))
            if r["time_ms"] > 50:
                slow.append("%s %s: %.1f ms" % (r["topology"], mode, r["time_ms"]))
    if md:
        print("| family | plans | N | worst ratio | median ratio | worst ms | most trees |")
        print("|---|---|---|---|---|---|---|")
    for fam in sorted(rows):
        v = rows[fam]
        ns = sorted({x[3] for x in v})
        line = (fam, len(v), "%d..%d" % (ns[0], ns[-1]), max(x[0] for x in v),
                statistics.median(x[0] for x in v), max(x[1] for x in v), max(x[2] for x in v))
        if md:
            print("| %s | %d | %s | %.4f | %.4f | %.1f | %d |" % line)
        else:
            print("%-12s plans %3d  N %-6s worst %.4f  median %.4f  worst %.1f ms  trees %d" % line)
    for m in misses:
        print("MISS " + m)
    for s in slow:
        print("SLOW " + s)
    sys.exit(1 if misses else 0)

main()
