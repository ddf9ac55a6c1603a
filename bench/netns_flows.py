#!/usr/bin/env python3
"""netns_flows.py - the raw TCP floor of a traffic pattern between the hosts
of bench/hosts.sh (host i at 10.216.0.(i+1)), with nothing done to the
bytes: no framing, no sums, no copies beyond the sockets'.

  netns_flows.py ME N MODE START BYTES [PORT]

Run once in each host's namespace.  Host ME sends BYTES in all: with MODE
a2a split evenly over every other host at once (what a parameter server's
push and pull do), with MODE ring all to the next host (what a ring
allreduce's step does).  Two schedules of a2a's bytes: staged, to host
ME+1 whole, then to ME+2, ... (one flow per link while the hosts keep in
step); rr, one thread sending 1 MiB to each host in turn (every flow held
to the same pace); paced, a2a with each connection paced at the link's
rate (LINK_BPS, bit/s) over the N-1 connections (SO_MAX_PACING_RATE, as
KVS_LINK_GBPS paces kvsd's).  Every host starts sending at the wall-clock time
START (seconds since the epoch; the namespaces share the clock) and prints
    flows: host ME MODE received_ms R sent_ms S
R: until the last byte it receives arrived, S: until its sends returned,
both from START.  Exit status 0 when every byte arrived."""
import os
import socket
import sys
import threading
import time

SO_MAX_PACING_RATE = getattr(socket, "SO_MAX_PACING_RATE", 47)  # Linux

def main():
    if len(sys.argv) not in (6, 7) or sys.argv[3] not in ("a2a", "ring", "staged", "rr", "paced"):
        sys.exit(__doc__)
    me, n, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    start, total = float(sys.argv[4]), int(sys.argv[5])
    port = int(sys.argv[6]) if len(sys.argv) == 7 else 9500
    link_bps = int(os.environ.get("LINK_BPS", "0"))
    if mode == "paced" and link_bps <= 0:
        sys.exit("flows: paced needs LINK_BPS, the link's rate in bit/s")
    addr = lambda i: "10.216.0.%d" % (i + 1)
    if mode in ("a2a", "staged", "rr", "paced"):
        # to host me+1 first, then me+2, ... (the order staged and rr keep)
        to = [(me + k) % n for k in range(1, n)]
        frm = [(me - k) % n for k in range(1, n)]
    else:
        to, frm = [(me + 1) % n], [(me - 1) % n]
    per = total // len(to)
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((addr(me), port))
    ls.listen(len(frm))
    done, short = [], []

    def receive(c):
        left, buf = per, bytearray(1 << 20)
        while left > 0:
            k = c.recv_into(buf, min(len(buf), left))
            if k == 0:
                break
            left -= k
        (short if left else done).append(time.time())

    def accept():
        ts = []
        for _ in frm:
            c, _ = ls.accept()
            ts.append(threading.Thread(target=receive, args=(c,)))
            ts[-1].start()
        for t in ts:
            t.join()

    acceptor = threading.Thread(target=accept)
    acceptor.start()
    conns = []
    deadline = time.time() + 30
    for p in to:  # the others may still be binding: retry until the deadline
        while True:
            s = socket.socket()
            try:
                s.connect((addr(p), port))
                break
            except OSError:
                s.close()
                if time.time() > deadline:
                    sys.exit("flows: host %d cannot reach host %d" % (me, p))
                time.sleep(0.05)
        if mode == "paced":  # as KVS_LINK_GBPS paces kvsd's connections
            s.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, link_bps // 8 // len(to))
        conns.append(s)
    payload = memoryview(bytes(1 << 20))

    def send(s):
        left = per
        while left > 0:
            left -= s.send(payload[:min(len(payload), left)])
        s.shutdown(socket.SHUT_WR)

    while time.time() < start:
        time.sleep(0.001)
    if mode == "staged":
        for s in conns:
            send(s)
    elif mode == "rr":  # one thread, 1 MiB to each host in turn
        left = [per] * len(conns)
        while any(left):
            for i, s in enumerate(conns):
                k = min(len(payload), left[i])
                if k:
                    s.sendall(payload[:k])
                    left[i] -= k
        for s in conns:
            s.shutdown(socket.SHUT_WR)
    else:
        ts = [threading.Thread(target=send, args=(s,)) for s in conns]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    sent = time.time()
    acceptor.join()
    if short or len(done) != len(frm):
        sys.exit("flows: host %d: a connection closed early" % me)
    print("flows: host %d %s received_ms %.1f sent_ms %.1f" %
          (me, mode, 1000 * (max(done) - start), 1000 * (sent - start)))


if __name__ == "__main__":
    main()
