# fw_routed.sh: the routed topology of moat-fw's forward-placement tests and benchmarks, sourced
# after lib.sh and e2e_init. fw_routed ADDR...: three namespaces linked to nothing else,
#   sandbox ($SBX = $E2E_NS) 192.0.2.2/28 s0 -- h0 192.0.2.1/28 host ($HOST) h1 198.51.100.1/28
#   -- n0 198.51.100.2/28 "net" ($NET), with each ADDR (documentation /32s) on net's loopback;
# the sandbox routes via the host, the host forwards 203.0.113.0/24 to net, net routes back.
fw_routed() {
	SBX=$E2E_NS
	e2e_peer host
	HOST=$E2E_PEER
	e2e_peer net
	NET=$E2E_PEER
	e2e_veth "$SBX" s0 "$HOST" h0
	e2e_veth "$HOST" h1 "$NET" n0
	e2e_addr_dev "$SBX" s0 192.0.2.2/28
	e2e_addr_dev "$HOST" h0 192.0.2.1/28
	e2e_addr_dev "$HOST" h1 198.51.100.1/28
	e2e_addr_dev "$NET" n0 198.51.100.2/28
	local a
	for a in "$@"; do e2e_addr_dev "$NET" lo "$a/32"; done
	e2e_run ip route add default via 192.0.2.1
	ip -n "$HOST" route add 203.0.113.0/24 via 198.51.100.2
	ip -n "$NET" route add 192.0.2.0/28 via 198.51.100.1
	ip netns exec "$HOST" sysctl -qw net.ipv4.ip_forward=1
}
