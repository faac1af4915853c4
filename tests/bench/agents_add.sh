#!/usr/bin/env bash
# tests/bench/agents_add.sh -- runtime agents (issue 16): the time to add 1,000 agents over the
# control socket, against the peer an operator has without them (the same 1,000 agents written
# into the config file and loaded by `moatctl reload`), in one run, by hand, as root (never part
# of tools/test). Everything runs in a private network namespace (unshare -n) with only lo; no
# query is sent (the adds and the reload are what is timed).
#
# Usage: tests/bench/agents_add.sh [--agents N] [--rounds R] [--separate] [--out FILE]
# Per round, with a fresh state directory and a fresh moatd (2 workers, user nobody):
#   batch     N `agent add` lines in one `moatctl batch` (one store commit per request, requests
#             of one batch pipelined)
#   separate  (--separate) N `moatctl agent add` processes one after another (each waits for its
#             own durable commit: an fdatasync of the LMDB store)
#   reload    the same N agents in the config file, `moatctl reload` (the peer)
#   del       N `agent del` lines in one batch
# Medians with [min-max] go to --out (default tests/bench/results-agents-YYYYMMDD-HHMM.md).
# Target (issue 16): batch <= 2 s for 1,000 agents.
set -euo pipefail
shopt -s inherit_errexit

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${MOAT_BUILD:-$SRC/build}
N=1000 ROUNDS=3 SEPARATE=0
OUT="$SRC/tests/bench/results-agents-$(date -u +%Y%m%d-%H%M).md"
while (($#)); do
	case $1 in
	--agents) N=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--separate) SEPARATE=1; shift ;;
	--out) OUT=$2; shift 2 ;;
	*) echo "usage: see the head of $0" >&2; exit 2 ;;
	esac
done
. "$SRC/tests/bench/lib.sh"
bench_root
((N >= 1 && N <= 60000)) || { echo "$0: --agents 1..60000" >&2; exit 2; }
if [[ -z ${MOAT_BENCH_IN_NS:-} ]]; then
	args=(--agents "$N" --rounds "$ROUNDS" --out "$OUT")
	((SEPARATE)) && args+=(--separate)
	exec unshare -n env MOAT_BENCH_IN_NS=1 "$0" "${args[@]}"
fi
ip link set lo up
bench_need moatd moatctl

bench_work agents # metric value_ms
CTL=("$BUILD/moatctl" -s "$WORK/ctl.sock")

# Agent i: client 10.<i/65536>.<i/256%256>.<i%256>/32 (private, never routed: no query is sent),
# pattern ai.fleet.test.
client_of() { printf '10.%d.%d.%d' $(($1 >> 16 & 255)) $(($1 >> 8 & 255)) $(($1 & 255)); }
for ((i = 1; i <= N; i++)); do
	echo "agent add a$i --clients $(client_of "$i")/32 --pattern a$i.fleet.test"
done >"$WORK/adds.txt"
for ((i = 1; i <= N; i++)); do echo "agent del a$i"; done >"$WORK/dels.txt"
printf 'ops.fleet.test\n' >"$WORK/ops.txt"
conf() { # FILE WITH_N_AGENTS(0|1)
	cat >"$1" <<EOF2
listen: ["127.0.0.1:5392"]
upstreams: ["192.0.2.1:53"]
log: {file: $WORK/queries.jsonl}
control: $WORK/ctl.sock
state_dir: $WORK/state
user: nobody
workers: 2
agents:
  - name: ops
    clients: [127.0.0.1/32]
    allow: [$WORK/ops.txt]
EOF2
	if (($2)); then
		for ((i = 1; i <= N; i++)); do
			printf '  - name: a%d\n    clients: [%s/32]\n    allow: ["a%d.fleet.test"]\n' \
				"$i" "$(client_of "$i")" "$i"
		done >>"$1"
	fi
}
conf "$WORK/small.yaml" 0
conf "$WORK/full.yaml" 1
# The peer's allow entries are patterns inline; if this moatd wants files, write one per agent.
if ! "$BUILD/moatd" -c "$WORK/full.yaml" --check >/dev/null 2>&1; then
	mkdir -p "$WORK/allow"
	for ((i = 1; i <= N; i++)); do printf 'a%d.fleet.test\n' "$i" >"$WORK/allow/a$i.txt"; done
	sed -i -E "s|allow: \[\"a([0-9]+)\.fleet\.test\"\]|allow: [$WORK/allow/a\1.txt]|" "$WORK/full.yaml"
	"$BUILD/moatd" -c "$WORK/full.yaml" --check >/dev/null || { echo "$0: the peer config does not load" >&2; exit 1; }
