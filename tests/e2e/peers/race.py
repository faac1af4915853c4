#!/usr/bin/env python3
"""Resolve-then-connect, COUNT times, as fast as a client can: ask RESOLVER for the AAAA of
r<i>.race.test (each name its own address) and connect to that address on PORT at once. With
moat-fw in front, a connection can only succeed if the grant was in the kernel before the
answer left moatd. Prints: ok=N fail=N resolve_p50_ms=X resolve_p99_ms=Y, then failures.
With a fifth argument PEER (a second resolver), each round also resolves r<i+COUNT> at PEER
first (no connect), and a last line "peer resolve_p50_ms=X resolve_p99_ms=Y": both series then
see the same load on the machine, so their difference is the cost of what differs."""
import random
import socket
import struct
import sys
import time

resolver, count, port, first = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
peer = sys.argv[5] if len(sys.argv) > 5 else None


def query(name):
    qid = random.randrange(65536)
    q = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0\0\x1c\0\1"
    return qid, q


def resolve(server, name):
    """(latency ms, reply) or (None, None) on timeout."""
    qid, q = query(name)
    t0 = time.perf_counter()
    u.sendto(q, (server, 53))
    try:
        while True:
            data, _ = u.recvfrom(4096)
            if struct.unpack(">H", data[:2])[0] == qid:
                return (time.perf_counter() - t0) * 1000, data
    except socket.timeout:
        return None, None


u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.settimeout(2)
ok, fails, lat, peer_lat = 0, [], [], []
deadline = time.time() + 300  # bounded whatever happens
for i in range(first, first + count):
    if time.time() > deadline:
        fails.append("time budget exhausted")
        break
    if peer:
        ms, _ = resolve(peer, "r%d.race.test" % (i + count))
        if ms is not None:
            peer_lat.append(ms)
    name = "r%d.race.test" % i
    ms, data = resolve(resolver, name)
    if ms is None:
        fails.append("%s: no answer" % name)
        continue
    lat.append(ms)
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
pct = lambda v, p: sorted(v)[min(len(v) - 1, int(len(v) * p))] if v else -1
print("ok=%d fail=%d resolve_p50_ms=%.3f resolve_p99_ms=%.3f" % (
    ok, len(fails), pct(lat, 0.5), pct(lat, 0.99)))
for f in fails[:10]:
    print("  " + f)
if peer:
    print("peer resolve_p50_ms=%.3f resolve_p99_ms=%.3f" % (pct(peer_lat, 0.5), pct(peer_lat, 0.99)))
