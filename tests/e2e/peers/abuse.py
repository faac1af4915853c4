#!/usr/bin/env python3
"""Hostile clients for tests/e2e/test_abuse.sh and the soak (issue 12). One mode per abuse:

  pipeline ADDR PORT NAME QTYPE SECONDS
      One TCP connection with a small receive buffer: pipelines queries for NAME/QTYPE as fast
      as it can and never reads an answer. Prints, once the server closed the connection or
      SECONDS passed:  pipeline sent=N blocked_ms=B closed_ms=C   (closed_ms=-1: still open)
      blocked_ms: when sending first made no progress for 0.5 s (the server stopped reading).
  spray ADDR PORT SRC SUFFIX SECONDS RATE
      UDP from SRC: distinct names sink<N>.SUFFIX at RATE queries/s for SECONDS, answers read
      and counted by rcode:  spray sent=N NOERROR=.. SERVFAIL=.. ede14=..
  served ADDR PORT SRC PREFIX COUNT TIMEOUT
      COUNT queries, one after the other, for PREFIX<i>.<rest> from SRC (PREFIX holds the rest,
      e.g. "ok%d.abuse.test"), each waiting TIMEOUT s:  served answered=K of=N max_ms=M
  collide ADDR PORT NAME NCLIENTS ROUNDS
      NCLIENTS UDP clients on 127.1.x.y take turns, ROUNDS queries each for NAME (any of them
      may share a rate-limit bucket); per client the answers other than REFUSED are counted
      (max_ok: the most one client got; first_round_refused: REFUSED in the first round, when
      only a client sharing a bucket with an earlier one can be over a 1-token burst):
      collide clients=N answered=A refused=R first_round_refused=F max_ok=M elapsed_ms=T
"""
import resource
import select
import socket
import struct
import sys
import time

import dnsmini


def pipeline(addr, port, name, qtype, seconds):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect((addr, port))
    s.setblocking(False)
    q = dnsmini.query(0x4242, name, qtype, edns=False)
    one = struct.pack(">H", len(q)) + q
    chunk = one * 1000
    start = time.monotonic()
    end = start + seconds
    sent = 0
    pending = b""
    last_progress = start
    blocked_ms = -1
    closed_ms = -1
    while time.monotonic() < end:
        if not pending:
            pending = chunk
        try:
            n = s.send(pending)
            sent += n
            pending = pending[n:]
            last_progress = time.monotonic()
            continue
        except BlockingIOError:
            pass
        except OSError:
            closed_ms = int((time.monotonic() - start) * 1000)
            break
        now = time.monotonic()
        if blocked_ms < 0 and now - last_progress > 0.5:
            blocked_ms = int((now - start) * 1000)
        # closed by the server? (an RST: it closed with our queries unread)
        info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)
        if info[0] != 1:  # not ESTABLISHED any more
            closed_ms = int((now - start) * 1000)
            break
        select.select([], [s], [], 0.05)
    print("pipeline sent=%d blocked_ms=%d closed_ms=%d" % (sent // len(one), blocked_ms,
                                                           closed_ms), flush=True)


def spray(addr, port, src, suffix, seconds, rate):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    s.bind((src, 0))
    s.setblocking(False)
    counts = {}
    sent = 0
    start = time.monotonic()
    end = start + seconds
    while time.monotonic() < end:
        due = start + sent / rate
        while time.monotonic() >= due and sent < rate * seconds:
            try:
                s.sendto(dnsmini.query(sent & 0xFFFF, "sink%d.%s" % (sent, suffix)), (addr, port))
            except BlockingIOError:
                pass
            sent += 1
            due = start + sent / rate
        while True:
            try:
                pkt = s.recv(65535)
            except BlockingIOError:
                break
            rc = dnsmini.rcode(pkt) or "?"
            counts[rc] = counts.get(rc, 0) + 1
            info = dnsmini.records(pkt)
            if info and 14 in info["ede"]:
                counts["ede14"] = counts.get("ede14", 0) + 1
        select.select([s], [], [], 0.001)
    print("spray sent=%d %s" % (sent, " ".join("%s=%d" % kv for kv in sorted(counts.items()))),
          flush=True)


def served(addr, port, src, pattern, count, timeout):
    answered, worst = 0, 0
    for i in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind((src, 0))
        s.settimeout(timeout)
        qid = (i * 7919) & 0xFFFF
        t0 = time.monotonic()
        s.sendto(dnsmini.query(qid, pattern % i), (addr, port))
        try:
            while True:
                pkt = s.recv(65535)
                if len(pkt) >= 2 and struct.unpack(">H", pkt[:2])[0] == qid:
                    break
            ms = int((time.monotonic() - t0) * 1000)
            worst = max(worst, ms)
            if dnsmini.rcode(pkt) == "NOERROR":
                answered += 1
        except socket.timeout:
            worst = max(worst, int(timeout * 1000))
        s.close()
    print("served answered=%d of=%d max_ms=%d" % (answered, count, worst), flush=True)


def collide(addr, port, name, nclients, rounds):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, nclients + 256), hard))
    socks = []
    for i in range(nclients):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.1.%d.%d" % (i // 250, 1 + i % 250), 0))
        s.setblocking(False)
        socks.append(s)
    qs = [dnsmini.query(r, name) for r in range(rounds)]  # the ID says the round
    ok = [0] * nclients
    refused = 0
    first_refused = 0
    start = time.monotonic()

    def drain(wait):
        nonlocal refused, first_refused
        quiet_until = time.monotonic() + wait
        while time.monotonic() < quiet_until:
            got = False
            for i, s in enumerate(socks):
                while True:
                    try:
                        pkt = s.recv(65535)
                    except BlockingIOError:
                        break
                    got = True
                    if dnsmini.rcode(pkt) == "REFUSED":
                        refused += 1
                        first_refused += pkt[:2] == b"\0\0"
                    else:
                        ok[i] += 1
            if got:
                quiet_until = time.monotonic() + wait
            else:
                time.sleep(0.01)

    for r in range(rounds):
        for k, s in enumerate(socks):
            s.sendto(qs[r], (addr, port))
            if k % 200 == 199:
                drain(0.0)  # a breath now and then, so moatd's socket buffer does not overflow
        drain(0.02)
    elapsed = int((time.monotonic() - start) * 1000)
    drain(0.5)
    print("collide clients=%d answered=%d refused=%d first_round_refused=%d max_ok=%d "
          "elapsed_ms=%d" % (nclients, sum(ok), refused, first_refused, max(ok), elapsed),
          flush=True)


mode, a = sys.argv[1], sys.argv[2:]
if mode == "pipeline":
    pipeline(a[0], int(a[1]), a[2], int(a[3]), float(a[4]))
elif mode == "spray":
    spray(a[0], int(a[1]), a[2], a[3], float(a[4]), float(a[5]))
elif mode == "served":
    served(a[0], int(a[1]), a[2], a[3], int(a[4]), float(a[5]))
elif mode == "collide":
    collide(a[0], int(a[1]), a[2], int(a[3]), int(a[4]))
else:
    sys.exit("unknown mode " + mode)
