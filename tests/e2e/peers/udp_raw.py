#!/usr/bin/env python3
"""Send one raw datagram (hex) to ADDR PORT and print the reply as hex, or 'timeout'.
Used by end-to-end tests to send packets dig will not build (malformed, odd opcodes)."""
import socket
import sys

addr, port, hexdata = sys.argv[1], int(sys.argv[2]), sys.argv[3]
wait = float(sys.argv[4]) if len(sys.argv) > 4 else 2.0
fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
s = socket.socket(fam, socket.SOCK_DGRAM)
s.settimeout(wait)
s.sendto(bytes.fromhex(hexdata), (addr, port))
try:
    data, _ = s.recvfrom(65535)
    print(data.hex())
except socket.timeout:
    print("timeout")
