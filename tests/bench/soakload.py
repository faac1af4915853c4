#!/usr/bin/env python3
"""A small UDP load generator for tests/bench/soak.sh when dnsperf is not installed.

usage: soakload.py ADDR PORT QUERYFILE RATE SECONDS

Sends the queries of QUERYFILE ("NAME TYPE" per line, cycled) at RATE per second for SECONDS
from 8 sockets, reads answers as they come, waits up to 5 s for the last ones and prints
    sent=N answered=N lost=N qps=X rcodes: NOERROR=N NXDOMAIN=N ...
A query is lost when no answer with its ID came back within 5 s."""
import collections
import select
import socket
import struct
import sys
import time

addr, port, path, rate, seconds = (sys.argv[1], int(sys.argv[2]), sys.argv[3],
                                   float(sys.argv[4]), float(sys.argv[5]))
TYPES = {"A": 1, "AAAA": 28, "TXT": 16, "MX": 15}
queries = []
with open(path) as f:
    for line in f:
        parts = line.split()
        if len(parts) >= 2:
            wire = b"".join(bytes([len(l)]) + l.encode() for l in parts[0].strip(".").split("."))
            queries.append(wire + b"\0" + struct.pack(">HH", TYPES.get(parts[1], 1), 1))
socks = []
for _ in range(8):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.setblocking(False)
    s.connect((addr, port))
    socks.append(s)
outstanding = {}  # (sock index, id) -> send time
rcodes = collections.Counter()
sent = answered = lost = 0
names = {0: "NOERROR", 2: "SERVFAIL", 3: "NXDOMAIN", 5: "REFUSED"}
next_id = [0] * 8


def drain():
    global answered
    r, _, _ = select.select(socks, [], [], 0)
    for s in r:
        i = socks.index(s)
        while True:
            try:
                data = s.recv(4096)
            except BlockingIOError:
                break
            if len(data) < 12:
                continue
            key = (i, struct.unpack(">H", data[:2])[0])
            if outstanding.pop(key, None) is not None:
                answered += 1
                rc = data[3] & 0xF
                rcodes[names.get(rc, str(rc))] += 1


def expire(now):
    global lost
    for key in [k for k, t in outstanding.items() if now - t > 5]:
        del outstanding[key]
        lost += 1


t0 = time.monotonic()
qi = 0
last_expire = t0
while True:
    now = time.monotonic()
    if now - t0 >= seconds:
        break
    due = int((now - t0) * rate)
    while sent < due:
        i = sent % 8
        qid = next_id[i]
        next_id[i] = (qid + 1) & 0xFFFF
        key = (i, qid)
        if key in outstanding:  # an ID still in flight after 65536 more: count it lost
            del outstanding[key]
            lost += 1
        try:
            socks[i].send(struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + queries[qi])
        except BlockingIOError:
            pass
        outstanding[key] = now
        qi = (qi + 1) % len(queries)
        sent += 1
    drain()
    if now - last_expire > 1:
        expire(now)
        last_expire = now
    time.sleep(0.001)
t_end = time.monotonic()
while outstanding and time.monotonic() - t_end < 5:
    drain()
    time.sleep(0.01)
lost += len(outstanding)
print("sent=%d answered=%d lost=%d qps=%.1f rcodes: %s" % (
    sent, answered, lost, answered / max(1e-9, t_end - t0),
    " ".join("%s=%d" % kv for kv in sorted(rcodes.items()))), flush=True)
