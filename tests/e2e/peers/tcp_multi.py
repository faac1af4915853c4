#!/usr/bin/env python3
"""Open one TCP connection to ADDR 53, send a query for each NAME back to back (pipelined, in one
write), and print one line per answer in arrival order: "ID RCODE ANCOUNT"."""
import socket
import struct
import sys

addr, names = sys.argv[1], sys.argv[2:]
out = b""
for i, name in enumerate(names):
    q = struct.pack(">HHHHHH", 1000 + i, 0x0100, 1, 0, 0, 0)
    q += b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0\0\1\0\1"
    out += struct.pack(">H", len(q)) + q
s = socket.create_connection((addr, 53), timeout=3)
s.sendall(out)
buf = b""
for _ in names:
    while len(buf) < 2 or len(buf) < 2 + struct.unpack(">H", buf[:2])[0]:
        chunk = s.recv(65535)
        if not chunk:
            sys.exit("connection closed early")
        buf += chunk
    n = struct.unpack(">H", buf[:2])[0]
    msg, buf = buf[2:2 + n], buf[2 + n:]
    print(struct.unpack(">H", msg[:2])[0], msg[3] & 0xF, struct.unpack(">H", msg[6:8])[0])
