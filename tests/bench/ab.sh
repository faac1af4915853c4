#!/usr/bin/env bash
# tests/bench/ab.sh -- two moatd builds at the same moment: is a change faster, and by how much?
# On this shared machine the speed of one CPU drifts by 10-20 % from one run to the next (other
# guests' load, not steal), so two builds run one after the other differ by that much whatever
# their code. Here both run at once, pinned to the same CPU 0, each loaded by its own dnsperf
# on CPU 1: whatever slows the CPU slows both, and their ratio of server CPU per answered query
# stays. They share the CPU's caches as two workers would, so a ratio is what a change does,
# not a figure of moatd alone (tests/bench/run's). Run as root, after building both.
#
# Usage: tests/bench/ab.sh --a DIR (--b DIR | --b-floor FILE [--floor-forward]) [--rounds N]
#                          [--duration S] [--scenarios "..."] [--log FILE|/dev/null]
#                          [--b-log FILE|/dev/null] [--moatd-args "..."] [--out FILE]
#   --a DIR, --b DIR  the two builds: DIR/moatd each (a copied binary finds the shipped lists in
#                     DIR/../share/moat, as installed); the same DIR twice compares flags
#   --b-floor FILE    B is the floor responder (FILE: a built bench-floor) in place of a moatd:
#                     A/B is then moatd's ratio to the floor, paired (issue 27's deny and hit
#                     targets; the floor answers every scenario alike)
#   --floor-forward   the floor forwards every question to the upstream moatd uses and relays
#                     the answers (bench-floor's forwarding mode): the miss's floor, four
#                     datagrams a query, for --scenarios miss
#   --b-log FILE      B's query log when it differs from A's: --b-log /dev/null with the same DIR
#                     twice is log on against log off, paired
#   --rounds N        rounds (default 7); the two swap listen addresses every round
#   --duration S      seconds of each paired max-load run (default 5)
#   --scenarios "..." of deny hit miss (default all three; as tests/bench/run's)
#   --log FILE        where both write their query logs (default: files in the work directory)
#   --moatd-args "..." more flags for both (e.g. "--cache-size 4": a cache that fills, so the
#                     misses also evict)
# Prints per scenario A's and B's server µs/query (medians) and A/B per round and its median.
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
A="" B="" FLOOR="" FLOOR_UP=() ROUNDS=7 DUR=5 SCEN="deny hit miss" QLOG="" BLOG="" OUT="" EXTRA=""
while [[ $# -gt 0 ]]; do
	case $1 in
	--a) A=$(cd "$2" && pwd); shift 2 ;;
	--b) B=$(cd "$2" && pwd); shift 2 ;;
	--b-floor) FLOOR=$(realpath "$2"); shift 2 ;;
	--b-log) BLOG=$2; shift 2 ;;
	--floor-forward) FLOOR_UP=(127.0.0.1 5300); shift ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--duration) DUR=$2; shift 2 ;;
	--scenarios) SCEN=$2; shift 2 ;;
	--log) QLOG=$2; shift 2 ;;
	--moatd-args) EXTRA=$2; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	*) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
	esac
done
[[ -x $A/moatd && ( -x $B/moatd || -x $FLOOR ) ]] ||
	{ echo "$0: --a and --b: directories with a moatd (or --b-floor: a bench-floor)" >&2; exit 2; }
# shellcheck shell=bash source=tests/bench/lib.sh
source "$SRC/tests/bench/lib.sh"
bench_root
for t in dnsperf nsd taskset; do
	command -v $t >/dev/null || { echo "$0: needs $t" >&2; exit 1; }
done
bench_work ab
PIDB=
cleanup_ab() {
	[[ -n $PIDB ]] && kill "$PIDB" 2>/dev/null && wait "$PIDB" 2>/dev/null
	bench_cleanup
}
traps_set cleanup_ab
HZ=$(getconf CLK_TCK)
# Enough fresh names for the longest run at the fastest moatd has gone here (~250k q/s alone).
NQ=$((DUR * 150000))
((NQ * ROUNDS < 10000000)) || { echo "$0: --rounds x --duration too large for the names" >&2; exit 2; }

bench_data
bench_ns_nsd ab bench.test "$WORK/bench.test.zone"
ip -n "$NS" addr add 127.0.0.2/8 dev lo 2>/dev/null || true

# start_one DIR ADDR LOG: moatd of DIR on ADDR:53, on CPU 0, as tests/bench/run starts it.
start_one() {
	# shellcheck disable=SC2086 # EXTRA is a word list
	ip netns exec "$NS" taskset -c 0 "$1/moatd" --listen "$2:53" --upstream 127.0.0.1:5300 \
		--allow "$WORK/allow.txt" --log "$3" --log-budget 0 --ratelimit 10000000 --budget 0 $EXTRA \
		>>"$WORK/moatd.out" 2>>"$WORK/moatd-$2.log" &
	STARTED=$!
}
start_b() { # start_b ADDR LOG: B, a moatd or the floor
	if [[ -n $FLOOR ]]; then
		ip netns exec "$NS" taskset -c 0 "$FLOOR" "$1" 53 "${FLOOR_UP[@]}" 2>>"$WORK/moatd-$1.log" &
		STARTED=$!
	else
		start_one "$B" "$1" "$2"
	fi
}
ready() { # ready ADDR: the last hit name answers NOERROR, the floor anything (bounded: 30 s)
	local i want='status: NOERROR'
	[[ -z $FLOOR || $1 != "$addr_b" ]] || want='status: '
	for ((i = 0; i < 300; i++)); do
		ip netns exec "$NS" dig +tries=1 +time=1 @"$1" n0000999.bench.test A 2>/dev/null |
			grep -q "$want" && return 0
		sleep 0.1
	done
	return 1
}
ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
done_q() { awk '/Queries completed:/ { print $3; exit }' "$1"; }
perf_at() { # perf_at ADDR OUT ARGS...: a max-load dnsperf on CPU 1 against ADDR
	local addr=$1 out=$2
	shift 2
	ip netns exec "$NS" taskset -c 1 timeout $((DUR + 60)) dnsperf -s "$addr" -p 53 -c 1 -q 200 -t 1 "$@" >"$out" 2>&1
}

