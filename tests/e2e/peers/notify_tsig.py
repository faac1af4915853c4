#!/usr/bin/env python3
"""TSIG-signed NOTIFYs (RFC 1996, RFC 8945) for the RPZ replay tests: ones dig cannot make.

usage: notify_tsig.py [options] ADDR PORT ZONE KEYNAME SECRET_BASE64
  --alg NAME      the TSIG algorithm named in the packet and used for the MAC
                  (hmac-sha256 | hmac-md5.sig-alg.reg.int; default hmac-sha256)
  --at SECONDS    time signed, relative to now (default 0; -3600: an hour old)
  --count N       send N NOTIFYs (default 1)
  --replay        the same signed bytes every time (a captured NOTIFY replayed);
                  without it each one gets a new id and is signed anew (a primary's)
  --src ADDR      source address (default 127.0.0.1: the primary's)

Each NOTIFY is sent over UDP and its answer awaited (2 s) before the next, so when the script
exits the server has handled every one. Prints one line: "sent=N NOERROR=a REFUSED=b ... "
(rcodes counted, "timeout" for no answer)."""
import base64
import collections
import hashlib
import hmac
import random
import socket
import struct
import sys
import time

import dnsmini

ALGS = {"hmac-sha256": hashlib.sha256, "hmac-md5.sig-alg.reg.int": hashlib.md5}


def notify(qid, zone, key, alg, secret, signed_at, fudge=300):
    """The NOTIFY for zone, its TSIG appended (MAC over the message and the TSIG variables)."""
    hdr = struct.pack(">HHHHHH", qid, (4 << 11) | 0x0400, 1, 0, 0, 0)
    msg = hdr + dnsmini.wire_name(zone) + struct.pack(">HH", 6, 1)  # SOA IN
    kname, aname = dnsmini.wire_name(key.lower()), dnsmini.wire_name(alg.lower())
    t48 = struct.pack(">HI", signed_at >> 32, signed_at & 0xFFFFFFFF)
    variables = kname + struct.pack(">HI", 255, 0) + aname + t48 + struct.pack(">HHH", fudge, 0, 0)
    mac = hmac.new(secret, msg + variables, ALGS[alg]).digest()
    rdata = aname + t48 + struct.pack(">HH", fudge, len(mac)) + mac + struct.pack(">HHH", qid, 0, 0)
    rr = kname + struct.pack(">HHIH", 250, 255, 0, len(rdata)) + rdata
    return msg[:10] + struct.pack(">H", 1) + msg[12:] + rr


def main(argv):
    alg, at, count, replay, src = "hmac-sha256", 0, 1, False, "127.0.0.1"
    while argv and argv[0].startswith("--"):
        opt = argv.pop(0)
        if opt == "--replay":
            replay = True
            continue
        val = argv.pop(0)
        if opt == "--alg":
            alg = val
        elif opt == "--at":
            at = int(val)
        elif opt == "--count":
            count = int(val)
        elif opt == "--src":
            src = val
    addr, port, zone, key, secret = argv[0], int(argv[1]), argv[2], argv[3], argv[4]
    secret = base64.b64decode(secret)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, 0))
    s.settimeout(2)
    seen = collections.Counter()
    pkt = notify(random.randrange(65536), zone, key, alg, secret, int(time.time()) + at)
    for _ in range(count):
        if not replay:
            pkt = notify(random.randrange(65536), zone, key, alg, secret, int(time.time()) + at)
        s.sendto(pkt, (addr, port))
        try:
            ans, _ = s.recvfrom(4096)
            seen[dnsmini.RCODES.get(ans[3] & 15, str(ans[3] & 15)) if len(ans) >= 4 else "short"] += 1
        except socket.timeout:
            seen["timeout"] += 1
    print("sent=%d " % count + " ".join("%s=%d" % kv for kv in sorted(seen.items())))


if __name__ == "__main__":
    main(sys.argv[1:])
