#!/usr/bin/env bash
# moat-fw against a hostile sandbox, forward placement (issue 11). Three namespaces, linked by
# veth pairs and to nothing else:
#
#   sandbox 192.0.2.2/28 s0 ---- h0 192.0.2.1/28  moat host  h1 198.51.100.1 ---- n0 "net"
#           2001:db8:1::2/64        2001:db8:1::1  (moat-fw)     2001:db8:2::1     198.51.100.2
#                                                                                 web 203.0.113.80
#                                                                                     2001:db8:3::80
# The sandbox runs as root with CAP_NET_RAW and without CAP_NET_ADMIN (setpriv), except where a
# case says so. Everything is judged at the receiver: listeners in "net" and on the moat host
# log what arrived. Paths that must stay shut: spoofed sources (raw socket, and an address added
# with CAP_NET_ADMIN) in both families; link-local and multicast to the host; the host's other
# services; an ND packet with a payload to a granted address; a connection from the "internet"
# to the sandbox (but --inbound tcp/8080 opens); grants of private, shared and the host's own
# addresses; grants from a uid that is not --moatd-user; 64 idle connections locking moatd out.
# What must work: IPv6 without static neighbours, DNS to the resolver on the host, the grants.
source "$(dirname "$0")/lib.sh"
e2e_init fw_forward

PY=$E2E_PY
FW="$MOAT_BUILD/moat-fw"
H="$E2E_DIR/peers/hostile.py"
SBX=$E2E_NS
e2e_peer host
HOST=$E2E_PEER
e2e_peer net
NET=$E2E_PEER
e2e_peer sbxb # a second sandbox, on its own link h2 (192.0.2.18)
SBXB=$E2E_PEER
# No duplicate-address detection: link-local addresses are usable at once (no tentative window
# in which neighbour discovery waits).
for ns in "$SBX" "$HOST" "$NET" "$SBXB"; do
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.all.accept_dad=0
done
e2e_veth "$SBX" s0 "$HOST" h0
e2e_veth "$HOST" h1 "$NET" n0
e2e_uplink "$SBXB" s0 "$HOST" h2 192.0.2.18/28 192.0.2.17/28 2001:db8:4::2/64 2001:db8:4::1/64
e2e_addr_dev "$SBX" s0 192.0.2.2/28
e2e_addr_dev "$SBX" s0 2001:db8:1::2/64
e2e_addr_dev "$HOST" h0 192.0.2.1/28
e2e_addr_dev "$HOST" h0 2001:db8:1::1/64
e2e_addr_dev "$HOST" h1 198.51.100.1/28
e2e_addr_dev "$HOST" h1 2001:db8:2::1/64
e2e_addr_dev "$NET" n0 198.51.100.2/28
e2e_addr_dev "$NET" n0 2001:db8:2::2/64
e2e_addr_dev "$NET" lo 203.0.113.80/32
e2e_addr_dev "$NET" lo 2001:db8:3::80/128
e2e_run ip route add default via 192.0.2.1
e2e_run ip -6 route add default via 2001:db8:1::1
ip -n "$HOST" route add 203.0.113.0/24 via 198.51.100.2
ip -n "$HOST" -6 route add 2001:db8:3::/64 via 2001:db8:2::2
ip -n "$NET" route add 192.0.2.0/27 via 198.51.100.1
ip -n "$NET" -6 route add 2001:db8:1::/64 via 2001:db8:2::1
ip netns exec "$HOST" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
links=$(ip -n "$SBX" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort | tr '\n' ' ')
e2e_assert_eq "lo s0 " "$links" "the sandbox must have one link, to the moat host"
HOST_LL=$(ip -n "$HOST" -6 -o addr show dev h0 scope link | awk '{print $4}' | cut -d/ -f1)
[[ "$HOST_LL" == fe80::* ]] || e2e_fail "no link-local address on h0"

# The sandbox: root, CAP_NET_RAW, no CAP_NET_ADMIN; sbx_admin keeps CAP_NET_ADMIN.
sbx() { e2e_run setpriv --bounding-set -net_admin "$PY" "$H" "$@"; }
sbx_admin() { e2e_run "$PY" "$H" "$@"; }
e2e_run setpriv --bounding-set -net_admin ip link add v9 type veth peer name v10 2>/dev/null &&
	e2e_fail "the sandbox still has CAP_NET_ADMIN"
net() { ip netns exec "$NET" "$PY" "$H" "$@"; }

