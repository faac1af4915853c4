#!/usr/bin/env bash
# moat run's exit and clean-up (issue 24), in both daemon modes (and the refusal without root:
# there is no rootless mode): the command's exit status 0
# and 3 come back, SIGINT to moat run comes back as 130 and SIGTERM as 143 (both forwarded to
# the command, which dies of them); after each nothing of the run is left. After kill -9 of
# moat run itself, the sandbox's processes die with it, and `moat run --gc` removes what is
# left (the record says what: link, table, runtime agent and sandbox range); so does a run that
# could not reach the system's moatd as it ended (its record stays). Sequential runs
# leak nothing: 100 with the system's daemons (links, set elements, runtime agents,
# namespaces, the daemons' descriptors), 20 with private ones (no daemon process stays).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/run_env.sh"
run_env_init run_lifecycle

# status MODE EXPECTED ARGS...: run, compare the exit status, check for leftovers.
status() {
	local mode=$1 want=$2 st=0
	shift 2
	moat_run "${MODEARGS[@]}" --quiet -- "$@" >/dev/null 2>"$E2E_WORK/err.txt" || st=$?
	e2e_assert_eq "$want" "$st" "$mode: exit status of $*: $(cat "$E2E_WORK/err.txt")"
	run_leftovers "$mode: after $*"
}

# signal MODE SIG EXPECTED: a run whose command waits, stopped with SIG sent to moat run.
signal() {
	local mode=$1 sig=$2 want=$3 st=0 pid ino
	: >"$E2E_WORK/sig.out"
	moat_run_bg "$E2E_WORK/sig.out" "$E2E_WORK/sig.err" "${MODEARGS[@]}" --quiet -- \
		"${RUN_PEER[@]}" script "$RUN_BIN/waits"
	pid=$RUN_BG_PID
	wait_line -F "$E2E_WORK/sig.out" "self: uid" 10
	ino=$(run_netns "$E2E_WORK/sig.out")
	kill "-$sig" "$pid"
	wait "$pid" || st=$?
	e2e_assert_eq "$want" "$st" "$mode: SIG$sig: $(cat "$E2E_WORK/sig.err")"
	run_leftovers "$mode: after SIG$sig" "$ino"
}

# killed MODE: kill -9 of moat run; then --gc.
killed() {
	local mode=$1 pid ino
	: >"$E2E_WORK/kill.out"
	moat_run_bg "$E2E_WORK/kill.out" /dev/null "${MODEARGS[@]}" --quiet --allow a.test -- \
		"${RUN_PEER[@]}" script "$RUN_BIN/waits"
	pid=$RUN_BG_PID
	wait_line -F "$E2E_WORK/kill.out" "self: uid" 10
	ino=$(run_netns "$E2E_WORK/kill.out")
	kill -KILL "$pid"
	wait "$pid" 2>/dev/null || true
	# The sandbox's init dies with moat run (its death signal), and with it the command.
	no_procs() { [[ "$(run_ns_held "$ino")" == 0 ]]; }
	e2e_poll 10 no_procs || e2e_fail "$mode: the sandbox's processes outlived kill -9"
	# Left: the slot's record and the table (and in the system mode the agent and range).
	[[ -n "$(find "$RUN_STATE" -mindepth 1 -maxdepth 1 -type d)" ]] ||
		e2e_fail "$mode: kill -9 left no record to clean"
	e2e_assert_contains "$(ip netns exec "$RUN_HOST" nft list tables)" moatrun "$mode: kill -9 left no table"
	if [[ $mode == system ]]; then
		e2e_assert_contains "$(ip netns exec "$RUN_HOST" "$MOAT_BUILD/moatctl" -s "$RUN_SYS/ctl.sock" --json agents)" \
			'"moat-run-' "$mode: kill -9 left no agent"
	fi
	local out
	out=$(moat_run "${MODEARGS[@]}" --gc 2>&1) || e2e_fail "$mode: --gc failed: $out"
	e2e_assert_contains "$out" "1 slot(s) cleaned" "$mode: --gc"
	run_leftovers "$mode: after kill -9 and --gc" "$ino"
}

# unreachable: the system's moatd cannot be reached as a run ends (its control socket moved
# away): the run says so and keeps its record (a runtime agent left in moatd would refuse the
# slot's next run), and --gc, once moatd is back, removes the agent and the record.
unreachable() {
	local st=0 out
	printf 'self\nwait %s 30\n' "$RUN_BIN/go-unreach" >"$RUN_BIN/unreach"
	chmod 0644 "$RUN_BIN/unreach"
	: >"$E2E_WORK/unreach.out"
	moat_run_bg "$E2E_WORK/unreach.out" "$E2E_WORK/unreach.err" "${MODEARGS[@]}" --quiet \
		--allow a.test -- "${RUN_PEER[@]}" script "$RUN_BIN/unreach"
	wait_line -F "$E2E_WORK/unreach.out" "self: uid" 10
	mv "$RUN_SYS/ctl.sock" "$RUN_SYS/ctl.away"
	touch "$RUN_BIN/go-unreach"
	wait "$RUN_BG_PID" || st=$?
	mv "$RUN_SYS/ctl.away" "$RUN_SYS/ctl.sock"
	out=$(cat "$E2E_WORK/unreach.err")
	e2e_assert_eq 0 "$st" "unreachable moatd: the command's exit status: $out"
	e2e_assert_contains "$out" "moatd: agent del moat-run-" "unreachable moatd: the run says so"
	e2e_assert_contains "$out" "its record stays" "unreachable moatd: the record stays"
	[[ -n "$(find "$RUN_STATE" -mindepth 1 -maxdepth 1 -type d)" ]] ||
		e2e_fail "unreachable moatd: no record left for the clean-up"
	e2e_assert_contains "$(ip netns exec "$RUN_HOST" "$MOAT_BUILD/moatctl" -s "$RUN_SYS/ctl.sock" --json agents)" \
		'"moat-run-' "unreachable moatd: the agent the run could not remove"
	out=$(moat_run "${MODEARGS[@]}" --gc 2>&1) || e2e_fail "unreachable moatd: --gc failed: $out"
	e2e_assert_contains "$out" "1 slot(s) cleaned" "unreachable moatd: --gc"
	run_leftovers "after a run that could not reach moatd and --gc"
}

