#!/usr/bin/env bash
# tests/bench/burst.sh -- how many queries a benign agent sends at its busiest, for the default
# per-client rate limit (ratelimit_qps / ratelimit_burst): package-manager-style bursts resolved
# by the real glibc stub resolver (getaddrinfo in Python threads: A and AAAA in parallel, the
# search list, retries), against moatd in a private namespace with its rate limit off, counted
# from moatd's own query log (one client). Run as root after building (build-bench by default).
#
# Usage: tests/bench/burst.sh [--build DIR] [--out FILE]
# Scenarios, each with a plain resolv.conf and with a Kubernetes-style one (search list of three
# domains, ndots:5: every name below five dots is tried under each search domain first):
#   npm      an install that opens 50 connections to its registry at once, then fetches 1000
#            tarballs over 15 connections, a new connection (and lookup) for each, 10 ms a
#            fetch (a fast mirror; npm without keep-alive or DNS cache: the worst case), from
#            two hosts
#   pip      200 packages from an index and a file host, one at a time, resolving both hosts
#            for each (pip and urllib3 keep no DNS cache), 5 and 10 ms a fetch
#   crawl    an agent fetching 300 distinct hosts, 64 at a time, 50 ms a page
#   tight    1000 distinct hosts resolved by 16 threads with no work in between: no agent
#            does this; it is the most a client's stub resolver can send (the ceiling)
# Prints per scenario: queries in all, the busiest 1 s and the busiest 100 ms.
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$SRC/build-bench OUT=""
while [[ $# -gt 0 ]]; do
	case $1 in
	--build) BUILD=$2; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	*) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
	esac
done
# shellcheck source=tests/bench/lib.sh
source "$SRC/tests/bench/lib.sh"
bench_root
bench_need moatd
bench_work burst
printf '*.burst.test\n' >"$WORK/allow.txt"
printf '$ORIGIN burst.test.\n$TTL 300\n@ IN SOA ns hostmaster 1 3600 600 86400 60\n@ IN NS ns\nns IN A 192.0.2.53\n* IN A 192.0.2.1\n* IN AAAA 2001:db8::1\n' \
	>"$WORK/burst.test.zone"
bench_ns_nsd burst burst.test "$WORK/burst.test.zone"
mkdir -p "/etc/netns/$NS" # ip netns exec mounts its resolv.conf over /etc/resolv.conf

cat >"$WORK/agent.py" <<'EOF'
import socket, sys, threading, queue, time
kind = sys.argv[1]
def resolve(host, work=0.0):
    try:
        socket.getaddrinfo(host, 443, type=socket.SOCK_STREAM)
    except OSError:
        pass
    time.sleep(work)  # the fetch that follows the lookup
def pool(hosts, width, work):
    q = queue.Queue()
    for h in hosts:
        q.put(h)
    def run():
        while True:
            try:
                h = q.get_nowait()
            except queue.Empty:
                return
            resolve(h, work)
    ts = [threading.Thread(target=run) for _ in range(width)]
    for t in ts: t.start()
    for t in ts: t.join()
if kind == "npm":
    pool(["registry.npm.burst.test"] * 50, 50, 0.0)
    pool(["registry.npm.burst.test", "tarballs.npm.burst.test"] * 500, 15, 0.010)
elif kind == "pip":
    for i in range(200):
        resolve("index.pypi.burst.test", 0.005)
        resolve("files.pypi.burst.test", 0.010)
elif kind == "crawl":
    pool(["site%03d.web.burst.test" % i for i in range(300)], 64, 0.050)
elif kind == "tight":
    pool(["host%04d.burst.test" % i for i in range(1000)], 16, 0.0)
EOF

run_scenario() { # run_scenario NAME KIND RESOLV_CONF_TEXT
	printf '%b' "$3" >"/etc/netns/$NS/resolv.conf"
	local qlog="$WORK/$1.jsonl"
	# shellcheck disable=SC2086
	ip netns exec "$NS" "$BUILD/moatd" --listen 127.0.0.1:53 --upstream 127.0.0.1:5300 \
		--allow "$WORK/allow.txt" --log "$qlog" --log-budget 0 --ratelimit 0 --user root \
		>/dev/null 2>"$WORK/$1.moatd.log" &
	MPID=$!
	for ((i = 0; i < 100; i++)); do
		grep -qs "ready in" "$WORK/$1.moatd.log" && break
		sleep 0.05
	done
	ip netns exec "$NS" python3 "$WORK/agent.py" "$2"
	sleep 0.3
	kill "$MPID"
	wait "$MPID" 2>/dev/null || true
	MPID=
	python3 - "$qlog" "$1" <<'EOF'
import json, sys, datetime
ts, first = [], {}
for l in open(sys.argv[1]):
    e = json.loads(l)
    t = datetime.datetime.strptime(e["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
    key = (e.get("qname"), e.get("qtype"), e.get("decision"))
    if "repeated" in e:
        # counted repeats of a deny: all put at its first line's time (the worst case)
        ts += [first.get(key, t)] * e["repeated"]
    else:
        first[key] = t
        ts.append(t)
ts.sort()
def peak(win):
    best, j = 0, 0
    for i in range(len(ts)):
        while ts[i] - ts[j] >= win:
            j += 1
        best = max(best, i - j + 1)
    return best
print("| %s | %d | %d | %d | %.2f |" % (sys.argv[2], len(ts), peak(1.0), peak(0.1),
      ts[-1] - ts[0] if ts else 0))
EOF
}

PLAIN='nameserver 127.0.0.1\noptions attempts:2 timeout:1\n'
K8S='nameserver 127.0.0.1\nsearch ns1.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5 attempts:2 timeout:1\n'
{
	printf '# Benign query bursts, %s (moat %s, load average %s)\n\n' "$(date '+%Y-%m-%d %H:%M')" \
		"$(git -C "$SRC" rev-parse --short HEAD)" "$(cut -d' ' -f1-3 /proc/loadavg)"
	printf 'glibc getaddrinfo (A+AAAA) from Python threads, one client, counted from moatd'"'"'s log (counted repeats of a deny at the time of its first line).\n\n'
	printf '| scenario | queries | busiest 1 s | busiest 100 ms | seconds |\n|---|---|---|---|---|\n'
	for k in npm pip crawl tight; do
		run_scenario "$k" "$k" "$PLAIN"
		run_scenario "$k-k8s" "$k" "$K8S"
	done
} >"$WORK/result.md"
cat "$WORK/result.md"
[[ -z $OUT ]] || cp "$WORK/result.md" "$OUT"
