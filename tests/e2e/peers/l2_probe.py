#!/usr/bin/env python3
"""A sandbox that keeps knocking on its neighbour on the same bridge while the bridge tables
are changed under it (test_fw_bridge_l2.sh).

usage: l2_probe.py SECONDS STOPFILE IF DSTMAC ADDR4 ADDR6
Every GAP (2 ms) until SECONDS pass or STOPFILE exists: a non-blocking TCP connect to port 80
of ADDR4 and of ADDR6 (a SYN each), a UDP datagram "probe N" to port 9 of both, and on a
packet socket on IF two frames to DSTMAC: the IPv4 datagram "probe N" to ADDR4 port 9 and a
frame of ethertype 0x88b5 (neither IP nor ARP). The caller gives the sender a permanent
neighbour entry for both addresses, so every probe leaves as a unicast frame to DSTMAC at once.
Prints "rounds=N connects=K" at the end (connects made, the sender's view; the receiver's
capture is the judge). Bounded in time (SECONDS) and in sockets (a connect is closed after
0.3 s)."""
import os
import socket
import struct
import sys
import time

GAP = 0.002
PENDING = 0.3


def csum(data):
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def ip4_frame(dst, mine, src4, dst4, token):
    udp = struct.pack("!HHHH", 40000, 9, 8 + len(token), 0) + token
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                     socket.inet_aton(src4), socket.inet_aton(dst4))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    return dst + mine + struct.pack("!H", 0x0800) + ip + udp


def main():
    seconds, stop, ifname, dstmac, addr4, addr6 = sys.argv[1:7]
    seconds = float(seconds)
    dst = bytes.fromhex(dstmac.replace(":", ""))
    pkt = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    pkt.bind((ifname, 0))
    mine = pkt.getsockname()[4]
    udp4 = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp4.connect((addr4, 9))
    src4 = udp4.getsockname()[0]
    udp6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    pending = []  # (socket, start)
    made = rounds = 0
    end = time.time() + seconds
    while time.time() < end and not os.path.exists(stop):
        rounds += 1
        token = b"probe %d" % rounds
        now = time.time()
        for fam, addr in ((socket.AF_INET, addr4), (socket.AF_INET6, addr6)):
            s = socket.socket(fam, socket.SOCK_STREAM)
            s.setblocking(False)
            s.connect_ex((addr, 80))
            pending.append((s, now))
        for s, addr in ((udp4, addr4), (udp6, addr6)):
            try:
                s.sendto(token, (addr, 9))
            except OSError:
                pass  # a refusal (ICMP error on the connected socket) is an answer
        pkt.send(ip4_frame(dst, mine, src4, addr4, token))
        pkt.send(dst + mine + struct.pack("!H", 0x88B5) + token.ljust(46, b"\0"))
        time.sleep(GAP)
        keep = []
        for s, start in pending:
            if now - start <= PENDING:
                keep.append((s, start))
                continue
            try:
                s.getpeername()  # only a connect that was made has a peer
                made += 1
            except OSError:
                pass
            s.close()
        pending = keep
    for s, _ in pending:
        s.close()
    print("rounds=%d connects=%d" % (rounds, made), flush=True)


if __name__ == "__main__":
    main()
