#!/usr/bin/env python3
"""Write the hand-made seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/.

Deterministic (no randomness, no clock): running it again rewrites the same bytes. Only files named
seed-*.bin are written; inputs kept from fuzzing runs (min-*, regress-*) are left alone.

  tests/fuzz/make_seeds.py            # from anywhere

Seeds are small real messages (queries with and without EDNS, answers with CNAME/DNAME/SVCB/SOA,
compression) and deliberately broken ones (pointer loops, truncation, overruns), pattern and range
files, YAML configs and firewall-channel messages. The packets are written by hand here rather
than with a DNS library so that malformed ones are as easy to make as good ones.
"""
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

A, NS, CNAME, SOA, PTR, MX, TXT, AAAA, SRV, DNAME, OPT, RRSIG, NSEC, NSEC3, SVCB, HTTPS, ANY = (
    1, 2, 5, 6, 12, 15, 16, 28, 33, 39, 41, 46, 47, 50, 64, 65, 255)
TSIG = 250
IN, CH = 1, 3


def name(text):
    """Uncompressed wire name of a dotted text name (no escapes)."""
    out = b""
    for label in text.strip(".").split("."):
        if label:
            out += bytes([len(label)]) + label.encode("latin-1")
    return out + b"\0"


def ptr(off):
    return struct.pack("!H", 0xC000 | off)


def header(id_, flags, qd=1, an=0, ns=0, ar=0):
    return struct.pack("!HHHHHH", id_, flags, qd, an, ns, ar)


def question(owner, qtype, qclass=IN):
    return owner + struct.pack("!HH", qtype, qclass)


def rr(owner, rtype, rdata, ttl=300, rclass=IN):
    return owner + struct.pack("!HHIH", rtype, rclass, ttl, len(rdata)) + rdata


def opt(size=1232, do=False, version=0, ext=0, options=b"", owner=b"\0"):
    ttl = (ext << 24) | (version << 16) | (0x8000 if do else 0)
    return owner + struct.pack("!HHIH", OPT, size, ttl, len(options)) + options


def option(code, data):
    return struct.pack("!HH", code, len(data)) + data


def a(addr):
    return bytes(int(x) for x in addr.split("."))


def aaaa(text):
    import ipaddress
    return ipaddress.IPv6Address(text).packed


def soa(mname, rname, serial=2024010101, minimum=60):
    return mname + rname + struct.pack("!IIIII", serial, 3600, 600, 86400, minimum)


def svcb_rdata(prio, target, params):
    out = struct.pack("!H", prio) + target
    for key, val in params:
        out += struct.pack("!HH", key, len(val)) + val
    return out


QNAME_OFF = 12  # the question name right after the header: a pointer target for compression

