#!/usr/bin/env python3
"""A sandbox that keeps knocking while its firewall is changed under it (test_fw_watch.sh).

usage: fw_probe.py SECONDS STOPFILE GRANTED BAD...
Every GAP (2 ms) until SECONDS pass or STOPFILE exists: a non-blocking TCP connect to port 80 of
GRANTED and of every BAD address (a SYN each), and a UDP datagram "probe N" to port 9 of every
BAD address. A connect counts as made when its socket turns writable without error within
0.3 s; at most 0.3 s of connects are pending at once. Prints "granted-ok" at the first connect
to GRANTED that is made, and at the end
    rounds=N GRANTED=K BAD=K ...
(connects made per address). The receiver's log is the judge; these counts are the sender's
view. Bounded in time (SECONDS) and in sockets (pending ones are closed after 0.3 s)."""
import os
import select
import socket
import sys
import time

GAP = 0.002
PENDING = 0.3


def fam(addr):
    return socket.AF_INET6 if ":" in addr else socket.AF_INET


def main():
    seconds, stop, granted, bad = float(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
    targets = [granted] + bad
    made = {t: 0 for t in targets}
    udp = {t: socket.socket(fam(t), socket.SOCK_DGRAM) for t in bad}
    pending = {}  # fd -> (socket, target, start)
    poller = select.poll()
    end = time.time() + seconds
    rounds = 0
    while time.time() < end and not os.path.exists(stop):
        rounds += 1
        now = time.time()
        for t in targets:
            s = socket.socket(fam(t), socket.SOCK_STREAM)
            s.setblocking(False)
            s.connect_ex((t, 80))
            pending[s.fileno()] = (s, t, now)
            poller.register(s.fileno(), select.POLLOUT)
        for t in bad:
            try:
                udp[t].sendto(b"probe %d" % rounds, (t, 9))
            except OSError:
                pass  # a local drop (EPERM) is an answer
        time.sleep(GAP)
        for fd, ev in poller.poll(0):
            s, t, _ = pending.pop(fd)
            poller.unregister(fd)
            if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0 and not ev & select.POLLERR:
                made[t] += 1
                if t == granted and made[t] == 1:
                    print("granted-ok", flush=True)
            s.close()
        for fd, (s, t, start) in list(pending.items()):
            if now - start > PENDING:
                poller.unregister(fd)
                del pending[fd]
                s.close()
    print("rounds=%d %s" % (rounds, " ".join("%s=%d" % (t, made[t]) for t in targets)),
          flush=True)


if __name__ == "__main__":
    main()
