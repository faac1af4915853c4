#!/usr/bin/env bash
# tests/bench/callgrind.sh -- moatd's instructions per query (valgrind --tool=callgrind counts
# them, the same on a loaded machine as on a quiet one) for a denied name, a cache hit and a
# forwarded miss, and the functions that spend them. For development: the real CPU time is
# tests/bench/run's. Run as root, after building (default build dir: build-bench, as run makes it).
#
# Usage: tests/bench/callgrind.sh [--build DIR] [--queries N] [--log FILE|/dev/null] [--top N]
#                                 [--moatd-args "..."] [--keep]
#   --queries N   queries per scenario (default 20000), sent by dnsperf at 2000/s
#   --log FILE    moatd's --log (default: a file in the work directory)
# Prints, per scenario, Ir (instructions) per query over the whole process (every thread; system
# calls are not instructions and not counted) and the top functions by self Ir. With --keep the
# profiles stay as WORK/callgrind.SCENARIO (callgrind_annotate --inclusive=yes reads them).
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=$SRC/build-bench QUERIES=20000 QLOG="" TOP=25 EXTRA="" KEEP=0
while [[ $# -gt 0 ]]; do
	case $1 in
	--build) BUILD=$2; shift 2 ;;
	--queries) QUERIES=$2; shift 2 ;;
	--log) QLOG=$2; shift 2 ;;
	--top) TOP=$2; shift 2 ;;
	--moatd-args) EXTRA=$2; shift 2 ;;
	--keep) KEEP=1; shift ;;
	*) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2 ;;
	esac
done
# shellcheck source=tests/bench/lib.sh
source "$SRC/tests/bench/lib.sh"
bench_root
bench_need moatd
for t in valgrind callgrind_control callgrind_annotate dnsperf nsd; do
	command -v $t >/dev/null || { echo "$0: needs $t" >&2; exit 1; }
done
BENCH_KEEP=$KEEP
bench_work cg
[[ -n $QLOG ]] || QLOG=$WORK/moatd.jsonl

bench_data
awk -v n="$QUERIES" 'BEGIN { for (i = 0; i < n; i++) printf "d%07d.bench.test A\n", i }' >"$WORK/q-deny.txt"
awk -v n="$QUERIES" 'BEGIN { for (i = 0; i < n; i++) printf "m%07d.w.bench.test A\n", i }' >"$WORK/q-miss.txt"
bench_ns_nsd cg bench.test "$WORK/bench.test.zone"
# The benchmark's flags (log budget off, the limiter on but never reached, no label budget: the
# misses are fresh names under one wildcard, which it would deny after a few hundred), where this
# moatd has them (an older build, to compare with, may not).
if "$BUILD/moatd" --help 2>&1 | grep -q -- --log-budget; then
	EXTRA="--log-budget 0 --ratelimit 10000000 $EXTRA"
fi
if "$BUILD/moatd" --help 2>&1 | grep -q -- '^  --budget '; then
	EXTRA="--budget 0 $EXTRA"
fi
# shellcheck disable=SC2086 # EXTRA is a word list
ip netns exec "$NS" valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.%p" \
	"$BUILD/moatd" --listen 127.0.0.1:53 --upstream 127.0.0.1:5300 --allow "$WORK/allow.txt" \
	--log "$QLOG" --no-seccomp --user root $EXTRA \
	>"$WORK/moatd.out" 2>"$WORK/moatd.log" &
MPID=$!
for ((i = 0; i < 600; i++)); do
	grep -q "ready in" "$WORK/moatd.log" 2>/dev/null && break
	sleep 0.1
done
grep -q "ready in" "$WORK/moatd.log" || { cat "$WORK/moatd.log" >&2; exit 1; }
perf_q() { ip netns exec "$NS" dnsperf -s 127.0.0.1 -p 53 -c 1 -q 50 -t 2 "$@" 2>&1; }
perf_q -d "$WORK/q-hit.txt" -n 1 -Q 2000 >/dev/null # the hit set, cached

printf '# moatd instructions per query (callgrind), %s\n\n' "$(date '+%Y-%m-%d %H:%M')"
printf 'moat %s, %s; %s queries a scenario at 2000/s; log %s\n\n' \
	"$(git -C "$SRC" rev-parse --short HEAD)" "$BUILD" "$QUERIES" "$QLOG"
for s in deny hit miss; do
	case $s in
	deny) args=(-d "$WORK/q-deny.txt" -n 1) ;;
	hit) args=(-d "$WORK/q-hit.txt" -n $((QUERIES / 1000))) ;;
	miss) args=(-d "$WORK/q-miss.txt" -n 1) ;;
	esac
	callgrind_control -z "$MPID" >/dev/null
	out=$(perf_q "${args[@]}" -Q 2000)
	done_q=$(awk '/Queries completed:/ { print $3; exit }' <<<"$out")
	rm -f "$WORK"/cg.*.*
	callgrind_control -d "$s" "$MPID" >/dev/null
	for ((i = 0; i < 100; i++)); do
		f=$(ls "$WORK"/cg.*.* 2>/dev/null | head -n 1 || true)
		[[ -n $f ]] && break
		sleep 0.1
	done
	sleep 0.2 # written whole
	mv "$f" "$WORK/callgrind.$s"
	f=$WORK/callgrind.$s
	ir=$(callgrind_annotate "$f" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }')
	printf '## %s: %s queries, %s Ir, **%.0f Ir a query**\n\n```\n' "$s" "$done_q" "$ir" \
		"$(awk -v a="$ir" -v n="$done_q" 'BEGIN { print n ? a / n : 0 }')"
	callgrind_annotate --threshold=100 --auto=no "$f" 2>/dev/null |
		awk '/file:function/ { on = 1; next } on && /^-+$/ { next } on && NF && !/\(100\.0%\)/' |
		sed 's| [^ ]*/\([^/ ]*:\)| \1|; s| \[[^]]*\]$||' | head -n "$TOP" || true
	printf '```\n\n'
done
