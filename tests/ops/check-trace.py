"""check-trace.py FILE RANK ROUNDS [KEYS [PATH]] - check a KVS_TRACE timeline of kvs-opsworker.

The file must be one valid JSON array (the worker closed its store).  The
worker inits keys 1 and 2 and runs ROUNDS pushpulls of both, each followed by
a barrier: every one of those 2 + 2*ROUNDS key operations must have, on its
own async id, queued (b), sent (n), summed on server / on server (n),
replied (n) and done (e), in time order, with the round numbers 0..ROUNDS-1,
and the server's time within the round trip.  KEYS (comma-separated, default
1,2) are the keys the worker used; with PATH (socket, cma, fused) every sent
event of the pushpulls must have travelled that way (the fused keys' server
marks come from TIMING messages of records of FUSED messages).  Exit 0 when
all holds.
"""
import json
import sys
from collections import defaultdict


def main():
    path, rank, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    keys = [int(k) for k in sys.argv[4].split(",")] if len(sys.argv) > 4 else [1, 2]
    want_path = sys.argv[5] if len(sys.argv) > 5 else None
    with open(path) as f:
        events = json.load(f)
    spans = defaultdict(list)
    barriers = []
    dropped = None
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "kvs_trace_dropped":
            dropped = e["args"]["dropped"]
        elif e.get("cat") == "barrier":
            barriers.append(e)
        elif e.get("cat") == "key":
            assert e["pid"] == rank, e
            spans[e["id"]].append(e)
    problems = []
    if dropped != 0:
        problems.append("dropped events: %r" % dropped)
    if len(barriers) != rounds or any(b["ph"] != "X" or b["dur"] < 0 for b in barriers):
        problems.append("%d barriers, expected %d" % (len(barriers), rounds))
    seen = defaultdict(list)  # (op, key) -> rounds
    for sid, evs in spans.items():
        kinds = [e["args"]["event"] for e in evs]
        ts = [e["ts"] for e in evs]
        q = evs[0]
        op, key = q["args"].get("op"), q["args"]["key"]
        want_server = "summed" if op in ("push", "pushpull") else "server"
        if kinds[0] != "queued" or q["ph"] != "b" or kinds[-1] != "done" or evs[-1]["ph"] != "e":
            problems.append("%s: starts %s, ends %s" % (sid, kinds[0], kinds[-1]))
            continue
        for k in ("sent", want_server, "replied"):
            if kinds.count(k) != 1:
                problems.append("%s: %d '%s' events (one part expected)" % (sid, kinds.count(k), k))
        if problems:
            continue
        t = {k: evs[kinds.index(k)]["ts"] for k in ("queued", "sent", "replied", "done")}
        if not t["queued"] <= t["sent"] <= t["replied"] <= t["done"]:
            problems.append("%s: out of order %r" % (sid, t))
        sent = evs[kinds.index("sent")]["args"]
        if want_path and op == "pushpull" and sent["path"] != want_path:
            problems.append("%s: sent by %s, expected %s" % (sid, sent["path"], want_path))
        srv = evs[kinds.index(want_server)]["args"]
        if not 0 <= srv["sum_us"] <= srv["server_us"] <= t["replied"] - t["sent"] + 1:
            problems.append("%s: server time %r outside the round trip %.3f us"
                            % (sid, srv, t["replied"] - t["sent"]))
        if any(e["args"]["key"] != key for e in evs) or len({e["name"] for e in (evs[0], evs[-1])}) != 1:
            problems.append("%s: mixed keys or names" % sid)
        seen[(op, key)].append(q["args"]["round"])
    want = {}
    for k in keys:
        want[("init", k)] = [0]
        want[("pushpull", k)] = list(range(rounds))
    got = {k: sorted(v) for k, v in seen.items()}
    if got != want:
        problems.append("key operations %r, expected %r" % (got, want))
    for p in problems[:10]:
        print("check-trace: %s: %s" % (path, p))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
