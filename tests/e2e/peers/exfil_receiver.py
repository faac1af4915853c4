#!/usr/bin/env python3
"""The attacker's authoritative server for tests/e2e/test_exfil.sh (issue 26): it answers every
name, over UDP and TCP, and counts what the resolver in front of it let through, the way whoever
reads a zone's query logs would.

usage: exfil_receiver.py ADDR PORT SECONDS WINDOW ZONE [ZONE...]

Every query is answered with TTL 0 (so nothing is cached on the way): A 192.0.2.10, AAAA
2001:db8::10, and NODATA for other types, except for these first labels, there to test the
inbound caps: "big-txt" (TXT strings of 20,000 bytes in all: TC over UDP, whole over TCP),
"many-a" (100 A records), "txt" (one small TXT record).

Counted: queries (udp, tcp), the query types that arrived, how many had the DO bit set, and per
ZONE the new label bytes: for each name below ZONE not seen before, the wire bytes of its labels
below ZONE (moatd's own measure, moat/budget.h). maxwin.ZONE is the most new bytes that arrived
within any WINDOW seconds, by the kernel's receive time of each datagram (SO_TIMESTAMPNS: a
receiver slow to read cannot bunch them up), by the time of reading over TCP.

SIGUSR1 prints one line and flushes it:
  stats seq=N queries=Q udp=U tcp=T do1=D types=A,AAAA,... names.ZONE=N bytes.ZONE=B maxwin.ZONE=M
(seq counts the SIGUSR1s, so a test can wait for its own line). SIGTERM or SECONDS: the same line
with seq=final, then exit."""
import selectors
import signal
import socket
import struct
import sys
import time

import dnsmini

addr, port, seconds, window = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
zones = [z.strip(".").lower() for z in sys.argv[5:]]
TYPES = {1: "A", 2: "NS", 5: "CNAME", 6: "SOA", 10: "NULL", 12: "PTR", 15: "MX", 16: "TXT",
         28: "AAAA", 33: "SRV", 64: "SVCB", 65: "HTTPS", 255: "ANY", 257: "CAA"}

stats = {"queries": 0, "udp": 0, "tcp": 0, "do1": 0}
types = {}
seen = {z: set() for z in zones}
arrivals = {z: [] for z in zones}  # (time, bytes) of each new name
usr1 = 0
stop = False


def on_usr1(signum, frame):
    global usr1
    usr1 += 1
    report(str(usr1))


def on_term(signum, frame):
    global stop
    stop = True


def maxwin(z):
    best, s, j, a = 0, 0, 0, arrivals[z]
    for i in range(len(a)):
        s += a[i][1]
        while a[j][0] <= a[i][0] - window:
            s -= a[j][1]
            j += 1
        best = max(best, s)
    return best


def report(seq):
    words = ["stats", "seq=" + seq] + ["%s=%d" % (k, stats[k]) for k in ("queries", "udp", "tcp",
                                                                          "do1")]
    words.append("types=" + ",".join(sorted(TYPES.get(t, "TYPE%d" % t) for t in types)))
    for z in zones:
        words += ["names.%s=%d" % (z, len(seen[z])),
                  "bytes.%s=%d" % (z, sum(b for _, b in arrivals[z])), "maxwin.%s=%d" % (z, maxwin(z))]
    print(" ".join(words), flush=True)


def do_bit(pkt, off):
    """The DO bit of the OPT record after the question (moatd sends no other records)."""
    qd, an, ns, ar = struct.unpack(">HHHH", pkt[4:12])
    for _ in range(an + ns + ar):
        r = dnsmini.read_name(pkt, off)
        if r is None or r[1] + 10 > len(pkt):
            return False
        rtype, _, ttl, rdlen = struct.unpack(">HHIH", pkt[r[1]:r[1] + 10])
        if rtype == 41:
            return bool(ttl & 0x8000)
        off = r[1] + 10 + rdlen
    return False


