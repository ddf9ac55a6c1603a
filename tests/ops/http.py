"""http.py - HTTP client bits for tests/ops/test-ops.sh (Python 3 stdlib only).

  http.py get PORT PATH          print the body; exit 0 on 200, else 1 (status on stderr)
  http.py status PORT RAWFILE    send RAWFILE's bytes, print the status code of the reply
  http.py abuse PORT SEED N      N connections of random bytes, idle holds and
                                 half-sent heads; exit 0 when done (never hangs)
"""
import random
import socket
import sys
import time


def get(port, path):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % path).encode())
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ")[1])
    return status, head.decode("latin-1"), body


def raw_status(port, payload):
    s = socket.create_connection(("127.0.0.1", port), timeout=15)
    try:
        s.sendall(payload)
    except OSError:
        pass
    data = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except OSError:
        pass
    s.close()
    if not data.startswith(b"HTTP/1.1 "):
        return 0
    return int(data.split(b" ")[1])


def abuse(port, seed, n):
    rnd = random.Random(seed)
    idle = []
    for i in range(n):
        kind = i % 4
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
        except OSError:
            continue
        try:
            if kind == 0:  # noise
                s.sendall(bytes(rnd.getrandbits(8) for _ in range(rnd.randrange(1, 3000))))
            elif kind == 1:  # half a head, then hold the connection open
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                idle.append(s)
                continue
            elif kind == 2:  # a head far past the limit
                s.sendall(b"GET /metrics HTTP/1.1\r\n" + b"X-Pad: " + b"a" * 20000 + b"\r\n\r\n")
            else:  # connect and close at once
                pass
        except OSError:
            pass
        s.close()
    for s in idle:
        s.close()


def main():
    cmd, port = sys.argv[1], int(sys.argv[2])
    if cmd == "get":
        status, head, body = get(port, sys.argv[3])
        sys.stdout.buffer.write(body)
        if status != 200:
            sys.stderr.write("status %d\n%s\n" % (status, head))
            return 1
        return 0
    if cmd == "status":
        with open(sys.argv[3], "rb") as f:
            print(raw_status(port, f.read()))
        return 0
    if cmd == "abuse":
        abuse(port, int(sys.argv[3]), int(sys.argv[4]))
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
