#!/usr/bin/env python3
"""Send COUNT AAAA queries for distinct names r<FIRST>..r<FIRST+COUNT-1>.race.test to RESOLVER in
windows of WINDOW outstanding queries, and print how many were answered with data per second.
Each answer needs its own firewall grant when moat-fw runs, so this is grants per second."""
import random
import socket
import struct
import sys
import time

resolver, count, first, window = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
pending, answered, sent = {}, 0, 0
t0 = time.perf_counter()
deadline = time.time() + 120
while (sent < count or pending) and time.time() < deadline:
    while sent < count and len(pending) < window:
        qid = (first + sent) & 0xFFFF
        name = "r%d.race.test" % (first + sent)
        q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
        q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0\0\x1c\0\1"
        u.sendto(q, (resolver, 53))
        pending[qid] = time.perf_counter()
        sent += 1
    u.settimeout(2)
    try:
        data, _ = u.recvfrom(4096)
    except socket.timeout:
        break
    qid = struct.unpack(">H", data[:2])[0]
    if pending.pop(qid, None) is not None and struct.unpack(">H", data[6:8])[0] > 0:
        answered += 1
el = time.perf_counter() - t0
print("answered=%d of %d in %.3f s: %.0f answers/s" % (answered, count, el, answered / el))