# ---------------------------------------------------------------- client queries
def queries():
    q = {}
    www = name("www.example.com")
    q["a-plain"] = header(0x1234, 0x0100) + question(www, A)
    q["aaaa-edns-do"] = header(0x2345, 0x0100, ar=1) + question(www, AAAA) + opt(4096, do=True)
    q["edns-cookie"] = (header(0x3456, 0x0100, ar=1) + question(name("api.github.com"), A) +
                        opt(1232, options=option(10, bytes(range(8)))))
    q["edns-many-options"] = (header(7, 0x0120, ar=1) + question(www, HTTPS) +
                              opt(1400, options=option(10, bytes(24)) + option(12, bytes(30)) +
                                  option(8, b"\x00\x01\x18\x00\x0a\x00\x00")))
    q["edns-small-size"] = header(8, 0x0100, ar=1) + question(www, A) + opt(100)
    q["edns-size-zero"] = header(8, 0x0100, ar=1) + question(www, A) + opt(0)
    q["root-ns"] = header(9, 0x0000) + question(b"\0", NS)
    q["any"] = header(10, 0x0100) + question(www, ANY)
    q["https-mixed-case"] = header(11, 0x0110) + question(name("WwW.ExAmPlE.CoM"), HTTPS)
    q["class-ch"] = header(12, 0x0000) + question(name("version.bind"), TXT, CH)
    q["iplit"] = header(13, 0x0100) + question(name("169.254.169.254"), A)
    q["iplit-hex"] = header(14, 0x0100) + question(name("0xa9fea9fe"), A)
    q["nipio"] = header(15, 0x0100) + question(name("app.10.0.0.1.nip.io"), A)
    tsig = (name("key.example") + struct.pack("!HHIH", TSIG, 255, 0, 0))
    tsig_rdata = (name("hmac-sha256") + b"\x00\x00\x65\x00\x00\x00" + struct.pack("!H", 300) +
                  struct.pack("!H", 32) + bytes(32) + struct.pack("!HHH", 0x1234, 0, 0))
    tsig = name("key.example") + struct.pack("!HHIH", TSIG, 255, 0, len(tsig_rdata)) + tsig_rdata
    q["tsig"] = header(16, 0x0100, ar=1) + question(www, A) + tsig
    q["opt-and-tsig"] = header(17, 0x0100, ar=2) + question(www, A) + opt() + tsig
    q["tsig-short-rdata"] = (header(18, 0x0100, ar=1) + question(www, A) + name("k") +
                             struct.pack("!HHIH", TSIG, 255, 0, 3) + b"\x01\x02\x03")
    q["extra-a-record"] = (header(19, 0x0100, ar=1) + question(www, A) +
                           rr(ptr(QNAME_OFF), A, a("192.0.2.1")))
    q["extra-a-bad-len"] = (header(20, 0x0100, ar=1) + question(www, A) +
                            rr(ptr(QNAME_OFF), A, b"\x01\x02\x03"))
    q["badvers"] = header(21, 0x0100, ar=1) + question(www, A) + opt(version=1)
    q["notimp-notify"] = header(22, 0x2000) + question(www, SOA)
    q["notimp-update"] = header(23, 0x2800, qd=1, ns=1) + question(name("example.com"), SOA)
    q["response"] = header(24, 0x8180) + question(www, A)
    q["short"] = b"\x12\x34\x01"
    q["empty"] = b""
    q["header-only"] = header(25, 0x0100, qd=0)
    q["trailing"] = header(26, 0x0100) + question(www, A) + b"\x00\x00\x00"
    q["question-pointer"] = header(27, 0x0100) + ptr(4) + struct.pack("!HH", A, IN)
    q["two-questions"] = header(28, 0x0100, qd=2) + question(www, A) + question(www, AAAA)
    q["ancount"] = header(29, 0x0100, an=1) + question(www, A) + rr(ptr(12), A, a("1.2.3.4"))
    q["two-opt"] = header(30, 0x0100, ar=2) + question(www, A) + opt() + opt()
    q["opt-nonroot"] = header(31, 0x0100, ar=1) + question(www, A) + opt(owner=ptr(12))
    q["opt-bad-options"] = (header(32, 0x0100, ar=1) + question(www, A) +
                            opt(options=b"\x00\x0a\x00\x09abc"))
    q["opt-truncated"] = header(33, 0x0100, ar=1) + question(www, A) + opt()[:7]
    q["label-overrun"] = header(34, 0x0100) + b"\x3fabc"
    q["label-64"] = header(35, 0x0100) + b"\x40" + b"a" * 64 + b"\0" + struct.pack("!HH", 1, 1)
    q["label-63"] = header(36, 0x0100) + b"\x3f" + b"a" * 63 + b"\0" + struct.pack("!HH", 1, 1)
    n255 = b"".join(bytes([n]) + c * n for n, c in ((63, b"a"), (63, b"b"), (63, b"c"), (61, b"d")))
    n255 += b"\0"
    assert len(n255) == 255
    q["name-255"] = header(37, 0x0100) + n255 + struct.pack("!HH", 1, 1)
    n256 = b"".join(bytes([n]) + c * n for n, c in ((63, b"a"), (63, b"b"), (63, b"c"), (62, b"d")))
    n256 += b"\0"
    q["name-256"] = header(38, 0x0100) + n256 + struct.pack("!HH", 1, 1)
    q["extra-pointer-loop"] = (header(39, 0x0100, ar=1) + question(www, A) + b"\xc0\x21" +
                               struct.pack("!HHIH", A, IN, 0, 4) + a("1.2.3.4"))
    base = header(40, 0x0100, ar=1) + question(www, A)
    q["extra-pointer-self"] = (base + ptr(len(base)) + struct.pack("!HHIH", A, IN, 0, 4) +
                               a("1.1.1.1"))
    q["extra-pointer-to-0"] = base + ptr(0) + struct.pack("!HHIH", TXT, IN, 0, 1) + b"\0"
    q["rdlen-overrun"] = (header(41, 0x0100, ar=1) + question(www, A) + b"\0" +
                          struct.pack("!HHIH", OPT, 1232, 0, 40) + b"\x00\x0a\x00\x02ab")
    q["binary-label"] = header(42, 0x0100) + question(b"\x03a\x00b\x03\xff.\\\0", A)
    return q


