#!/usr/bin/env python3
"""check-linkmap.py - each product binary carries only the code it calls.

For each binary, from its roots (an executable: main; libkvs.so: the
functions it exports), follow the references recorded in the objects'
relocations (every function and data object has a section of its own:
-ffunction-sections -fdata-sections) and list the functions of ours that are
reachable.  Every function of ours that the binary contains must be among
them: a function that nothing reaches was linked for nothing.  Then the
rules the design names (docs/design/layout.md): the scheduler has no summing,
planner, device, server or worker code; the server no planner, device or
worker code; libkvs no daemon code, no net/guard.c and no optimizer kernels.

Usage: check-linkmap.py [BUILD].  Prints "linkmap: N passed, N failed".
"""
import os
import re
import subprocess
import sys

FOLDERS = ["common", "proto", "net", "reduce", "optim", "tree", "device", "worker",
           "server", "scheduler", "tools", "deploy"]

# binary -> (roots: objects whose main is the root, or None for a library)
BINARIES = {
    "kvs-scheduler": "scheduler/main",
    "kvs-server": "server/main",
    "kvs-bench": "tools/kvs-bench",
    "kvs-topo": "tools/kvs-topo",
    "kvs-trace": "tools/kvs-trace",
    "kvs-keygen": "tools/kvs-keygen",
    "kvs-guard": "deploy/kvs-guard",
    "libkvs.so": None,
}

# what a binary must not contain: (binary, object path prefix, why)
FORBIDDEN = [
    ("kvs-scheduler", p, "the scheduler sums, plans, drives devices and serves data never")
    for p in ("reduce/", "optim/", "tree/", "device/", "server/", "worker/")
] + [
    ("kvs-server", p, "the server plans no trees and has no worker or device code")
    for p in ("tree/plan", "tree/opt", "tree/build", "tree/score", "tree/sched", "tree/detect",
              "device/", "worker/", "scheduler/")
] + [
    ("libkvs.so", p, "libkvs has no daemon code, no connection guard, no optimizer kernels")
    for p in ("server/", "scheduler/", "net/guard", "optim/optim_kern")
]


def run(args):
    return subprocess.run(args, capture_output=True, text=True, check=False).stdout


class Obj:
    """One object file: its sections, symbols and the references between them."""

    def __init__(self, path, name):
        self.name = name
        self.secnames = {}   # index -> section name
        self.symsec = {}     # symbol -> section name (defined here)
        self.funcs = {}      # function symbol -> section
        self.globals = set()
        self.refs = {}       # section name -> set of symbol names it references
        for line in run(["readelf", "-SW", path]).splitlines():
            m = re.match(r"\s*\[\s*(\d+)\]\s+(\S+)", line)
            if m:
                self.secnames[int(m.group(1))] = m.group(2)
        for line in run(["readelf", "-sW", path]).splitlines():
            parts = line.split()
            if len(parts) < 8 or not parts[0].rstrip(":").isdigit():
                continue
            typ, bind, ndx, sym = parts[3], parts[4], parts[6], parts[7]
            if not ndx.isdigit():
                continue
            sec = self.secnames.get(int(ndx), "")
            self.symsec[sym] = sec
            if typ == "FUNC":
                self.funcs[sym] = sec
            if bind in ("GLOBAL", "WEAK") and typ in ("FUNC", "OBJECT"):
                self.globals.add(sym)
        cur = None
        for line in run(["readelf", "-rW", path]).splitlines():
            m = re.match(r"Relocation section '\.rela?(\S+)'", line)
            if m:
                cur = m.group(1)
                self.refs.setdefault(cur, set())
                continue
            parts = line.split()
            if cur and len(parts) >= 5 and re.match(r"^[0-9a-f]+$", parts[0]):
                self.refs[cur].add(parts[4].split("@")[0])


