#!/usr/bin/env python3
"""A hostile client, for test_faults_client.sh. Every query asks for www.example.test A (an
allowed name with an answer), so a parser that let a broken packet through would show it.

usage:
  client_faults.py udp ADDR PORT
      Send each malformed or odd UDP query of the table below, one at a time, and print one
      line per case: "CASE RESULT", RESULT the answer's rcode (EDNS extended rcode included),
      "none" when nothing came back within 1 s, "RCODE-badhdr" when the answer did not echo
      the ID or lacked QR. A NOERROR result adds the A records and "small" if the answer fits
      512 bytes.
  client_faults.py tcp-bad ADDR PORT
      On one TCP connection: a query with a pointer to itself, an empty message (length 0), a
      5-byte message, then a good query. Prints each answer's rcode in order, then "open" if
      the connection is still usable.
  client_faults.py loris MODE ADDR PORT BOUND
      One slow TCP client; prints "closed ms=N sent=K" when moatd closes the connection, or
      "open ms=N sent=K" if it is still open after BOUND seconds. MODE:
        stall    send a length prefix of 300 and 10 bytes of the message, then nothing
        trickle  send the prefix of 300, then one byte of the message every 0.25 s
        silent   connect and send nothing (half-open from the server's point of view)
  client_faults.py idle ADDR PORT COUNT HOLD SRC
      Open COUNT TCP connections from SRC at once (non-blocking connects), print
      "open COUNT established=N", hold them HOLD seconds (or until the file HOLD.stop exists, if
      HOLD is a path:SECONDS pair), then print "closed_by_server=N still_open=M" and close all."""
import os
import random
import resource
import select
import socket
import struct
import sys
import time

import dnsmini

NAME = "www.example.test"
QN = dnsmini.wire_name(NAME) + b"\0\1\0\1"


def hdr(qd=1, an=0, ns=0, ar=0, flags=0x0100, qid=0x4D4F):
    return struct.pack(">HHHHHH", qid, flags, qd, an, ns, ar)


def opt(ttl=0, rdata=b"", owner=b"\0", rdlen=None):
    return owner + struct.pack(">HHIH", 41, 1232, ttl, len(rdata) if rdlen is None else rdlen) + rdata


def txt_rr(n):
    chunk = b"x" * 200
    return b"\xc0\x0c" + struct.pack(">HHIH", 16, 1, 0, len(chunk) + 1) + bytes([len(chunk)]) + chunk


def oversized_good():
    # A well-formed query of 4000 bytes: the question, then records nobody asked for.
    body = hdr(ar=0) + QN
    n = 0
    while len(body) + 214 <= 4000:
        body += txt_rr(n)
        n += 1
    body += b"\xc0\x0c" + struct.pack(">HHIH", 16, 1, 0, 4000 - len(body) - 12)
    body += b"\x00" * (4000 - len(body))
    return hdr(ar=n + 1) + body[12:]


def oversized_bogus():
    # 4000 bytes, 65535 additional records claimed, garbage after the question.
    rng = random.Random(4000)
    pkt = hdr(ar=65535) + QN
    return pkt + bytes(rng.randrange(256) for _ in range(4000 - len(pkt)))


off_opt = 12 + len(QN)  # where the first additional record starts
CASES = [
    ("empty", b""),
    ("one-byte", b"\x4d"),
    ("short-header", hdr()[:11]),
    ("header-only-qd0", hdr(qd=0)),
    ("header-only-qd1", hdr()),
    ("qdcount-0", hdr(qd=0) + QN),
    ("qdcount-2", hdr(qd=2) + QN + QN),
    ("ancount-1", hdr(an=1) + QN + b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + b"\xc0\0\2\1"),
    ("nscount-1", hdr(ns=1) + QN + b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + b"\xc0\0\2\1"),
    ("question-ptr-self", hdr() + b"\xc0\x0c" + b"\0\1\0\1"),
    ("question-ptr-forward", hdr() + b"\xc0\x12" + b"\0\1\0\1" + QN),
    ("question-label-overrun", hdr() + b"\x03www\x20example\x04test\x00\0\1\0\1"),
    ("question-label-past-end", hdr() + b"\x03www\x3fab"),
    ("question-reserved-label", hdr() + b"\x43www\x07example\x04test\x00\0\1\0\1"),
    ("question-name-too-long", hdr() + (b"\x3f" + b"a" * 63) * 5 + b"\0\0\1\0\1"),
    ("question-type-cut", hdr() + QN[:-3]),
    ("trailing-byte", hdr() + QN + b"\0"),
    ("additional-ptr-self", hdr(ar=1) + QN + struct.pack(">H", 0xC000 | off_opt) + opt()[1:]),
    ("additional-ptr-forward", hdr(ar=1) + QN + b"\xc0\xff" + opt()[1:]),
    ("additional-rdlen-past-end", hdr(ar=1) + QN + opt(rdata=b"\0\0\0\0", rdlen=50)),
    ("opt-twice", hdr(ar=2) + QN + opt() + opt()),
    ("opt-option-overrun", hdr(ar=1) + QN + opt(rdata=struct.pack(">HH", 10, 20) + b"abcd")),
    ("opt-option-cut", hdr(ar=1) + QN + opt(rdata=b"\0\x0a\0")),
    ("opt-owner-not-root", hdr(ar=1) + QN + opt(owner=b"\x01x\x00")),
    ("edns-version-1", hdr(ar=1) + QN + opt(ttl=0x00010000)),
    ("oversized-4000-good", oversized_good()),
    ("oversized-4000-bogus", oversized_bogus()),
    ("max-datagram-65507", hdr() + QN + b"\0" * (65507 - 12 - len(QN))),
    ("control-good", hdr(ar=1) + QN + opt()),
]