# ---------------------------------------------------------------- upstream answers
def responses():
    r = {}
    www = name("www.example.com")
    QR_RD_RA = 0x8180

    def resp(id_, qn, qt, an=(), ns=(), ar=(), flags=QR_RD_RA, rcode=0):
        return (header(id_, flags | rcode, 1, len(an), len(ns), len(ar)) + question(qn, qt) +
                b"".join(an) + b"".join(ns) + b"".join(ar))

    P = ptr(QNAME_OFF)  # the question name
    r["a"] = resp(1, www, A, [rr(P, A, a("192.0.2.1")), rr(P, A, a("192.0.2.2"), ttl=30)])
    r["a-edns"] = resp(2, www, A, [rr(P, A, a("192.0.2.1"))], ar=[opt(1232, do=True)])
    r["aaaa"] = resp(3, www, AAAA, [rr(P, AAAA, aaaa("2001:db8::1"))])
    r["a-private"] = resp(4, www, A, [rr(P, A, a("10.0.0.1"))])
    r["a-metadata"] = resp(5, www, A, [rr(P, A, a("169.254.169.254"))])
    # www.example.com CNAME edge.cdn.example.net (compressed against nothing: literal), then A.
    cdn = name("edge.cdn.example.net")
    q1 = header(6, QR_RD_RA, 1, 3, 0, 0) + question(www, A)
    off_cname_rdata = len(q1) + 2 + 10
    msg = q1 + rr(P, CNAME, cdn)
    msg += rr(ptr(off_cname_rdata), CNAME, b"\x02lb" + ptr(off_cname_rdata + 5))
    off_lb = len(q1) + 2 + 10 + len(cdn) + 2 + 10
    msg += rr(ptr(off_lb), A, a("198.51.100.7"))
    r["cname-chain"] = msg
    # DNAME: example.com DNAME example.net; synthesized CNAME; A at the target.
    q2 = header(7, QR_RD_RA, 1, 3, 0, 0) + question(www, A)
    dn = rr(ptr(QNAME_OFF + 4), DNAME, name("example.net"))
    off_dtarget = len(q2) + 2 + 10
    cn = rr(P, CNAME, b"\x03www" + ptr(off_dtarget))
    off_cn_rdata = len(q2) + len(dn) + 2 + 10
    r["dname"] = q2 + dn + cn + rr(ptr(off_cn_rdata), A, a("203.0.113.5"))
    r["dname-only"] = resp(8, www, A, [rr(ptr(QNAME_OFF + 4), DNAME, name("example.org"))])
    r["dname-compressed-target"] = resp(9, www, A,
                                        [rr(ptr(QNAME_OFF + 4), DNAME, ptr(QNAME_OFF + 12))])
    # A DNAME whose (compressed) target points into a record that is not passed on.
    q3 = header(42, QR_RD_RA, 1, 2, 0, 0) + question(www, A)
    evil = rr(name("evil.example.org"), A, a("192.0.2.66"))
    r["dname-target-in-dropped"] = q3 + evil + rr(ptr(QNAME_OFF + 4), DNAME, ptr(len(q3) + 5))
    hints = [(1, b"\x02h2"), (4, a("192.0.2.10") + a("192.0.2.11")),
             (6, aaaa("2001:db8::10"))]
    r["https-hints"] = resp(10, www, HTTPS, [rr(P, HTTPS, svcb_rdata(1, b"\0", hints))])
    r["https-alias"] = resp(11, www, HTTPS,
                            [rr(P, HTTPS, svcb_rdata(0, name("svc.example.net"), []))])
    r["svcb-bad-order"] = resp(12, name("_dns.example.com"), SVCB,
                               [rr(ptr(QNAME_OFF), SVCB,
                                   svcb_rdata(1, b"\0", [(6, aaaa("::1")), (4, a("127.0.0.1"))]))])
    r["svcb-bad-hint-len"] = resp(13, www, HTTPS,
                                  [rr(P, HTTPS, svcb_rdata(1, b"\0", [(4, b"\1\2\3")]))])
    r["https-in-additional"] = resp(14, www, A, [rr(P, A, a("192.0.2.1"))],
                                    ar=[rr(P, HTTPS, svcb_rdata(1, b"\0", [(4, a("127.0.0.1"))]))])
    # Negative answers.
    ex = name("nope.example.com")
    soa_rr = rr(ptr(QNAME_OFF + 5), SOA,
                soa(name("ns1.example.com"), name("hostmaster.example.com")), ttl=900)
    nsec = rr(ptr(QNAME_OFF + 5), NSEC, name("a.example.com") + b"\x00\x06\x40\x01\x00\x00\x00\x03")
    r["nxdomain-soa"] = resp(15, ex, A, ns=[soa_rr, nsec], rcode=3)
    r["nodata-soa"] = resp(16, ex, AAAA, ns=[soa_rr])
    r["soa-short"] = resp(17, ex, A, ns=[rr(ptr(QNAME_OFF + 5), SOA, b"\0\0" + bytes(19))], rcode=3)
    r["referral"] = resp(18, www, A,
                         ns=[rr(ptr(QNAME_OFF + 4), NS, name("ns1.example.com")),
                             rr(ptr(QNAME_OFF + 4), NS, b"\x03ns2" + ptr(QNAME_OFF + 4))],
                         ar=[rr(name("ns1.example.com"), A, a("192.0.2.53"))], flags=0x8100)
    r["mx"] = resp(19, name("example.com"), MX,
                   [rr(P, MX, b"\x00\x0a\x04mail" + P),
                    rr(P, MX, b"\x00\x14" + name("mx.example.net"))])
    r["mx-short"] = resp(20, name("example.com"), MX, [rr(P, MX, b"\x00\x0a")])
    r["ptr"] = resp(21, name("1.2.0.192.in-addr.arpa"), PTR, [rr(P, PTR, name("host.example.com"))])
    r["txt"] = resp(22, www, TXT, [rr(P, TXT, b"\x05hello\x05world")])
    r["txt-bad-string"] = resp(23, www, TXT, [rr(P, TXT, b"\x09hi")])
    r["srv-compressed-target"] = resp(24, name("_x._tcp.example.com"), SRV,
                                      [rr(P, SRV, b"\0\1\0\1\x01\xbb" + ptr(QNAME_OFF + 8))])
    r["rrsig"] = resp(25, www, A, [rr(P, A, a("192.0.2.1")),
                                   rr(P, RRSIG, struct.pack("!HBBIIIH", A, 13, 3, 300, 2000000000,
                                                            1900000000, 12345) +
                                      name("example.com") + bytes(64))], flags=0x81a0)
    r["servfail"] = resp(26, www, A, rcode=2)
    r["not-qr"] = resp(27, www, A, [rr(P, A, a("192.0.2.1"))], flags=0x0100)
    r["offchain"] = resp(28, www, A, [rr(name("evil.example.org"), A, a("192.0.2.66")),
                                      rr(P, A, a("192.0.2.1"))])
    r["opt-in-answer"] = resp(29, www, A, [opt()])
    r["two-opt"] = resp(30, www, A, [rr(P, A, a("192.0.2.1"))], ar=[opt(), opt()])
    r["a-bad-len"] = resp(31, www, A, [rr(P, A, b"\1\2\3\4\5")])
    r["a-bad-len-chaos"] = resp(32, www, A, [rr(P, A, b"\1\2\3", rclass=CH)])
    r["ttl-top-bit"] = resp(33, www, A, [rr(P, A, a("192.0.2.1"), ttl=0x80000001)])
    # CNAME loop and a long chain.
    lp = header(34, QR_RD_RA, 1, 2, 0, 0) + question(www, A)
    o1 = len(lp) + 2 + 10
    lp += rr(P, CNAME, name("b.example.com"))
    lp += rr(ptr(o1), CNAME, P)
    r["cname-loop"] = lp
    chain = [rr(name("c%d.example.com" % i if i else "www.example.com"), CNAME,
                name("c%d.example.com" % (i + 1))) for i in range(20)]
    r["cname-long"] = resp(35, www, A, chain + [rr(name("c20.example.com"), A, a("192.0.2.20"))])
    # Malformed framing.
    good = r["a"]
    r["truncated-mid-rr"] = good[:-3]
    r["truncated-header"] = good[:7]
    r["trailing"] = good + b"\0\0"
    r["rdlen-overrun"] = resp(36, www, A, [P + struct.pack("!HHIH", A, IN, 60, 200) + a("1.1.1.1")])
    body = header(37, QR_RD_RA, 1, 1, 0, 0) + question(www, A)
    r["pointer-self"] = body + ptr(len(body)) + struct.pack("!HHIH", A, IN, 1, 4) + a("1.1.1.1")
    r["pointer-forward"] = (body + ptr(len(body) + 2) + b"\0" + struct.pack("!HHIH", A, IN, 1, 4) +
                            a("1.1.1.1"))
    r["pointer-loop"] = (body + b"\x01a" + ptr(len(body) + 4) + b"\x01b" + ptr(len(body)) +
                         struct.pack("!HHIH", A, IN, 1, 4) + a("1.1.1.1"))
    r["pointer-to-header"] = body + ptr(2) + struct.pack("!HHIH", A, IN, 1, 4) + a("1.1.1.1")
    r["question-pointer-loop"] = header(38, QR_RD_RA) + ptr(QNAME_OFF) + struct.pack("!HH", A, IN)
    r["too-many-rrs"] = resp(39, www, A, [rr(P, A, a("192.0.2.%d" % (i % 250)))
                                          for i in range(WIRE_MAXRR_PLUS)])
    r["big-answer"] = resp(40, www, TXT, [rr(P, TXT, b"\xff" + bytes([65 + i % 26]) * 255)
                                          for i in range(12)])
    r["many-a"] = resp(41, www, A, [rr(P, A, a("192.0.2.%d" % i)) for i in range(1, 60)])
    return r


