#!/usr/bin/env bash
# moat on a Docker-style bridge (issue 22): the host's bridge br-x holds the gateway address
# inside the sandboxes' subnet, as docker0, podman, libvirt and LXD do, and moat-fw takes the
# whole subnet (--sandbox 192.0.2.0/24@br-x). Two sandboxes, A and B, hang off the bridge on veth
# ports (the topology of fw_bridged.sh); their DNS is moatd on the gateway, its upstream NSD on
# the host (the README's worked example, with an agent each).
# Shown: moat-fw starts with the gateway inside the range; each sandbox's lookups open its own
# addresses and not the other's, in both families; a packet from a sandbox with the gateway's
# address as source (raw socket, both families) is dropped and counted in chain prerouting and
# never reaches "net"; a name answered with the gateway's address is not granted; the host's
# services beyond DNS stay closed to the sandboxes. And what the bridge switches between its
# ports (which the inet hooks never see): open before moat-fw, then nothing of A's reaches B,
# by IPv4, IPv6, ARP and ND, or as a raw frame (packet socket, IP or not, unicast or
# broadcast), judged by B's service, datagram log and a capture on B's interface below its
# inet stack; the drops counted in table bridge moat; both sandboxes still resolve and reach
# their grants. Judged at the receiver.
source "$(dirname "$0")/lib.sh"
e2e_init fw_bridge
# moatd connects to moat-fw only as the user it drops to: both daemons run with the users the
# install makes (moat, moat-fw; the host's files untouched) and their defaults, which agree.
e2e_users

PY=$E2E_PY
FW="$MOAT_BUILD/moat-fw"
H="$E2E_DIR/peers/hostile.py"
source "$E2E_DIR/fw_bridged.sh"
fw_bridged

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
# In sandbox B: a service, a datagram log and a capture below the inet stack of what arrives
# from A's MAC address (whatever its kind: IP, ARP, ND, any ethertype).
e2e_bg bsvc ip netns exec "$B" "$PY" "$H" tcp-listen 240 192.0.2.3:8090 "[2001:db8:77::3]:8090"
e2e_bg blog ip netns exec "$B" "$PY" "$H" udp-log 240 192.0.2.3:9 "[2001:db8:77::3]:9"
e2e_bg bcap ip netns exec "$B" "$PY" "$H" capture 240 s0 "$AMAC"
E2E_NS=$B e2e_wait_port tcp 192.0.2.3 8090
E2E_NS=$B e2e_wait_port udp 192.0.2.3 9
wait_line "$E2E_WORK/bcap.log" ready
# Before moat: the bridge routes, so what stays shut below is the firewall's doing.
e2e_assert_eq connected "$(in_a "$PY" "$H" connect 203.0.113.81 80)" "no route before moat"
e2e_assert_eq connected "$(in_b "$PY" "$H" connect 192.0.2.1 8082)" "no host service before moat"
wait_line "$E2E_WORK/hostsvc.log" accepted
svc_before=$(grep -c accepted "$E2E_WORK/hostsvc.log")
# ... and the bridge switches A's frames to B: every way below is open without moat-fw.
e2e_assert_eq connected "$(in_a "$PY" "$H" connect 192.0.2.3 8090)" "A cannot reach B before moat"
e2e_assert_eq connected "$(in_a "$PY" "$H" connect 2001:db8:77::3 8090)" "A cannot reach B by IPv6 before moat"
in_a "$PY" "$H" packet s0 "$BMAC" 192.0.2.2 192.0.2.3 9 pre-raw >/dev/null
in_a "$PY" "$H" frame s0 "$BMAC" 0x88b5 pre-frame >/dev/null
wait_line "$E2E_WORK/blog.log" "got 192.0.2.2 pre-raw"
wait_line "$E2E_WORK/bcap.log" "from $AMAC type 0x88b5"

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
# From here on nothing of A's may reach B's interface: the capture's lines after this barrier.
fw_barrier "$E2E_WORK/bcap.log" "$BMAC"
l2_mark=$FW_MARK
bsvc_before=$(grep -c accepted "$E2E_WORK/bsvc.log")

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
# (a copy the user can read: the checkout may be a 0700 directory)
install -m 0644 "$E2E_DIR/peers/fw_client.py" "$E2E_WORK/fw_client.py"
out=$(e2e_run setpriv --reuid "$E2E_MOAT_UID" --regid "$E2E_MOAT_UID" --clear-groups "$PY" \
	"$E2E_WORK/fw_client.py" --socket "$E2E_WORK/fw.sock" --client 192.0.2.2 192.0.2.1)
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

