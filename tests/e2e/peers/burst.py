#!/usr/bin/env python3
"""Send COUNT identical A queries for NAME to ADDR PORT at once (distinct IDs), wait up to 5 s,
and print how many were answered and the set of answer addresses. Used to show that identical
questions in flight share one upstream query."""
import random
import socket
import struct
import sys
import time

addr, port, name, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
qname = b"".join(bytes([len(l)]) + l.encode() for l in name.strip(".").split(".")) + b"\0"
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
ids = random.sample(range(65536), count)
for i in ids:
    s.sendto(struct.pack(">HHHHHH", i, 0x0100, 1, 0, 0, 0) + qname + b"\0\1\0\1", (addr, port))
got, addrs = set(), set()
end = time.time() + 5
while len(got) < count and time.time() < end:
    s.settimeout(max(0.01, end - time.time()))
    try:
        data, _ = s.recvfrom(65535)
    except socket.timeout:
        break
    qid, flags, qd, an = struct.unpack(">HHHH", data[:8])
    if qid in ids and an > 0:
        got.add(qid)
        addrs.add(socket.inet_ntoa(data[-4:]))
print(len(got), " ".join(sorted(addrs)))
