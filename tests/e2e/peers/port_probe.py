#!/usr/bin/env python3
"""Port-scope probes for the firewall tests, both ends.

  port_probe.py listen ADDR SECONDS LOG SPEC...   receiver outside the sandbox: SPEC is tcp/PORT
      or udp/PORT; each accepted connection / datagram appends "tcp PORT TOKEN" / "udp PORT
      TOKEN" to LOG (TOKEN: the first line the peer sent), flushed at once.
  port_probe.py tcp ADDR PORT TOKEN    connect, send TOKEN; prints "connected" or "failed: ..."
  port_probe.py udp ADDR PORT TOKEN    send TOKEN in one datagram; prints "sent"
  port_probe.py echo ADDR              one ICMP echo (raw socket); prints "reply" or "no reply"
Every wait is bounded (connect and echo 1 s)."""
import os
import select
import socket
import struct
import sys
import time


def listen(addr, seconds, log, specs):
    socks = {}
    for spec in specs:
        proto, port = spec.split("/")
        if proto == "tcp":
            s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((addr, int(port)))
            s.listen(64)
        else:
            s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((addr, int(port)))
        socks[s] = (proto, port)
    out = open(log, "a")
    end = time.time() + seconds
    while time.time() < end:
        r, _, _ = select.select(list(socks), [], [], 0.2)
        for s in r:
            proto, port = socks[s]
            if proto == "tcp":
                c, _ = s.accept()
                c.settimeout(1)
                try:
                    token = c.recv(200).decode(errors="replace").strip()
                except OSError:
                    token = ""
                c.close()
            else:
                token = s.recv(200).decode(errors="replace").strip()
            out.write("%s %s %s\n" % (proto, port, token))
            out.flush()


def tcp(addr, port, token):
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    s.settimeout(1)
    try:
        s.connect((addr, port))
        s.sendall(token.encode() + b"\n")
        print("connected")
    except OSError as e:
        print("failed: %s" % e)
    finally:
        s.close()


def udp(addr, port, token):
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(token.encode() + b"\n", (addr, port))
        print("sent")
    except OSError as e:
        print("failed: %s" % e)


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF)
    s += s >> 16
    return ~s & 0xFFFF


def echo(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    ident = os.getpid() & 0xFFFF
    body = struct.pack("!BBHHH", 8, 0, 0, ident, 1) + b"moat"
    pkt = body[:2] + struct.pack("!H", csum(body)) + body[4:]
    try:
        s.sendto(pkt, (addr, 0))
    except OSError as e:
        print("failed: %s" % e)
        return
    end = time.time() + 1
    while time.time() < end:
        r, _, _ = select.select([s], [], [], max(0, end - time.time()))
        if not r:
            break
        data, (src, _) = s.recvfrom(200)
        ihl = (data[0] & 0xF) * 4
        if src == addr and data[ihl] == 0 and struct.unpack("!H", data[ihl + 4:ihl + 6])[0] == ident:
            print("reply")
            return
    print("no reply")


cmd = sys.argv[1]
if cmd == "listen":
    listen(sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5:])
elif cmd == "tcp":
    tcp(sys.argv[2], int(sys.argv[3]), sys.argv[4])
elif cmd == "udp":
    udp(sys.argv[2], int(sys.argv[3]), sys.argv[4])
elif cmd == "echo":
    echo(sys.argv[2])
else:
    sys.exit("unknown command %s" % cmd)
