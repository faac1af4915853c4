#!/usr/bin/env bash
# moat run (issue 24), in both daemon modes: `moat run --allow 'a.test tcp/80' --allow
# 'ntp.test udp/123' -- CLIENT` reaches a.test on TCP 80 and ntp.test on UDP 123, and nothing
# else: not a.test on 443, not b.test, not 169.254.169.254 (by name or by address); judged by
# the receivers outside. Inside, the command runs as the invoking user (SUDO_UID) with CapEff
# and CapBnd 0 and no_new_privs, its resolv.conf names only moatd, and its exit status (3) is
# moat run's; the summary and --report name the denied names and the dropped destinations.
# After the run nothing of it is left: links, tables, set elements, runtime agent, processes.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/run_env.sh"
run_env_init run

run_serve web 203.0.113.80:80 203.0.113.80:443 203.0.113.80:123 203.0.113.81:80 \
	203.0.113.123:123 169.254.169.254:80
# The report is written as the invoking user, into a directory that user may write.
REPORTS=$E2E_WORK/reports
mkdir -m 0700 "$REPORTS"
chown "$RUN_USER:$RUN_USER" "$REPORTS"

# What the command does: every line of its script is one probe (run_peer.py).
cat >"$RUN_BIN/probes" <<'P'
self
resolve a.test
tcp a.test 80 via-name-80
tcp a.test 443 via-name-443
tcp b.test 80 b-80
resolve b.test
resolve meta.test
tcp 169.254.169.254 80 metadata
tcp 203.0.113.81 80 b-by-address
udp ntp.test 123 ntp-123
udp a.test 123 a-udp-123
exit 3
P
chmod 0644 "$RUN_BIN/probes"

# check MODE ARGS...: one run and what the receivers saw.
check() {
	local mode=$1 st=0 out
	shift
	local before
	before=$(wc -l <"$E2E_WORK/web.log")
	moat_run "$@" --report "$REPORTS/$mode.json" --allow 'a.test tcp/80' \
		--allow 'ntp.test udp/123' -- "${RUN_PEER[@]}" script "$RUN_BIN/probes" \
		>"$E2E_WORK/out-$mode.txt" 2>"$E2E_WORK/err-$mode.txt" || st=$?
	out=$(cat "$E2E_WORK/out-$mode.txt")
	e2e_log "$mode: $(tr '\n' '|' <"$E2E_WORK/err-$mode.txt")"
	e2e_assert_eq 3 "$st" "$mode: the command's exit status is not moat run's: $(cat "$E2E_WORK/err-$mode.txt")"
	e2e_assert_contains "$out" "self: uid $RUN_USER gid $RUN_USER capeff 0000000000000000 capbnd 0000000000000000 nnp 1" \
		"$mode: the command's user or capabilities"
	e2e_assert_contains "$out" "resolve a.test: addr 203.0.113.80" "$mode: a.test"
	e2e_assert_contains "$out" "tcp a.test 80 via-name-80: ok" "$mode: a.test tcp/80"
	e2e_assert_contains "$out" "tcp a.test 443 via-name-443: failed" "$mode: a.test tcp/443"
	e2e_assert_contains "$out" "resolve b.test: failed" "$mode: b.test resolved"
	e2e_assert_contains "$out" "resolve meta.test: failed" "$mode: a name of the metadata address resolved"
	e2e_assert_contains "$out" "udp ntp.test 123 ntp-123: sent 203.0.113.123" "$mode: ntp.test"
	# The receivers: the allowed ones arrived, nothing else did. The UDP datagram to a.test
	# was sent after the one to ntp.test (same path, same moment), so once the first is in,
	# the second had its time.
	wait_line -F "$E2E_WORK/web.log" "udp 203.0.113.123:123 ntp-123" 5
	wait_line -F "$E2E_WORK/web.log" "tcp 203.0.113.80:80 via-name-80" 5
	local seen
	seen=$(tail -n +"$((before + 1))" "$E2E_WORK/web.log")
	for t in via-name-443 b-80 metadata b-by-address a-udp-123; do
		e2e_assert_not_contains "$seen" "$t" "$mode: $t reached its receiver"
	done
	e2e_assert_eq 1 "$(grep -c via-name-80 <<<"$seen")" "$mode: a.test:80 count"
	e2e_assert_not_contains "$seen" "169.254.169.254:80" "$mode: the metadata address was reached"
	# The summary and the report.
	local err
	err=$(cat "$E2E_WORK/err-$mode.txt")
	e2e_assert_contains "$err" "denied  b.test. A" "$mode: summary: b.test denied"
	e2e_assert_contains "$err" "dropped 203.0.113.80 tcp/443" "$mode: summary: the 443 drop"
	e2e_assert_contains "$err" "allowed by --allow 'a.test tcp/80'" "$mode: summary: the rule"
	"$E2E_PY" - "$REPORTS/$mode.json" "$mode" <<'PY' || e2e_fail "$mode: --report"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["mode"] == sys.argv[2], r["mode"]
assert r["exit"] == 3, r
names = {(n["name"], n["type"]): n for n in r["names"]}
assert names[("a.test.", "A")]["allowed"], names
assert not names[("b.test.", "A")]["allowed"], names
assert names[("b.test.", "A")]["decision"] == "deny-not-allowed", names
drops = {(d["address"], d["proto"], d["port"]) for d in r["dropped"]}
for want in [("203.0.113.80", "tcp", 443), ("203.0.113.81", "tcp", 80), ("203.0.113.80", "udp", 123)]:
    assert want in drops, (want, drops)
PY
	# The report belongs to the invoking user, not to root.
	e2e_assert_eq "$RUN_USER" "$(stat -c %u "$REPORTS/$mode.json")" "$mode: report owner"
	local ino
	ino=$(run_netns <<<"$out")
	run_leftovers "$mode" "$ino"
}

check private --private --upstream 203.0.113.53
run_sys_start
check system "${RUN_SYSARGS[@]}"
# The system's daemons carry on as before: no agent, no range, no grant of the run.
run_leftovers "system daemons"
stop_moatd sysmoatd
e2e_pass