def load_objects(build):
    objs = {}
    for d in FOLDERS:
        base = os.path.join(build, "obj", d)
        if not os.path.isdir(base):
            continue
        for f in sorted(os.listdir(base)):
            if f.endswith(".o"):
                name = os.path.join(d, f[:-2])
                objs[name] = Obj(os.path.join(base, f), name)
    return objs


def reachable(objs, roots):
    """(object, function) pairs reachable from roots [(object, symbol)]."""
    definers = {}
    for o in objs.values():
        for sym in o.globals:
            definers.setdefault(sym, []).append(o)
    seen_sec, out = set(), set()
    todo = []
    for oname, sym in roots:
        o = objs[oname]
        if sym in o.symsec:
            todo.append((o, o.symsec[sym]))
    # constructors and destructors run without a call (sanitizer builds add
    # one per object)
    for o in objs.values():
        for sec in o.refs:
            if sec.startswith((".init_array", ".fini_array", ".preinit_array", ".ctors",
                               ".dtors")):
                todo.append((o, sec))
    while todo:
        o, sec = todo.pop()
        if (o.name, sec) in seen_sec:
            continue
        seen_sec.add((o.name, sec))
        for fn, fsec in o.funcs.items():
            if fsec == sec:
                out.add((o.name, fn))
        for sym in o.refs.get(sec, ()):
            if sym.startswith("."):  # a reference to a section of this object
                todo.append((o, sym))
            elif sym in o.symsec and (sym not in o.globals or sym not in definers):
                todo.append((o, o.symsec[sym]))  # a static of this object
            else:
                for d in definers.get(sym, []):
                    todo.append((d, d.symsec[sym]))
    return out


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("BUILD", "build")
    passed = failed = 0

    def ok(msg):
        nonlocal passed
        passed += 1
        print("ok: " + msg)

    def bad(msg):
        nonlocal failed
        failed += 1
        print("FAIL: " + msg)

    objs = load_objects(build)
    if not objs:
        bad("no objects under %s/obj (build first)" % build)
        print("linkmap: %d passed, %d failed" % (passed, failed))
        return 1
    ours = {}  # function name -> objects defining it
    for o in objs.values():
        for fn in o.funcs:
            ours.setdefault(fn, set()).add(o.name)
    for binary, main_obj in BINARIES.items():
        path = os.path.join(build, binary)
        if not os.path.isfile(path):
            bad("%s does not exist" % path)
            continue
        present = set()
        for line in run(["nm", "--defined-only", path]).splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "Tt":
                present.add(parts[2])
        if main_obj:
            roots = [(main_obj, "main")]
        else:
            exported = {l.split()[2].split("@")[0]
                        for l in run(["nm", "-D", "--defined-only", path]).splitlines()
                        if len(l.split()) == 3}
            roots = [(o.name, s) for o in objs.values() for s in o.globals if s in exported]
        reach = reachable(objs, roots)
        reach_names = {fn for _, fn in reach}
        linked = sorted(fn for fn in present if fn in ours and fn not in reach_names)
        if linked:
            bad("%s contains %d functions nothing reaches: %s" %
                (binary, len(linked), ", ".join("%s (%s)" % (fn, "/".join(sorted(ours[fn])))
                                                for fn in linked[:12])))
        else:
            n = len([fn for fn in present if fn in ours])
            ok("%s: every one of its %d functions of ours is reached from %s" %
               (binary, n, "main" if main_obj else "its exported API"))
        # the design's rules: which components it must not contain
        # (a name defined by several objects, a static one, counts for those
        # of them that reach it)
        contains = {}
        for fn in present:
            defs = ours.get(fn, set())
            for oname in defs:
                if len(defs) == 1 or (oname, fn) in reach:
                    contains.setdefault(oname, []).append(fn)
        for b, prefix, why in FORBIDDEN:
            if b != binary:
                continue
            hits = sorted(o for o in contains if o.startswith(prefix))
            if hits:
                bad("%s contains %s: %s" % (binary, ", ".join(hits), why))
            else:
                ok("%s contains nothing of %s" % (binary, prefix))
    print("linkmap: %d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
