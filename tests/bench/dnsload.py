#!/usr/bin/env python3
"""dnsload.py -- the small UDP client of tests/bench/compiled.sh (no dnsperf needed).

  dnsload.py first PORT NAME TIMEOUT_S [READY]  poll 127.0.0.1:PORT for NAME A every ms until
                                            an answer with rcode NOERROR; prints the CLOCK_REALTIME
                                            nanoseconds of that answer; creates the file READY
                                            once it polls (so its own start is not timed)
  dnsload.py run PORT N MIX [WINDOW]        N queries, at most WINDOW (default 64) outstanding;
                                            MIX: deny (fresh dNNN.x.bench.test), mix (a third
                                            listed, under *.w, absent; random over LIST_N names,
                                            env LIST_N); prints "sent answered lost seconds"
  dnsload.py steady PORT SECONDS STOPFILE   queries until SECONDS pass or STOPFILE exists, window
                                            16, each retried never: prints "sent answered lost"
A query is lost when no answer came within 2 s of its sending. Only 127.0.0.1 is ever asked.
"""
import os
import random
import select
import socket
import struct
import sys
import time


def query(qid, name):
    wire = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    return struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + wire + struct.pack(">HH", 1, 1)


def first(port, name, timeout, ready):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setblocking(False)
    if ready:
        open(ready, "w").close()
    end = time.time() + timeout
    qid = 0
    while time.time() < end:
        qid = (qid + 1) & 0xFFFF
        try:
            s.sendto(query(qid, name), ("127.0.0.1", port))
        except OSError:
            pass
        r, _, _ = select.select([s], [], [], 0.001)
        while r:
            try:
                data = s.recv(4096)
            except OSError:
                break
            if len(data) >= 12 and (data[3] & 0xF) == 0 and struct.unpack(">H", data[6:8])[0] > 0:
                print(time.time_ns())
                return 0
            r, _, _ = select.select([s], [], [], 0)
    return 1


def names(mix, n):
    list_n = int(os.environ.get("LIST_N", "1000000"))
    rnd = random.Random(12345)
    for i in range(n):
        k = rnd.randrange(list_n)
        if mix == "deny" or i % 3 == 2:
            yield "d%08d.x.bench.test" % rnd.randrange(10**8)
        elif i % 3 == 0:
            yield "n%08d.bench.test" % k
        else:
            yield "m%08d.w.bench.test" % k


def pump(port, gen, window, stop):
    """Send from gen keeping window outstanding; returns (sent, answered, lost)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.connect(("127.0.0.1", port))
    s.setblocking(False)
    out = {}  # id -> send time
    sent = answered = lost = 0
    nextid = 0
    done = False
    while not done or out:
        while not done and len(out) < window:
            name = next(gen, None)
            if name is None or stop():
                done = True
                break
            nextid = (nextid + 1) & 0xFFFF
            while nextid in out:
                nextid = (nextid + 1) & 0xFFFF
            s.send(query(nextid, name))
            out[nextid] = time.monotonic()
            sent += 1
        r, _, _ = select.select([s], [], [], 0.05)
        if r:
            for _ in range(256):
                try:
                    data = s.recv(4096)
                except BlockingIOError:
                    break
                qid = struct.unpack(">H", data[:2])[0]
                if out.pop(qid, None) is not None:
                    answered += 1
        now = time.monotonic()
        for qid in [q for q, t in out.items() if now - t > 2.0]:
            del out[qid]
            lost += 1
    return sent, answered, lost


def main(argv):
    if len(argv) >= 4 and argv[0] == "first":
        return first(int(argv[1]), argv[2], float(argv[3]), argv[4] if len(argv) > 4 else None)
    if len(argv) >= 4 and argv[0] == "run":
        window = int(argv[4]) if len(argv) > 4 else 64
        t0 = time.monotonic()
        sent, answered, lost = pump(int(argv[1]), names(argv[3], int(argv[2])), window,
                                    lambda: False)
        print(sent, answered, lost, "%.3f" % (time.monotonic() - t0))
        return 0
    if len(argv) >= 4 and argv[0] == "steady":
        end = time.monotonic() + float(argv[2])
        stop = lambda: time.monotonic() > end or os.path.exists(argv[3])
        print(*pump(int(argv[1]), names("mix", 10**9), 16, stop))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
