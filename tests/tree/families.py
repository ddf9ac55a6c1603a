#!/usr/bin/env python3
"""Generate link matrices of the machine families the tree planner targets.

usage: tests/tree/families.py [--seed S] [--count K] [--max-n N] [--family F ...]
Writes {"topologies": [{"name", "n", "weights"}]} (kvs-topo's input) to stdout.

Every topology is drawn at random within its family (sizes, link counts,
weight jitter where the family has it) and its GPUs are relabelled by a
random permutation, so a planner cannot be tuned to the numbering.  Weights
follow kvs-topo parse-smi: NV# -> 1 + #, PCIe/SMP paths -> 1 (2 inside a
PCIe switch where the family distinguishes it), network rails -> 1 with
NVLink/NVSwitch inside a node much faster.

Families: dgx1p (DGX-1 P100: hybrid cube mesh, one NVLink per pair),
dgx1v (DGX-1 V100: the same mesh with double links), nvswitch (all-to-all,
N in 4..36), pcie_bridge (PCIe tree, NVLink bridges between GPU pairs),
pcie2s (two sockets of PCIe switches), xgmi (AMD meshes: MI250-like 8 GCDs,
MI300-like fully connected, random degree), rails (nodes of NVSwitch GPUs
joined by one rail per local index: 2x8, 4x8, 8x8 and random), ring_weak
(a ring closed by one weak link), star (a hub with weak leaf-to-leaf links),
random (connected random graphs with mixed weights)."""
import argparse, json, random

def sym(n):
    return [[0.0] * n for _ in range(n)]

def link(w, i, j, x):
    w[i][j] = w[j][i] = float(x)

def cube_mesh(double):
    """DGX-1 hybrid cube mesh: two quads (0-3, 4-7) fully linked, i <-> i+4."""
    w = sym(8)
    for q in (0, 4):
        for a in range(4):
            for b in range(a + 1, 4):
                link(w, q + a, q + b, 2)
    for i in range(4):
        link(w, i, i + 4, 2)
    if double:  # V100: 6 links per GPU, 2 of them doubled
        for i, j in ((0, 3), (1, 2), (4, 7), (5, 6), (0, 4), (1, 5), (2, 6), (3, 7)):
            link(w, i, j, 3)
    return w

def nvswitch(rng):
    n = rng.choice([4, 8, 8, 16, 16, 24, 32, 36, 48, 64])
    x = rng.choice([7, 13, 19])  # NV6, NV12, NV18
    w = sym(n)
    for i in range(n):
        for j in range(i + 1, n):
            link(w, i, j, x)
    return "nvswitch%d" % n, w