def count(pkt, tcp, when=None):
    q = dnsmini.question(pkt)
    if q is None:
        return None
    stats["queries"] += 1
    stats["tcp" if tcp else "udp"] += 1
    types[q[3]] = types.get(q[3], 0) + 1
    if do_bit(pkt, q[5]):
        stats["do1"] += 1
    name = q[2].rstrip(".")
    for z in zones:
        if name.endswith("." + z) and name not in seen[z]:
            seen[z].add(name)
            prefix = name[:-len(z)]  # "a.b." is the wire length of labels a and b
            arrivals[z].append((when or time.time(), len(prefix)))
            break
    return q


SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)


def arrived(anc):
    """The kernel's receive time of a datagram (SO_TIMESTAMPNS, wall clock): when it reached
    this host, however late this process read it."""
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
            sec, nsec = struct.unpack("qq", data[:16])
            return sec + nsec / 1e9
    return None


def rr(rtype, rdata):
    return struct.pack(">HHHIH", 0xC00C, rtype, 1, 0, len(rdata)) + rdata


def answer(pkt, q, tcp):
    qid, flags, name, qtype = q[0], q[1], q[2], q[3]
    first = name.split(".")[0]
    recs = []
    if first == "big-txt" and qtype == 16:
        chunk = b"\xff" + b"x" * 255
        recs = [rr(16, chunk * 8) for _ in range(10)]  # 10 records of 2,048 bytes
    elif first == "many-a" and qtype == 1:
        recs = [rr(1, bytes([192, 0, 2, i + 1])) for i in range(100)]
    elif first == "txt" and qtype == 16:
        recs = [rr(16, b"\x05hello")]
    elif qtype == 1:
        recs = [rr(1, bytes([192, 0, 2, 10]))]
    elif qtype == 28:
        recs = [rr(28, socket.inet_pton(socket.AF_INET6, "2001:db8::10"))]
    body = b"".join(recs)
    hdr = struct.pack(">HHHHHH", qid, 0x8400 | (flags & 0x0100), 1, len(recs), 0, 0)
    msg = hdr + pkt[12:q[5]] + body
    if not tcp and len(msg) > 1232:
        hdr = struct.pack(">HHHHHH", qid, 0x8600 | (flags & 0x0100), 1, 0, 0, 0)
        msg = hdr + pkt[12:q[5]]
    return msg


def main():
    signal.signal(signal.SIGUSR1, on_usr1)
    signal.signal(signal.SIGTERM, on_term)
    u, t = dnsmini.listen_udp_tcp(addr, port)
    u.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    u.setblocking(False)
    t.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(u, selectors.EVENT_READ, "udp")
    sel.register(t, selectors.EVENT_READ, "listen")
    bufs = {}
    end = time.monotonic() + seconds
    print("receiver listening on %s:%d" % (addr, port), flush=True)
    while not stop and time.monotonic() < end:
        try:
            events = sel.select(0.2)
        except InterruptedError:
            continue
        for key, _ in events:
            s = key.fileobj
            if key.data == "udp":
                for _ in range(256):
                    try:
                        pkt, anc, _, client = u.recvmsg(65535, 64)
                    except (BlockingIOError, InterruptedError):
                        break
                    q = count(pkt, False, arrived(anc))
                    if q:
                        u.sendto(answer(pkt, q, False), client)
            elif key.data == "listen":
                try:
                    c, _ = t.accept()
                except (BlockingIOError, InterruptedError):
                    continue
                c.setblocking(True)
                c.settimeout(2)
                sel.register(c, selectors.EVENT_READ, "tcp")
                bufs[c] = b""
            else:
                try:
                    data = s.recv(65535)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(s)
                    s.close()
                    bufs.pop(s, None)
                    continue
                bufs[s] += data
                while len(bufs[s]) >= 2 and len(bufs[s]) >= 2 + struct.unpack(">H", bufs[s][:2])[0]:
                    n = struct.unpack(">H", bufs[s][:2])[0]
                    pkt, bufs[s] = bufs[s][2:2 + n], bufs[s][2 + n:]
                    q = count(pkt, True)
                    if q:
                        a = answer(pkt, q, True)
                        try:
                            s.sendall(struct.pack(">H", len(a)) + a)
                        except OSError:
                            break
    report("final")


main()
