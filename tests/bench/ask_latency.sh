#!/usr/bin/env bash
# tests/bench/ask_latency.sh -- ask mode (issue 25): how long after `moatctl allow` starts the held
# query gets its answer, against two peers in the same run: the same moatctl process doing
# `moatctl status` (what starting the command and one control round trip cost) and a query for an
# allowed name (what a forwarded answer costs). By hand, as root, in a private network namespace
# (unshare -n, only lo); the upstream is bench-floor on 127.0.0.1:5354 (answers NXDOMAIN).
#
# Usage: tests/bench/ask_latency.sh [--rounds N] [--kept]
#   --kept   rules kept in state_dir (one durable store commit each) instead of --for 600
# Prints medians and the slowest in ms. Target (issue 25): the answer within 100 ms of allow.
set -euo pipefail
shopt -s inherit_errexit

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${MOAT_BUILD:-$SRC/build}
ROUNDS=30 KEPT=0
while (($#)); do
	case $1 in
	--rounds) ROUNDS=$2; shift 2 ;;
	--kept) KEPT=1; shift ;;
	*) echo "usage: see the head of $0" >&2; exit 2 ;;
	esac
done
. "$SRC/tests/bench/lib.sh"
bench_root
if [[ -z ${MOAT_BENCH_IN_NS:-} ]]; then
	args=(--rounds "$ROUNDS")
	((KEPT)) && args+=(--kept)
	exec unshare -n env MOAT_BENCH_IN_NS=1 "$0" "${args[@]}"
fi
ip link set lo up
bench_need moatd moatctl bench-floor
bench_work ask
"$BUILD/bench-floor" 127.0.0.1 5354 &
FPID=$!
latency_cleanup() {
	kill "$FPID" 2>/dev/null
	bench_cleanup
}
traps_set latency_cleanup
printf 'known.bench.test\n' >"$WORK/allow.txt"
cat >"$WORK/moatd.yaml" <<EOF
listen: ["127.0.0.1:53"]
upstreams: ["127.0.0.1:5354"]
log: {file: $WORK/queries.jsonl}
control: $WORK/ctl.sock
state_dir: $WORK/state
user: nobody
agents:
  - name: b
    clients: [127.0.0.1/32]
    allow: [allow.txt]
    on_unknown: ask
    ask_timeout_ms: 30000
EOF
mkdir -p "$WORK/state"
chown nobody "$WORK/state"
"$BUILD/moatd" -c "$WORK/moatd.yaml" 2>"$WORK/moatd.log" &
MPID=$!
for ((i = 0; i < 50; i++)); do grep -q "ready in" "$WORK/moatd.log" && break; sleep 0.1; done
log "moatd ready; $ROUNDS rounds, kept=$KEPT"
python3 - "$BUILD/moatctl" "$WORK/ctl.sock" "$ROUNDS" "$KEPT" <<'PY'
import json, socket, statistics, struct, subprocess, sys, time
ctl, sock, rounds, kept = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"
def query(name, qid):
    q = b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + q + b"\0\1\0\1", ("127.0.0.1", 53))
    return s
def pending():
    out = subprocess.run([ctl, "-s", sock, "--json", "status"], capture_output=True, text=True).stdout
    return json.loads(out)["asks"]["pending"]
allow, status, direct = [], [], []
for i in range(rounds):
    s = query("n%d.bench.test" % i, i)
    while pending() < 1:
        time.sleep(0.01)
    t0 = time.monotonic()
    cmd = [ctl, "-s", sock, "allow", "n%d.bench.test" % i, "--agent", "b"]
    if not kept:
        cmd += ["--for", "600"]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    s.settimeout(5)
    s.recvfrom(4096)
    allow.append((time.monotonic() - t0) * 1000)
    p.wait()
    t0 = time.monotonic()
    subprocess.run([ctl, "-s", sock, "status"], stdout=subprocess.DEVNULL)
    status.append((time.monotonic() - t0) * 1000)
    t0 = time.monotonic()
    d = query("known.bench.test", 60000 + i)
    d.settimeout(5)
    d.recvfrom(4096)
    direct.append((time.monotonic() - t0) * 1000)
for name, v in (("allow -> answer", allow), ("moatctl status (peer)", status), ("allowed query (peer)", direct)):
    print("%-24s median %7.2f ms  max %7.2f ms  (n=%d)" % (name, statistics.median(v), max(v), len(v)))
PY