# Receivers: web (TCP 80) and a datagram log (UDP 9) in "net"; on the moat host a service on
# every address (TCP 8082, UDP 8083), and "moatd" on 192.0.2.1:53; in the sandbox two services.
e2e_bg web ip netns exec "$NET" "$PY" "$H" tcp-listen 240 203.0.113.80:80 "[2001:db8:3::80]:80"
e2e_bg log ip netns exec "$NET" "$PY" "$H" udp-log 240 203.0.113.80:9 "[2001:db8:3::80]:9"
e2e_bg hostsvc ip netns exec "$HOST" "$PY" "$H" tcp-listen 240 "[::]:8082" 192.0.2.1:53
e2e_bg hostudp ip netns exec "$HOST" "$PY" "$H" udp-log 240 "[::]:8083" 0.0.0.0:8083
e2e_bg sbxsvc "$PY" "$H" tcp-listen 240 "[::]:8080" "[::]:8081"
e2e_bg sbxbsvc ip netns exec "$SBXB" "$PY" "$H" tcp-listen 240 "[::]:8081"
E2E_NS=$NET e2e_wait_port tcp 203.0.113.80 80
E2E_NS=$NET e2e_wait_port udp 203.0.113.80 9
E2E_NS=$HOST e2e_wait_port tcp 192.0.2.1 53
E2E_NS=$HOST e2e_wait_port udp '*' 8083
e2e_wait_port tcp '*' 8081

# Before moat-fw, every path is open (so "failed" below is the firewall's doing).
e2e_assert_eq connected "$(sbx connect 203.0.113.80 80)" "web unreachable without moat-fw"
e2e_assert_eq connected "$(net connect 192.0.2.2 8081)" "sandbox unreachable without moat-fw"

