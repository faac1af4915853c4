#!/usr/bin/env bash
# moat-fw never fails open (issue 22). Forward placement, three namespaces linked to nothing
# else:
#   sandbox 192.0.2.2/28 s0 ---- h0 192.0.2.1/28  host (moat-fw)  h1 198.51.100.1 ---- n0 "net"
#                                                                   web 203.0.113.80 (granted)
#                                                                   203.0.113.99 (never granted)
#                                                                   169.254.169.254 (metadata)
# While a prober in the sandbox knocks on all three without pause (a SYN to port 80 of each and
# a datagram to port 9 of the two forbidden ones every 2 ms), someone else deletes table inet
# moat, deletes its last drop rule, flushes a set and deletes table inet moat_guard: each time
# moat-fw logs an ALERT naming the process and the change, the tables are back with the
# ledger's grants, and the listeners of the forbidden addresses in "net" got nothing at any
# time (judged at the receiver). An element someone adds to an allow set is removed the same
# way. The metrics count the changes. `moat-fw
# --remove` is refused while moat-fw runs, naming its pid. With moat-fw killed -9 and the table
# deleted, table inet moat_guard still drops the sandbox's traffic (the granted web server gets
# nothing) and counts it; a restart puts the grant back. Last, the netns placement restores a
# deleted table too.
source "$(dirname "$0")/lib.sh"
e2e_init fw_watch

PY=$E2E_PY
FW="$MOAT_BUILD/moat-fw"
H="$E2E_DIR/peers/hostile.py"
source "$E2E_DIR/fw_routed.sh"
fw_routed 203.0.113.80 203.0.113.99
# Packets go to 169.254.169.254 below: first make sure none of these namespaces has a link but
# the ones made here (so nothing leads to the root namespace or beyond).
links() { ip -n "$1" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort | tr '\n' ' '; }
e2e_assert_eq "lo s0 " "$(links "$SBX")" "the sandbox must have one link, to the host"
e2e_assert_eq "h0 h1 lo " "$(links "$HOST")" "the host must link only the sandbox and net"
e2e_assert_eq "lo n0 " "$(links "$NET")" "net must have one link, to the host"
ip -n "$NET" addr add 169.254.169.254/32 dev lo
ip -n "$HOST" route add 169.254.169.254/32 via 198.51.100.2

in_host() { ip netns exec "$HOST" "$@"; }
sbx() { e2e_run "$PY" "$H" "$@"; }
e2e_bg web ip netns exec "$NET" "$PY" "$H" tcp-listen 300 203.0.113.80:80
e2e_bg web9 ip netns exec "$NET" "$PY" "$H" udp-log 300 203.0.113.80:9
e2e_bg bad ip netns exec "$NET" "$PY" "$H" tcp-listen 300 203.0.113.99:80 169.254.169.254:80
e2e_bg bad9 ip netns exec "$NET" "$PY" "$H" udp-log 300 203.0.113.99:9 169.254.169.254:9
for p in 203.0.113.80:80 203.0.113.99:80 169.254.169.254:80; do
	E2E_NS=$NET e2e_wait_port tcp "${p%:*}" "${p##*:}"
done
E2E_NS=$NET e2e_wait_port udp 203.0.113.99 9

# Before moat-fw every path is open, so what stays shut below is the firewall's doing.
for a in 203.0.113.80 203.0.113.99 169.254.169.254; do
	e2e_assert_eq connected "$(sbx connect "$a" 80)" "$a unreachable without moat-fw"
done
wait_line "$E2E_WORK/bad.log" "accepted 192.0.2.2 80"
bad_before=$(grep -c accepted "$E2E_WORK/bad.log")

PORT=$((20000 + $$ % 20000))
FWARGS=(--socket "$E2E_WORK/fw.sock" --forward --state "$E2E_WORK/state" --sandbox 192.0.2.2/32
	--resolver 192.0.2.1 --moatd-user root --user nobody --min-lifetime 600)
