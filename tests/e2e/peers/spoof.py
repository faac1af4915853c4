#!/usr/bin/env python3
"""An upstream whose answers come from the wrong place.

usage: spoof.py ADDR PORT OTHER_ADDR SECONDS

Receives queries on UDP ADDR:PORT and answers each with the correct ID and question (A record
192.0.2.99), but never from ADDR:PORT: one copy from OTHER_ADDR:PORT (wrong address, right
port) and one from ADDR:PORT+1 (right address, wrong port). A resolver must ignore both.
Queries for names that start with "honest" are answered from ADDR:PORT itself (A 192.0.2.98),
which shows the same answer is accepted when it comes from the right source. Prints one line
per query ("spoofed NAME 2" or "honest NAME") and stops after SECONDS."""
import select
import socket
import sys
import time

import dnsmini

addr, port, other, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
listen = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
listen.bind((addr, port))
wrong_addr = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
wrong_addr.bind((other, port))
wrong_port = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
wrong_port.bind((addr, port + 1))
print("ready", flush=True)
end = time.time() + seconds
while time.time() < end:
    r, _, _ = select.select([listen], [], [], 0.1)
    if not r:
        continue
    pkt, client = listen.recvfrom(65535)
    q = dnsmini.question(pkt)
    if q is None:
        continue
    if q[2].startswith("honest"):
        listen.sendto(dnsmini.answer_a(pkt, ["192.0.2.98"]), client)
        print("honest %s" % q[2], flush=True)
        continue
    ans = dnsmini.answer_a(pkt, ["192.0.2.99"])
    wrong_addr.sendto(ans, client)
    wrong_port.sendto(ans, client)
    print("spoofed %s 2" % q[2], flush=True)