def pcie_bridge(rng):
    n = rng.choice([4, 6, 8, 8, 10, 16])
    w = sym(n)
    per = rng.choice([2, 4, n])  # GPUs per PCIe switch
    for i in range(n):
        for j in range(i + 1, n):
            link(w, i, j, 2 if i // per == j // per else 1)
    nb = rng.choice([1, 2, 3, 4])
    for i in range(0, n - 1, 2):
        link(w, i, i + 1, 1 + nb)
    return "pcie_bridge%d" % n, w

def pcie2s(rng):
    k = rng.choice([2, 4, 8, 16])  # GPUs per socket
    n = 2 * k
    w = sym(n)
    per = rng.choice([2, 4, k])
    for i in range(n):
        for j in range(i + 1, n):
            if i // k != j // k:
                link(w, i, j, 1)
            else:
                link(w, i, j, 2 if i // per == j // per else 1.5)
    return "pcie2s_%d" % n, w

def xgmi(rng):
    kind = rng.choice(["mi250", "mi300", "random"])
    if kind == "mi250":  # 8 GCDs: in-package pairs with 4 links, others 1-2
        n = 8
        w = sym(n)
        for i in range(0, 8, 2):
            link(w, i, i + 1, 5)
        for i in range(8):
            for j in (i ^ 2, i ^ 4, i ^ 6):
                if w[i][j] == 0:
                    link(w, i, j, rng.choice([2, 3]))
        return "xgmi_mi250", w
    if kind == "mi300":
        n = rng.choice([4, 8])
        w = sym(n)
        for i in range(n):
            for j in range(i + 1, n):
                link(w, i, j, rng.choice([2, 2, 3]))
        return "xgmi_mi300_%d" % n, w
    n = rng.choice([8, 16, 32])
    w = sym(n)
    for i in range(n):  # ring for connectivity, then random chords
        link(w, i, (i + 1) % n, rng.choice([2, 3]))
    for i in range(n):
        for j in range(i + 2, n):
            if rng.random() < 3.0 / n:
                link(w, i, j, rng.choice([2, 3]))
    return "xgmi_mesh%d" % n, w

def rails(rng):
    nodes, per = rng.choice([(2, 8), (2, 8), (4, 8), (8, 8), (2, 4), (4, 4), (3, 8)])
    n = nodes * per
    w = sym(n)
    fast = rng.choice([10, 19])
    for a in range(nodes):
        for i in range(per):
            for j in range(i + 1, per):
                link(w, a * per + i, a * per + j, fast)
    for i in range(per):
        for a in range(nodes):
            for b in range(a + 1, nodes):
                link(w, a * per + i, b * per + i, 1)
    return "rails%dx%d" % (nodes, per), w

def ring_weak(rng):
    n = rng.choice([6, 8, 16, 24, 32, 48, 64])
    x = rng.choice([2, 3])
    w = sym(n)
    for i in range(n - 1):
        link(w, i, i + 1, x)
    link(w, n - 1, 0, rng.choice([0.01, 0.1, 0.5]))
    return "ring_weak%d" % n, w

def star(rng):
    n = rng.choice([5, 8, 16, 32, 64])
    w = sym(n)
    for i in range(1, n):
        link(w, 0, i, rng.choice([4, 5]))
    for i in range(1, n):  # weak leaf ring
        j = i + 1 if i + 1 < n else 1
        if w[i][j] == 0:
            link(w, i, j, 0.5)
    return "star%d" % n, w

def random_graph(rng):
    n = rng.choice([8, 12, 16, 24, 32, 48, 64])
    d = rng.choice([0.1, 0.3, 1.0])
    w = sym(n)
    perm = list(range(n))
    rng.shuffle(perm)
    for i in range(1, n):
        link(w, perm[i], perm[rng.randrange(i)], rng.choice([1, 2, 3]))
    for i in range(n):
        for j in range(i + 1, n):
            if w[i][j] == 0 and rng.random() < d:
                link(w, i, j, rng.choice([1, 2, 3]))
    return "random%d_d%g" % (n, d), w

FAMILIES = {
    "dgx1p": lambda rng: ("dgx1p", cube_mesh(False)),
    "dgx1v": lambda rng: ("dgx1v", cube_mesh(True)),
    "nvswitch": nvswitch, "pcie_bridge": pcie_bridge, "pcie2s": pcie2s, "xgmi": xgmi,
    "rails": rails, "ring_weak": ring_weak, "star": star, "random": random_graph,
}

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=1, help="topologies per family")
    ap.add_argument("--max-n", type=int, default=64)
    ap.add_argument("--family", action="append", choices=sorted(FAMILIES))
    a = ap.parse_args()
    rng = random.Random(a.seed)
    out = []
    for fam in a.family or sorted(FAMILIES):
        made = 0
        while made < a.count:
            name, w = FAMILIES[fam](rng)
            n = len(w)
            if n > a.max_n:
                continue
            perm = list(range(n))
            rng.shuffle(perm)
            pw = [[w[perm[i]][perm[j]] for j in range(n)] for i in range(n)]
            out.append({"name": "%s-s%d-%d" % (name, a.seed, made), "family": fam, "n": n,
                        "weights": [[int(x) if x == int(x) else x for x in r] for r in pw]})
            made += 1
    json.dump({"topologies": out}, __import__("sys").stdout, separators=(",", ":"))
    print()

main()
