#!/usr/bin/env python3
"""What a hostile sandbox sends, and what listens at the receiver (moat-fw's e2e tests).

usage: hostile.py CMD ARGS...
  udp-log SECONDS ADDR:PORT...   print "got SRC TOKEN" for every datagram (receiver side)
  tcp-listen SECONDS ADDR:PORT...   accept and close connections, print "accepted SRC PORT"
  raw4 SRC DST PORT TOKEN        one UDP datagram from any source (raw socket, IP_HDRINCL)
  raw6 SRC DST PORT TOKEN [IF]   the same for IPv6 (IPPROTO_RAW: the header is ours)
  nd6 SRC DST TOKEN [IF]         a neighbour solicitation (type 135, hop limit 255) to DST with
                                 TOKEN as payload after the target address
  udp SRC DST PORT TOKEN [IF]    a plain UDP datagram bound to SRC ("-": any)
  connect DST PORT [SRC] [IF]    TCP connect, 2 s: prints "connected" or "failed: ..."
  idle PATH N SECONDS            hold N idle connections to a SEQPACKET socket; prints "held N"
  ping DST                       one ICMP(v6) echo, 1 s: prints "reply" or "no reply"
  packet IF DSTMAC SRC DST PORT TOKEN   the UDP datagram in an Ethernet frame on a packet
                                 socket (AF_PACKET: below every inet hook of the sender)
  frame IF DSTMAC ETHERTYPE TOKEN   one Ethernet frame of any ethertype (0x88b5: local
                                 experimental, neither IP nor ARP) carrying TOKEN
  capture SECONDS IF SRCMAC      receiver side, below the inet stack: print "from SRCMAC type
                                 0xNNNN" for every frame IF receives from SRCMAC, and "barrier"
                                 for every received frame that carries "l2-barrier"
Addresses are IPv4 or IPv6; IF gives the scope of link-local and multicast addresses."""
import select
import socket
import struct
import sys
import time


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def scope(ifname):
    return socket.if_nametoindex(ifname) if ifname else 0


def split(spec):
    host, port = spec.rsplit(":", 1)
    return host.strip("[]"), int(port)


def fam(addr):
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def bind_all(specs, kind):
    socks = []
    for spec in specs:
        host, port = split(spec)
        s = socket.socket(fam(host), kind)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        if kind == socket.SOCK_STREAM:
            s.listen(64)
        socks.append(s)
    print("ready", flush=True)
    return socks


def udp_log(seconds, specs):
    socks = bind_all(specs, socket.SOCK_DGRAM)
    end = time.time() + seconds
    while time.time() < end:
        r, _, _ = select.select(socks, [], [], 0.2)
        for s in r:
            data, src = s.recvfrom(2048)
            print("got %s %s" % (src[0], data.decode(errors="replace")), flush=True)


def tcp_listen(seconds, specs):
    socks = bind_all(specs, socket.SOCK_STREAM)
    end = time.time() + seconds
    while time.time() < end:
        r, _, _ = select.select(socks, [], [], 0.2)
        for s in r:
            c, src = s.accept()
            print("accepted %s %d" % (src[0], s.getsockname()[1]), flush=True)
            c.close()


def udp_header(src, dst, port, payload, v6):
    length = 8 + len(payload)
    hdr = struct.pack("!HHHH", 40000, port, length, 0)
    if v6:
        pseudo = socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst)
        pseudo += struct.pack("!IxxxB", length, 17)
    else:
        pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!xBH", 17, length)
    c = csum(pseudo + hdr + payload) or 0xFFFF
    return struct.pack("!HHHH", 40000, port, length, c) + payload


def raw4(src, dst, port, token):
    udp = udp_header(src, dst, port, token.encode(), False)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                     socket.inet_aton(src), socket.inet_aton(dst))
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_HDRINCL, 1)
    sendto(s, ip + udp, (dst, 0))


def sendto(s, data, dest):
    """A local firewall drop shows as EPERM: that is an answer, not a crash."""
    try:
        s.sendto(data, dest)
        print("sent", flush=True)
    except OSError as e:
        print("not sent: %s" % e, flush=True)


def ip6_packet(src, dst, nh, hops, payload):
    return struct.pack("!IHBB", 6 << 28, len(payload), nh, hops) + \
        socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst) + payload


def send6(dst, pkt, ifname):
    s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_RAW)
    sendto(s, pkt, (dst, 0, 0, scope(ifname)))


def raw6(src, dst, port, token, ifname=None):
    send6(dst, ip6_packet(src, dst, 17, 64, udp_header(src, dst, port, token.encode(), True)),
          ifname)


def nd6(src, dst, token, ifname=None):
    body = struct.pack("!BBHI", 135, 0, 0, 0) + socket.inet_pton(socket.AF_INET6, dst) + \
        token.encode()
    pseudo = socket.inet_pton(socket.AF_INET6, src) + socket.inet_pton(socket.AF_INET6, dst) + \
        struct.pack("!IxxxB", len(body), 58)
    c = csum(pseudo + body)
    body = body[:2] + struct.pack("!H", c) + body[4:]
    send6(dst, ip6_packet(src, dst, 58, 255, body), ifname)


