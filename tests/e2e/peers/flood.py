#!/usr/bin/env python3
"""Send COUNT A queries for NAME to ADDR 53 from source SRC as fast as possible, then collect
answers for up to 3 s and print the count per rcode, e.g. "NXDOMAIN=50 REFUSED=150", and how
many answers carried moat's rate-limit text ("ratelimit-text=150")."""
import collections
import socket
import struct
import sys
import time

addr, src, name, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
# The answers of a burst must all fit: FORCE (the tests run as root) goes past rmem_max.
try:
    s.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), 1 << 22)
except OSError:
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
s.bind((src, 0))
qname = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
names = {0: "NOERROR", 2: "SERVFAIL", 3: "NXDOMAIN", 5: "REFUSED"}
seen = collections.Counter()


def take(data):
    seen[names.get(data[3] & 0xF, str(data[3] & 0xF))] += 1
    if b"moat: rate limit" in data:
        seen["ratelimit-text"] += 1


opt = b"\0\0\x29\x04\xd0\0\0\0\0\0\0"  # EDNS, so answers can carry their EDE
for i in range(count):
    s.sendto(struct.pack(">HHHHHH", i, 0x0100, 1, 0, 0, 1) + qname + b"\0\1\0\1" + opt,
             (addr, 53))
    # Drain as we go: the answers of a burst would overflow a default receive buffer.
    s.setblocking(False)
    try:
        while True:
            take(s.recvfrom(4096)[0])
    except BlockingIOError:
        pass
    s.setblocking(True)
end = time.time() + 3
while time.time() < end and sum(v for k, v in seen.items() if k != "ratelimit-text") < count:
    s.settimeout(max(0.05, end - time.time()))
    try:
        data, _ = s.recvfrom(4096)
    except socket.timeout:
        break
    take(data)
print(" ".join("%s=%d" % kv for kv in sorted(seen.items())))
