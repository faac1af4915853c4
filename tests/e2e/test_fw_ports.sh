#!/usr/bin/env bash
# Port-scoped grants (issue 11), in both placements. The allowlist says `www.demo.test tcp/80`:
# right after the answer, TCP 80 to its address works, while TCP 443 and UDP 80 to the same
# address are dropped; ICMP echo to it works (echo follows any grant of the address). A second
# name on the same address with `udp/80` adds UDP 80 (the union); a name without ports opens
# every port of its address; `moatd --check` names a bad port's file:line. Judged at the receiver: a listener in a third namespace logs what
# reached it. Topology (all made here, none linked to the root namespace):
#   sandbox 198.51.100.2 --veth-- host 198.51.100.1 (moatd, NSD 192.0.2.53, moat-fw) --veth--
#   net 203.0.113.80/.82 (listeners)
source "$(dirname "$0")/lib.sh"
e2e_init fw_ports
# moatd connects to moat-fw only as the user it drops to: both daemons run with the users the
# install makes (moat, moat-fw; the host's files untouched) and their defaults, which agree.
e2e_users

PY=$E2E_PY
PROBE="$E2E_DIR/peers/port_probe.py"
SBX="moat-e2e-fwports-sbx-$$"
NET="moat-e2e-fwports-net-$$"
ports_cleanup() {
	[[ "${BASHPID:-$$}" == "$E2E_OWNER_PID" ]] || return 0
	local pid ns
	for ns in "$SBX" "$NET"; do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$pid" 2>/dev/null || true; done
		ip netns del "$ns" 2>/dev/null || true
	done
}
e2e_on_cleanup ports_cleanup

# bg_in NS NAME CMD...: like e2e_bg, in another namespace of this test.
bg_in() {
	local ns=$1 name=$2
	shift 2
	ip netns exec "$ns" "$@" >"$E2E_WORK/$name.log" 2>&1 </dev/null &
	e2e__track "$!"
	E2E_BG[$name]=$!
}
in_sbx() { ip netns exec "$SBX" "$@"; }

for ns in "$SBX" "$NET"; do
	ip netns add "$ns"
	ip -n "$ns" link set lo up
done
ip link add sb0 netns "$SBX" type veth peer name hb0 netns "$E2E_NS"
ip link add nt0 netns "$NET" type veth peer name hn0 netns "$E2E_NS"
ip -n "$SBX" addr add 198.51.100.2/24 dev sb0
ip -n "$E2E_NS" addr add 198.51.100.1/24 dev hb0
ip -n "$NET" addr add 203.0.113.80/24 dev nt0
ip -n "$NET" addr add 203.0.113.82/24 dev nt0
ip -n "$E2E_NS" addr add 203.0.113.1/24 dev hn0
for l in "$SBX sb0" "$NET nt0" "$E2E_NS hb0" "$E2E_NS hn0"; do
	set -- $l
	ip -n "$1" link set "$2" up
done
ip -n "$SBX" route add default via 198.51.100.1
ip -n "$NET" route add default via 203.0.113.1
e2e_run sysctl -qw net.ipv4.ip_forward=1
# Nothing in the sandbox or the net namespace leads anywhere but the host namespace.
[[ "$(ip -n "$SBX" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort | tr '\n' ' ')" == "lo sb0 " ]] ||
	e2e_fail "sandbox namespace has unexpected links"

cat >"$E2E_WORK/demo.test.zone" <<'Z'
$ORIGIN demo.test.
$TTL 300
@ IN SOA ns1 hostmaster 1 3600 600 86400 60
  IN NS ns1
ns1 IN A 192.0.2.53
www IN A 203.0.113.80
www IN AAAA 2001:db8:3::80
both IN A 203.0.113.80
any IN A 203.0.113.82
Z
e2e_addr 192.0.2.53/32
e2e_nsd 192.0.2.53 53 "$E2E_WORK/demo.test.zone"
printf 'www.demo.test tcp/80\nboth.demo.test udp/80\nany.demo.test\n' >"$E2E_WORK/allow.txt"
# --check validates the port syntax with file:line (and the good file passes).
printf 'ok.demo.test tcp/443\nbad.demo.test tcp/80,0\n' >"$E2E_WORK/allow-bad.txt"
st=0
out=$("$MOAT_BUILD/moatd" --listen 127.0.0.1:53 --upstream 192.0.2.53:53 \
	--allow "$E2E_WORK/allow-bad.txt" --check 2>&1) || st=$?
