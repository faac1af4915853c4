#!/usr/bin/env bash
# moat on a Docker-style bridge (issue 22): the host's bridge br-x holds the gateway address
# inside the sandboxes' subnet, as docker0, podman, libvirt and LXD do, and moat-fw takes the
# whole subnet (--sandbox 192.0.2.0/24@br-x). Two sandboxes hang off the bridge on veth ports;
# their DNS is moatd on the gateway (the README's worked example, with an agent each):
#
#   sandbox A 192.0.2.2, 2001:db8:77::2 -- va \
#                                               br-x 192.0.2.1/24, 2001:db8:77::1/64   host
#   sandbox B 192.0.2.3, 2001:db8:77::3 -- vb /   (moatd, NSD 198.51.100.53, moat-fw)
#                                         h1 198.51.100.1 ---- n0 "net": 203.0.113.80, .81,
#                                                                  2001:db8:3::80 (listeners)
# Shown: moat-fw starts with the gateway inside the range; each sandbox's lookups open its own
# addresses and not the other's, in both families; a packet from a sandbox with the gateway's
# address as source (raw socket, both families) is dropped and counted in chain prerouting and
# never reaches "net"; a name answered with the gateway's address is not granted; the host's
# services beyond DNS stay closed to the sandboxes. Judged at the receiver.
source "$(dirname "$0")/lib.sh"
e2e_init fw_bridge
# moatd connects to moat-fw only as the user it drops to: both daemons run with the users the
# install makes (moat, moat-fw; the host's files untouched) and their defaults, which agree.
e2e_users

PY=$E2E_PY
FW="$MOAT_BUILD/moat-fw"
H="$E2E_DIR/peers/hostile.py"
HOSTNS=$E2E_NS
e2e_peer sbxa
A=$E2E_PEER
e2e_peer sbxb
B=$E2E_PEER
e2e_peer net
NET=$E2E_PEER
for ns in "$HOSTNS" "$A" "$B" "$NET"; do
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.all.accept_dad=0
done
# The bridge and its gateway address, as a container engine makes them.
e2e_run ip link add br-x type bridge
e2e_run ip link set br-x up
e2e_addr_dev "$HOSTNS" br-x 192.0.2.1/24
e2e_addr_dev "$HOSTNS" br-x 2001:db8:77::1/64
# port SBX HOSTIF ADDR4 ADDR6: a sandbox on a veth port of the bridge, routed via the gateway.
port() {
	e2e_veth "$1" s0 "$HOSTNS" "$2"
	e2e_run ip link set "$2" master br-x
	e2e_addr_dev "$1" s0 "$3/24"
	e2e_addr_dev "$1" s0 "$4/64"
	ip -n "$1" route add default via 192.0.2.1
	ip -n "$1" -6 route add default via 2001:db8:77::1
}
port "$A" va 192.0.2.2 2001:db8:77::2
port "$B" vb 192.0.2.3 2001:db8:77::3
e2e_veth "$HOSTNS" h1 "$NET" n0
e2e_addr_dev "$HOSTNS" h1 198.51.100.1/28
e2e_addr_dev "$HOSTNS" h1 2001:db8:2::1/64
e2e_addr_dev "$NET" n0 198.51.100.2/28
e2e_addr_dev "$NET" n0 2001:db8:2::2/64
for a in 203.0.113.80/32 203.0.113.81/32 2001:db8:3::80/128; do e2e_addr_dev "$NET" lo "$a"; done
e2e_run ip route add 203.0.113.0/24 via 198.51.100.2
e2e_run ip -6 route add 2001:db8:3::/64 via 2001:db8:2::2
ip -n "$NET" route add 192.0.2.0/24 via 198.51.100.1
ip -n "$NET" -6 route add 2001:db8:77::/64 via 2001:db8:2::1
e2e_run sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
links() { ip -n "$1" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort | tr '\n' ' '; }
e2e_assert_eq "lo s0 " "$(links "$A")" "sandbox A must have one link, to the bridge"
e2e_assert_eq "lo s0 " "$(links "$B")" "sandbox B must have one link, to the bridge"

