#!/usr/bin/env python3
"""Resolve-then-connect, COUNT times, as fast as a client can: ask RESOLVER for the AAAA of
r<i>.race.test (each name its own address) and connect to that address on PORT at once. With
moat-fw in front, a connection can only succeed if the grant was in the kernel before the
answer left moatd. Prints: ok=N fail=N resolve_p50_ms=X resolve_p99_ms=Y, then failures."""
import random
import socket
import struct
import sys
import time

resolver, count, port, first = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])


def query(name):
    qid = random.randrange(65536)
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0\0\x1c\0\1"
    return qid, q


u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(2)
ok, fails, lat = 0, [], []
deadline = time.time() + 300  # bounded whatever happens
for i in range(first, first + count):
    if time.time() > deadline:
        fails.append("time budget exhausted")
        break
    name = "r%d.race.test" % i
    qid, q = query(name)
    t0 = time.perf_counter()
    u.sendto(q, (resolver, 53))
    try:
        while True:
            data, _ = u.recvfrom(4096)
            if struct.unpack(">H", data[:2])[0] == qid:
                break
    except socket.timeout:
        fails.append("%s: no answer" % name)
        continue
    lat.append((time.perf_counter() - t0) * 1000)
    an = struct.unpack(">H", data[6:8])[0]
    if data[3] & 0xF or an == 0:
        fails.append("%s: rcode %d, %d answers" % (name, data[3] & 0xF, an))
        continue
    addr = socket.inet_ntop(socket.AF_INET6, data[-16:])
    c = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    c.settimeout(1)
    try:
        c.connect((addr, port))
        ok += 1
    except OSError as e:
        fails.append("%s -> %s: %s" % (name, addr, e))
    finally:
        c.close()
lat.sort()
pct = lambda p: lat[min(len(lat) - 1, int(len(lat) * p))] if lat else -1
print("ok=%d fail=%d resolve_p50_ms=%.3f resolve_p99_ms=%.3f" % (ok, len(fails), pct(0.5), pct(0.99)))
for f in fails[:10]:
    print("  " + f)
