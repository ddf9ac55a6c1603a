#!/usr/bin/env python3
"""check-circles.py - no file includes or calls a file that includes or calls
it back (docs/design/layout.md).

A module is a source file with its header: dir/x.c and dir/x.h are one node
"dir/x".  Edges:
  include  a file of A has  #include "B's header"; a header with no .c of
           its own (dir/x_int.h, common/sizes.h) is looked through: A
           depends on every module header it includes, directly or not
  call     A's object file references a symbol that B's object file defines
           (nm: undefined in A, defined in B), functions and data alike
The graph over every production folder must have no circle: each strongly
connected component has one node.  One check per folder (its circles, and
the circles that run through it to another folder), plus one for the edges
between folders.

Usage: check-circles.py [BUILD]   (BUILD: the build folder with obj/, default
"build").  Prints "circles: N passed, N failed"; exit 1 on a failure.
"""
import os
import re
import subprocess
import sys

FOLDERS = ["common", "proto", "net", "reduce", "optim", "tree", "device", "worker",
           "server", "scheduler", "tools", "deploy"]
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def node_of(path):
    """dir/x.c, dir/x.h -> dir/x."""
    base, _ = os.path.splitext(path)
    return base


def resolve(inc, src):
    for cand in (inc, os.path.join("include", inc), os.path.join(os.path.dirname(src), inc)):
        if os.path.isfile(cand):
            return os.path.normpath(cand)
    return None


def sources():
    out = []
    for d in FOLDERS:
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if f.endswith((".c", ".h")):
                out.append(os.path.join(d, f))
    return out


def defined_and_used(obj):
    """(defined global symbols, undefined symbols) of an object file."""
    res = subprocess.run(["nm", obj], capture_output=True, text=True, check=False)
    defs, undefs = set(), set()
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefs.add(parts[1])
        elif len(parts) == 3 and parts[1] in "TDBRVWCG" and parts[1].isupper():
            defs.add(parts[2])
    return defs, undefs


def includes_of(path):
    """The project headers path includes directly."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        text = fh.read()
    out = []
    for inc in INCLUDE_RE.findall(text):
        target = resolve(inc, path)
        if target is None or target.startswith("include/"):
            continue  # the public header: below everything
        if target.split(os.sep)[0] in FOLDERS:
            out.append(target)
    return out


def build_graph(build):
    edges = {}  # node -> {node: why}
    srcs = sources()
    has_c = {node_of(s) for s in srcs if s.endswith(".c")}

    def add(a, b, why):
        if a != b:
            edges.setdefault(a, {}).setdefault(b, why)

    for src in srcs:
        if node_of(src) not in has_c:
            continue  # a header of its own: looked through from its includers
        edges.setdefault(node_of(src), {})
        # what src includes, looking through headers without a .c
        seen, todo = set(), [(t, "%s includes %s" % (src, t)) for t in includes_of(src)]
        while todo:
            target, why = todo.pop()
            if target in seen:
                continue
            seen.add(target)
            if node_of(target) in has_c:
                add(node_of(src), node_of(target), why)
            else:
                todo.extend((t, "%s, which includes %s" % (why, t)) for t in includes_of(target))
    # calls, from the objects
    owner = {}
    uses = {}
    for src in srcs:
        if not src.endswith(".c"):
            continue
        obj = os.path.join(build, "obj", node_of(src) + ".o")
        if not os.path.isfile(obj):
            continue
        defs, undefs = defined_and_used(obj)
        for sym in defs:
            owner.setdefault(sym, node_of(src))
        uses[node_of(src)] = (src, undefs)
    for node, (src, undefs) in uses.items():
        for sym in sorted(undefs):
            if sym in owner:
                add(node, owner[sym], "%s calls %s (%s)" % (src, sym, owner[sym] + ".c"))
    return edges


def sccs(edges):
    """Tarjan, iterative."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def one_circle(edges, comp):
    """A shortest circle through comp[0] inside comp, as the edges' reasons."""
    members = set(comp)
    start = comp[0]
    prev = {start: None}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges.get(v, {})):
                if w not in members:
                    continue
                if w == start:
                    path = [(v, w)]
                    while prev[v] is not None:
                        path.append((prev[v], v))
                        v = prev[v]
                    return [edges[a][b] for a, b in reversed(path)]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    return []


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("BUILD", "build")
    if not os.path.isdir(os.path.join(build, "obj")):
        print("FAIL: %s/obj does not exist (build first)" % build)
        print("circles: 0 passed, 1 failed")
        return 1
    edges = build_graph(build)
    bad = [c for c in sccs(edges) if len(c) > 1]
    passed = failed = 0
    for d in FOLDERS:
        if not os.path.isdir(d):
            continue
        mine = [c for c in bad if any(n.split(os.sep)[0] == d for n in c)]
        if not mine:
            passed += 1
            print("ok: %s/ has no circle" % d)
            continue
        failed += 1
        for c in mine:
            print("FAIL: %s/: circle among %s:" % (d, ", ".join(c)))
            for why in one_circle(edges, c):
                print("    " + why)
    # between folders: the folder graph has no circle either
    fedges = {}
    for a, outs in edges.items():
        for b, why in outs.items():
            fa, fb = a.split(os.sep)[0], b.split(os.sep)[0]
            if fa != fb:
                fedges.setdefault(fa, {}).setdefault(fb, why)
            fedges.setdefault(fa, {})
    fbad = [c for c in sccs(fedges) if len(c) > 1]
    if fbad:
        failed += 1
        for c in fbad:
            print("FAIL: folders depend on each other in a circle: %s" % ", ".join(c))
            for why in one_circle(fedges, c):
                print("    " + why)
    else:
        passed += 1
        print("ok: the folders depend on each other without a circle")
    print("circles: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
