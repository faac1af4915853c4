#!/usr/bin/env python3
"""A plain upstream on UDP and TCP ADDR:PORT that logs where each query came from, for
SECONDS at most (or until SIGTERM).

usage: port_log.py ADDR PORT SECONDS LOGFILE

Every query gets NOERROR with one A record 192.0.2.N, TTL 60, where N = 1 + (sum of the bytes of
the lower-case query name with its trailing dot) % 250, so a client can tell which question an
answer belongs to. Appends one line per query to LOGFILE, flushed at once:
    udp SRCPORT ID QNAME T_RECV     (T_RECV: time.monotonic() at receipt, in seconds)
    tcp QNAME
Special names (by the first label):
  slow*  answered after 300 ms, without holding up other queries (a heap of pending answers).
  big*   over UDP an answer of 400 A records (over 6000 bytes, TC not set); over TCP the
         normal one-record answer.
Prints its totals when it stops: "port_log: udp=N tcp=N"."""
import heapq
import signal
import struct
import sys
import time

import dnsmini

addr, port, seconds, logfile = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
SLOW_S = 0.3
BIG_RECORDS = 400

u, t = dnsmini.listen_udp_tcp(addr, port)
log = open(logfile, "a")
stop = False


def on_term(signum, frame):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)
later = []  # heap of (due, seq, packet, client)
seq = 0
totals = {"udp": 0, "tcp": 0}


def addr_of(qname):
    return "192.0.2.%d" % (1 + sum(qname.encode()) % 250)


def first_label(qname):
    return qname.split(".", 1)[0]


def on_udp(pkt, client, now):
    global seq
    q = dnsmini.question(pkt)
    if q is None:
        return
    qname = q[2]
    log.write("udp %d %d %s %.6f\n" % (client[1], q[0], qname, now))
    log.flush()
    totals["udp"] += 1
    label = first_label(qname)
    if label.startswith("big"):
        ans = dnsmini.answer_a(pkt, ["192.0.2.%d" % (1 + k % 250) for k in range(BIG_RECORDS)])
    else:
        ans = dnsmini.answer_a(pkt, [addr_of(qname)])
    if ans is None:
        return
    if label.startswith("slow"):
        seq += 1
        heapq.heappush(later, (now + SLOW_S, seq, ans, client))
        return
    try:
        u.sendto(ans, client)
    except OSError:
        pass


def recv_exact(c, n):
    buf = b""
    while len(buf) < n:
        chunk = c.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def on_tcp():
    c, _ = t.accept()
    c.settimeout(1)
    try:
        hdr = recv_exact(c, 2)
        pkt = recv_exact(c, struct.unpack(">H", hdr)[0]) if hdr else None
        q = dnsmini.question(pkt) if pkt else None
        if q is not None:
            log.write("tcp %s\n" % q[2])
            log.flush()
            totals["tcp"] += 1
            ans = dnsmini.answer_a(pkt, [addr_of(q[2])])
            c.sendall(struct.pack(">H", len(ans)) + ans)
    except (OSError, struct.error):
        pass
    c.close()


dnsmini.serve(u, t, seconds, lambda pkt, client: on_udp(pkt, client, time.monotonic()), on_tcp,
              later, lambda: stop)
log.close()
print("port_log: udp=%d tcp=%d" % (totals["udp"], totals["tcp"]), flush=True)