e2e_assert_eq 1 "$st" "--check accepted a bad port"
e2e_assert_contains "$out" "allow-bad.txt:2: bad port in 'tcp/80,0'" "--check names file:line"
e2e_assert_contains "$("$MOAT_BUILD/moatd" --listen 127.0.0.1:53 --upstream 192.0.2.53:53 \
	--allow "$E2E_WORK/allow.txt" --check 2>&1)" "configuration OK" "--check refused good ports"
start_moatd moatd --listen 198.51.100.1:53 --upstream 192.0.2.53:53 \
	--allow "$E2E_WORK/allow.txt" --firewall "$E2E_WORK/fw.sock"
RECV="$E2E_WORK/received.log"
: >"$RECV"
bg_in "$NET" listen80 "$PY" "$PROBE" listen 203.0.113.80 300 "$RECV" tcp/80 tcp/443 udp/80
bg_in "$NET" listen82 "$PY" "$PROBE" listen 203.0.113.82 300 "$RECV" tcp/443
for ((i = 0; i < 50; i++)); do
	[[ $(ip netns exec "$NET" ss -Hlnt | grep -c '203.0.113.8[02]:443') == 2 ]] && break
	sleep 0.1
done

resolve() { in_sbx dig +time=2 +tries=1 +short @198.51.100.1 "$1" A; }
probe() { in_sbx "$PY" "$PROBE" "$@"; }
# received TOKEN: wait (bounded) until the receiver logged TOKEN; 0 when it did.
received() {
	local i
	for ((i = 0; i < 30; i++)); do
		grep -q " $1\$" "$RECV" && return 0
		sleep 0.1
	done
	return 1
}
# moatd, started first and dropped to its default user (moat), connects as that user: moat-fw
# takes its grants and gives it the socket's group by default (e2e_users above)
# shellcheck disable=SC2034 # read by start_fw (lib.sh)
FW_BASE=(--socket "$E2E_WORK/fw.sock" --resolver 198.51.100.1)

# checks PL NFT...: the port-scope assertions; NFT lists a set of the placement's table.
checks() {
	local pl=$1
	shift
	e2e_assert_contains "$(probe tcp 203.0.113.80 80 "pre-$pl")" "failed" "$pl: TCP 80 open before the answer"
	e2e_assert_eq 203.0.113.80 "$(resolve www.demo.test)" "$pl: www.demo.test"
	e2e_assert_eq connected "$(probe tcp 203.0.113.80 80 "t80-$pl")" "$pl: TCP 80 right after the answer"
	received "t80-$pl" || e2e_fail "$pl: the receiver did not get the TCP 80 connection"
	e2e_assert_contains "$(probe tcp 203.0.113.80 443 "t443-$pl")" "failed" "$pl: TCP 443 reached past a tcp/80 grant"
	probe udp 203.0.113.80 80 "u80-$pl" >/dev/null
	# A barrier on the allowed port: once it is in, the dropped probes sent before it would be too.
	probe tcp 203.0.113.80 80 "bar1-$pl" >/dev/null
	received "bar1-$pl" || e2e_fail "$pl: barrier connection lost"
	e2e_assert_not_contains "$(cat "$RECV")" "u80-$pl" "$pl: UDP 80 reached past a tcp/80 grant"
	e2e_assert_not_contains "$(cat "$RECV")" "tcp 443 t443-$pl" "$pl: TCP 443 reached the receiver"
	e2e_assert_eq reply "$(probe echo 203.0.113.80)" "$pl: ICMP echo to a granted address"
	e2e_assert_contains "$("$@" port4)" "203.0.113.80 . tcp . 80 timeout" "$pl: port4 lacks tcp/80"
	e2e_assert_not_contains "$("$@" allow4)" "203.0.113.80" "$pl: a port-scoped grant opened every port"
	# The union: another name on the same address, allowed for udp/80.
	e2e_assert_eq 203.0.113.80 "$(resolve both.demo.test)" "$pl: both.demo.test"
	probe udp 203.0.113.80 80 "u80b-$pl" >/dev/null
	received "u80b-$pl" || e2e_fail "$pl: UDP 80 blocked after a udp/80 grant of the same address"
	e2e_assert_contains "$(probe tcp 203.0.113.80 443 "t443b-$pl")" "failed" "$pl: TCP 443 open after the union"
	e2e_assert_eq connected "$(probe tcp 203.0.113.80 80 "t80b-$pl")" "$pl: TCP 80 lost in the union"
	# A line without ports: every port.
	e2e_assert_contains "$(probe tcp 203.0.113.82 443 "any-pre-$pl")" "failed" "$pl: .82 open before its answer"
	e2e_assert_eq 203.0.113.82 "$(resolve any.demo.test)" "$pl: any.demo.test"
	e2e_assert_eq connected "$(probe tcp 203.0.113.82 443 "any-$pl")" "$pl: a grant without ports is not every port"
	received "any-$pl" || e2e_fail "$pl: the receiver did not get the any-port connection"
	e2e_assert_contains "$("$@" allow4)" "203.0.113.82 timeout" "$pl: allow4 lacks the any-port grant"
}

