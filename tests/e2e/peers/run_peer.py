#!/usr/bin/env python3
"""Both ends of moat run's end-to-end tests: a client inside `moat run` that resolves through the
sandbox's resolv.conf as any program would (getaddrinfo), and receivers outside that say what
arrived (receiver-judged).

usage: run_peer.py CMD ARGS...
  serve SECONDS ADDR:PORT...      TCP and UDP on each ADDR:PORT; print "tcp ADDR:PORT TOKEN" for
                                  each connection (its first line) and "udp ADDR:PORT TOKEN" for
                                  each datagram; "ready" once bound
  tcp HOST PORT TOKEN             resolve HOST (IPv4), connect (2 s), send TOKEN: "ok ADDR" or
                                  "failed: ..."
  udp HOST PORT TOKEN             resolve HOST, send TOKEN in one datagram: "sent ADDR" or "failed: ..."
  resolve HOST                    "addr ADDR..." or "failed: ..."
  self                            "uid U gid G capeff X capbnd Y nnp N netns INODE cookie C"
  cookie                          "cookie C": the network namespace's cookie (SO_NETNS_COOKIE,
                                  never reused while the machine runs; an inode number is)
  wait FILE SECONDS               wait until FILE exists: "go" or "timeout"
  script FILE                     run the lines of FILE (one command each) and exit with the
                                  status the last line "exit N" gives"""
import os
import select
import socket
import sys
import time


def split(spec):
    host, port = spec.rsplit(":", 1)
    return host.strip("[]"), int(port)


def serve(seconds, specs):
    socks = {}
    for spec in specs:
        host, port = split(spec)
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        t.bind((host, port))
        t.listen(64)
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        u.bind((host, port))
        socks[t] = ("tcp", spec)
        socks[u] = ("udp", spec)
    print("ready", flush=True)
    end = time.time() + seconds
    while time.time() < end:
        r, _, _ = select.select(list(socks), [], [], 0.2)
        for s in r:
            kind, spec = socks[s]
            if kind == "udp":
                data, _ = s.recvfrom(2048)
                print("udp %s %s" % (spec, data.decode(errors="replace").strip()), flush=True)
                continue
            c, _ = s.accept()
            c.settimeout(2)
            try:
                data = c.recv(256)
            except OSError:
                data = b""
            c.close()
            print("tcp %s %s" % (spec, data.decode(errors="replace").strip()), flush=True)


def resolve(host):
    try:
        infos = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
    except OSError as e:
        return None, "failed: %s" % e
    return sorted({i[4][0] for i in infos}), None


def tcp(host, port, token):
    addrs, err = resolve(host)
    if err:
        return err
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(2)
    try:
        s.connect((addrs[0], int(port)))
        s.sendall(token.encode() + b"\n")
        s.close()
        return "ok %s" % addrs[0]
    except OSError as e:
        return "failed: %s" % e


def udp(host, port, token):
    addrs, err = resolve(host)
    if err:
        return err
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.sendto(token.encode(), (addrs[0], int(port)))
        return "sent %s" % addrs[0]
    except OSError as e:
        return "failed: %s" % e


def netns_cookie():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        return int.from_bytes(s.getsockopt(socket.SOL_SOCKET, 71, 8), sys.byteorder)  # SO_NETNS_COOKIE


def self_report():
    st = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            st[k] = v.strip()
    return "uid %d gid %d capeff %s capbnd %s nnp %s netns %d cookie %d" % (
        os.getuid(), os.getgid(), st["CapEff"], st["CapBnd"], st["NoNewPrivs"],
        os.stat("/proc/self/ns/net").st_ino, netns_cookie())


def wait(path, seconds):
    end = time.time() + float(seconds)
    while time.time() < end:
        if os.path.exists(path):
            return "go"
        time.sleep(0.05)
    return "timeout"


def one(cmd, args):
    if cmd == "tcp":
        return tcp(*args)
    if cmd == "udp":
        return udp(*args)
    if cmd == "resolve":
        addrs, err = resolve(args[0])
        return err or "addr " + " ".join(addrs)
    if cmd == "self":
        return self_report()
    if cmd == "cookie":
        return "cookie %d" % netns_cookie()
    if cmd == "wait":
        return wait(*args)
    raise SystemExit("unknown command " + cmd)


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "serve":
        serve(float(args[0]), args[1:])
        return 0
    if cmd != "script":
        print(one(cmd, args), flush=True)
        return 0
    with open(args[0]) as f:
        for line in f:
            words = line.split()
            if not words:
                continue
            if words[0] == "exit":
                return int(words[1])
            print("%s: %s" % (" ".join(words), one(words[0], words[1:])), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
