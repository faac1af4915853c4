#!/usr/bin/env python3
"""A misbehaving upstream on UDP and TCP ADDR:PORT, for SECONDS at most.

usage: bad_upstream.py MODE ADDR PORT SECONDS

MODE
  tcreset  UDP answers have TC=1 (no records), so the resolver retries over TCP; TCP accepts
           and resets the connection at once (SO_LINGER 0), before reading anything.
  tchalf   UDP answers have TC=1; TCP reads the query, sends a length prefix of 100 and only
           10 bytes, then closes.
  tcstall  UDP answers have TC=1; TCP accepts, reads the query and never answers (the
           connection stays open until the peer stops).
  flood    every UDP query gets 100 answers: the first 20 with wrong IDs (A 192.0.2.66), then
           80 alternating between the right ID (A 192.0.2.80) and wrong IDs (A 192.0.2.66).
  partial  names whose first label starts with "sink" are never answered (UDP or TCP); any
           other name gets A 192.0.2.10, TTL 1. Prints its totals when it stops:
             partial: answered=N ignored=N
  chclass  every query gets, besides A 192.0.2.10 (class IN), two class-CH records holding
           169.254.169.254: an "A" of 16 bytes and an "AAAA" of 4 (not address-sized for
           their types, so a check by size alone misses them).
  flaky    a plain upstream that misbehaves some of the time, for the soak: A 192.0.2.x for any
           name, TTL 30; 10% of queries dropped, 10% answered 50-800 ms late (past a
           500 ms timeout about 40% of those); names whose first label starts with "sink"
           never answered (the soak's in-flight spray).

Prints one line per event ("udp NAME", "tcp-reset", "tcp-half", "tcp-stall", "flood NAME 100"); flaky
prints only its totals when it stops (SIGTERM or SECONDS):
  flaky: received=N answered=N dropped=N delayed=N"""
import heapq
import random
import signal
import socket
import struct
import sys
import time

import dnsmini

mode, addr, port, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
if mode not in ("tcreset", "tchalf", "tcstall", "flood", "flaky", "partial", "chclass"):
    sys.exit("unknown mode " + mode)
u, t = dnsmini.listen_udp_tcp(addr, port)
stop = False


def on_term(signum, frame):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)
stats = {"received": 0, "answered": 0, "dropped": 0, "delayed": 0, "ignored": 0}
held = []  # tcstall: connections kept open, unanswered
later = []  # heap of (due, seq, packet, client)
seq = 0
rng = random.Random(7)


def on_udp(pkt, client):
    global seq
    q = dnsmini.question(pkt)
    if q is None:
        return
    if mode in ("tcreset", "tchalf", "tcstall"):
        u.sendto(dnsmini.answer_a(pkt, [], flags=0x8380), client)
        print("udp %s" % q[2], flush=True)
    elif mode == "flood":
        good = dnsmini.answer_a(pkt, ["192.0.2.80"])
        for k in range(100):
            if k >= 20 and k % 2 == 0:
                u.sendto(good, client)
            else:
                u.sendto(dnsmini.answer_a(pkt, ["192.0.2.66"], qid=q[0] ^ (k + 1)), client)
        print("flood %s 100" % q[2], flush=True)
    elif mode == "partial":
        if q[2].lower().startswith("sink"):
            stats["ignored"] += 1
            return
        u.sendto(dnsmini.answer_a(pkt, ["192.0.2.10"], ttl=1), client)
        stats["answered"] += 1
    elif mode == "chclass":
        ans = bytearray(dnsmini.answer_a(pkt, ["192.0.2.10"]))
        md = bytes([169, 254, 169, 254])
        ans += struct.pack(">HHHIH", 0xC00C, 1, 3, 60, 16) + md * 4
        ans += struct.pack(">HHHIH", 0xC00C, 28, 3, 60, 4) + md
        ans[6:8] = struct.pack(">H", 3)
        u.sendto(bytes(ans), client)
        print("chclass %s" % q[2], flush=True)
    else:
        stats["received"] += 1
        if q[2].lower().startswith("sink"):
            stats["ignored"] += 1
            return
        x = rng.random()
        if x < 0.10:
            stats["dropped"] += 1
            return
        # a stable address per name, inside 192.0.2.0/24
        ans = dnsmini.answer_a(pkt, ["192.0.2.%d" % (1 + sum(q[2].encode()) % 250)], ttl=30)
        if x < 0.20:
            stats["delayed"] += 1
            seq += 1
            heapq.heappush(later, (time.monotonic() + rng.uniform(0.05, 0.8), seq, ans, client))
            return
        u.sendto(ans, client)
        stats["answered"] += 1


def on_tcp():
    c, _ = t.accept()
    if mode == "tcreset":
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()
        print("tcp-reset", flush=True)
        return
    c.settimeout(1)
    try:
        c.recv(65535)
        if mode in ("tcstall", "partial"):
            held.append(c)  # never answered, never closed while we run
            print("tcp-stall", flush=True)
            return
        if mode == "tchalf":
            c.sendall(struct.pack(">H", 100) + b"\0" * 10)
            print("tcp-half", flush=True)
    except OSError:
        pass
    c.close()




def on_sent():
    stats["answered"] += 1


dnsmini.serve(u, t, seconds, on_udp, on_tcp, later, lambda: stop, on_sent)
if mode == "partial":
    print("partial: answered=%d ignored=%d" % (stats["answered"], stats["ignored"]), flush=True)
if mode == "flaky":
    print("flaky: " + " ".join("%s=%d" % (k, stats[k]) for k in
                               ("received", "answered", "dropped", "delayed", "ignored")),
          flush=True)