def udp(src, dst, port, token, ifname=None):
    s = socket.socket(fam(dst), socket.SOCK_DGRAM)
    if src != "-":
        s.bind((src, 0, 0, scope(ifname)) if ":" in src else (src, 0))
    if ifname:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, ifname.encode())
    sendto(s, token.encode(), (dst, port, 0, scope(ifname)) if ":" in dst else (dst, port))


def connect(dst, port, src=None, ifname=None):
    s = socket.socket(fam(dst), socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        if src and src != "-":
            s.bind((src, 0, 0, scope(ifname)) if ":" in src else (src, 0))
        s.connect((dst, port, 0, scope(ifname)) if ":" in dst else (dst, port))
        print("connected")
    except OSError as e:
        print("failed: %s" % e)


def idle(path, n, seconds):
    held = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            s.connect(path)
            held.append(s)
        except OSError:
            pass
    print("held %d" % len(held), flush=True)
    end = time.time() + seconds
    while time.time() < end:
        time.sleep(0.2)


def ping(dst):
    v6 = ":" in dst
    s = socket.socket(fam(dst), socket.SOCK_RAW,
                      socket.IPPROTO_ICMPV6 if v6 else socket.IPPROTO_ICMP)
    body = struct.pack("!BBHHH", 128 if v6 else 8, 0, 0, 0x4d4f, 1) + b"moat"
    if not v6:  # the kernel fills in the ICMPv6 checksum, not the ICMP one
        body = body[:2] + struct.pack("!H", csum(body)) + body[4:]
    s.sendto(body, (dst, 0))
    end = time.time() + 1
    while time.time() < end:
        r, _, _ = select.select([s], [], [], max(0, end - time.time()))
        if not r:
            break
        data = s.recv(2048)
        icmp = data if v6 else data[(data[0] & 15) * 4:]
        if icmp[0] == (129 if v6 else 0) and icmp[4:6] == b"\x4d\x4f":
            print("reply")
            return
    print("no reply")


def packet(ifname, dstmac, src, dst, port, token):
    v6 = ":" in dst
    udp = udp_header(src, dst, port, token.encode(), v6)
    if v6:
        ip = ip6_packet(src, dst, 17, 64, udp)
    else:
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 1, 0, 64, 17, 0,
                         socket.inet_aton(src), socket.inet_aton(dst))
        ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:] + udp
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((ifname, 0))
    mine = s.getsockname()[4]
    frame = bytes.fromhex(dstmac.replace(":", "")) + mine + \
        struct.pack("!H", 0x86DD if v6 else 0x0800) + ip
    s.send(frame)
    print("sent", flush=True)


def frame(ifname, dstmac, ethertype, token):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((ifname, 0))
    payload = token.encode().ljust(46, b"\0")  # the minimum Ethernet payload
    s.send(bytes.fromhex(dstmac.replace(":", "")) + s.getsockname()[4] +
           struct.pack("!H", int(ethertype, 16)) + payload)
    print("sent", flush=True)


def capture(seconds, ifname, srcmac):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))  # ETH_P_ALL
    s.bind((ifname, 3))
    want = bytes.fromhex(srcmac.replace(":", ""))
    print("ready", flush=True)
    end = time.time() + seconds
    while time.time() < end:
        r, _, _ = select.select([s], [], [], 0.2)
        if not r:
            continue
        data, addr = s.recvfrom(65535)
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        if data[6:12] == want:
            print("from %s type 0x%04x" % (srcmac, struct.unpack("!H", data[12:14])[0]),
                  flush=True)
        if b"l2-barrier" in data:
            print("barrier", flush=True)


def main():
    cmd, a = sys.argv[1], sys.argv[2:]
    if cmd == "udp-log":
        udp_log(float(a[0]), a[1:])
    elif cmd == "tcp-listen":
        tcp_listen(float(a[0]), a[1:])
    elif cmd == "raw4":
        raw4(a[0], a[1], int(a[2]), a[3])
    elif cmd == "raw6":
        raw6(a[0], a[1], int(a[2]), a[3], *a[4:5])
    elif cmd == "nd6":
        nd6(a[0], a[1], a[2], *a[3:4])
    elif cmd == "udp":
        udp(a[0], a[1], int(a[2]), a[3], *a[4:5])
    elif cmd == "connect":
        connect(a[0], int(a[1]), *a[2:4])
    elif cmd == "packet":
        packet(a[0], a[1], a[2], a[3], int(a[4]), a[5])
    elif cmd == "frame":
        frame(a[0], a[1], a[2], a[3])
    elif cmd == "capture":
        capture(float(a[0]), a[1], a[2])
    elif cmd == "ping":
        ping(a[0])
    elif cmd == "idle":
        idle(a[0], int(a[1]), float(a[2]))
    else:
        sys.exit(__doc__)


main()
