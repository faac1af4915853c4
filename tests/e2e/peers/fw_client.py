#!/usr/bin/env python3
"""A stand-in for moatd's side of the firewall channel (include/moat/fwproto.h, format version 3).

Reads moat-fw's HELLO (the first message of an admitted connection; a peer moat-fw refuses is
closed before it: then "not admitted" and exit 1), sends GRANT messages to moat-fw's
SOCK_SEQPACKET socket and prints each ACK as
    seq=N status=OK lifetime=S
Usage:
    fw_client.py --socket PATH [--agent NAME] [--lifetime S] [--seq N] [--client ADDR]
                 [--count N] [--quiet] [--ports tcp/80,443 udp/53 ...] ADDR...
    fw_client.py --socket PATH --raw HEX        send raw bytes (malformed-message tests)
    fw_client.py --socket PATH --hello          print the HELLO and exit:
        hello placement=forward ranges=10.77.0.0/24,2001:db8:1::/64
--count N sends N grants at once (seq, seq+1, ...); grant i carries every ADDR plus i, so the
grants name different addresses. All are written before any ACK is read, so moat-fw sees them in
one loop turn as far as the socket buffer allows. --quiet prints only the summary line
    acks=N ok=N denied=N failed=N badmsg=N ms=T
Exit status 0 when every ACK arrived (whatever its status), 1 otherwise.
"""
import argparse
import ipaddress
import socket
import struct
import sys
import time

VERSION = 3
GRANT = 1
ACK = 2
HELLO = 3
PLACEMENT = {1: "netns", 2: "forward"}
STATUS = {0: "OK", 1: "DENIED", 2: "FAILED", 3: "BADMSG"}


def addr_field(text):
    if text is None:
        return bytes(17)
    a = ipaddress.ip_address(text)
    if a.version == 4:
        return bytes([4]) + a.packed + bytes(12)
    return bytes([6]) + a.packed


def parse_ports(specs):
    """["tcp/80,443", "udp/53"] -> sorted unique [(6, 80), (6, 443), (17, 53)]."""
    out = set()
    for spec in specs or []:
        proto, ports = spec.split("/", 1)
        for p in ports.split(","):
            out.add(({"tcp": 6, "udp": 17}[proto], int(p)))
    return sorted(out)


def encode_grant(seq, lifetime, agent, client, addrs, ports=()):
    name = agent.encode()
    msg = struct.pack(">BBHII", VERSION, GRANT, len(addrs), seq, lifetime)
    msg += bytes([len(name)]) + name + addr_field(client)
    msg += bytes([len(ports)]) + b"".join(struct.pack(">BH", pr, po) for pr, po in ports)
    for a in addrs:
        msg += addr_field(a)
    return msg


def decode_ack(data):
    if len(data) != 16:
        raise ValueError("ACK of %d bytes" % len(data))
    ver, typ, status, seq, lifetime, reserved = struct.unpack(">BBHIII", data)
    if ver != VERSION or typ != ACK or reserved != 0:
        raise ValueError("bad ACK header %r" % data)
    return seq, STATUS.get(status, "UNKNOWN(%d)" % status), lifetime


def decode_hello(data):
    if len(data) < 4 or data[0] != VERSION or data[1] != HELLO or len(data) != 4 + 18 * data[3]:
        raise ValueError("bad HELLO %r" % data)
    ranges = []
    for i in range(data[3]):
        r = data[4 + 18 * i: 22 + 18 * i]
        addr = ipaddress.ip_address(r[2:6] if r[0] == 4 else r[2:18])
        ranges.append("%s/%d" % (addr, r[1]))
    return PLACEMENT.get(data[2], "?%d" % data[2]), ranges


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--socket", required=True)
    p.add_argument("--agent", default="ci")
    p.add_argument("--lifetime", type=int, default=60)
    p.add_argument("--seq", type=int, default=1)
    p.add_argument("--client")
    p.add_argument("--count", type=int, default=1)
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--raw")
    p.add_argument("--hello", action="store_true")
    p.add_argument("--ports", nargs="+", help="tcp/80,443 udp/53 ... (default: every port)")
    p.add_argument("--timeout", type=float, default=5.0)
    p.add_argument("addrs", nargs="*")
    a = p.parse_args()

    msgs = []
    if a.raw is not None:
        msgs.append(bytes.fromhex(a.raw))
    elif not a.hello:
        if not a.addrs:
            p.error("give at least one ADDR")
        for i in range(a.count):
            addrs = [str(ipaddress.ip_address(x) + i) for x in a.addrs]
            msgs.append(encode_grant(a.seq + i, a.lifetime, a.agent, a.client, addrs,
                                     parse_ports(a.ports)))

    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    # Room for a whole --count burst in the socket (unix sockets charge queued messages to the
    # sender): SO_SNDBUFFORCE needs CAP_NET_ADMIN, which the tests have; otherwise keep the default.
    try:
        s.setsockopt(socket.SOL_SOCKET, 32, 4 << 20)  # SO_SNDBUFFORCE
    except OSError:
        pass
    s.settimeout(a.timeout)
    s.connect(a.socket)
    first = s.recv(4096)
    if not first:
        print("not admitted: closed before HELLO")
        return 1
    placement, ranges = decode_hello(first)
    if a.hello:
        print("hello placement=%s ranges=%s" % (placement, ",".join(ranges) or "-"))
        return 0
    t0 = time.monotonic()
    for m in msgs:
        s.send(m)
    counts = {}
    got = 0
    try:
        while got < len(msgs):
            data = s.recv(64)
            if not data:
                break
            seq, status, lifetime = decode_ack(data)
            got += 1
            counts[status] = counts.get(status, 0) + 1
            if not a.quiet:
                print("seq=%d status=%s lifetime=%d" % (seq, status, lifetime))
    except socket.timeout:
        print("timeout after %d of %d ACKs" % (got, len(msgs)), file=sys.stderr)
    ms = (time.monotonic() - t0) * 1000
    if a.quiet:
        print("acks=%d ok=%d denied=%d failed=%d badmsg=%d ms=%.1f" % (
            got, counts.get("OK", 0), counts.get("DENIED", 0), counts.get("FAILED", 0),
            counts.get("BADMSG", 0), ms))
    return 0 if got == len(msgs) else 1


if __name__ == "__main__":
    sys.exit(main())
