#!/usr/bin/env python3
"""A stand-in for the service manager's notification socket (sd_notify(3)), for readiness tests.

usage: notify_listen.py [--query ADDR PORT NAME] [--connect PATH] SOCKET SECONDS

Binds an AF_UNIX datagram socket at SOCKET (a path, or an abstract name starting with '@'),
prints "listening", then one line per datagram received:
    msg pid=PID READY=1|STATUS=serving        (lines of the datagram joined by '|')
PID is the sender's, from SCM_CREDENTIALS (the service manager checks it with NotifyAccess=main).
With --query, the moment a datagram holds READY=1 it sends one UDP query for NAME (type A) to
ADDR:PORT and prints
    answer RCODE a=ADDR,...        or  answer timeout / answer refused
so a test sees whether the daemon really serves when it says it is ready. With --connect, at
READY=1 it connects a SOCK_SEQPACKET socket to PATH (moat-fw's) and prints "connect ok" or
"connect failed". Exits after READY=1 (and its checks), or after SECONDS with "timeout"."""
import random
import socket
import struct
import sys
import time

import dnsmini

args = sys.argv[1:]
query = connect = None
while args and args[0].startswith("--"):
    if args[0] == "--query":
        query = (args[1], int(args[2]), args[3])
        args = args[4:]
    elif args[0] == "--connect":
        connect = args[1]
        args = args[2:]
    else:
        sys.exit("unknown option " + args[0])
path, seconds = args[0], float(args[1])

s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
s.bind("\0" + path[1:] if path.startswith("@") else path)
print("listening", flush=True)


def ask(addr, port, name):
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    q = socket.socket(fam, socket.SOCK_DGRAM)
    q.settimeout(2.0)
    qid = random.randrange(65536)
    try:
        q.connect((addr, port))
        q.send(dnsmini.query(qid, name, 1))
        while True:
            pkt = q.recv(65535)
            if len(pkt) >= 2 and struct.unpack(">H", pkt[:2])[0] == qid:
                break
    except socket.timeout:
        return "answer timeout"
    except ConnectionRefusedError:
        return "answer refused"
    info = dnsmini.records(pkt) or {"a": []}
    return "answer %s a=%s" % (dnsmini.rcode(pkt), ",".join(info["a"]))


def try_connect(p):
    c = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        c.connect(p)
        return "connect ok"
    except OSError:
        return "connect failed"
    finally:
        c.close()


deadline = time.monotonic() + seconds
while True:
    left = deadline - time.monotonic()
    if left <= 0:
        print("timeout", flush=True)
        sys.exit(0)
    s.settimeout(left)
    try:
        data, anc, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(12))
    except socket.timeout:
        continue
    pid = 0
    for level, kind, payload in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS:
            pid = struct.unpack("iII", payload[:12])[0]
    lines = data.decode("utf-8", "replace").split("\n")
    ready = "READY=1" in lines
    reply = ask(*query) if query and ready else None
    conn = try_connect(connect) if connect and ready else None
    print("msg pid=%d %s" % (pid, "|".join(lines)), flush=True)
    for line in (reply, conn):
        if line:
            print(line, flush=True)
    if "READY=1" in lines:
        sys.exit(0)