def result(pkt):
    if pkt is None:
        return "none"
    rc = dnsmini.rcode(pkt) or "short"
    if pkt[:2] != b"\x4d\x4f" or not pkt[2] & 0x80:
        return rc + "-badhdr"
    if rc == "NOERROR":
        info = dnsmini.records(pkt) or {"a": []}
        rc += " a=" + ",".join(info["a"]) + (" small" if len(pkt) <= 512 else " big")
    return rc


def udp(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    for name, pkt in CASES:
        s.sendto(pkt, (addr, port))
        s.settimeout(1.0)
        try:
            got = s.recv(65535)
        except socket.timeout:
            got = None
        print("%s %s" % (name, result(got)), flush=True)


def recv_msg(s):
    h = b""
    while len(h) < 2:
        c = s.recv(2 - len(h))
        if not c:
            return None
        h += c
    n = struct.unpack(">H", h)[0]
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            return None
        b += c
    return b


def tcp_bad(addr, port):
    s = socket.create_connection((addr, port), timeout=3)
    bad = hdr() + b"\xc0\x0c" + b"\0\1\0\1"
    good = hdr(ar=1) + QN + opt()
    s.sendall(struct.pack(">H", len(bad)) + bad + b"\0\0" + b"\0\5abcde" +
              struct.pack(">H", len(good)) + good)
    try:
        for _ in range(2):
            m = recv_msg(s)
            print(result(m) if m else "closed", flush=True)
            if m is None:
                return
    except socket.timeout:
        print("timeout", flush=True)
        return
    print("open", flush=True)


def loris(mode, addr, port, bound):
    s = socket.create_connection((addr, port), timeout=3)
    t0 = time.monotonic()
    sent = 0
    if mode == "stall":
        s.sendall(struct.pack(">H", 300) + b"\0" * 10)
        sent = 12
    elif mode == "trickle":
        s.sendall(struct.pack(">H", 300))
        sent = 2
    next_byte = time.monotonic() + 0.25
    while time.monotonic() - t0 < bound:
        wait = 0.05
        r, _, _ = select.select([s], [], [], wait)
        if r:
            try:
                data = s.recv(4096)
            except ConnectionResetError:
                data = b""
            if not data:
                print("closed ms=%d sent=%d" % ((time.monotonic() - t0) * 1000, sent), flush=True)
                return
        if mode == "trickle" and time.monotonic() >= next_byte and sent < 302:
            try:
                s.send(b"\0")
                sent += 1
            except OSError:
                print("closed ms=%d sent=%d" % ((time.monotonic() - t0) * 1000, sent),
                      flush=True)
                return
            next_byte += 0.25
    print("open ms=%d sent=%d" % ((time.monotonic() - t0) * 1000, sent), flush=True)


def idle(addr, port, count, hold, src):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = count + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(want, soft), hard), hard))
    socks = []
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.bind((src, 0))
        s.connect_ex((addr, port))
        socks.append(s)
    # Wait (bounded) for the handshakes: the kernel completes them into moatd's backlog.
    pending = set(socks)
    end = time.monotonic() + 10
    est = 0
    p = select.poll()
    fdmap = {s.fileno(): s for s in socks}
    for s in socks:
        p.register(s, select.POLLOUT)
    while pending and time.monotonic() < end:
        for fd, ev in p.poll(100):
            s = fdmap[fd]
            if s in pending:
                pending.discard(s)
                p.unregister(fd)
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
                    est += 1
    print("open %d established=%d" % (count, est), flush=True)
    path, _, secs = hold.partition(":")
    end = time.monotonic() + float(secs or path)
    while time.monotonic() < end and not (secs and os.path.exists(path)):
        time.sleep(0.05)
    closed, still = 0, 0
    for s in socks:
        try:
            data = s.recv(1)
            if data == b"":
                closed += 1
            else:
                still += 1
        except BlockingIOError:
            still += 1
        except OSError:
            closed += 1
    print("closed_by_server=%d still_open=%d" % (closed, still), flush=True)
    for s in socks:
        s.close()


cmd = sys.argv[1]
if cmd == "udp":
    udp(sys.argv[2], int(sys.argv[3]))
elif cmd == "tcp-bad":
    tcp_bad(sys.argv[2], int(sys.argv[3]))
elif cmd == "loris":
    loris(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
elif cmd == "idle":
    idle(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6])
else:
    sys.exit("unknown command " + cmd)