e2e_bg fw ip netns exec "$HOST" "$FW" "${FWARGS[@]}" --metrics "127.0.0.1:$PORT"
e2e_wait_log fw 'listening on'
grant() { "$PY" "$E2E_DIR/peers/fw_client.py" --socket "$E2E_WORK/fw.sock" "$@"; }
e2e_assert_eq "seq=1 status=OK lifetime=600" "$(grant --seq 1 --client 192.0.2.2 203.0.113.80)" "grant"
e2e_assert_contains "$(in_host nft list table inet moat)" "comment \"moat-fw pid $(e2e_pid fw) " \
	"the table does not name its moat-fw"

STOP="$E2E_WORK/probe.stop"
e2e_bg probe "$PY" "$E2E_DIR/peers/fw_probe.py" 120 "$STOP" 203.0.113.80 203.0.113.99 169.254.169.254
wait_line "$E2E_WORK/probe.log" granted-ok

# tamper N WHAT CMD...: run CMD on the host; wait (bounded) for moat-fw's Nth restore, and
# check its ALERT names nft and WHAT.
tamper() {
	local want=$1 what=$2
	shift 2
	in_host "$@" || e2e_fail "tamper: $* failed"
	e2e_poll 10 restored "$want" ||
		e2e_fail "no restore after: $* ($(tail -n 3 "$E2E_WORK/fw.log"))"
	e2e_assert_contains "$(grep ALERT "$E2E_WORK/fw.log" | tail -n 1)" "nft, netlink port" "ALERT: who"
	e2e_assert_contains "$(grep ALERT "$E2E_WORK/fw.log" | tail -n 1)" "$what" "ALERT: what"
	e2e_assert_contains "$(in_host nft list set inet moat allow4)" "192.0.2.2 . 203.0.113.80" \
		"the grant is not back after: $*"
}
# restored N: moat-fw has logged N restores or more.
restored() { (($(grep -c "table inet moat restored" "$E2E_WORK/fw.log") >= $1)); }
last_drop() { in_host nft -a list chain inet moat sandbox | awk '/^\t\tcounter packets/ { print $NF }'; }

tamper 1 "table inet moat deleted" nft delete table inet moat
tamper 2 "a rule of chain inet moat sandbox deleted" nft delete rule inet moat sandbox handle "$(last_drop)"
[[ -n "$(last_drop)" ]] || e2e_fail "the deleted drop rule is not back"
tamper 3 "elements of set inet moat allow4 deleted" nft flush set inet moat allow4
tamper 4 "table inet moat_guard deleted" nft delete table inet moat_guard
e2e_assert_contains "$(in_host nft list tables)" "table inet moat_guard" "the guard is not back"

touch "$STOP"
e2e_wait_exit probe 10 || e2e_fail "the prober did not stop"
summary=$(tail -n 1 "$E2E_WORK/probe.log")
e2e_log "prober: $summary; moat-fw: $(grep -o 'restored (.*' "$E2E_WORK/fw.log" | grep -o '[0-9.]* ms' | tr '\n' ' ')"
e2e_assert_contains "$summary" "203.0.113.99=0 169.254.169.254=0" "the sender made a forbidden connection"
# The granted address still works, and a datagram to it (sent last) arrives: what the prober
# sent before it to the forbidden addresses would have arrived too.
e2e_assert_eq connected "$(sbx connect 203.0.113.80 80)" "the grant does not work after the restores"
sbx udp - 203.0.113.80 9 barrier >/dev/null
wait_line "$E2E_WORK/web9.log" "got 192.0.2.2 barrier"
e2e_assert_eq "$bad_before" "$(grep -c accepted "$E2E_WORK/bad.log")" \
	"a forbidden address accepted a connection while the table was changed: $(cat "$E2E_WORK/bad.log")"
e2e_assert_not_contains "$(cat "$E2E_WORK/bad9.log")" "got" "a forbidden address got a datagram"
# A change that opens (an element added to an allow set) is undone the same way; it is open
# until then (a few ms: see the README), so it is not probed.
tamper 5 "elements of set inet moat allow4 added" nft add element inet moat allow4 "{ 192.0.2.2 . 203.0.113.99 }"
e2e_assert_not_contains "$(in_host nft list set inet moat allow4)" 203.0.113.99 "the foreign element stayed"
e2e_assert_contains "$(sbx connect 203.0.113.99 80)" failed "the foreign element still opens"