# Not root: no rootless mode, refused clearly (exit 125, the reason and what the machine has).
cp "$MOAT_BUILD/moat" "$RUN_BIN/"
st=0
out=$(ip netns exec "$RUN_HOST" setpriv --reuid $RUN_USER --regid $RUN_USER --clear-groups \
	"$RUN_BIN/moat" run --allow a.test -- true 2>&1) || st=$?
e2e_assert_eq 125 "$st" "a run without root: $out"
e2e_assert_contains "$out" "no rootless mode: refused" "a run without root: the refusal"
e2e_assert_contains "$out" "/dev/net/tun" "a run without root: what this machine has"
run_leftovers "a refused rootless run"

cat >"$RUN_BIN/waits" <<'P'
self
wait /nonexistent 60
P
chmod 0644 "$RUN_BIN/waits"

# The daemons' descriptors; the runs' namespaces, by the inodes their commands print, each
# checked right after its run (the kernel gives a freed namespace's number to later ones).
fds() { ls "/proc/$1/fd" | wc -l; }

MODEARGS=(--private --upstream 203.0.113.53)
status private 0 true
status private 3 sh -c 'exit 3'
status private 127 /nonexistent/command
signal private INT 130
signal private TERM 143
killed private
daemons_now() { # processes running the build's moatd or moat-fw on this test's state (other
	# tests running beside this one have daemons of their own)
	local n=0 f p
	for f in /proc/[0-9]*/exe; do
		case "$(readlink "$f" 2>/dev/null)" in
		"$MOAT_BUILD/moatd" | "$MOAT_BUILD/moat-fw")
			p=${f%/exe}
			tr '\0' '\n' <"$p/cmdline" 2>/dev/null | grep -qF -- "$E2E_WORK/" && n=$((n + 1))
			;;
		esac
	done
	echo "$n"
}
d0=$(daemons_now)
: >"$E2E_WORK/seq.out"
for ((i = 0; i < 20; i++)); do
	moat_run "${MODEARGS[@]}" --quiet --allow a.test -- "${RUN_PEER[@]}" self \
		>>"$E2E_WORK/seq.out" || e2e_fail "private run $i failed"
	ino=$(tail -n 2 "$E2E_WORK/seq.out" | run_netns)
	[[ -n "$ino" ]] || e2e_fail "private run $i did not report itself"
	e2e_assert_eq 0 "$(run_ns_held "$ino")" "private run $i: its namespace is still held"
done
e2e_assert_eq "$d0" "$(daemons_now)" "private: daemon processes left after 20 runs"
run_leftovers "private: 20 runs"

run_sys_start
MODEARGS=("${RUN_SYSARGS[@]}")
status system 0 true
status system 3 sh -c 'exit 3'
signal system INT 130
signal system TERM 143
killed system
unreachable
cat >"$RUN_BIN/seq" <<'P'
self
resolve a.test
P
chmod 0644 "$RUN_BIN/seq"
: >"$E2E_WORK/seq.out"
# One run first: moatd connects to moat-fw at its first grant (resolver/serve/fwchan.c), and
# that one connection is the daemons' own, not a run's.
moat_run "${MODEARGS[@]}" --quiet --allow a.test -- "${RUN_PEER[@]}" script "$RUN_BIN/seq" \
	>/dev/null || e2e_fail "the first system run failed"
mfd=$(fds "$(e2e_pid sysmoatd)")
ffd=$(fds "$(e2e_pid sysfw)")
for ((i = 0; i < 100; i++)); do
	moat_run "${MODEARGS[@]}" --quiet --allow a.test -- "${RUN_PEER[@]}" script "$RUN_BIN/seq" \
		>>"$E2E_WORK/seq.out" || e2e_fail "system run $i failed"
	ino=$(tail -n 2 "$E2E_WORK/seq.out" | run_netns)
	[[ -n "$ino" ]] || e2e_fail "system run $i did not report itself"
	e2e_assert_eq 0 "$(run_ns_held "$ino")" "system run $i: its namespace is still held"
done
e2e_assert_eq 100 "$(grep -c "resolve a.test: addr 203.0.113.80" "$E2E_WORK/seq.out")" \
	"system: a run did not resolve its name"
run_leftovers "system: 100 runs"
# moatd's upstream sockets come and go with its pool (a few at a time), so a handful of
# descriptors more or less is its pool, not the runs; a leak per run would be 100.
mfd2=$(fds "$(e2e_pid sysmoatd)")
ffd2=$(fds "$(e2e_pid sysfw)")
e2e_log "descriptors: moatd $mfd -> $mfd2, moat-fw $ffd -> $ffd2"
((mfd2 <= mfd + 4)) || e2e_fail "moatd holds $mfd2 descriptors after 100 runs (was $mfd)"
e2e_assert_eq "$ffd" "$ffd2" "moat-fw's descriptors after 100 runs"
stop_moatd sysmoatd
e2e_pass