in_a() { ip netns exec "$A" "$@"; }
in_b() { ip netns exec "$B" "$@"; }
# Receivers in "net" (web and a datagram log, both families) and on the host (services that are
# not DNS, on every address).
e2e_bg web ip netns exec "$NET" "$PY" "$H" tcp-listen 240 203.0.113.80:80 203.0.113.81:80 "[2001:db8:3::80]:80"
e2e_bg log ip netns exec "$NET" "$PY" "$H" udp-log 240 203.0.113.80:9 "[2001:db8:3::80]:9"
e2e_bg hostsvc "$PY" "$H" tcp-listen 240 "[::]:8082"
e2e_bg hostudp "$PY" "$H" udp-log 240 "[::]:8083"
E2E_NS=$NET e2e_wait_port tcp 203.0.113.81 80
E2E_NS=$NET e2e_wait_port udp 203.0.113.80 9
e2e_wait_port tcp '*' 8082
e2e_wait_port udp '*' 8083
# Before moat: the bridge routes, so what stays shut below is the firewall's doing.
e2e_assert_eq connected "$(in_a "$PY" "$H" connect 203.0.113.81 80)" "no route before moat"
e2e_assert_eq connected "$(in_b "$PY" "$H" connect 192.0.2.1 8082)" "no host service before moat"
wait_line "$E2E_WORK/hostsvc.log" accepted
svc_before=$(grep -c accepted "$E2E_WORK/hostsvc.log")

cat >"$E2E_WORK/demo.test.zone" <<'Z'
$ORIGIN demo.test.
$TTL 300
@ IN SOA ns1 hostmaster 1 3600 600 86400 60
  IN NS ns1
ns1 IN A 198.51.100.53
a IN A 203.0.113.80
a IN AAAA 2001:db8:3::80
b IN A 203.0.113.81
gw IN A 192.0.2.1
Z
e2e_addr_dev "$HOSTNS" lo 198.51.100.53/32
e2e_nsd 198.51.100.53 53 "$E2E_WORK/demo.test.zone"
printf 'a.demo.test\ngw.demo.test\n' >"$E2E_WORK/a.txt"
printf 'b.demo.test\n' >"$E2E_WORK/b.txt"
# The README's example, with an agent per sandbox (one agent for the whole subnet works the same).
cat >"$E2E_WORK/moatd.yaml" <<Y
listen: ["192.0.2.1:53", "[2001:db8:77::1]:53"]
upstreams: ["198.51.100.53:53"]
firewall_socket: $E2E_WORK/fw.sock
log: {file: $E2E_WORK/moatd.jsonl}
agents:
  - {name: sbx-a, clients: [192.0.2.2, 2001:db8:77::2], allow: [a.txt]}
  - {name: sbx-b, clients: [192.0.2.3, 2001:db8:77::3], allow: [b.txt]}
Y
e2e_bg fw "${E2E_USERS[@]}" "$FW" --socket "$E2E_WORK/fw.sock" --state "$E2E_WORK/state" --forward \
	--sandbox 192.0.2.0/24@br-x --sandbox 2001:db8:77::/64@br-x \
	--resolver 192.0.2.1 --resolver "[2001:db8:77::1]:53"
e2e_wait_log fw 'listening on'
start_moatd moatd -c "$E2E_WORK/moatd.yaml"
e2e_assert_contains "$(e2e_run nft list set inet moat hostsrc4)" '"br-x" . 192.0.2.1 }' "v4 gateway"
e2e_assert_contains "$(e2e_run nft list set inet moat hostsrc6)" '"br-x" . 2001:db8:77::1 }' "v6 gateway"

sbx() { local ns=$1; shift; ip netns exec "$ns" setpriv --bounding-set -net_admin "$PY" "$H" "$@"; }
resolve() { ip netns exec "$1" dig +time=2 +tries=1 +short "@$2" "$3" "$4"; }

# --- each sandbox's lookups open its addresses, and only for it ------------------------------
e2e_assert_contains "$(sbx "$A" connect 203.0.113.80 80)" failed "A reached web before its lookup"
e2e_assert_eq 203.0.113.80 "$(resolve "$A" 192.0.2.1 a.demo.test A)" "A: a.demo.test"
e2e_assert_eq connected "$(sbx "$A" connect 203.0.113.80 80)" "A: its grant does not open"
e2e_assert_eq 2001:db8:3::80 "$(resolve "$A" 2001:db8:77::1 a.demo.test AAAA)" "A: a.demo.test AAAA"
e2e_assert_eq connected "$(sbx "$A" connect 2001:db8:3::80 80)" "A: its IPv6 grant does not open"
e2e_assert_eq 203.0.113.81 "$(resolve "$B" 192.0.2.1 b.demo.test A)" "B: b.demo.test"
e2e_assert_eq connected "$(sbx "$B" connect 203.0.113.81 80)" "B: its grant does not open"
e2e_assert_contains "$(sbx "$A" connect 203.0.113.81 80)" failed "A used B's grant"
e2e_assert_contains "$(sbx "$B" connect 203.0.113.80 80)" failed "B used A's grant"
e2e_assert_contains "$(sbx "$B" connect 2001:db8:3::80 80)" failed "B used A's IPv6 grant"

