#!/usr/bin/env bash
# moat-fw against a hostile sandbox, netns placement (issue 11): moat-fw filters inside the
# sandbox's namespace, named by a path (/proc/PID/ns/net, as for a container without
# `ip netns`). The sandbox (root, CAP_NET_RAW, no CAP_NET_ADMIN) is one veth away from "net",
# where the receivers are:
#
#   sandbox 203.0.113.2/24 s0 ---- n0 203.0.113.1/24 "net"   hosts 192.0.2.80, 2001:db8::80
#           2001:db8:ff::2/64        2001:db8:ff::1/64
#
# Must stay shut: raw-socket sources that are not the namespace's own (both families), an ND
# packet with a payload to a remote address, a connection from outside (but --inbound tcp/8080
# opens), a private grant. Must work: the sandbox's loopback, IPv6 to a granted address (ND on
# the link), DNS to the resolver. moat-fw warns that packet sockets pass the output hook.
source "$(dirname "$0")/lib.sh"
e2e_init fw_netns

PY=$E2E_PY
FW="$MOAT_BUILD/moat-fw"
H="$E2E_DIR/peers/hostile.py"
e2e_peer net
NET=$E2E_PEER
for ns in "$E2E_NS" "$NET"; do
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.all.accept_dad=0
done
e2e_uplink "$E2E_NS" s0 "$NET" n0 203.0.113.2/24 203.0.113.1/24 2001:db8:ff::2/64 2001:db8:ff::1/64
for a in 192.0.2.80/32 192.0.2.53/32 2001:db8::80/128; do e2e_addr_dev "$NET" lo "$a"; done

sbx() { e2e_run setpriv --bounding-set -net_admin "$PY" "$H" "$@"; }
e2e_run setpriv --bounding-set -net_admin ip link add v9 type veth peer name v10 2>/dev/null &&
	e2e_fail "the sandbox still has CAP_NET_ADMIN"
net() { ip netns exec "$NET" "$PY" "$H" "$@"; }
# The receiver's own count of ND packets to the remote address (a capture in "net").
ip netns exec "$NET" nft -f - <<'NFT'
table inet count {
	chain in {
		type filter hook prerouting priority -300; policy accept;
		icmpv6 type nd-neighbor-solicit ip6 daddr 2001:db8::80 counter
	}
}
NFT
nd_seen() { ip netns exec "$NET" nft list chain inet count in | awk '/nd-neighbor-solicit/ { print $(NF - 2) }'; }

e2e_bg web ip netns exec "$NET" "$PY" "$H" tcp-listen 240 192.0.2.80:80 "[2001:db8::80]:80" 192.0.2.53:53
e2e_bg log ip netns exec "$NET" "$PY" "$H" udp-log 240 192.0.2.80:9 "[2001:db8::80]:9"
e2e_bg sbxsvc "$PY" "$H" tcp-listen 240 "[::]:8080" "[::]:8081" 127.0.0.1:8000
E2E_NS=$NET e2e_wait_port tcp 192.0.2.80 80
E2E_NS=$NET e2e_wait_port udp 192.0.2.80 9
e2e_wait_port tcp '*' 8081
e2e_assert_eq connected "$(net connect 203.0.113.2 8081)" "sandbox unreachable without moat-fw"

SOCK="$E2E_WORK/fw.sock"
e2e_bg fw "$FW" --socket "$SOCK" --moatd-user root --netns "/proc/$(e2e_pid sbxsvc)/ns/net" --state "$E2E_WORK/st" \
	--resolver 192.0.2.53 --inbound tcp/8080 --user nobody
e2e_wait_log fw 'listening on'
e2e_assert_contains "$(cat "$E2E_WORK/fw.log")" \
	"WARNING: netns placement: packet sockets (AF_PACKET) bypass the output hook" \
	"no warning about packet sockets"
e2e_assert_contains "$(cat "$E2E_WORK/fw.log")" "(processes with CAP_NET_RAW in it now: $(e2e_pid sbxsvc)" \
	"the warning does not name the process that holds CAP_NET_RAW"
grant() { "$PY" "$E2E_DIR/peers/fw_client.py" --socket "$SOCK" "$@"; }
e2e_assert_eq "seq=1 status=OK lifetime=300" "$(grant --seq 1 --lifetime 300 192.0.2.80 2001:db8::80)" "grant"

