# fw_bridged.sh: the Docker-style bridge of moat-fw's bridge tests, sourced after lib.sh and
# e2e_init. fw_bridged: the host ($HOSTNS = $E2E_NS) holds bridge br-x with the gateway inside
# the sandboxes' subnet, as a container engine makes it; two sandboxes hang off it on veth ports
# and route via the gateway; "net" is routed behind the host:
#
#   sandbox $A 192.0.2.2, 2001:db8:77::2 -- va \
#                                               br-x 192.0.2.1/24, 2001:db8:77::1/64   host
#   sandbox $B 192.0.2.3, 2001:db8:77::3 -- vb /
#                                         h1 198.51.100.1 ---- n0 $NET: 203.0.113.80, .81,
#                                                                  2001:db8:3::80 (loopback)
# Each sandbox's only link is its port (checked); forwarding is on; $AMAC and $BMAC are the
# sandboxes' MAC addresses. Also:
#   fw_bridge_port SBX HOSTIF BRIDGE ADDR... : SBX on a new veth port HOSTIF of BRIDGE, its end
#                                              s0 with the addresses (CIDRs)
#   fw_links NS: NS's links, sorted, on one line ("lo s0 ")
#   fw_mac NS IF: the MAC address of IF in NS
#   fw_other_bridge: another bridge of the host, br-o, that is no sandbox's, with $C
#                    198.51.100.65/28 and $D 198.51.100.66/28 on its ports vc and vd
#   fw_barrier CAP MAC: a frame from the host to MAC by br-x (the bridge device's own: not
#                       switched between ports, so it passes), then wait (bounded) until the
#                       capture log CAP (hostile.py capture) shows it; FW_MARK is then the line
#                       number of that "barrier" line in CAP
#   fw_from_since CAP MARK: the "from" lines of CAP after line MARK, up to its last barrier
fw_bridge_port() {
	local ns=$1 hif=$2 br=$3 a
	shift 3
	e2e_veth "$ns" s0 "$HOSTNS" "$hif"
	ip -n "$HOSTNS" link set "$hif" master "$br"
	for a in "$@"; do e2e_addr_dev "$ns" s0 "$a"; done
}
fw_links() { ip -n "$1" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort | tr '\n' ' '; }
fw_mac() { ip -n "$1" -o link show "$2" | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2; }
fw__barriers() { (($(grep -c '^barrier' "$1" || true) >= $2)); }
fw_barrier() {
	local k
	k=$(($(grep -c '^barrier' "$1" || true) + 1))
	ip netns exec "$HOSTNS" "$E2E_PY" "$E2E_DIR/peers/hostile.py" frame br-x "$2" 0x88b5 l2-barrier >/dev/null
	e2e_poll 5 fw__barriers "$1" "$k" || e2e_fail "the host's barrier frame never reached $1"
	FW_MARK=$(awk -v k="$k" '/^barrier/ && ++n == k { print NR; exit }' "$1")
}
fw_from_since() {
	awk -v m="$2" 'NR > m && /^from/ { n++ } NR > m && /^barrier/ { last = n } END { print last + 0 }' "$1"
}

fw_bridged() {
	HOSTNS=$E2E_NS
	e2e_peer sbxa
	A=$E2E_PEER
	e2e_peer sbxb
	B=$E2E_PEER
	e2e_peer net
	NET=$E2E_PEER
	local ns a
	for ns in "$HOSTNS" "$A" "$B" "$NET"; do
		ip netns exec "$ns" sysctl -qw net.ipv6.conf.default.accept_dad=0 net.ipv6.conf.all.accept_dad=0
	done
	# br_netfilter (built into some kernels, this test VM's among them) would hand bridged IP
	# to the inet hooks; moat must not rely on it, so it is off here: what stops a frame
	# between two ports below is table bridge moat alone.
	local k
	for k in iptables ip6tables arptables; do
		if ip netns exec "$HOSTNS" test -e "/proc/sys/net/bridge/bridge-nf-call-$k"; then
			ip netns exec "$HOSTNS" sysctl -qw "net.bridge.bridge-nf-call-$k=0"
		fi
	done
	ip -n "$HOSTNS" link add br-x type bridge
	ip -n "$HOSTNS" link set br-x up
	e2e_addr_dev "$HOSTNS" br-x 192.0.2.1/24
	e2e_addr_dev "$HOSTNS" br-x 2001:db8:77::1/64
	fw_bridge_port "$A" va br-x 192.0.2.2/24 2001:db8:77::2/64
	fw_bridge_port "$B" vb br-x 192.0.2.3/24 2001:db8:77::3/64
	for ns in "$A" "$B"; do
		ip -n "$ns" route add default via 192.0.2.1
		ip -n "$ns" -6 route add default via 2001:db8:77::1
	done
	e2e_veth "$HOSTNS" h1 "$NET" n0
	e2e_addr_dev "$HOSTNS" h1 198.51.100.1/28
	e2e_addr_dev "$HOSTNS" h1 2001:db8:2::1/64
	e2e_addr_dev "$NET" n0 198.51.100.2/28
	e2e_addr_dev "$NET" n0 2001:db8:2::2/64
	for a in 203.0.113.80/32 203.0.113.81/32 2001:db8:3::80/128; do e2e_addr_dev "$NET" lo "$a"; done
	ip -n "$HOSTNS" route add 203.0.113.0/24 via 198.51.100.2
	ip -n "$HOSTNS" -6 route add 2001:db8:3::/64 via 2001:db8:2::2
	ip -n "$NET" route add 192.0.2.0/24 via 198.51.100.1
	ip -n "$NET" -6 route add 2001:db8:77::/64 via 2001:db8:2::1
	ip netns exec "$HOSTNS" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
	e2e_assert_eq "lo s0 " "$(fw_links "$A")" "sandbox A must have one link, to the bridge"
	e2e_assert_eq "lo s0 " "$(fw_links "$B")" "sandbox B must have one link, to the bridge"
	AMAC=$(fw_mac "$A" s0)
	BMAC=$(fw_mac "$B" s0)
}

fw_other_bridge() {
	ip -n "$HOSTNS" link add br-o type bridge
	ip -n "$HOSTNS" link set br-o up
	e2e_peer sbxc
	C=$E2E_PEER
	e2e_peer sbxd
	D=$E2E_PEER
	fw_bridge_port "$C" vc br-o 198.51.100.65/28
	fw_bridge_port "$D" vd br-o 198.51.100.66/28
}
