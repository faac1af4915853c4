#!/usr/bin/env bash
# moat-fw's drop log (issue 25): with --drop-log, every packet table inet moat drops from the
# sandbox is one JSON line with the right reason, read from the rules' nfnetlink_log group: a
# connect to an address never granted (never-resolved), to a granted address on another port
# (wrong-port, with the grant's agent), to an address whose grant expired (expired), a datagram
# with a forged source (spoofed), a connection from outside (inbound, chain input); a new
# connection that passes is a "connect" line. A flood of 3000 drops is rate-limited (a few dozen
# lines, the rest in "suppressed" lines) and counted exactly: lines plus suppressed equal the
# packets counted, which equal the kernel's own counter of the rule, and none was lost.
# Netns placement, moat-fw under its filter as nobody; grants come from fw_client.py (moatd's
# side of the channel). Judged at the receiver too: the dropped packets never arrived.
source "$(dirname "$0")/lib.sh"
e2e_init fw_droplog

PY=/usr/bin/python3 # Debian's, where python3-prometheus-client lives
H="$E2E_DIR/peers/hostile.py"
SOCK="$E2E_WORK/fw.sock"
LOG="$E2E_WORK/drops.jsonl"
PORT=9155
e2e_peer net
NET=$E2E_PEER
e2e_uplink "$E2E_NS" s0 "$NET" n0 203.0.113.2/24 203.0.113.1/24 2001:db8:ff::2/64 2001:db8:ff::1/64
for a in 192.0.2.80/32 192.0.2.81/32 192.0.2.82/32 192.0.2.53/32; do e2e_addr_dev "$NET" lo "$a"; done
e2e_bg web ip netns exec "$NET" "$PY" "$H" tcp-listen 240 192.0.2.80:80 192.0.2.80:443 192.0.2.82:80
e2e_bg udplog ip netns exec "$NET" "$PY" "$H" udp-log 240 192.0.2.80:9 192.0.2.81:9
e2e_bg sbxsvc "$PY" "$H" tcp-listen 240 203.0.113.2:8081
E2E_NS=$NET e2e_wait_port tcp 192.0.2.80 443
e2e_wait_port tcp 203.0.113.2 8081

# shellcheck disable=SC2034 # read by start_fw (lib.sh)
FW_BASE=(--socket "$SOCK" --netns "$E2E_NS" --state "$E2E_WORK/st" --user nobody
	--resolver 192.0.2.53 --min-lifetime 1 --max-lifetime 3600)
start_fw fw --drop-log "$LOG" --metrics "127.0.0.1:$PORT"
e2e_wait_port tcp 127.0.0.1 "$PORT"
rules=$(e2e_run nft list chain inet moat output)
e2e_assert_contains "$rules" 'log prefix "moat output unresolved" group 27 drop' "the final drop logs"
e2e_assert_contains "$rules" 'log prefix "moat output connect" group 27 accept' "the allow rules log"

grant() { "$PY" "$E2E_DIR/peers/fw_client.py" --socket "$SOCK" "$@"; }
sbx() { e2e_run setpriv --bounding-set -net_admin "$PY" "$H" "$@"; }
# line JQ: wait (bounded) for a log line matching the jq filter JQ; prints it.
line() {
	local i out
	for ((i = 0; i < 50; i++)); do
		out=$(jq -c "select($1)" "$LOG" 2>/dev/null | head -n 1)
		[[ -n "$out" ]] && {
			printf '%s\n' "$out"
			return 0
		}
		sleep 0.1
	done
	e2e_fail "no drop log line for $1: $(tail -n 5 "$LOG")"
}
field() { jq -r ".$1" <<<"$2"; }
scrape() { e2e_run curl -sf --max-time 5 "http://127.0.0.1:$PORT/metrics"; }
metric() { scrape | awk -v k="$1" '$1 == k { print $2; f = 1 } END { if (!f) print "absent" }'; }
# wait_metric KEY WANT: the counters reach the scrape once a second; poll until KEY is WANT.
wait_metric() {
	local i v
	for ((i = 0; i < 50; i++)); do
		v=$(metric "$1")
		[[ "$v" == "$2" ]] && return 0
		sleep 0.2
	done
	e2e_fail "$1 is $v, wanted $2"
}

# --- never resolved: a connect by address ---------------------------------------------------
e2e_assert_contains "$(sbx connect 192.0.2.81 443)" failed "an address never granted reachable"
l=$(line '.event == "drop" and .dst == "192.0.2.81" and .port == 443')
e2e_assert_eq never-resolved "$(field reason "$l")" "never-resolved: reason"
e2e_assert_eq "tcp output 203.0.113.2 null $E2E_NS" \
	"$(jq -r '"\(.proto) \(.chain) \(.src) \(.agent) \(.sandbox)"' <<<"$l")" "never-resolved: fields"

# --- a port-scoped grant: connect logged, another port wrong-port ---------------------------
e2e_assert_eq "seq=1 status=OK lifetime=300" \
	"$(grant --seq 1 --agent dl --lifetime 300 192.0.2.80 --ports tcp/80)" "port grant"
