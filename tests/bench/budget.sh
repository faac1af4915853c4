#!/usr/bin/env bash
# What the label budget (issue 26) costs a cached query on the hit path, end to end: two moatds
# side by side in one namespace, one with the budget (its default, 4096 bytes an hour) and one
# with --budget 0, each asked the same 200 names under an allowed wildcard, all sent before and
# cached (so the budget's work is the seen-name check), by dnsperf at full speed, in alternating
# rounds. Reports each one's server CPU per answered query (utime+stime from /proc over the
# queries dnsperf completed) and their difference and ratio, per round and as medians. Also runs
# build/bench-budget (the in-process figures). Run by hand as root:
#   tests/bench/budget.sh [BUILD_DIR] [ROUNDS] [SECONDS]    default build, 5 rounds of 10 s
# Not a timed test: it prints figures, asserts nothing.
set -euo pipefail
export MOAT_SRC=$(cd "$(dirname "$0")/../.." && pwd)
export MOAT_BUILD=${1:-$MOAT_SRC/build}
ROUNDS=${2:-5}
DUR=${3:-10}
source "$MOAT_SRC/tests/e2e/lib.sh"
e2e_init budget_bench
command -v dnsperf >/dev/null || e2e_fail "dnsperf is needed (tools/deps)"
{
	printf '$ORIGIN bench.test.\n$TTL 3600\n@ IN SOA ns1 hostmaster 1 3600 600 86400 3600\n'
	printf '  IN NS ns1\nns1 IN A 198.51.100.53\n* IN A 198.51.100.1\n'
} >"$E2E_WORK/bench.test.zone"
e2e_nsd 127.0.0.1 5300 "$E2E_WORK/bench.test.zone"
printf '*.bench.test\n' >"$E2E_WORK/allow.txt"
# 200 names of 15 bytes below the zone: 3000 bytes, inside the default budget
for ((i = 0; i < 200; i++)); do printf 'd%012x.bench.test A\n' $((i * 7919 + 4242)); done >"$E2E_WORK/names.txt"
e2e_addr 127.0.0.2/32
start_moatd on --listen 127.0.0.1:53 --upstream 127.0.0.1:5300 --allow "$E2E_WORK/allow.txt" \
	--log /dev/null
start_moatd off --listen 127.0.0.2:53 --upstream 127.0.0.1:5300 --allow "$E2E_WORK/allow.txt" \
	--log /dev/null --budget 0
for a in 127.0.0.1 127.0.0.2; do # warm: every name billed (on) and cached (both)
	e2e_run dig +time=2 +tries=1 @"$a" -f "$E2E_WORK/names.txt" +noall +answer >"$E2E_WORK/warm.txt"
	(($(grep -c 198.51.100.1 "$E2E_WORK/warm.txt") == 200)) || e2e_fail "warm-up on $a: $(wc -l <"$E2E_WORK/warm.txt") answers"
done
ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

round() { # round NAME ADDR: prints server CPU ns per answered query
	local pid t0 t1 n
	pid=$(e2e_pid "$1")
	t0=$(ticks "$pid")
	n=$(e2e_run dnsperf -s "$2" -d "$E2E_WORK/names.txt" -l "$DUR" -c 1 -q 100 2>&1 |
		awk '/Queries completed:/ { print $3 }')
	t1=$(ticks "$pid")
	awk -v d=$((t1 - t0)) -v hz="$hz" -v n="$n" 'BEGIN { printf "%.0f %d\n", d / hz * 1e9 / n, n }'
}

printf '| round | budget on (ns CPU/query) | off | on - off (ns) | on / off | queries on, off |\n|---|---|---|---|---|---|\n'
ons=() offs=()
for ((r = 1; r <= ROUNDS; r++)); do
	read -r on qon < <(round on 127.0.0.1)
	read -r off qoff < <(round off 127.0.0.2)
	ons+=("$on") offs+=("$off")
	awk -v r="$r" -v a="$on" -v b="$off" -v qa="$qon" -v qb="$qoff" \
		'BEGIN { printf "| %d | %d | %d | %d | %.3f | %d, %d |\n", r, a, b, a - b, a / b, qa, qb }'
done
med() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
mon=$(med "${ons[@]}")
moff=$(med "${offs[@]}")
awk -v a="$mon" -v b="$moff" 'BEGIN { printf "| median | %d | %d | %d | %.3f | |\n", a, b, a - b, a / b }'
stop_moatd on
stop_moatd off
printf '\nbuild/bench-budget (in process):\n\n'
"$MOAT_BUILD/bench-budget" 2000000
e2e_pass