# --- the gateway's address as a sandbox's source: forged, dropped before routing, counted ------
sbx "$A" raw4 192.0.2.1 203.0.113.80 9 forged4 >/dev/null
sbx "$A" raw6 2001:db8:77::1 2001:db8:3::80 9 forged6 >/dev/null
sbx "$B" raw4 192.0.2.1 203.0.113.80 9 forged4b >/dev/null
sbx "$A" raw4 192.0.2.2 203.0.113.80 9 real4 >/dev/null
sbx "$A" raw6 2001:db8:77::2 2001:db8:3::80 9 real6 >/dev/null
wait_line "$E2E_WORK/log.log" "got 192.0.2.2 real4"
wait_line "$E2E_WORK/log.log" "got 2001:db8:77::2 real6"
e2e_assert_not_contains "$(cat "$E2E_WORK/log.log")" forged "a forged gateway source arrived"
pre=$(e2e_run nft list chain inet moat prerouting)
n4=$(awk '/ip saddr @hostsrc4 counter/ { print $8 }' <<<"$pre")
n6=$(awk '/ip6 saddr @hostsrc6 counter/ { print $8 }' <<<"$pre")
((n4 >= 2 && n6 >= 1)) || e2e_fail "forged gateway sources not counted: $pre"

# --- the gateway is never a grant, and the host's services beyond DNS stay closed ------------
# The gateway is moatd's own listen address here: moatd refuses the answer itself, and moat-fw
# refuses a grant of it sent directly (as moatd's user).
out=$(ip netns exec "$A" dig +time=2 +tries=1 @192.0.2.1 gw.demo.test A)
e2e_assert_contains "$out" "status: NXDOMAIN" "an answer with the gateway's address was released"
e2e_assert_contains "$out" "moat: answer contained 192.0.2.1, moatd's own listen address" \
	"moatd's reason for refusing the gateway's address"
out=$(e2e_run setpriv --reuid "$E2E_MOAT_UID" --regid "$E2E_MOAT_UID" --clear-groups "$PY" \
	"$E2E_DIR/peers/fw_client.py" --socket "$E2E_WORK/fw.sock" --client 192.0.2.2 192.0.2.1)
e2e_assert_contains "$out" "status=DENIED" "moat-fw granted the gateway"
e2e_assert_contains "$(cat "$E2E_WORK/fw.log")" "asks for the resolver's (--resolver) address 192.0.2.1" \
	"moat-fw did not refuse the gateway as a grant"
e2e_assert_eq connected "$(sbx "$A" connect 192.0.2.1 53)" "DNS over TCP to moatd blocked"
for s in "$A 192.0.2.1" "$A 2001:db8:77::1" "$B 192.0.2.1" "$B 198.51.100.1"; do
	set -- $s
	e2e_assert_contains "$(sbx "$1" connect "$2" 8082)" failed "a host service on $2 reached from a sandbox"
done
sbx "$A" udp 192.0.2.2 192.0.2.1 8083 hostudp4 >/dev/null
sbx "$B" udp 2001:db8:77::3 2001:db8:77::1 8083 hostudp6 >/dev/null
# A datagram that must arrive, sent last.
sbx "$A" udp 192.0.2.2 203.0.113.80 9 barrier >/dev/null
wait_line "$E2E_WORK/log.log" "got 192.0.2.2 barrier"
e2e_assert_not_contains "$(cat "$E2E_WORK/hostudp.log")" got "a datagram reached a host service"
e2e_assert_eq "$svc_before" "$(grep -c accepted "$E2E_WORK/hostsvc.log")" \
	"a host service accepted a sandbox: $(cat "$E2E_WORK/hostsvc.log")"

stop_moatd moatd
e2e_stop fw
e2e_run "$FW" --remove >/dev/null
e2e_pass
