#!/usr/bin/env bash
# Two sandboxes on one bridge never reach each other, and that never fails open (issue 22's
# layer-2 follow-up). The topology of fw_bridged.sh (sandboxes A and B on ports of the host's
# bridge br-x, the gateway inside their subnet), plus another bridge of the host, br-o, that is
# no sandbox's: C and D on its ports must keep switching.
#
# While a prober in A knocks on B without pause (every 2 ms: a SYN and a datagram to B in both
# families, and on a packet socket an IPv4 frame and a non-IP frame to B's MAC address), someone
# else deletes table bridge moat, deletes its drop rule, (without meta ibrname) flushes its port
# set and adds A's own port to it, and deletes table bridge moat_guard: each time moat-fw logs an
# ALERT naming the change and the tables are back, and B's interface got nothing from A at any
# time (a capture below B's inet stack, judged after a barrier frame the host sends). A port
# added to br-o while moat-fw runs reaches its neighbour. The drops are counted, in the metrics
# too. `moat-fw --remove` is refused while moat-fw runs. With moat-fw killed -9 A still cannot
# reach B, and with table bridge moat then deleted too, table bridge moat_guard drops (counted).
# After a stop and --remove the tables are gone and A reaches B again: they were what kept the
# two apart.
source "$(dirname "$0")/lib.sh"
e2e_init fw_bridge_l2

PY=$E2E_PY
FW="$MOAT_BUILD/moat-fw"
H="$E2E_DIR/peers/hostile.py"
source "$E2E_DIR/fw_bridged.sh"
fw_bridged
fw_other_bridge

inns() {
	local ns=$1
	shift
	ip netns exec "$ns" "$@"
}
CAP="$E2E_WORK/bcap.log"
e2e_bg bsvc ip netns exec "$B" "$PY" "$H" tcp-listen 300 192.0.2.3:80 "[2001:db8:77::3]:80"
e2e_bg blog ip netns exec "$B" "$PY" "$H" udp-log 300 192.0.2.3:9 "[2001:db8:77::3]:9"
e2e_bg bcap ip netns exec "$B" "$PY" "$H" capture 300 s0 "$AMAC"
e2e_bg web ip netns exec "$NET" "$PY" "$H" tcp-listen 300 203.0.113.80:80
e2e_bg dsvc ip netns exec "$D" "$PY" "$H" tcp-listen 300 198.51.100.66:80
E2E_NS=$B e2e_wait_port tcp 192.0.2.3 80
E2E_NS=$B e2e_wait_port udp 192.0.2.3 9
E2E_NS=$NET e2e_wait_port tcp 203.0.113.80 80
E2E_NS=$D e2e_wait_port tcp 198.51.100.66 80
wait_line "$CAP" ready

# Before moat-fw the bridges switch: what stays shut below is moat-fw's doing.
e2e_assert_eq connected "$(inns "$A" "$PY" "$H" connect 192.0.2.3 80)" "A cannot reach B before moat-fw"
e2e_assert_eq connected "$(inns "$C" "$PY" "$H" connect 198.51.100.66 80)" "C cannot reach D before moat-fw"
inns "$A" "$PY" "$H" frame s0 "$BMAC" 0x88b5 pre >/dev/null
wait_line "$CAP" "from $AMAC type 0x88b5"

PORT=$((20000 + $$ % 20000))
FWARGS=(--socket "$E2E_WORK/fw.sock" --forward --state "$E2E_WORK/state" --sandbox 192.0.2.0/24@br-x
	--sandbox 2001:db8:77::/64@br-x --resolver 192.0.2.1 --moatd-user root --user nobody
	--min-lifetime 600)
e2e_bg fw "$FW" "${FWARGS[@]}" --metrics "127.0.0.1:$PORT"
e2e_wait_log fw 'listening on'
grant() { "$PY" "$E2E_DIR/peers/fw_client.py" --socket "$E2E_WORK/fw.sock" "$@"; }
e2e_assert_eq "seq=1 status=OK lifetime=600" "$(grant --seq 1 --client 192.0.2.2 203.0.113.80)" "grant"
e2e_assert_eq connected "$(inns "$A" "$PY" "$H" connect 203.0.113.80 80)" "A's grant does not open"
e2e_assert_eq connected "$(inns "$C" "$PY" "$H" connect 198.51.100.66 80)" "the other bridge is cut"
ports=0
e2e_run nft list table bridge moat | grep -q other_ports && ports=1
e2e_log "bridge tables match $( ((ports)) && echo "by port (no meta ibrname here)" || echo "by bridge name")"

