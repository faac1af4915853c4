#!/usr/bin/env python3
"""moat-escape's witness: runs OUTSIDE the sandbox, on a host the sandbox may reach through an
allowed name (the `witness = NAME:PORT` setting), and tells moat-escape what arrived.

usage: witness.py SECONDS ADDR:PORT...

On each ADDR:PORT it listens for UDP datagrams (it remembers their payloads, the tokens of test
11) and for TCP questions, one line each:
  SEEN TOKEN...    -> "SEEN " + the tokens it has received (waits up to 1 s for missing ones)
  CALLBACK PORT    -> connects to the asker's address at PORT (1.5 s) and answers
                      "CALLBACK open" or "CALLBACK closed" (test 12)
It prints one line per event and stops after SECONDS."""
import select
import socket
import sys
import time


def main():
    seconds, specs = float(sys.argv[1]), sys.argv[2:]
    udp, tcp, seen = [], [], set()
    for spec in specs:
        host, port = spec.rsplit(":", 1)
        host = host.strip("[]")
        fam = socket.AF_INET6 if ":" in host else socket.AF_INET
        u = socket.socket(fam, socket.SOCK_DGRAM)
        u.bind((host, int(port)))
        t = socket.socket(fam, socket.SOCK_STREAM)
        t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        t.bind((host, int(port)))
        t.listen(16)
        udp.append(u)
        tcp.append(t)
    print("ready", flush=True)

    def drain(wait):
        r, _, _ = select.select(udp, [], [], wait)
        for u in r:
            data, src = u.recvfrom(2048)
            seen.add(data.decode(errors="replace"))
            print("datagram from %s: %s" % (src[0], data.decode(errors="replace")), flush=True)

    end = time.time() + seconds
    while time.time() < end:
        r, _, _ = select.select(udp + tcp, [], [], 0.2)
        for s in r:
            if s in udp:
                drain(0)
                continue
            c, src = s.accept()
            c.settimeout(2)
            try:
                line = c.recv(4096).decode(errors="replace").split()
                if line and line[0] == "SEEN":
                    limit = time.time() + 1
                    while time.time() < limit and not all(t in seen for t in line[1:]):
                        drain(0.05)
                    c.sendall(("SEEN %s\n" % " ".join(t for t in line[1:] if t in seen)).encode())
                elif len(line) == 2 and line[0] == "CALLBACK":
                    back = socket.socket(c.family, socket.SOCK_STREAM)
                    back.settimeout(1.5)
                    try:
                        back.connect((src[0], int(line[1])))
                        verdict = "open"
                    except OSError:
                        verdict = "closed"
                    back.close()
                    print("callback to %s:%s: %s" % (src[0], line[1], verdict), flush=True)
                    c.sendall(("CALLBACK %s\n" % verdict).encode())
            except OSError:
                pass
            c.close()


main()
