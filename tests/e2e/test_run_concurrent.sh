#!/usr/bin/env bash
# 20 concurrent moat runs (issue 24), each with its own allowlist (run i: n<i>.test tcp/80), with
# the system's daemons and with private ones: each reaches its own name; none resolves its
# neighbour's name; and once every run holds its grant, none reaches its neighbour's address
# directly, although that address is granted at that moment to the neighbour (grants are bound
# to the sandbox that asked). Judged at the receivers; nothing is left after.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/run_env.sh"
run_env_init run_concurrent

N=20
specs=()
for ((i = 0; i < N; i++)); do specs+=("203.0.113.$((100 + i)):80"); done
run_serve web "${specs[@]}"

# round MODE ARGS...: N runs at once.
round() {
	local mode=$1 i j pids=() st
	shift
	local go="$RUN_BIN/go-$mode"
	for ((i = 0; i < N; i++)); do
		j=$(((i + 1) % N))
		cat >"$RUN_BIN/c-$mode-$i" <<P
tcp n$i.test 80 own-$mode-$i
resolve n$j.test
wait $go 60
tcp 203.0.113.$((100 + j)) 80 cross-$mode-$i
tcp n$i.test 80 again-$mode-$i
exit 0
P
		chmod 0644 "$RUN_BIN/c-$mode-$i"
		moat_run_bg "$E2E_WORK/c-$mode-$i.out" "$E2E_WORK/c-$mode-$i.err" "$@" --quiet \
			--allow "n$i.test tcp/80" -- "${RUN_PEER[@]}" script "$RUN_BIN/c-$mode-$i"
		pids+=("$RUN_BG_PID")
	done
	# Every run has its own grant (its first connection went through): now the cross attempts.
	# A run that ended before that failed: say which and why at once.
	all_granted() {
		local k
		for ((k = 0; k < N; k++)); do
			grep -q "own-$mode-$k: ok" "$E2E_WORK/c-$mode-$k.out" 2>/dev/null && continue
			e2e__alive "${pids[k]}" ||
				e2e_fail "$mode: run $k ended early: $(cat "$E2E_WORK/c-$mode-$k.out" "$E2E_WORK/c-$mode-$k.err")
what the system's moatd logged of n$k.test: $(grep -F "\"n$k.test." "$RUN_SYS/queries.jsonl" 2>/dev/null)"
			return 1
		done
	}
	e2e_poll 120 all_granted || e2e_fail "$mode: not every run reached its own name"
	touch "$go"
	for ((i = 0; i < N; i++)); do
		st=0
		wait "${pids[i]}" || st=$?
		e2e_assert_eq 0 "$st" "$mode: run $i: $(cat "$E2E_WORK/c-$mode-$i.err")"
		local out
		out=$(cat "$E2E_WORK/c-$mode-$i.out")
		e2e_assert_contains "$out" "resolve n$(((i + 1) % N)).test: failed" "$mode: run $i resolved its neighbour's name"
		e2e_assert_contains "$out" "cross-$mode-$i: failed" "$mode: run $i reached its neighbour's address"
		e2e_assert_contains "$out" "again-$mode-$i: ok" "$mode: run $i lost its own grant"
	done
	# The receivers: each own connection arrived at its own address, no cross one at all.
	for ((i = 0; i < N; i++)); do
		grep -qF "tcp 203.0.113.$((100 + i)):80 own-$mode-$i" "$E2E_WORK/web.log" ||
			e2e_fail "$mode: run $i's connection did not arrive"
	done
	e2e_assert_not_contains "$(cat "$E2E_WORK/web.log")" "cross-$mode" "$mode: a cross connection arrived"
	run_leftovers "$mode"
}

run_sys_start
round system "${RUN_SYSARGS[@]}"
# A private run refuses to start beside moat-fw's table (it would drop all the run sends).
out=$(moat_run --private --upstream 203.0.113.53 -- true 2>&1) && e2e_fail "private run beside table inet moat started"
e2e_assert_contains "$out" "table inet moat" "private beside moat-fw: the reason"
run_sys_stop
round private --private --upstream 203.0.113.53
e2e_pass
