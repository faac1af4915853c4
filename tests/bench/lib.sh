# tests/bench/lib.sh -- what the benchmark scripts that start moatd share (sourced; bash, set -e):
# the root check, the binaries they need, and a work directory that moatd, running as nobody
# after its privilege drop, can still read (a reload reopens the files there), removed on exit
# together with the moatd the script started (MPID). Needs BUILD set.

# shellcheck source=tools/sh/traps.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../tools/sh/traps.sh"

bench_root() {
	[[ $(id -u) == 0 ]] || { echo "$0: run as root (network namespace)" >&2; exit 1; }
}

bench_need() { # bench_need PROGRAM...: each built under $BUILD
	local b
	for b; do [[ -x $BUILD/$b ]] || { echo "$0: no $BUILD/$b (build first)" >&2; exit 1; }; done
}

bench_cleanup() { # traps_set's (INT and TERM ignored)
	[[ -n $MPID ]] && kill "$MPID" 2>/dev/null && wait "$MPID" 2>/dev/null
	[[ -n ${NSD_PID:-} ]] && kill "$NSD_PID" 2>/dev/null && wait "$NSD_PID" 2>/dev/null
	if [[ -n ${NS:-} ]]; then
		# What else runs in it (a client still sending when a signal came): by PID, not name.
		local pid
		for pid in $(ip netns pids "$NS" 2>/dev/null); do kill "$pid" 2>/dev/null || true; done
		ip netns del "$NS" 2>/dev/null || true
		rm -rf "/etc/netns/$NS"
	fi
	if [[ ${BENCH_KEEP:-0} == 1 ]]; then log "kept $WORK"; else rm -rf "$WORK"; fi
}

bench_work() { # bench_work NAME: sets WORK (0755), RAW (empty), MPID (none) and the exit trap
	WORK=$(mktemp -d "/tmp/moat-bench-$1.XXXXXX")
	chmod 0755 "$WORK" # mktemp makes it 0700: moatd (nobody) could not reload from it
	MPID=
	traps_set bench_cleanup
	RAW=$WORK/raw.tsv
	: >"$RAW"
}

log() { printf '[%s] %s\n' "$(date -u +%T)" "$*" >&2; }

# bench_ns_nsd NAME ZONE ZONEFILE: a namespace moat-NAME-PID with only lo (NS), and NSD in it on
# 127.0.0.1:5300 serving ZONE from ZONEFILE (NSD_PID); bench_cleanup removes both. After
# bench_work.
bench_ns_nsd() {
	NS=moat-$1-$$
	cat >"$WORK/nsd.conf" <<EOF
server:
    ip-address: 127.0.0.1@5300
    server-count: 1
    username: ""
    chroot: ""
    zonesdir: "$WORK"
    database: ""
    zonelistfile: "$WORK/zone.list"
    xfrdfile: "$WORK/xfrd.state"
    pidfile: "$WORK/nsd.pid"
    rrl-ratelimit: 0
remote-control:
    control-enable: no
zone:
    name: "$2"
    zonefile: "$3"
EOF
	ip netns add "$NS"
	ip -n "$NS" link set lo up
	ip netns exec "$NS" nsd -d -c "$WORK/nsd.conf" >"$WORK/nsd.log" 2>&1 &
	NSD_PID=$!
}

# bench_data: in WORK, the policy (allow.txt: 100000 names n0000000.bench.test.. and
# *.w.bench.test), the hit queries (q-hit.txt: the first 1000 of them, type A) and the zone NSD
# serves (bench.test.zone: those 1000 names and a wildcard, so every allowed and every miss name
# resolves). After bench_work.
bench_data() {
	awk 'BEGIN { for (i = 0; i < 100000; i++) printf "n%07d.bench.test\n", i; print "*.w.bench.test" }' >"$WORK/allow.txt"
	awk 'BEGIN { for (i = 0; i < 1000; i++) printf "n%07d.bench.test A\n", i }' >"$WORK/q-hit.txt"
	{
		printf '$ORIGIN bench.test.\n$TTL 3600\n@ IN SOA ns hostmaster 1 3600 600 86400 300\n@ IN NS ns\nns IN A 192.0.2.53\n* IN A 192.0.2.1\n'
		awk 'BEGIN { for (i = 0; i < 1000; i++) printf "n%07d IN A 198.51.100.%d\n", i, i % 250 + 1 }'
	} >"$WORK/bench.test.zone"
}
