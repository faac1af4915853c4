#!/usr/bin/env bash
# The query log is bounded by default (issue 22): a flood of 500k denied queries from one client
# against moatd with no limit flags. Its rate limit (10000 q/s by default) refuses what is over
# it (counted, not logged); the log's byte budget (1 MiB/s by default) holds the bytes written;
# identical denies are counted in "repeated" lines and what the budget left out in "suppressed"
# lines. Judged from the log file and moatd's own stop line: the log's bytes stay within the
# budget for the time the flood took, every line is valid JSON, and every query moatd read is
# counted exactly once (a line of its own, a repeat, a suppressed one or a rate-limited one).
# Then a second moatd with --log-budget 65536 --ratelimit 0: the same flood, the same exact
# count, under the smaller budget.
source "$(dirname "$0")/lib.sh"
e2e_init log_flood

printf '*.example.test\n' >"$E2E_WORK/allow.txt"
PY=$E2E_PY
N=500000

# flood NAME BUDGET: send N denied queries to the moatd NAME, then check its log.
flood() {
	local name=$1 budget=$2 out t0 t1
	t0=$(date +%s.%N)
	out=$(e2e_run "$PY" "$E2E_DIR/peers/logflood.py" 127.0.0.1 "$N" 64)
	t1=$(date +%s.%N)
	e2e_log "$name: $out"
	[[ "$out" == "sent=$N answered=$N lost=0 "* ]] || e2e_fail "$name: not every query answered: $out"
	# a normal query is still answered, and logged once the budget has refilled
	e2e_assert_eq NXDOMAIN "$(status_of "$(e2e_dig @127.0.0.1 after.flood.test A)")" "$name: still serving"
	wait_line -F "$E2E_WORK/$name.jsonl" '"qname":"after.flood.test."' 5
	stop_moatd "$name"
	local read rl
	read=$(sed -n 's/.*stopped: \([0-9]*\) queries.*/\1/p' <<<"$STOPLINE")
	rl=$(sed -n 's/.* \([0-9]*\) rate-limited.*/\1/p' <<<"$STOPLINE")
	e2e_assert_eq $((N + 1)) "$read" "$name: moatd read every query"
	local tally
	tally=$(e2e_run "$PY" - "$E2E_WORK/$name.jsonl" <<'PY'
import json, sys
lines = plain = rep = sup = nbytes = 0
for raw in open(sys.argv[1], "rb"):
    nbytes += len(raw)
    e = json.loads(raw)  # every line valid JSON
    lines += 1
    if "suppressed" in e:
        sup += e["suppressed"]
    elif "repeated" in e:
        rep += e["repeated"]
    else:
        plain += 1
print(lines, plain, rep, sup, nbytes)
PY
)
	local lines plain rep sup bytes
	read -r lines plain rep sup bytes <<<"$tally"
	e2e_log "$name: $lines lines, $bytes bytes: $plain queries on their own line, $rep repeats counted, $sup suppressed, $rl rate-limited"
	e2e_assert_eq "$read" $((plain + rep + sup + rl)) "$name: every query counted exactly once"
	((rep > 0)) || e2e_fail "$name: no repeats were counted"
	((sup > 0)) || e2e_fail "$name: the budget never held a line back"
	# The budget: a second's burst, one second of refill for each second the flood took, one
	# line over it, and the summary lines (at most two a second).
	local max
	max=$(awk -v b="$budget" -v t0="$t0" -v t1="$t1" 'BEGIN { s = t1 - t0 + 6; printf "%d", b * (s + 1) + 4096 + s * 160 }')
	((bytes <= max)) || e2e_fail "$name: $bytes log bytes, over the budget's $max"
}

start_moatd flood_default --listen 127.0.0.1:53 --upstream 127.0.0.1:5300 --allow "$E2E_WORK/allow.txt"
flood flood_default 1048576
start_moatd flood_small --listen 127.0.0.1:53 --upstream 127.0.0.1:5300 --allow "$E2E_WORK/allow.txt" \
	--log-budget 65536 --ratelimit 0
flood flood_small 65536
e2e_assert_contains "$STOPLINE" " 0 rate-limited" "no rate limit with --ratelimit 0"
e2e_pass