WIRE_MAXRR_PLUS = 513


# ---------------------------------------------------------------- names
def names():
    n = {}
    n["plain"] = name("www.example.com")
    n["root"] = b"\0"
    n["text-plain"] = b"www.Example.COM"
    n["text-trailing-dot"] = b"example.com."
    n["text-root"] = b"."
    n["text-escapes"] = b"a\\.b.\\065\\066c.ex\\\\ample."
    n["text-bad-escape"] = b"a\\25"
    n["text-escape-256"] = b"\\256.com"
    n["text-empty-label"] = b"a..b"
    n["text-label-64"] = b"a" * 64 + b".com"
    n["text-label-63"] = b"a" * 63 + b".com"
    n["text-long"] = b".".join([b"a" * 63] * 4)
    n["text-spaces"] = b"a b.c\td"
    # Messages with compression: header-ish prefix then names pointing back.
    msg = bytes(12) + name("example.com") + b"\x03www" + ptr(12) + b"\x01a" + ptr(25)
    n["msg-pointers"] = msg
    n["msg-pointer-loop"] = bytes(12) + b"\x01a" + ptr(14) + b"\x01b" + ptr(12)
    n["msg-pointer-self"] = b"\x02" + bytes(11) + ptr(12)
    n["msg-pointer-zero"] = name("example.com") + b"\x03www" + ptr(0)
    n["msg-pointer-forward"] = b"\x05" + ptr(4) + b"\x01x\x00" + bytes(10)
    n["msg-64-pointers"] = b"\x01a\x00" + b"".join(ptr(1 + 2 * i) for i in range(66))
    n["msg-label-overrun"] = b"\x00\x3fabc"
    n["msg-reserved-label"] = b"\x00\x40abc\x00\x80abc\x00"
    n["msg-255"] = b"\x00" + b"".join(bytes([k]) + c * k for k, c in
                                      ((63, b"a"), (63, b"b"), (63, b"c"), (61, b"d"))) + b"\0"
    n["msg-compressed-long"] = (b"\x00" + b"\x3f" + b"a" * 63 + b"\x3f" + b"b" * 63 + b"\0" +
                                b"\x3f" + b"c" * 63 + b"\x3e" + b"d" * 62 + ptr(1))
    return n