# The metrics count the changes and the restores.
m=$(in_host curl -sf --max-time 5 "http://127.0.0.1:$PORT/metrics") || e2e_fail "no metrics"
changes=$(awk '$1 == "moatfw_table_changes_total" { print $2 }' <<<"$m")
restores=$(awk '$1 == "moatfw_table_restores_total" { print $2 }' <<<"$m")
((changes >= 5 && restores >= 5)) || e2e_fail "metrics: changes=$changes restores=$restores"
e2e_assert_contains "$m" "moatfw_table_restore_failures_total 0" "a restore failed"

# --remove while moat-fw runs: refused, with its pid; nothing removed.
st=0
out=$(in_host "$FW" --remove 2>&1) || st=$?
e2e_assert_eq 1 "$st" "--remove under a running moat-fw: exit status ($out)"
e2e_assert_contains "$out" "refusing to remove table inet moat from this namespace: moat-fw pid $(e2e_pid fw) (moat-fw) holds it" \
	"--remove does not name the running moat-fw"
e2e_assert_contains "$(in_host nft list tables)" "table inet moat_guard" "--remove removed the guard"
e2e_assert_contains "$(in_host nft list tables)" "table inet moat" "--remove removed the table"
# Nor does a second moat-fw start on the same table.
st=0
out=$(in_host "$FW" --socket "$E2E_WORK/fw2.sock" --forward --state "$E2E_WORK/state2" \
	--sandbox 192.0.2.2/32 --resolver 192.0.2.1 --user nobody 2>&1) || st=$?
e2e_assert_eq 1 "$st" "a second moat-fw on the same table: exit status"
e2e_assert_contains "$out" "moat-fw pid $(e2e_pid fw) already holds table inet moat" "second moat-fw"

# moat-fw killed -9 and the table deleted: the guard still drops all the sandbox sends.
e2e_stop fw KILL
in_host nft delete table inet moat
e2e_assert_eq "table inet moat_guard" "$(in_host nft list tables)" "tables after kill and delete"
e2e_assert_contains "$(sbx connect 203.0.113.80 80)" failed "the granted address open without table inet moat"
e2e_assert_contains "$(sbx connect 203.0.113.99 80)" failed "a forbidden address open without table inet moat"
sbx udp - 203.0.113.80 9 after-kill >/dev/null
dropped=$(in_host nft list chain inet moat_guard guard_forward | awk '/iifname "h0" counter/ { print $5 }')
((dropped >= 1)) || e2e_fail "the guard counted no drop: $(in_host nft list table inet moat_guard)"
# A restart puts the ledger's grant back; the datagram sent after it arrives, the one before not.
e2e_bg fw2 ip netns exec "$HOST" "$FW" "${FWARGS[@]}"
e2e_wait_log fw2 'listening on'
e2e_assert_contains "$(cat "$E2E_WORK/fw2.log")" "1 grants restored" "the restart lost the grant"
e2e_assert_eq connected "$(sbx connect 203.0.113.80 80)" "the grant does not work after the restart"
sbx udp - 203.0.113.80 9 after-restart >/dev/null
wait_line "$E2E_WORK/web9.log" "got 192.0.2.2 after-restart"
e2e_assert_not_contains "$(cat "$E2E_WORK/web9.log")" after-kill "a datagram passed without table inet moat"
e2e_stop fw2
e2e_assert_contains "$(in_host "$FW" --remove)" "removed table inet moat_guard" "--remove after the stop"
e2e_assert_eq "" "$(in_host nft list tables)" "tables left after --remove"

# The netns placement restores a deleted table too (it has no guard: see the README).
e2e_bg fw3 "$FW" --socket "$E2E_WORK/fw3.sock" --netns "$SBX" --state "$E2E_WORK/state3" \
	--resolver 192.0.2.1 --moatd-user root --user nobody
e2e_wait_log fw3 'listening on'
e2e_run nft delete table inet moat
wait_line "$E2E_WORK/fw3.log" "table inet moat restored (netns placement"
e2e_assert_contains "$(cat "$E2E_WORK/fw3.log")" "ALERT: table inet moat changed by another process" "netns ALERT"
e2e_assert_contains "$(sbx connect 203.0.113.99 80)" failed "netns: open after the restore"
e2e_stop fw3
e2e_assert_contains "$(e2e_run "$FW" --remove)" "removed table inet moat" "netns --remove"
e2e_pass
