#!/usr/bin/env python3
"""A black-hole upstream: bind UDP and TCP on ADDR PORT, read and never answer, for SECONDS at
most. Lets tests see moatd's timeout path (the ICMP-refused path is a different one)."""
import socket
import sys
import time

addr, port, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind((addr, port))
t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
t.bind((addr, port))
t.listen(16)
u.settimeout(0.1)
end = time.time() + seconds
while time.time() < end:
    try:
        u.recvfrom(65535)
    except socket.timeout:
        pass