# ---------------------------------------------------------------- policy and config
CONFIG_OK = b"""\
listen: ["127.0.0.1:53", "[::1]:5353"]
upstreams: ["192.0.2.53:53", "2001:db8::53"]
upstream_source: 192.0.2.10
upstream_timeout_ms: 1000
upstream_attempts: 3
tcp_idle_ms: 10000
tcp_max_clients: 1024
log: {file: /var/log/moat/queries.jsonl}
highrisk: [extra-highrisk.txt]
blocked_ranges: [extra-ranges.txt]
firewall_socket: /run/moat/fw.sock
firewall_timeout_ms: 1000
firewall_fail_open: false
agents:
  - name: ci-42
    clients: [10.0.0.0/24, "2001:db8::/64"]
    allow: [zones/allow/example.txt]
    deny: nxdomain
  - name: build.box_2
    clients: [192.168.1.7]
    deny: sinkhole
    sinkhole: [0.0.0.0, "::"]
    sinkhole_ttl: 60
    strict_chain: true
    allow_private: true
"""

CONFIGS = {
    "full": CONFIG_OK,
    "minimal": b"upstreams: [192.0.2.53]\nagents:\n  - name: a\n    clients: [127.0.0.1]\n",
    "empty": b"",
    "comment-only": b"# nothing\n",
    "not-a-map": b"- a\n- b\n",
    "unknown-key": b"listen: [127.0.0.1]\nfrobnicate: 3\n",
    "duplicate-key": b"tcp_idle_ms: 1\ntcp_idle_ms: 2\n",
    "alias": b"x: &a [1.2.3.4]\nupstreams: *a\n",
    "bad-types": b"upstream_timeout_ms: lots\nfirewall_fail_open: maybe\nlisten: 5\n",
    "huge-int": b"upstream_timeout_ms: 99999999999999999999999\ntcp_max_clients: -1\n",
    "bad-cidr": b"agents:\n  - name: x\n    clients: [10.0.0.1/8, 300.1.1.1, \"::/129\"]\n",
    "bad-agent-name": b"agents:\n  - name: \"no spaces!\"\n    clients: [10.0.0.0/8]\n",
    "agent-dup": (b"upstreams: [1.1.1.1]\nagents:\n  - {name: a, clients: [10.0.0.0/8]}\n"
                  b"  - {name: a, clients: [10.0.0.0/8]}\n"),
    "two-docs": b"listen: [127.0.0.1]\n---\nlisten: [127.0.0.2]\n",
    "tabs": b"agents:\n\t- name: a\n",
    "unterminated": b"listen: [\"127.0.0.1:53\"\nupstreams: {\n",
    "deny-bad": (b"agents:\n  - name: a\n    clients: [10.0.0.0/8]\n    deny: maybe\n"
                 b"    sinkhole: [1.2.3.4, 5.6.7.8, \"::1\"]\n"),
    "null-values": b"listen:\nupstreams: ~\nagents: null\nlog: {file: }\n",
    "flow-mixed": (b"{listen: [\"[::1]:53\"], upstreams: [\"[2001:db8::1]:5353\"], "
                   b"agents: [{name: z, clients: [\"::/0\"]}]}\n"),
    "tags": b"listen: !!str 127.0.0.1\nupstreams: !custom [1.1.1.1]\n",
    "anchors-deep": b"a: &x {b: &y {c: &z [1, 2, 3]}}\n",
    "utf8-bom": b"\xef\xbb\xbflisten: [127.0.0.1]\n",
    "binary": bytes(range(256)),
}