# --- netns placement: the table lives in the sandbox's namespace ---
start_fw fw_netns --netns "$SBX" --state "$E2E_WORK/state-netns"
checks netns ip netns exec "$SBX" nft list set inet moat
e2e_stop fw_netns
in_sbx nft delete table inet moat

# --- forward placement: the table lives on the host, keys start with the sandbox address ---
start_fw fw_fwd --forward --sandbox 198.51.100.2/32 --state "$E2E_WORK/state-fwd"
# The answers now come from moatd's cache: every path grants, with the rule's ports.
checks forward e2e_run nft list set inet moat
e2e_assert_contains "$(e2e_run nft list set inet moat port4)" "198.51.100.2 . 203.0.113.80 . udp . 80" \
	"forward: port4 element is not bound to the sandbox"
# A restart keeps the port scope: the ledger stores proto and port.
e2e_stop fw_fwd
start_fw fw_fwd2 --forward --sandbox 198.51.100.2/32 --state "$E2E_WORK/state-fwd"
e2e_assert_eq connected "$(probe tcp 203.0.113.80 80 "t80-restart")" "TCP 80 lost across a moat-fw restart"
e2e_assert_contains "$(probe tcp 203.0.113.80 443 "t443-restart")" "failed" "TCP 443 opened by a restart"
e2e_assert_contains "$(e2e_run nft list set inet moat echo4)" "198.51.100.2 . 203.0.113.80 timeout" \
	"echo element lost across a restart"
# Someone deletes the table under moat-fw (issue 22): moat-fw puts it back at once with an
# ALERT, and the next answer's grant goes through.
e2e_run nft delete table inet moat
out=$(in_sbx dig +time=2 +tries=1 @198.51.100.1 www.demo.test A)
e2e_assert_contains "$out" "status: NOERROR" "no answer after the table was deleted under moat-fw"
e2e_assert_contains "$(cat "$E2E_WORK/fw_fwd2.log")" "ALERT: table inet moat changed by another process" \
	"no ALERT for the deleted table"
e2e_assert_eq connected "$(probe tcp 203.0.113.80 80 "t80-restored")" "TCP 80 lost after the restore"
# moat-fw refuses a grant (an AAAA answer for a sandbox without an IPv6 source to bind it to):
# the answer fails closed at once (SERVFAIL, no waiting for moatd's timeout), and moat-fw goes
# on serving.
out=$(in_sbx dig +time=2 +tries=1 @198.51.100.1 www.demo.test AAAA)
e2e_assert_contains "$out" "status: SERVFAIL" "an answer was released although moat-fw refused its grant"
e2e_assert_contains "$out" "firewall did not confirm the grant (FAILED)" "EDE says why"
e2e_assert_contains "$(cat "$E2E_WORK/fw_fwd2.log")" "is not of client 198.51.100.2's family" "no error from moat-fw"
e2e_alive fw_fwd2 || e2e_fail "moat-fw died on a refused grant"
e2e_pass