fi

now_ms() { echo $(($(date +%s%N) / 1000000)); }
start() { # CONFIG
	rm -rf "$WORK/state" "$WORK/ctl.sock"
	"$BUILD/moatd" -c "$1" >"$WORK/moatd.log" 2>&1 &
	MPID=$!
	local t
	for ((t = 0; t < 300; t++)); do
		grep -q 'ready in' "$WORK/moatd.log" 2>/dev/null && return 0
		kill -0 "$MPID" 2>/dev/null || break
		sleep 0.05
	done
	echo "$0: moatd did not start:" >&2
	cat "$WORK/moatd.log" >&2
	exit 1
}
stop() {
	kill "$MPID" && wait "$MPID" 2>/dev/null || true
	MPID=
}
timed() { # METRIC CMD...: run CMD, record its wall time
	local t0 t1
	t0=$(now_ms)
	"${@:2}" >"$WORK/out.txt" 2>&1 || { echo "$0: $1 failed:" >&2; head -5 "$WORK/out.txt" >&2; exit 1; }
	t1=$(now_ms)
	printf '%s\t%s\n' "$1" $((t1 - t0)) >>"$RAW"
	log "$1: $((t1 - t0)) ms"
}
separate() {
	local i
	for ((i = 1; i <= N; i++)); do
		"${CTL[@]}" agent add "b$i" --clients "$(client_of $((i + N)))/32" --pattern "b$i.fleet.test" >/dev/null
	done
}
for ((r = 1; r <= ROUNDS; r++)); do
	log "round $r/$ROUNDS"
	start "$WORK/small.yaml"
	timed batch "${CTL[@]}" --json batch <"$WORK/adds.txt"
	[[ $(grep -c '"ok":true' "$WORK/out.txt") == "$N" ]] || { echo "$0: not every add answered ok" >&2; exit 1; }
	((SEPARATE)) && timed separate separate
	timed del "${CTL[@]}" --json batch <"$WORK/dels.txt"
	stop
	# The peer: moatd started with the small config, which is then replaced by the full one.
	cp "$WORK/small.yaml" "$WORK/live.yaml"
	start "$WORK/live.yaml"
	cp "$WORK/full.yaml" "$WORK/live.yaml"
	timed reload "${CTL[@]}" reload
	stop
done

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
{
	echo "# runtime agents: $N added over the control socket vs. the same agents by config reload (tests/bench/agents_add.sh)"
	echo
	echo "- $(date -u '+%F %T') UTC, moat $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo '?'), build $BUILD, $ROUNDS round(s); host load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "- target (issue 16): batch <= 2000 ms for 1,000 agents"
	echo
	echo "| what | median ms | [min-max] | x reload |"
	echo "|---|---|---|---|"
	rel=$(awk -F'\t' '$1 == "reload" { print $2 }' "$RAW" | median)
	for m in batch separate del reload; do
		vals=$(awk -F'\t' -v m="$m" '$1 == m { print $2 }' "$RAW")
		[[ -n $vals ]] || continue
		med=$(median <<<"$vals")
		lo=$(sort -n <<<"$vals" | head -1) hi=$(sort -n <<<"$vals" | tail -1)
		echo "| $m | $med | [$lo-$hi] | $(awk -v a="$med" -v b="$rel" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }') |"
	done
} | tee "$OUT"
