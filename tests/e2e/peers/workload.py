#!/usr/bin/env python3
"""A scripted agent workload for the audit-to-enforce tests: resolve names, connect to them.

usage: workload.py RESOLVER PLAN

PLAN has one line per name: NAME SPEC... where SPEC is tcp/PORT or udp/PORT (connect to every
address of the answer on that port: TCP connects and sends NAME, UDP sends NAME in one
datagram), or lit-tcp/PORT: connect by address (the IP literal, as a tool that kept the address
would) to the answer's first address. Each name is asked once (A, over UDP, 1 s timeout, one
retry). One output line per name:
    NAME rcode=NOERROR addrs=203.0.113.10 tcp/443=connected lit-tcp/8443=connected
and a last line: names=N answered=N connects=N connected=N
Every wait is bounded (1 s per question or connect)."""
import socket
import sys

import dnsmini

resolver, plan = sys.argv[1], sys.argv[2]


def resolve(name, qid):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(1)
    try:
        for _ in range(2):
            s.sendto(dnsmini.query(qid, name), (resolver, 53))
            try:
                pkt, _ = s.recvfrom(65535)
            except socket.timeout:
                continue
            info = dnsmini.records(pkt)
            return dnsmini.rcode(pkt), (info["a"] if info else [])
        return "timeout", []
    finally:
        s.close()


def connect(proto, addr, port, token):
    if proto == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.sendto(token.encode() + b"\n", (addr, port))
            return "sent"
        except OSError as e:
            return "failed:%s" % e.errno
        finally:
            s.close()
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(1)
    try:
        s.connect((addr, port))
        s.sendall(token.encode() + b"\n")
        return "connected"
    except OSError as e:
        return "failed:%s" % (e.errno or "timeout")
    finally:
        s.close()


names = answered = connects = connected = 0
for i, line in enumerate(open(plan)):
    words = line.split()
    if not words or words[0].startswith("#"):
        continue
    name, specs = words[0], words[1:]
    names += 1
    rc, addrs = resolve(name, 1000 + i)
    answered += rc == "NOERROR" and bool(addrs)
    out = ["%s rcode=%s addrs=%s" % (name, rc, ",".join(addrs) or "-")]
    for spec in specs:
        proto, port = spec.split("/")
        targets = addrs[:1] if proto.startswith("lit-") else addrs
        for a in targets:
            r = connect(proto.replace("lit-", ""), a, int(port), name)
            connects += 1
            connected += r in ("connected", "sent")
            out.append("%s=%s" % (spec, r))
    print(" ".join(out), flush=True)
print("names=%d answered=%d connects=%d connected=%d" % (names, answered, connects, connected))