PATTERNS = {
    "basic": b"example.com\n*.example.org\nWWW.Example.NET.\n",
    "invalid": b"*.\n*\n**.a\na.*.b\nfoo*.com\n..\n.\n" + b"a" * 64 + b".com\n",
    "escapes": b"a\\.b.example.com\n\\042.example\nx\\000y.test\n",
    "many": b"".join(b"host%d.example.com\n*.w%d.example.net\n" % (i, i) for i in range(120)),
    "dup": b"a.com\na.com\n*.a.com\n*.a.com\n",
}

PATTERN_FILES = {
    "basic": (b"# allowlist\nexample.com\n  *.example.org   # trailing comment\n\n\t\r\n"
              b"host\\#1.test\n"),
    "two-per-line": b"a.com b.com\n",
    "bad": b"good.com\n*bad.com\n",
    "crlf": b"a.com\r\nb.com\r\n",
    "no-newline": b"last.example",
    "ports": (b"api.example.com tcp/443\n*.pypi.org tcp/80,443\nntp.example.net udp/123\n"
              b"api.example.com tcp/80 udp/53\nany.example\nany.example tcp/1\n"),
    "ports-bad": b"a.com tcp/0\nb.com tcp/65536\nc.com sctp/1\nd.com tcp/\ne.com tcp/1,\n",
    "ports-many": b"a.com tcp/" + b",".join(b"%d" % i for i in range(1, 18)) + b"\n",
}

RANGE_FILES = {
    "basic": (b"# ranges\n169.254.0.0/16 always\n10.0.0.0/8 private # rfc1918\n"
              b"fd00::/8 private\n::1 always\n"),
    "bad-class": b"10.0.0.0/8 sometimes\n",
    "host-bits": b"10.0.0.1/8 always\n",
    "bad-prefix": b"10.0.0.0/33 always\n::/129 private\n",
    "no-class": b"10.0.0.0/8\n",
    "junk": b"1.2.3.4.5 always\nfe80::1%eth0 always\n[::1] always\n",
}


def policy():
    p = {}
    for k, v in PATTERNS.items():
        p["patterns-" + k] = b"\0" + v
    for k, v in PATTERN_FILES.items():
        p["patfile-" + k] = b"\1" + v
    for k, v in RANGE_FILES.items():
        p["ranges-" + k] = b"\2" + v
    for k, v in CONFIGS.items():
        p["config-" + k] = b"\3" + v
    p["config-addr-v6"] = b"\3[2001:db8::1]:5353"
    p["config-cidr"] = b"\3" + b"10.1.0.0/16"
    return p


