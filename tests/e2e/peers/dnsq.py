#!/usr/bin/env python3
"""One timed DNS query, for tests that assert on time and on what else arrives.

usage: dnsq.py [--tcp] [--src ADDR] [--timeout S] [--linger S] [--noedns] ADDR PORT NAME [QTYPE]

Sends one query (random ID, QTYPE number, default 1 = A) and prints one line:
    RCODE ms=N a=ADDR,ADDR ede=CODE,CODE extra=K extra_a=ADDR,...
ms is the time from send to the first reply with our ID; a the A records in it; with --linger S
the UDP socket keeps listening S seconds more and extra counts every further datagram (a late or
second answer must never reach a client), extra_a their A records. "timeout ms=N" when nothing
answered within --timeout (default 5 s); "closed ms=N" when a TCP server closed without an
answer."""
import random
import socket
import struct
import sys
import time

import dnsmini

args = sys.argv[1:]
tcp, src, timeout, linger, edns = False, None, 5.0, 0.0, True
while args and args[0].startswith("--"):
    opt = args.pop(0)
    if opt == "--tcp":
        tcp = True
    elif opt == "--src":
        src = args.pop(0)
    elif opt == "--timeout":
        timeout = float(args.pop(0))
    elif opt == "--linger":
        linger = float(args.pop(0))
    elif opt == "--noedns":
        edns = False
    else:
        sys.exit("unknown option " + opt)
addr, port, name = args[0], int(args[1]), args[2]
qtype = int(args[3]) if len(args) > 3 else 1
qid = random.randrange(65536)
msg = dnsmini.query(qid, name, qtype, edns=edns)
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET


def describe(pkt, ms):
    info = dnsmini.records(pkt) or {"a": [], "ede": []}
    return "%s ms=%d a=%s ede=%s" % (dnsmini.rcode(pkt), ms, ",".join(info["a"]),
                                       ",".join(str(c) for c in info["ede"]))


def recv_exact(s, n, deadline):
    buf = b""
    while len(buf) < n:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = s.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


t0 = time.monotonic()
deadline = t0 + timeout
if tcp:
    s = socket.socket(fam, socket.SOCK_STREAM)
    if src:
        s.bind((src, 0))
    s.settimeout(timeout)
    try:
        s.connect((addr, port))
        s.sendall(struct.pack(">H", len(msg)) + msg)
        hdr = recv_exact(s, 2, deadline)
        body = hdr and recv_exact(s, struct.unpack(">H", hdr)[0], deadline)
    except socket.timeout:
        print("timeout ms=%d" % ((time.monotonic() - t0) * 1000))
        sys.exit(0)
    except OSError as e:
        print("closed ms=%d err=%s" % ((time.monotonic() - t0) * 1000, e.__class__.__name__))
        sys.exit(0)
    ms = (time.monotonic() - t0) * 1000
    print(describe(body, ms) if body else "closed ms=%d" % ms)
    sys.exit(0)

s = socket.socket(fam, socket.SOCK_DGRAM)
if src:
    s.bind((src, 0))
s.sendto(msg, (addr, port))
first, ms = None, 0
while first is None:
    left = deadline - time.monotonic()
    if left <= 0:
        print("timeout ms=%d" % ((time.monotonic() - t0) * 1000))
        sys.exit(0)
    s.settimeout(left)
    try:
        data = s.recv(65535)
    except socket.timeout:
        continue
    if len(data) >= 2 and struct.unpack(">H", data[:2])[0] == qid:
        first, ms = data, (time.monotonic() - t0) * 1000
extra, extra_a = 0, []
end = time.monotonic() + linger
while time.monotonic() < end:
    s.settimeout(max(0.01, end - time.monotonic()))
    try:
        data = s.recv(65535)
    except socket.timeout:
        break
    extra += 1
    info = dnsmini.records(data)
    if info:
        extra_a += info["a"]
print("%s extra=%d extra_a=%s" % (describe(first, ms), extra, ",".join(extra_a)))