# --- what must work -------------------------------------------------------------------------
e2e_assert_eq connected "$(sbx connect 192.0.2.80 80)" "granted IPv4 blocked"
e2e_assert_eq connected "$(sbx connect 2001:db8::80 80)" "granted IPv6 blocked"
e2e_assert_eq connected "$(sbx connect 192.0.2.53 53)" "DNS (TCP) to the resolver blocked"
e2e_assert_eq connected "$(sbx connect 127.0.0.1 8000)" "the sandbox's loopback blocked"
e2e_assert_eq connected "$(sbx connect 203.0.113.2 8081)" "the sandbox's own address blocked"
e2e_assert_contains "$(sbx connect 192.0.2.81 80)" failed "an ungranted address reachable"

# --- spoofed sources (raw socket) ------------------------------------------------------------
sbx raw4 203.0.113.2 192.0.2.80 9 real4 >/dev/null
sbx raw4 203.0.113.99 192.0.2.80 9 spoof4-link >/dev/null
sbx raw4 198.51.100.7 192.0.2.80 9 spoof4-far >/dev/null
sbx raw4 127.0.0.1 192.0.2.80 9 spoof4-lo >/dev/null
sbx raw6 2001:db8:ff::99 2001:db8::80 9 spoof6-link >/dev/null
sbx raw6 2001:db8:77::1 2001:db8::80 9 spoof6-far >/dev/null
# --- ND with a payload to a remote (granted) address, and an inbound connection ---------------
sbx nd6 2001:db8:ff::2 2001:db8::80 nd-payload >/dev/null
e2e_assert_contains "$(net connect 203.0.113.2 8081)" failed "inbound connection to the sandbox"
e2e_assert_contains "$(net connect 2001:db8:ff::2 8081)" failed "inbound IPv6 connection"
e2e_assert_eq connected "$(net connect 203.0.113.2 8080)" "--inbound tcp/8080 does not open"
sbx raw6 2001:db8:ff::2 2001:db8::80 9 real6 >/dev/null
e2e_poll_line "$E2E_WORK/log.log" real6 3 || true
e2e_assert_contains "$(cat "$E2E_WORK/log.log")" "got 203.0.113.2 real4" "raw IPv4 control lost"
e2e_assert_contains "$(cat "$E2E_WORK/log.log")" "got 2001:db8:ff::2 real6" "raw IPv6 control lost"
for t in spoof4-link spoof4-far spoof4-lo spoof6-link spoof6-far; do
	e2e_assert_not_contains "$(cat "$E2E_WORK/log.log")" "$t" "spoofed source arrived: $t"
done
e2e_assert_eq 0 "$(nd_seen)" "an ND packet with a payload reached a remote address"

# --- trust boundary: private and shared ranges need --allow-private --------------------------
for bad in 10.0.0.5 100.64.0.1 fd00::5; do
	e2e_assert_eq "seq=2 status=DENIED lifetime=0" "$(grant --seq 2 "$bad")" "grant of $bad"
done
e2e_stop fw
e2e_bg fw2 "$FW" --socket "$SOCK" --moatd-user root --netns "/proc/$(e2e_pid sbxsvc)/ns/net" --state "$E2E_WORK/st" \
	--resolver 192.0.2.53 --allow-private --user nobody
e2e_wait_log fw2 'listening on'
e2e_assert_eq "seq=3 status=OK lifetime=60" "$(grant --seq 3 10.0.0.5)" "--allow-private"
e2e_stop fw2
# Restarted without --allow-private, the ledger's private grant stays out of the kernel.
e2e_bg fw3 "$FW" --socket "$SOCK" --moatd-user root --netns "/proc/$(e2e_pid sbxsvc)/ns/net" --state "$E2E_WORK/st" \
	--resolver 192.0.2.53 --user nobody
e2e_wait_log fw3 'listening on'
e2e_assert_contains "$(cat "$E2E_WORK/fw3.log")" "2 grants restored, 1 skipped" "restore count"
e2e_assert_not_contains "$(e2e_run nft list set inet moat allow4)" "10.0.0.5" \
	"a private grant came back without --allow-private"
e2e_stop fw3
e2e_pass
