#!/usr/bin/env python3
"""An agent smuggling data out through the labels of an allowed wildcard, for
tests/e2e/test_exfil.sh (issue 26). Every query carries fresh random bytes, encoded the way the
known DNS tunnels encode them.

usage: exfil_client.py MODE ADDR PORT ZONE SECONDS [SRC]

MODE
  iodine   base32 (iodine's alphabet, a-z0-5), three 63-byte labels and a session label
           ("<d1>.<d2>.<d3>.s7.ZONE"), over UDP from 32 source ports in turn, as fast as the
           answers come (up to 64 queries outstanding)
  base64   iodine's base64u (a-z A-Z 0-9 - _, 63-byte labels, two of them), over UDP from a
           new source port each query, as fast as it can
  dnscat2  hex, dnscat2's form ("<hex>.<hex>.ZONE", 62-byte labels), over TCP: 4 connections,
           each pipelining 32 queries at a time
  drip     base32 in one 40-byte label, one query every 50 ms from one source port (a sender
           that stays under any rate limit)
SRC: the source address (default: any).

Prints, when SECONDS are over:
  client mode=M sent=N answered=A noerror=K refused=R other=O first_ok=NAME
(first_ok: the first name answered NOERROR, for the test to ask again later)."""
import base64
import os
import random
import selectors
import socket
import struct
import sys
import time

import dnsmini

mode, addr, port, zone, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], \
    float(sys.argv[5])
src = sys.argv[6] if len(sys.argv) > 6 else ""
B32 = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", "abcdefghijklmnopqrstuvwxyz012345")
counts = {"sent": 0, "answered": 0, "noerror": 0, "refused": 0, "other": 0}
first_ok = [""]
names = {}


def labels(text, size):
    return ".".join(text[i:i + size] for i in range(0, len(text), size))


def name_for(m):
    if m == "iodine":
        data = base64.b32encode(os.urandom(115)).decode().rstrip("=").translate(B32)[:189]
        return "%s.s7.%s" % (labels(data, 63), zone)
    if m == "base64":
        data = base64.urlsafe_b64encode(os.urandom(96)).decode().rstrip("=")[:126]
        return "%s.%s" % (labels(data, 63), zone)
    if m == "dnscat2":
        return "%s.%s" % (labels(os.urandom(62).hex(), 62), zone)
    if m == "drip":
        return "%s.%s" % (base64.b32encode(os.urandom(25)).decode().translate(B32)[:40], zone)
    sys.exit("unknown mode " + m)


def query(qid):
    name = name_for(mode)
    names[qid] = name
    counts["sent"] += 1
    return dnsmini.query(qid, name, 1)


def note(pkt):
    counts["answered"] += 1
    rc = dnsmini.rcode(pkt)
    key = {"NOERROR": "noerror", "REFUSED": "refused"}.get(rc, "other")
    counts[key] += 1
    if rc == "NOERROR" and not first_ok[0] and len(pkt) >= 2:
        first_ok[0] = names.get(struct.unpack(">H", pkt[:2])[0], "")


def udp_socket():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, 0))
    s.setblocking(False)
    return s


def run_udp(nsocks, outstanding, gap):
    socks = [udp_socket() for _ in range(nsocks)] if nsocks else []
    sel = selectors.DefaultSelector()
    for s in socks:
        sel.register(s, selectors.EVENT_READ)
    end = time.monotonic() + seconds
    inflight, i = {}, 0
    while time.monotonic() < end:
        while len(inflight) < outstanding:
            if nsocks:
                s = socks[i % nsocks]
            else:  # a new source port each query
                s = udp_socket()
                sel.register(s, selectors.EVENT_READ)
            qid = random.randrange(65536)
            try:
                s.sendto(query(qid), (addr, port))
            except OSError:
                pass
            inflight[(s, qid)] = time.monotonic()
            i += 1
            if gap:
                break
        for key, _ in sel.select(0.05):
            try:
                pkt = key.fileobj.recv(65535)
            except OSError:
                continue
            note(pkt)
            k = (key.fileobj, struct.unpack(">H", pkt[:2])[0] if len(pkt) >= 2 else -1)
            inflight.pop(k, None)
            if not nsocks:
                sel.unregister(key.fileobj)
                key.fileobj.close()
        now = time.monotonic()
        for k, t in list(inflight.items()):
            if now - t > 1.0:  # lost: go on
                del inflight[k]
                if not nsocks:
                    sel.unregister(k[0])
                    k[0].close()
        if gap:
            time.sleep(gap)


def run_tcp(nconns, pipeline):
    end = time.monotonic() + seconds
    conns = []
    for _ in range(nconns):
        c = socket.create_connection((addr, port), timeout=2, source_address=(src, 0))
        conns.append([c, b"", 0])
    sel = selectors.DefaultSelector()
    for st in conns:
        sel.register(st[0], selectors.EVENT_READ, st)
    while time.monotonic() < end:
        for st in conns:
            while st[2] < pipeline:
                q = query(random.randrange(65536))
                st[0].sendall(struct.pack(">H", len(q)) + q)
                st[2] += 1
        for key, _ in sel.select(0.2):
            st = key.data
            data = st[0].recv(65535)
            if not data:
                return
            st[1] += data
            while len(st[1]) >= 2 and len(st[1]) >= 2 + struct.unpack(">H", st[1][:2])[0]:
                n = struct.unpack(">H", st[1][:2])[0]
                note(st[1][2:2 + n])
                st[1] = st[1][2 + n:]
                st[2] -= 1


if mode == "iodine":
    run_udp(32, 64, 0)
elif mode == "base64":
    run_udp(0, 64, 0)
elif mode == "dnscat2":
    run_tcp(4, 32)
elif mode == "drip":
    run_udp(1, 1, 0.05)
else:
    sys.exit(__doc__)
print("client mode=%s %s first_ok=%s" % (mode, " ".join("%s=%d" % kv for kv in counts.items()),
                                          first_ok[0] or "-"))
