#!/usr/bin/env python3
"""Send COUNT denied A queries to ADDR:53 from one client, keeping at most WINDOW unanswered,
and print what came back: "sent=N answered=N lost=N seconds=S rcodes=NXDOMAIN:n,REFUSED:n".
Every other query asks the same name (same.flood.test: its repeats are what the log counts
instead of writing), the rest distinct names (fNNNNNNN.flood.test). A query unanswered for 2 s is
counted lost and its place in the window given to the next."""
import collections
import select
import socket
import struct
import sys
import time

addr, count, window = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for opt, val in ((getattr(socket, "SO_RCVBUFFORCE", 33), 1 << 22),
                 (getattr(socket, "SO_SNDBUFFORCE", 32), 1 << 22)):
    try:
        s.setsockopt(socket.SOL_SOCKET, opt, val)
    except OSError:
        pass
s.connect((addr, 53))
s.setblocking(False)


def wire(name):
    return b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"


same = wire("same.flood.test")
out = {}  # id -> send time
rcodes = collections.Counter()
sent = answered = lost = 0
names = {0: "NOERROR", 2: "SERVFAIL", 3: "NXDOMAIN", 5: "REFUSED"}
t0 = time.monotonic()
last_progress = t0
while answered + lost < count:
    while sent < count and len(out) < window:
        qid = sent & 0xFFFF
        if qid in out:  # 65536 outstanding never happens with a small window
            break
        qn = same if sent % 2 else wire("f%07d.flood.test" % sent)
        try:
            s.send(struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + qn + b"\0\1\0\1")
        except BlockingIOError:
            break
        out[qid] = time.monotonic()
        sent += 1
    if len(out) >= window or sent == count:
        select.select([s], [], [], 0.05)  # wait for answers, not spin
    got = False
    while True:
        try:
            m = s.recv(4096)
        except BlockingIOError:
            break
        if len(m) >= 12 and struct.unpack(">H", m[:2])[0] in out:
            del out[struct.unpack(">H", m[:2])[0]]
            answered += 1
            rcodes[names.get(m[3] & 15, str(m[3] & 15))] += 1
            got = True
    now = time.monotonic()
    if got:
        last_progress = now
    elif now - last_progress > 0.05:
        for qid, t in list(out.items()):
            if now - t > 2:
                del out[qid]
                lost += 1
print("sent=%d answered=%d lost=%d seconds=%.2f rcodes=%s" % (
    sent, answered, lost, time.monotonic() - t0,
    ",".join("%s:%d" % kv for kv in sorted(rcodes.items()))))