# ---------------------------------------------------------------- firewall channel
def fwproto():
    f = {}

    def grant(seq, life, agent, client, addrs, version=3, typ=1, naddr=None, ports=(),
              nport=None):
        out = struct.pack("!BBHII", version, typ, len(addrs) if naddr is None else naddr, seq, life)
        out += bytes([len(agent)]) + agent
        out += bytes([client[0]]) + client[1].ljust(16, b"\0")
        out += bytes([len(ports) if nport is None else nport])
        for proto, port in ports:
            out += struct.pack("!BH", proto, port)
        for fam, ad in addrs:
            out += bytes([fam]) + ad.ljust(16, b"\0")
        return out

    def ack(status, seq, life, reserved=0, version=3, typ=2):
        return struct.pack("!BBHIII", version, typ, status, seq, life, reserved)

    v4 = (4, a("192.0.2.1"))
    v6 = (6, aaaa("2001:db8::1"))
    c4 = (4, a("10.0.0.1"))
    f["grant-one"] = grant(1, 300, b"ci-42", (4, a("10.0.0.7")), [v4])
    f["grant-v6-client"] = grant(2, 60, b"build.box_2", (6, aaaa("fd00::7")), [v4, v6])
    f["grant-no-client"] = grant(3, 0, b"a", (0, b""), [v6])
    f["grant-max"] = grant(0xFFFFFFFF, 0xFFFFFFFF, b"x" * 63, c4,
                           [v4 if i % 2 else v6 for i in range(64)],
                           ports=[(6, 1 + i) for i in range(8)] + [(17, 60000 + i) for i in range(8)])
    f["grant-65"] = grant(4, 1, b"a", c4, [v4] * 65)
    f["grant-zero"] = grant(5, 1, b"a", c4, [], naddr=0)
    f["grant-bad-agent"] = grant(6, 1, b"a b", c4, [v4])
    f["grant-v4-padding"] = grant(7, 1, b"a", c4, [(4, a("1.2.3.4") + b"\1")])
    f["grant-family-0-addr"] = grant(8, 1, b"a", c4, [(0, b"")])
    f["grant-client-0-nonzero"] = grant(9, 1, b"a", (0, b"\1"), [v4])
    f["grant-truncated"] = grant(10, 1, b"agent", c4, [v4, v6])[:-5]
    f["grant-trailing"] = grant(11, 1, b"agent", c4, [v4]) + b"\0"
    f["grant-version-1"] = grant(12, 1, b"a", c4, [v4], version=1)
    f["grant-naddr-lies"] = grant(13, 1, b"a", c4, [v4], naddr=3)
    f["grant-ports"] = grant(14, 30, b"ci", c4, [v4, v6], ports=[(6, 80), (6, 443), (17, 123)])
    f["grant-ports-17"] = grant(15, 1, b"a", c4, [v4], ports=[(6, 1 + i) for i in range(17)])
    f["grant-ports-unsorted"] = grant(16, 1, b"a", c4, [v4], ports=[(6, 443), (6, 80)])
    f["grant-ports-dup"] = grant(17, 1, b"a", c4, [v4], ports=[(6, 80), (6, 80)])
    f["grant-ports-zero"] = grant(18, 1, b"a", c4, [v4], ports=[(6, 0)])
    f["grant-ports-sctp"] = grant(19, 1, b"a", c4, [v4], ports=[(132, 80)])
    f["grant-nport-lies"] = grant(20, 1, b"a", c4, [v4], ports=[(6, 80)], nport=2)
    f["ack-ok"] = ack(0, 1, 300)
    f["ack-denied"] = ack(1, 2, 0)
    f["ack-failed"] = ack(2, 3, 0)
    f["ack-badmsg"] = ack(3, 4, 0)
    f["ack-unknown-status"] = ack(4, 5, 0)
    f["ack-reserved"] = ack(0, 6, 1, reserved=1)
    f["ack-short"] = ack(0, 7, 1)[:15]
    f["ack-as-grant"] = ack(0, 8, 1, typ=1)
    f["grant-version-2"] = grant(21, 1, b"a", c4, [v4], version=2)

    def hello(placement, ranges, version=3, nrange=None):
        out = bytes([version, 3, placement, len(ranges) if nrange is None else nrange])
        for fam, bits, ad in ranges:
            out += bytes([fam, bits]) + ad.ljust(16, b"\0")
        return out

    f["hello-netns"] = hello(1, [])
    f["hello-forward"] = hello(2, [(4, 24, a("10.77.0.0")), (6, 64, aaaa("2001:db8:1::"))])
    f["hello-forward-none"] = hello(2, [])
    f["hello-max"] = hello(2, [(4, 32, a("10.0.0.%d" % i)) for i in range(64)])
    f["hello-65"] = hello(2, [(4, 32, a("10.0.0.1"))] * 65)
    f["hello-netns-range"] = hello(1, [(4, 24, a("10.77.0.0"))])
    f["hello-host-bits"] = hello(2, [(4, 24, a("10.77.0.1"))])
    f["hello-v4-bits-33"] = hello(2, [(4, 33, a("10.77.0.0"))])
    f["hello-family-5"] = hello(2, [(5, 8, a("10.0.0.0"))])
    f["hello-nrange-lies"] = hello(2, [(4, 8, a("10.0.0.0"))], nrange=2)
    f["hello-placement-3"] = hello(3, [])
    f["hello-version-2"] = hello(2, [], version=2)
    return f


