#!/usr/bin/env python3
"""Replay a workload of queries at its own pace, sped up, for tests/e2e/test_budget_benign.sh.

usage: replay.py ADDR PORT SPEEDUP FILE

FILE holds "SECONDS QTYPE NAME" lines in time order (tests/e2e/peers/benign_workload.py
--queries). Each query is sent over UDP at SECONDS / SPEEDUP after the start (never earlier;
late when the machine is slow, and never bunched up to catch up: each waits its own time), from
one of 8 sockets in turn, and its answer waited for up to 3 s. Prints when done:
  replay sent=N answered=A NOERROR=K REFUSED=R other=O late_max_ms=L refused_names=NAME,...
"""
import random
import selectors
import socket
import struct
import sys
import time

import dnsmini

TYPES = {"A": 1, "AAAA": 28, "HTTPS": 65, "SVCB": 64, "TXT": 16, "MX": 15, "SRV": 33,
         "CNAME": 5}
addr, port, speedup, path = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
work = []
with open(path) as f:
    for line in f:
        t, qt, name = line.split()
        work.append((float(t) / speedup, TYPES[qt], name))
socks = []
sel = selectors.DefaultSelector()
for _ in range(8):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setblocking(False)
    sel.register(s, selectors.EVENT_READ)
    socks.append(s)
counts = {"sent": 0, "answered": 0, "NOERROR": 0, "REFUSED": 0, "other": 0}
pending, refused = {}, []
late_max, start = 0.0, time.monotonic()


def read(wait):
    for key, _ in sel.select(wait):
        try:
            pkt = key.fileobj.recv(65535)
        except OSError:
            continue
        k = (key.fileobj, struct.unpack(">H", pkt[:2])[0] if len(pkt) >= 2 else -1)
        if k not in pending:
            continue
        name = pending.pop(k)[1]
        counts["answered"] += 1
        rc = dnsmini.rcode(pkt)
        counts[rc if rc in ("NOERROR", "REFUSED") else "other"] += 1
        if rc == "REFUSED":
            refused.append(name)


for i, (due, qtype, name) in enumerate(work):
    while True:
        now = time.monotonic() - start
        if now >= due:
            break
        read(min(0.05, due - now))
    late_max = max(late_max, time.monotonic() - start - due)
    s = socks[i % len(socks)]
    qid = random.randrange(65536)
    while (s, qid) in pending:
        qid = random.randrange(65536)
    s.sendto(dnsmini.query(qid, name, qtype), (addr, port))
    pending[(s, qid)] = (time.monotonic(), name)
    counts["sent"] += 1
end = time.monotonic() + 3
while pending and time.monotonic() < end:
    read(0.1)
print("replay %s late_max_ms=%d refused_names=%s" % (
    " ".join("%s=%d" % kv for kv in counts.items()), late_max * 1000,
    ",".join(refused[:10]) or "-"))
