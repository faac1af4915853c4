"""Just enough DNS wire format for the fault-injection peers (tests/e2e/peers/*.py import it from
their own directory): build queries and simple answers, read the header, the question and the
A records of an answer. Everything here trusts nothing it reads: a malformed packet gives None,
never an exception the caller did not expect."""
import heapq
import select
import socket
import struct
import time

RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED",
          16: "BADVERS"}


def wire_name(name):
    name = name.strip(".")
    if not name:
        return b"\0"
    return b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"


def query(qid, name, qtype=1, edns=True, flags=0x0100):
    """A query for NAME/QTYPE IN; with EDNS (1232 bytes) unless edns is False."""
    q = struct.pack(">HHHHHH", qid, flags, 1, 0, 0, 1 if edns else 0)
    q += wire_name(name) + struct.pack(">HH", qtype, 1)
    if edns:
        q += b"\0" + struct.pack(">HHIH", 41, 1232, 0, 0)
    return q


def read_name(pkt, off):
    """Uncompressed or compressed name at off: (lower-case text, offset after it) or None."""
    labels, jumped, end, hops = [], False, None, 0
    while True:
        if off >= len(pkt):
            return None
        n = pkt[off]
        if n & 0xC0 == 0xC0:
            if off + 1 >= len(pkt) or hops > 64:
                return None
            if not jumped:
                end = off + 2
            jumped, hops = True, hops + 1
            off = (n & 0x3F) << 8 | pkt[off + 1]
            continue
        if n & 0xC0:
            return None
        off += 1
        if n == 0:
            break
        if off + n > len(pkt):
            return None
        labels.append(pkt[off:off + n].decode("latin-1").lower())
        off += n
    return ".".join(labels) + ".", (end if jumped else off)


def question(pkt):
    """(id, flags, qname, qtype, qclass, offset after the question) of a message, or None."""
    if len(pkt) < 12:
        return None
    qid, flags, qd = struct.unpack(">HHH", pkt[:6])
    if qd != 1:
        return None
    r = read_name(pkt, 12)
    if r is None or r[1] + 4 > len(pkt):
        return None
    qtype, qclass = struct.unpack(">HH", pkt[r[1]:r[1] + 4])
    return qid, flags, r[0], qtype, qclass, r[1] + 4


def answer_a(pkt, addrs, ttl=60, flags=0x8180, qid=None):
    """An answer to query pkt (its question copied) with one A record per address in addrs
    (dotted quads), owner compressed to the question. qid replaces the query's ID if given."""
    q = question(pkt)
    if q is None:
        return None
    hdr = struct.pack(">HHHHHH", q[0] if qid is None else qid, flags, 1, len(addrs), 0, 0)
    body = pkt[12:q[5]]
    for a in addrs:
        body += struct.pack(">HHHIH", 0xC00C, 1, 1, ttl, 4) + bytes(int(x) for x in a.split("."))
    return hdr + body


def rcode(pkt):
    """Full rcode of a response (EDNS extended bits included) as a name, or None."""
    if len(pkt) < 12:
        return None
    rc = pkt[3] & 0xF
    info = records(pkt)
    if info is not None and info["opt_ttl"] is not None:
        rc |= (info["opt_ttl"] >> 24) << 4
    return RCODES.get(rc, str(rc))


def records(pkt):
    """Walk a response: {'a': [dotted quads of A records, any section], 'ede': [codes],
    'opt_ttl': OPT TTL or None, 'counts': (qd, an, ns, ar)} or None if it does not parse."""
    if len(pkt) < 12:
        return None
    counts = struct.unpack(">HHHH", pkt[4:12])
    off = 12
    for _ in range(counts[0]):
        r = read_name(pkt, off)
        if r is None:
            return None
        off = r[1] + 4
    out = {"a": [], "ede": [], "opt_ttl": None, "counts": counts}
    for _ in range(sum(counts[1:])):
        r = read_name(pkt, off)
        if r is None or r[1] + 10 > len(pkt):
            return None
        rtype, _, ttl, rdlen = struct.unpack(">HHIH", pkt[r[1]:r[1] + 10])
        rd = r[1] + 10
        if rd + rdlen > len(pkt):
            return None
        if rtype == 1 and rdlen == 4:
            out["a"].append(".".join(str(b) for b in pkt[rd:rd + 4]))
        if rtype == 41:
            out["opt_ttl"] = ttl
            o = rd
            while o + 4 <= rd + rdlen:
                code, olen = struct.unpack(">HH", pkt[o:o + 4])
                if code == 15 and olen >= 2:
                    out["ede"].append(struct.unpack(">H", pkt[o + 4:o + 6])[0])
                o += 4 + olen
        off = rd + rdlen
    return out


def listen_udp_tcp(addr, port):
    """A UDP socket (4 MiB buffers, so a burst is not dropped) and a listening TCP socket, both
    bound to ADDR:PORT (IPv4)."""
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
    u.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
    u.bind((addr, port))
    t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    t.bind((addr, port))
    t.listen(64)
    return u, t


def serve(u, t, seconds, on_udp, on_tcp, later, stopped, on_sent=None):
    """The peers' event loop: UDP socket u and listening TCP socket t for SECONDS at most or until
    stopped() is true. Datagrams go to on_udp(pkt, client) (a burst drained, bounded), a TCP
    connection to on_tcp(); later is a heap of (due, seq, answer, client) sent when due (then
    on_sent() is called, if given)."""
    end = time.monotonic() + seconds
    while not stopped() and time.monotonic() < end:
        wait = 0.1
        if later:
            wait = max(0.0, min(wait, later[0][0] - time.monotonic()))
        try:
            r, _, _ = select.select([u, t], [], [], wait)
        except InterruptedError:
            continue
        if u in r:
            for _ in range(256):
                try:
                    pkt, client = u.recvfrom(65535, socket.MSG_DONTWAIT)
                except BlockingIOError:
                    break
                on_udp(pkt, client)
        if t in r:
            on_tcp()
        now = time.monotonic()
        while later and later[0][0] <= now:
            _, _, ans, client = heapq.heappop(later)
            try:
                u.sendto(ans, client)
            except OSError:
                continue
            if on_sent:
                on_sent()