# ---------------------------------------------------------------- runtime sandboxes (fwproto_sandbox)
def fwproto_sandbox():
    f = {}

    def req(typ, seq, fam, bits, ad, ifname, flags=0, version=3, ifl=None):
        out = struct.pack("!BBHIBB", version, typ, flags, seq, fam, bits) + ad.ljust(16, b"\0")
        return out + bytes([len(ifname) if ifl is None else ifl]) + ifname

    def reply(status, seq, res, text, version=3, typ=18, nres=None):
        out = struct.pack("!BBHIB", version, typ, status, seq, len(res) if nres is None else nres)
        for fam, ad, port in res:
            out += bytes([fam]) + ad.ljust(16, b"\0") + struct.pack("!H", port)
        return out + bytes([len(text)]) + text

    f["add-v4"] = req(16, 1, 4, 32, a("10.77.0.2"), b"moat-3")
    f["add-private"] = req(16, 2, 4, 30, a("10.77.0.4"), b"moat-4", flags=1)
    f["del-v6"] = req(17, 3, 6, 64, aaaa("2001:db8:7::"), b"moat-5")
    f["add-host-bits"] = req(16, 4, 4, 30, a("10.77.0.2"), b"moat-3")
    f["add-bad-flag"] = req(16, 5, 4, 32, a("10.77.0.2"), b"moat-3", flags=2)
    f["add-bad-ifname"] = req(16, 6, 4, 32, a("10.77.0.2"), b"moat 3")
    f["add-long-ifname"] = req(16, 7, 4, 32, a("10.77.0.2"), b"m" * 16)
    f["add-ifl-lies"] = req(16, 8, 4, 32, a("10.77.0.2"), b"moat-3", ifl=9)
    f["add-v4-padding"] = req(16, 9, 4, 32, a("10.77.0.2") + b"\1", b"moat-3")
    f["add-version-1"] = req(16, 10, 4, 32, a("10.77.0.2"), b"moat-3", version=1)
    f["add-version-2"] = req(16, 11, 4, 32, a("10.77.0.2"), b"moat-3", version=2)
    r4 = (4, a("192.0.2.1"), 53)
    r6 = (6, aaaa("2001:db8::1"), 5353)
    f["reply-ok"] = reply(0, 1, [r4, r6], b"")
    f["reply-denied"] = reply(1, 2, [], b"overlaps 10.77.0.0/30 on moat-1")
    f["reply-max"] = reply(2, 3, [r4] * 16, b"x" * 200)
    f["reply-17"] = reply(0, 4, [r4] * 17, b"")
    f["reply-port-0"] = reply(0, 5, [(4, a("192.0.2.1"), 0)], b"")
    f["reply-ctl-text"] = reply(1, 6, [], b"a\nb")
    f["reply-nres-lies"] = reply(0, 7, [r4], b"", nres=2)
    f["reply-status-4"] = reply(4, 8, [], b"")
    return f


# ---------------------------------------------------------------- svcb and IP literals
def svcb():
    s = {}
    # [off][stop][message]; off 0 = the RDATA is the whole message.
    def seed(rdata, prefix=b"", stop=1):
        return bytes([len(prefix), stop]) + prefix + rdata
    hints = [(1, b"\x02h2"), (4, a("192.0.2.10") + a("192.0.2.11")), (6, aaaa("2001:db8::10"))]
    s["svcb-hints"] = seed(svcb_rdata(1, b"\0", hints))
    s["svcb-target"] = seed(svcb_rdata(1, name("svc.example.net"), hints), stop=3)
    s["svcb-alias"] = seed(svcb_rdata(0, name("a.example"), []))
    s["svcb-pointer-target"] = seed(svcb_rdata(1, ptr(0), [(4, a("127.0.0.1"))]),
                                    prefix=b"\x01x\x00")
    s["svcb-bad-order"] = seed(svcb_rdata(1, b"\0", [(6, aaaa("::1")), (4, a("1.2.3.4"))]))
    s["svcb-dup-key"] = seed(svcb_rdata(1, b"\0", [(4, a("1.2.3.4")), (4, a("1.2.3.5"))]))
    s["svcb-bad-len"] = seed(svcb_rdata(1, b"\0", [(4, b"\1\2\3\4\5")]))
    s["svcb-empty-hint"] = seed(svcb_rdata(1, b"\0", [(4, b"")]))
    s["svcb-short-param"] = seed(svcb_rdata(1, b"\0", []) + b"\x00\x04\x00")
    s["svcb-overrun"] = seed(svcb_rdata(1, b"\0", []) + b"\x00\x04\x00\x08\x01\x02")
    s["svcb-short"] = seed(b"\x00")
    # IP literals and look-alikes (the iplit half reads the same bytes as dotted text).
    for i, t in enumerate([b"169.254.169.254", b"2852039166", b"0xa9fea9fe", b"0251.0376.0251.0376",
                           b"169.254.43518", b"169.16689662", b"1.2.3.4.5", b"0x", b"08.1.1.1",
                           b"1e3", b"0xA9.0XFE.0.1", b"4294967296", b"4294967295", b"::1",
                           b"[fd00:ec2::254]", b"::ffff:169.254.169.254", b"fe80::1%eth0",
                           b"10-0-0-1.sslip.io", b"app.10.0.0.1.nip.io", b"a9fea9fe.nip.io",
                           b"app-0a000001.nip.io", b"256.1.1.1", b"1.2.3.0400",
                           b"00000000001.2.3.4"]):
        s["iplit-%02d" % i] = t
    return s


def main():
    sets = {"query": queries(), "resp": responses(), "name": names(), "policy": policy(),
            "fwproto": fwproto(), "fwproto_sandbox": fwproto_sandbox(),
            "svcb": svcb()}
    for target, seeds in sets.items():
        d = os.path.join(ROOT, target)
        os.makedirs(d, exist_ok=True)
        for f in os.listdir(d):
            if f.startswith("seed-"):
                os.unlink(os.path.join(d, f))
        for k, v in sorted(seeds.items()):
            with open(os.path.join(d, "seed-%s.bin" % k), "wb") as fh:
                fh.write(v)
        print("%-8s %3d seeds" % (target, len(seeds)))


if __name__ == "__main__":
    main()