# A knows B's MAC address (permanent neighbour entries): every probe leaves at once as a frame.
ip -n "$A" neigh replace 192.0.2.3 lladdr "$BMAC" dev s0 nud permanent
ip -n "$A" -6 neigh replace 2001:db8:77::3 lladdr "$BMAC" dev s0 nud permanent
fw_barrier "$CAP" "$BMAC"
mark=$FW_MARK
bsvc_before=$(grep -c accepted "$E2E_WORK/bsvc.log")
dropped() { e2e_run nft list chain bridge "$1" "$2" | awk '/counter packets/ { print $(NF-3) }'; }
STOP="$E2E_WORK/probe.stop"
e2e_bg probe ip netns exec "$A" "$PY" "$E2E_DIR/peers/l2_probe.py" 120 "$STOP" s0 "$BMAC" 192.0.2.3 2001:db8:77::3
probing() { (($(dropped moat bridged) >= 40)); }
e2e_poll 10 probing || e2e_fail "the prober's frames are not dropped and counted: $(dropped moat bridged)"

# tamper N WHAT CMD...: run CMD on the host; wait (bounded) for moat-fw's Nth restore; its ALERT
# names nft and WHAT, and both bridge tables are there again.
restored() { (($(grep -c "table inet moat restored" "$E2E_WORK/fw.log" || true) >= $1)); }
tamper() {
	local want=$1 what=$2
	shift 2
	e2e_run "$@" || e2e_fail "tamper: $* failed"
	e2e_poll 10 restored "$want" || e2e_fail "no restore after: $* ($(tail -n 3 "$E2E_WORK/fw.log"))"
	local alert
	alert=$(grep ALERT "$E2E_WORK/fw.log" | tail -n 1)
	e2e_assert_contains "$alert" "nft, netlink port" "ALERT: who"
	e2e_assert_contains "$alert" "$what" "ALERT: what"
	e2e_assert_contains "$(e2e_run nft list tables)" $'table bridge moat_guard\ntable bridge moat' \
		"the bridge tables are not back after: $*"
}
handle() { e2e_run nft -a list chain bridge moat bridged | awk '/counter packets/ { print $NF }'; }
n=0
tamper $((++n)) "table bridge moat deleted" nft delete table bridge moat
tamper $((++n)) "a rule of chain bridge moat bridged deleted" nft delete rule bridge moat bridged handle "$(handle)"
if ((ports)); then
	tamper $((++n)) "elements of set bridge moat other_ports deleted" nft flush set bridge moat other_ports
	# An opening change: A's own port among those that pass. The guard still drops it meanwhile.
	va=$(e2e_run cat /sys/class/net/va/ifindex)
	tamper $((++n)) "elements of set bridge moat other_ports added" \
		nft add element bridge moat other_ports "{ $va }"
	e2e_assert_not_contains "$(e2e_run nft list set bridge moat other_ports)" '"va"' "A's port stayed in the set"
fi
tamper $((++n)) "table bridge moat_guard deleted" nft delete table bridge moat_guard
touch "$STOP"
e2e_wait_exit probe 10 || e2e_fail "the prober did not stop"
e2e_log "prober: $(tail -n 1 "$E2E_WORK/probe.log"); restores: $(grep -o 'restored (.*' "$E2E_WORK/fw.log" | grep -o '[0-9.]* ms' | tr '\n' ' ')"
fw_barrier "$CAP" "$BMAC"
e2e_assert_eq 0 "$(fw_from_since "$CAP" "$mark")" \
	"frames from A reached B's interface while the tables were changed: $(tail -n 5 "$CAP")"
e2e_assert_not_contains "$(cat "$E2E_WORK/blog.log")" probe "a datagram from A reached B"
e2e_assert_eq "$bsvc_before" "$(grep -c accepted "$E2E_WORK/bsvc.log")" "B's service accepted A"
e2e_assert_eq connected "$(inns "$A" "$PY" "$H" connect 203.0.113.80 80)" "A's grant after the restores"