e2e_assert_eq connected "$(sbx connect 192.0.2.80 80)" "granted port blocked"
l=$(line '.event == "connect" and .dst == "192.0.2.80" and .port == 80')
e2e_assert_eq "tcp output null" "$(jq -r '"\(.proto) \(.chain) \(.reason)"' <<<"$l")" "connect: fields"
e2e_assert_contains "$(sbx connect 192.0.2.80 443)" failed "a port outside the grant reachable"
l=$(line '.event == "drop" and .dst == "192.0.2.80" and .port == 443')
e2e_assert_eq "wrong-port dl" "$(jq -r '"\(.reason) \(.agent)"' <<<"$l")" "wrong-port: reason and agent"

# --- an expired grant --------------------------------------------------------------------------
e2e_assert_eq "seq=2 status=OK lifetime=1" \
	"$(grant --seq 2 --agent dl --lifetime 1 192.0.2.82)" "short grant"
e2e_assert_eq connected "$(sbx connect 192.0.2.82 80)" "short grant blocked while live"
gone() { [[ "$(e2e_run nft list set inet moat allow4)" != *192.0.2.82* ]]; }
e2e_poll 10 gone || e2e_fail "the short grant never expired"
e2e_assert_contains "$(sbx connect 192.0.2.82 80)" failed "an expired grant still open"
l=$(line '.event == "drop" and .dst == "192.0.2.82"')
e2e_assert_eq "expired dl" "$(jq -r '"\(.reason) \(.agent)"' <<<"$l")" "expired: reason and agent"

# --- a forged source (raw socket) and a connection from outside --------------------------------
sbx raw4 203.0.113.99 192.0.2.80 9 forged-tok >/dev/null
l=$(line '.event == "drop" and .src == "203.0.113.99"')
e2e_assert_eq "spoofed udp 9" "$(jq -r '"\(.reason) \(.proto) \(.port)"' <<<"$l")" "spoofed: fields"
e2e_assert_contains "$(ip netns exec "$NET" "$PY" "$H" connect 203.0.113.2 8081)" failed \
	"a connection from outside reached the sandbox"
l=$(line '.event == "drop" and .reason == "inbound"')
e2e_assert_eq "input 203.0.113.1 8081" "$(jq -r '"\(.chain) \(.src) \(.port)"' <<<"$l")" "inbound: fields"

# --- a flood: rate-limited lines, exact counts -------------------------------------------------
N=3000
cat >"$E2E_WORK/flood.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sent = 0
for i in range(int(sys.argv[1])):
    try:
        s.sendto(b"flood", ("192.0.2.81", 9))
    except OSError:
        pass  # EPERM: the output chain dropped it
    sent += 1
print(sent)
PY
# kernel: the packets the final rule dropped, by the kernel's own counter; logged: the drop
# log's count of the three reasons that rule's drops are told apart into.
kernel() { e2e_run nft list chain inet moat output | awk '/^\t\tcounter packets .* unresolved/ { print $3 }'; }
logged() {
	local r sum=0
	for r in never-resolved wrong-port expired; do
		sum=$((sum + $(metric "moatfw_droplog_packets_total{reason=\"$r\"}")))
	done
	echo "$sum"
}
agree() { [[ "$(kernel)" == "$(logged)" ]]; }
e2e_poll 10 agree || e2e_fail "the drop log counted $(logged), the kernel $(kernel)"
nr0=$(metric 'moatfw_droplog_packets_total{reason="never-resolved"}')
e2e_assert_eq "$N" "$(e2e_run "$PY" "$E2E_WORK/flood.py" "$N")" "flood: datagrams sent"
wait_metric 'moatfw_droplog_packets_total{reason="never-resolved"}' $((nr0 + N))
e2e_assert_eq "$(kernel)" "$(logged)" "the drop log's counts = the kernel's counter of the rule"
e2e_assert_eq 0 "$(metric moatfw_droplog_lost_total)" "messages lost"
lines=$(metric 'moatfw_droplog_lines_total{reason="never-resolved"}')
((lines < 200)) || e2e_fail "flood not rate-limited: $lines lines"
# The suppressed lines are written once a second: wait until they add up.
held() { jq -s '[.[] | select(.event == "suppressed" and .reason == "never-resolved") | .count] | add // 0' "$LOG"; }
written() { jq -s '[.[] | select(.event == "drop" and .reason == "never-resolved")] | length' "$LOG"; }
adds_up() { (($(held) + $(written) == nr0 + N)); }
e2e_poll 10 adds_up || e2e_fail "lines $(written) + suppressed $(held) != $((nr0 + N))"
e2e_assert_eq "$lines" "$(written)" "lines in the file = lines counted"
# Judged at the receiver: nothing dropped arrived.
e2e_assert_not_contains "$(cat "$E2E_WORK/udplog.log")" "flood" "a dropped datagram arrived"
e2e_assert_not_contains "$(cat "$E2E_WORK/udplog.log")" "forged-tok" "the forged datagram arrived"
e2e_stop fw
e2e_pass