# moat-fw on the host. The IPv4 range's interface comes from the routing table.
SOCKDIR=$(mktemp -d /tmp/moat-fwsock.XXXXXX)
chmod 0711 "$SOCKDIR"
cp "$E2E_DIR/peers/fw_client.py" "$H" "$SOCKDIR/"
chmod 0644 "$SOCKDIR"/*.py
SOCK="$SOCKDIR/fw.sock"
NOGROUP=$(id -gn nobody)
e2e_bg fw ip netns exec "$HOST" "$FW" --socket "$SOCK" --moatd-user root --forward --state "$E2E_WORK/state" \
	--sandbox 192.0.2.2/32 --sandbox 2001:db8:1::2/128@h0 --sandbox 192.0.2.18/32 \
	--resolver 192.0.2.1 --resolver 192.0.2.17 --inbound tcp/8080 --socket-group "$NOGROUP" --user nobody --min-lifetime 60
e2e_wait_log fw 'listening on'
e2e_assert_contains "$(cat "$E2E_WORK/fw.log")" \
	"--sandbox 192.0.2.2/32 is on interface h0 (from the routing table)" "interface not printed"
grant() { "$PY" "$SOCKDIR/fw_client.py" --socket "$SOCK" "$@"; }
fwd_cleanup() { rm -rf "$SOCKDIR"; }
e2e_on_cleanup fwd_cleanup

e2e_assert_eq "seq=1 status=OK lifetime=300" \
	"$(grant --seq 1 --lifetime 300 --client 192.0.2.2 203.0.113.80 2001:db8:3::80)" "grant"

# --- what must work -------------------------------------------------------------------------
e2e_assert_eq connected "$(sbx connect 203.0.113.80 80)" "granted IPv4 blocked"
# No static neighbours anywhere: the sandbox's neighbour solicitation to the host's
# solicited-node address must pass (it used to hit the always-deny set).
e2e_assert_eq connected "$(sbx connect 2001:db8:3::80 80)" "IPv6 in forward placement broken"
e2e_assert_eq connected "$(sbx connect 192.0.2.1 53)" "DNS (TCP) to the resolver on the host blocked"
e2e_assert_contains "$(sbx connect 203.0.113.81 80)" failed "an ungranted address reachable"

# --- spoofed sources: raw socket (CAP_NET_RAW), both families --------------------------------
sbx raw4 192.0.2.2 203.0.113.80 9 real4 >/dev/null
sbx raw4 192.0.2.5 203.0.113.80 9 spoof4-link >/dev/null
sbx raw4 198.51.100.77 203.0.113.80 9 spoof4-far >/dev/null
sbx raw6 2001:db8:1::2 2001:db8:3::80 9 real6 >/dev/null
sbx raw6 2001:db8:1::5 2001:db8:3::80 9 spoof6-link >/dev/null
sbx raw6 2001:db8:2::77 2001:db8:3::80 9 spoof6-far >/dev/null
# --- spoofed sources: an address added with CAP_NET_ADMIN -------------------------------------
e2e_run ip addr add 192.0.2.6/28 dev s0
e2e_run ip addr add 2001:db8:1::6/64 dev s0 nodad
sbx_admin udp 192.0.2.6 203.0.113.80 9 added4 >/dev/null
sbx_admin udp 2001:db8:1::6 2001:db8:3::80 9 added6 >/dev/null
e2e_assert_contains "$(sbx_admin connect 203.0.113.80 80 192.0.2.6)" failed \
	"a connection from an added address got through"
# --- spoofed sources from a packet socket (AF_PACKET, below the sandbox's own inet hooks) -----
HOST_MAC=$(ip -n "$HOST" -o link show h0 | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
sbx packet s0 "$HOST_MAC" 192.0.2.2 203.0.113.80 9 pkt-real4 >/dev/null
sbx packet s0 "$HOST_MAC" 192.0.2.7 203.0.113.80 9 pkt-spoof4 >/dev/null
sbx packet s0 "$HOST_MAC" 2001:db8:1::7 2001:db8:3::80 9 pkt-spoof6 >/dev/null
# The controls arrive, so the sender works and the log is current.
for ((i = 0; i < 30; i++)); do
	grep -q "got 2001:db8:1::2 real6" "$E2E_WORK/log.log" && grep -q "real4" "$E2E_WORK/log.log" && break
	sleep 0.1
done
e2e_assert_contains "$(cat "$E2E_WORK/log.log")" "got 192.0.2.2 real4" "raw IPv4 control lost"
e2e_assert_contains "$(cat "$E2E_WORK/log.log")" "got 192.0.2.2 pkt-real4" "packet-socket control lost"
e2e_assert_contains "$(cat "$E2E_WORK/log.log")" "got 2001:db8:1::2 real6" "raw IPv6 control lost"
for t in spoof4-link spoof4-far spoof6-link spoof6-far added4 added6 pkt-spoof4 pkt-spoof6; do
	e2e_assert_not_contains "$(cat "$E2E_WORK/log.log")" "$t" "spoofed source arrived: $t"
done
e2e_run ip addr del 192.0.2.6/28 dev s0
e2e_run ip addr del 2001:db8:1::6/64 dev s0

# --- the other sandbox: its source, its grants and its ports stay its own ---------------------
e2e_assert_eq "seq=7 status=OK lifetime=300" \
	"$(grant --seq 7 --lifetime 300 --client 192.0.2.18 203.0.113.80)" "grant for sandbox B"
e2e_assert_eq "seq=8 status=OK lifetime=300" \
	"$(grant --seq 8 --lifetime 300 --client 192.0.2.2 192.0.2.18)" "grant of B's address for A"
sbx raw4 192.0.2.18 203.0.113.80 9 spoof4-other-sandbox >/dev/null
e2e_assert_contains "$(sbx connect 192.0.2.18 8081)" failed "A opened a connection into B"
e2e_assert_eq connected "$(ip netns exec "$SBXB" "$PY" "$H" connect 203.0.113.80 80)" \
	"sandbox B's own grant blocked"

# --- the moat host: link-local, multicast and its other services ------------------------------
e2e_assert_contains "$(sbx connect "$HOST_LL" 8082 - s0)" failed "host service over link-local"
e2e_assert_contains "$(sbx connect 2001:db8:1::1 8082)" failed "host service over IPv6"
e2e_assert_contains "$(sbx connect 192.0.2.1 8082)" failed "host service over IPv4"
sbx udp - ff02::1 8083 mcast6-ll s0 >/dev/null
sbx udp 2001:db8:1::2 ff02::1 8083 mcast6-global s0 >/dev/null
sbx udp 192.0.2.2 224.0.0.1 8083 mcast4 s0 >/dev/null
sbx udp - "$HOST_LL" 8083 unicast6-ll s0 >/dev/null
sbx udp 192.0.2.2 192.0.2.1 8083 unicast4 >/dev/null
# --- ND with a payload, to a granted address (routed if it passed) ---------------------------
sbx nd6 2001:db8:1::2 2001:db8:3::80 nd-payload >/dev/null
e2e_assert_eq reply "$(sbx ping 203.0.113.80)" "echo to a granted address blocked"
e2e_assert_eq reply "$(sbx ping 2001:db8:3::80)" "IPv6 echo to a granted address blocked"
e2e_assert_eq "no reply" "$(sbx ping 198.51.100.2)" "echo to an ungranted address answered"
# A datagram that must arrive, sent last: when it is in the log, the ones before it had time.
sbx udp 2001:db8:1::2 2001:db8:3::80 9 barrier >/dev/null
e2e_poll_line "$E2E_WORK/log.log" barrier 3 || true
e2e_assert_contains "$(cat "$E2E_WORK/log.log")" barrier "granted UDP lost"
e2e_assert_not_contains "$(cat "$E2E_WORK/log.log")" spoof4-other-sandbox \
	"A used B's source and B's grant"
for t in mcast6-ll mcast6-global mcast4 unicast6-ll unicast4; do
	e2e_assert_not_contains "$(cat "$E2E_WORK/hostudp.log")" "$t" "reached the host: $t"
done
e2e_assert_not_contains "$(cat "$E2E_WORK/hostsvc.log")" "8082" "a host service accepted"
nd=$(ip netns exec "$HOST" nft list chain inet moat sandbox | awk '/icmpv6 type != echo-request/ { print $7 }')
((nd >= 1)) || e2e_fail "the ND packet with a payload was not dropped in chain sandbox"

# --- only what the sandbox started: nothing from the "internet" in, but --inbound -------------
e2e_assert_contains "$(net connect 192.0.2.2 8081)" failed "inbound connection to the sandbox"
e2e_assert_contains "$(net connect 2001:db8:1::2 8081)" failed "inbound IPv6 connection"
e2e_assert_eq connected "$(net connect 192.0.2.2 8080)" "--inbound tcp/8080 does not open"

# --- the trust boundary ---------------------------------------------------------------------
for bad in 10.0.0.5 192.168.1.1 172.16.0.1 100.64.0.1 fd12::1 198.51.100.1 192.0.2.1; do
	e2e_assert_eq "seq=2 status=DENIED lifetime=0" \
		"$(grant --seq 2 --client 192.0.2.2 "$bad")" "grant of $bad not refused"
done
e2e_assert_contains "$(cat "$E2E_WORK/fw.log")" "asks for private (no --allow-private) address 10.0.0.5" \
	"no alert for a private grant"
e2e_assert_contains "$(cat "$E2E_WORK/fw.log")" "asks for this host's own address 198.51.100.1" \
	"no alert for the host's own address"
# A peer that is not --moatd-user (root) may open the socket (it is in the group) but not grant.
out=$(setpriv --reuid nobody --regid "$NOGROUP" --clear-groups "$PY" "$SOCKDIR/fw_client.py" \
	--socket "$SOCK" --seq 3 --client 192.0.2.2 203.0.113.81 2>&1 || true)
e2e_assert_not_contains "$out" "status=OK" "a uid other than --moatd-user granted"
e2e_assert_contains "$(cat "$E2E_WORK/fw.log")" "refused: only uid 0 (--moatd-user) may grant" \
	"no log line for the refused peer"
e2e_assert_contains "$(sbx connect 203.0.113.81 80)" failed "the unauthorised grant opened"
# 64 idle connections of that uid: moatd (root) still gets its grant through.
e2e_bg idle setpriv --reuid nobody --regid "$NOGROUP" --clear-groups "$PY" "$SOCKDIR/hostile.py" \
	idle "$SOCK" 64 60
e2e_wait_log idle 'held 64'
e2e_assert_eq "seq=4 status=OK lifetime=300" \
	"$(grant --seq 4 --lifetime 300 --client 192.0.2.2 203.0.113.80)" "moatd locked out"
e2e_stop idle

# --- --allow-private for one sandbox only ----------------------------------------------------
e2e_stop fw
e2e_bg fw2 ip netns exec "$HOST" "$FW" --socket "$SOCK" --moatd-user root --forward --state "$E2E_WORK/state" \
	--sandbox 192.0.2.2/32,allow-private --sandbox 2001:db8:1::2/128@h0 --resolver 192.0.2.1 \
	--user nobody
e2e_wait_log fw2 'listening on'
e2e_assert_eq "seq=5 status=OK lifetime=60" "$(grant --seq 5 --client 192.0.2.2 10.0.0.5)" \
	"allow-private for the IPv4 sandbox"
e2e_assert_eq "seq=6 status=DENIED lifetime=0" "$(grant --seq 6 --client 2001:db8:1::2 fd12::1)" \
	"allow-private leaked to the other sandbox"

# --- stop and remove ------------------------------------------------------------------------
e2e_stop fw2
e2e_assert_contains "$(sbx connect 203.0.113.81 80)" failed "closed did not stay closed on stop"
out=$(ip netns exec "$HOST" "$FW" --remove)
e2e_assert_contains "$out" "removed table inet moat" "--remove did not say what it removed"
e2e_assert_contains "$out" "chains forward, input, sandbox, host, to_sandbox" "--remove: chains"
e2e_assert_eq "" "$(ip netns exec "$HOST" nft list tables)" "table left after --remove"
e2e_assert_contains "$(ip netns exec "$HOST" "$FW" --remove)" "nothing removed" "second --remove"
e2e_pass