# --- between the two sandboxes: nothing is switched from A to B, whatever its kind -------------
# A forgets B's addresses, so it must ask again (ARP, neighbour discovery).
ip -n "$A" neigh flush dev s0
e2e_assert_contains "$(sbx "$A" connect 192.0.2.3 8090)" failed "A reached B by IPv4"
e2e_assert_contains "$(sbx "$A" connect 2001:db8:77::3 8090)" failed "A reached B by IPv6"
# With B's MAC address given (a permanent neighbour entry, a packet socket): unicast frames.
ip -n "$A" neigh replace 192.0.2.3 lladdr "$BMAC" dev s0 nud permanent
ip -n "$A" -6 neigh replace 2001:db8:77::3 lladdr "$BMAC" dev s0 nud permanent
sbx "$A" udp 192.0.2.2 192.0.2.3 9 l2-udp4 >/dev/null
sbx "$A" udp 2001:db8:77::2 2001:db8:77::3 9 l2-udp6 >/dev/null
e2e_assert_contains "$(sbx "$A" connect 192.0.2.3 8090)" failed "A reached B by IPv4 (B's MAC known)"
in_a "$PY" "$H" packet s0 "$BMAC" 192.0.2.2 192.0.2.3 9 l2-raw4 >/dev/null
in_a "$PY" "$H" packet s0 "$BMAC" 2001:db8:77::2 2001:db8:77::3 9 l2-raw6 >/dev/null
in_a "$PY" "$H" frame s0 "$BMAC" 0x88b5 l2-frame >/dev/null
in_a "$PY" "$H" frame s0 ff:ff:ff:ff:ff:ff 0x88b5 l2-bcast >/dev/null
fw_barrier "$E2E_WORK/bcap.log" "$BMAC" # sent last
e2e_assert_eq 0 "$(fw_from_since "$E2E_WORK/bcap.log" "$l2_mark")" \
	"frames from A reached B's interface: $(tail -n 5 "$E2E_WORK/bcap.log")"
e2e_assert_not_contains "$(cat "$E2E_WORK/blog.log")" l2- "a datagram from A reached B"
e2e_assert_eq "$bsvc_before" "$(grep -c accepted "$E2E_WORK/bsvc.log")" "B's service accepted A"
l2=$(e2e_run nft list chain bridge moat bridged | awk '/counter packets/ { print $(NF-3) }')
((l2 >= 6)) || e2e_fail "the bridge drops are not counted: $(e2e_run nft list table bridge moat)"
e2e_assert_contains "$(cat "$E2E_WORK/fw.log")" "sandbox bridges (or interfaces not there yet) br-x" \
	"moat-fw did not say it closes br-x"
# B still resolves and reaches its grant after all that (A did above).
e2e_assert_eq 203.0.113.81 "$(resolve "$B" 192.0.2.1 b.demo.test A)" "B: b.demo.test after the L2 probes"
e2e_assert_eq connected "$(sbx "$B" connect 203.0.113.81 80)" "B: its grant after the L2 probes"

stop_moatd moatd
e2e_stop fw
e2e_assert_contains "$(e2e_run "$FW" --remove)" "removed tables bridge moat and moat_guard" "--remove"
e2e_assert_eq "" "$(e2e_run nft list tables)" "tables left after --remove"
e2e_pass