for ((r = 1; r <= ROUNDS; r++)); do
	# The two swap addresses (and the order they start in) every round.
	if ((r % 2)); then addr_a=127.0.0.1 addr_b=127.0.0.2; else addr_a=127.0.0.2 addr_b=127.0.0.1; fi
	la=${QLOG:-$WORK/a.jsonl} lb=${BLOG:-${QLOG:-$WORK/b.jsonl}}
	start_one "$A" $addr_a "$la" && MPID=$STARTED
	start_b $addr_b "$lb" && PIDB=$STARTED
	ready $addr_a && ready $addr_b || { cat "$WORK"/moatd-*.log >&2; exit 1; }
	awk -v r="$r" -v n="$NQ" 'BEGIN { for (i = 0; i < n; i++) printf "d%07d.bench.test A\n", r * n + i }' >"$WORK/q-deny.txt"
	awk -v r="$r" -v n="$NQ" 'BEGIN { for (i = 0; i < n; i++) printf "m%07d.w.bench.test A\n", r * n + i }' >"$WORK/q-miss.txt"
	for s in $SCEN; do
		case $s in
		deny) args=(-d "$WORK/q-deny.txt" -n 1) ;;
		hit)
			args=(-d "$WORK/q-hit.txt")
			perf_at $addr_a /dev/null -d "$WORK/q-hit.txt" -n 1 -Q 5000
			perf_at $addr_b /dev/null -d "$WORK/q-hit.txt" -n 1 -Q 5000
			;;
		miss) args=(-d "$WORK/q-miss.txt" -n 1) ;;
		*) echo "$0: unknown scenario $s" >&2; exit 2 ;;
		esac
		ta0=$(ticks "$MPID") tb0=$(ticks "$PIDB")
		perf_at $addr_a "$WORK/pa.txt" "${args[@]}" -l "$DUR" &
		pa=$!
		perf_at $addr_b "$WORK/pb.txt" "${args[@]}" -l "$DUR" &
		pb=$!
		wait $pa && wait $pb || { tail "$WORK/pa.txt" "$WORK/pb.txt" >&2; exit 1; }
		ta1=$(ticks "$MPID") tb1=$(ticks "$PIDB")
		awk -v r="$r" -v s="$s" -v da=$((ta1 - ta0)) -v db=$((tb1 - tb0)) -v qa="$(done_q "$WORK/pa.txt")" \
			-v qb="$(done_q "$WORK/pb.txt")" -v hz="$HZ" 'BEGIN {
				ua = qa ? da * 1e6 / hz / qa : 0; ub = qb ? db * 1e6 / hz / qb : 0
				printf "%s\t%s\t%.3f\t%.3f\t%.4f\t%s\t%s\n", r, s, ua, ub, ub ? ua / ub : 0, qa, qb }' >>"$RAW"
		[[ -n $QLOG ]] || : >"$la"
		[[ -n $BLOG || -n $QLOG ]] || : >"$lb"
		log "round $r $s: $(tail -n 1 "$RAW" | cut -f3-5)"
	done
	kill "$MPID" "$PIDB"
	wait "$MPID" "$PIDB" 2>/dev/null || true
	MPID= PIDB=
done

med() { sort -g | awk '{ a[NR] = $1 } END { if (NR) printf "%.3f", NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
{
	printf '# moatd A/B, both at once on CPU 0, %s\n\n' "$(date '+%Y-%m-%d %H:%M')"
	printf -- '- A: %s (%s), query log %s\n' "$A/moatd" "$("$A/moatd" --version 2>&1 | head -n 1)" "${QLOG:-a file in the work directory}"
	if [[ -n $FLOOR ]]; then
		printf -- '- B: the floor responder %s%s\n' "$FLOOR" \
			"${FLOOR_UP:+, forwarding to the upstream (${FLOOR_UP[*]})}"
	else
		printf -- '- B: %s (%s), query log %s\n' "$B/moatd" "$("$B/moatd" --version 2>&1 | head -n 1)" "${BLOG:-${QLOG:-a file in the work directory}}"
	fi
	printf -- '- %s rounds, %s s paired max-load runs (dnsperf -c 1 -q 200 -t 1 each, on CPU 1); extra moatd flags: %s; load average now %s\n\n' \
		"$ROUNDS" "$DUR" "${EXTRA:-none}" "$(cut -d' ' -f1-3 /proc/loadavg)"
	printf '| scenario | A µs/query | B µs/query | A/B, median of rounds | A/B per round |\n|---|---|---|---|---|\n'
	for s in $SCEN; do
		printf '| %s | %s | %s | **%sx** | %s |\n' "$s" \
			"$(awk -F'\t' -v s="$s" '$2 == s { print $3 }' "$RAW" | med)" \
			"$(awk -F'\t' -v s="$s" '$2 == s { print $4 }' "$RAW" | med)" \
			"$(awk -F'\t' -v s="$s" '$2 == s { print $5 }' "$RAW" | med)" \
			"$(awk -F'\t' -v s="$s" '$2 == s { printf "%s%.3f", (n++ ? ", " : ""), $5 }' "$RAW")"
	done
} | tee "${OUT:-/dev/null}"