# The other bridge: C still reaches D, and a port added to br-o while moat-fw runs reaches D.
e2e_assert_eq connected "$(inns "$C" "$PY" "$H" connect 198.51.100.66 80)" "the other bridge after the restores"
e2e_peer sbxe
E=$E2E_PEER
fw_bridge_port "$E" ve br-o 198.51.100.67/28
e_reaches_d() { [[ "$(inns "$E" "$PY" "$H" ping 198.51.100.66)" == reply ]]; }
e2e_poll 10 e_reaches_d || e2e_fail "a new port of the other bridge never reached its neighbour"

# The metrics count the drops and the changes.
m=$(e2e_run curl -sf --max-time 5 "http://127.0.0.1:$PORT/metrics") || e2e_fail "no metrics"
d=$(awk '/^moatfw_dropped_packets_total\{chain="bridged"/ { s += $NF } END { print s + 0 }' <<<"$m")
((d >= 1)) || e2e_fail "no bridged drops in the metrics: $(grep bridged <<<"$m")"
changes=$(awk '$1 == "moatfw_table_changes_total" { print $2 }' <<<"$m")
((changes >= n)) || e2e_fail "metrics: changes=$changes, wanted $n"

# --remove while moat-fw runs: refused, nothing removed.
st=0
out=$(e2e_run "$FW" --remove 2>&1) || st=$?
e2e_assert_eq 1 "$st" "--remove under a running moat-fw: exit status ($out)"
e2e_assert_contains "$(e2e_run nft list tables)" "table bridge moat" "--remove removed the bridge table"

# moat-fw killed -9: both bridge tables stay and A still cannot reach B; with table bridge moat
# deleted as well, the guard drops what A sends (counted).
e2e_stop fw KILL
e2e_assert_contains "$(e2e_run nft list tables)" $'table bridge moat_guard\ntable bridge moat' "tables after kill"
fw_barrier "$CAP" "$BMAC"
mark=$FW_MARK
inns "$A" "$PY" "$H" packet s0 "$BMAC" 192.0.2.2 192.0.2.3 9 after-kill >/dev/null
inns "$A" "$PY" "$H" frame s0 "$BMAC" 0x88b5 after-kill >/dev/null
e2e_run nft delete table bridge moat
guard_before=$(dropped moat_guard guard_bridged)
inns "$A" "$PY" "$H" packet s0 "$BMAC" 192.0.2.2 192.0.2.3 9 after-delete >/dev/null
inns "$A" "$PY" "$H" frame s0 "$BMAC" 0x88b5 after-delete >/dev/null
e2e_assert_contains "$(inns "$A" "$PY" "$H" connect 192.0.2.3 80)" failed "A reached B with moat-fw dead"
fw_barrier "$CAP" "$BMAC"
e2e_assert_eq 0 "$(fw_from_since "$CAP" "$mark")" "frames from A reached B with moat-fw dead: $(tail -n 5 "$CAP")"
e2e_assert_not_contains "$(cat "$E2E_WORK/blog.log")" after- "a datagram from A reached B with moat-fw dead"
(($(dropped moat_guard guard_bridged) >= guard_before + 2)) ||
	e2e_fail "the bridge guard counted no drop: $(e2e_run nft list table bridge moat_guard)"

# A restart puts table bridge moat back; after a stop and --remove all of moat's tables are gone,
# and A reaches B again.
e2e_bg fw2 "$FW" "${FWARGS[@]}"
e2e_wait_log fw2 'listening on'
e2e_assert_contains "$(e2e_run nft list tables)" $'table bridge moat_guard\ntable bridge moat' "tables after the restart"
e2e_stop fw2
e2e_assert_contains "$(e2e_run "$FW" --remove)" "removed tables bridge moat and moat_guard" "--remove after the stop"
e2e_assert_eq "" "$(e2e_run nft list tables)" "tables left after --remove"
fw_barrier "$CAP" "$BMAC"
mark=$FW_MARK
inns "$A" "$PY" "$H" frame s0 "$BMAC" 0x88b5 after-remove >/dev/null
fw_barrier "$CAP" "$BMAC"
(($(fw_from_since "$CAP" "$mark") >= 1)) || e2e_fail "A's frame did not reach B after --remove: $(tail -n 5 "$CAP")"
e2e_pass
