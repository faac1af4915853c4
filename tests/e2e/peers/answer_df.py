#!/usr/bin/env python3
"""The IPv4 header of a DNS server's UDP answer, as it crossed the interface.

usage: answer_df.py [--src ADDR] ADDR PORT NAME

Sends one A query for NAME to ADDR:PORT (IPv4) from a fresh socket (bound to --src) and reads,
on a raw socket opened before it (root in the test's namespace), the datagram that came back to
that socket's port. Prints one line: "df=1 frag=0 id=N rcode=R" (DF set, fragment offset and MF clear, the
IP ID) or "none" when no answer arrived within 3 s. (A raw socket sees a datagram after
reassembly: DF is what tells whether the sender would have let it be fragmented.)"""
import random
import socket
import struct
import sys
import time

import dnsmini

args = sys.argv[1:]
src = "0.0.0.0"
if args[:1] == ["--src"]:
    src = args[1]
    args = args[2:]
addr, port, name = args[0], int(args[1]), args[2]
raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_UDP)
raw.settimeout(0.5)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((src, 0))
mine = s.getsockname()[1]
s.sendto(dnsmini.query(random.randrange(65536), name), (addr, port))
end = time.monotonic() + 3
while time.monotonic() < end:
    try:
        pkt = raw.recv(65535)
    except socket.timeout:
        continue
    ihl = (pkt[0] & 15) * 4
    if len(pkt) < ihl + 8:
        continue
    sport, dport = struct.unpack(">HH", pkt[ihl:ihl + 4])
    if sport != port or dport != mine:
        continue
    ident, frag = struct.unpack(">HH", pkt[4:8])
    print("df=%d frag=%d id=%d rcode=%s" % (frag >> 14 & 1, frag & 0x3fff, ident,
                                            dnsmini.rcode(pkt[ihl + 8:])))
    sys.exit(0)
print("none")
