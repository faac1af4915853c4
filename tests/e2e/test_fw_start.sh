#!/usr/bin/env bash
# moat-fw refuses to start on a configuration that would leave the sandbox open, break the host
# or drop DNS to moatd without saying so (issue 11): no --resolver, a resolver or sandbox range
# in the always-deny ranges, a sandbox range that is the whole space or covers an address the
# host has on another interface (issue 22: with the flags that would work), a range with no
# route but the default one. Each exits 1 with a message naming the option, and writes no
# table. A good one prints the interface it found for a range, and a range holding the host's
# own address on that interface (a bridge's gateway) starts, that address a forged source there.
# Run from the namespace's host side (forward placement) and with --netns given as a path.
source "$(dirname "$0")/lib.sh"
e2e_init fw_start

FW="$MOAT_BUILD/moat-fw"
e2e_peer sbx
e2e_veth "$E2E_NS" h0 "$E2E_PEER" s0
e2e_addr_dev "$E2E_NS" h0 192.0.2.1/28
e2e_addr_dev "$E2E_NS" h0 2001:db8:1::1/64
e2e_run ip route add default via 192.0.2.14 2>/dev/null || e2e_run ip route add default dev h0
# Another interface of the host, with addresses inside ranges named on h0 below.
e2e_run ip link add d0 type bridge
e2e_addr_dev "$E2E_NS" d0 192.0.2.17/28
e2e_run ip -6 addr add 2001:db8:2::1/64 dev d0 nodad
e2e_run ip link set d0 up

# refuse ARGS... EXPECTED: moat-fw exits 1, says EXPECTED, and no table exists afterwards.
refuse() {
	local want=${*: -1} st=0 out
	out=$(e2e_run timeout 10 "$FW" --socket "$E2E_WORK/fw.sock" --state "$E2E_WORK/st" \
		--user nobody "${@:1:$#-1}" 2>&1) || st=$?
	e2e_assert_eq 1 "$st" "moat-fw ${*:1:$#-1}: exit status (output: $out)"
	e2e_assert_contains "$out" "refusing to start: $want" "moat-fw ${*:1:$#-1}"
	e2e_assert_eq "" "$(e2e_run nft list tables)" "a refused start left a table"
}
refuse --forward --sandbox 192.0.2.2/32 "no --resolver"
refuse --forward --sandbox 192.0.2.2/32 --resolver 169.254.169.254 \
	"--resolver 169.254.169.254 lies in the always-deny ranges"
refuse --forward --sandbox 192.0.2.2/32 --resolver 127.0.0.53 \
	"--resolver 127.0.0.53 lies in the always-deny ranges"
refuse --forward --sandbox 0.0.0.0/0@h0 --resolver 192.0.2.1 \
	"--sandbox 0.0.0.0/0 is the whole address space: name the sandboxes' own range, such as --sandbox 192.0.2.0/28@h0"
refuse --forward --sandbox ::/0 --resolver 192.0.2.1 "--sandbox ::/0 is the whole address space"
refuse --forward --sandbox 169.254.0.0/16@h0 --resolver 192.0.2.1 \
	"--sandbox 169.254.0.0/16 lies in the always-deny ranges"
refuse --forward --sandbox 192.0.2.16/28@h0 --resolver 192.0.2.1 \
	"--sandbox 192.0.2.16/28@h0 covers 192.0.2.17/32, an address of this host (on d0, not h0): its rules would judge the host's own traffic; if the sandboxes are behind d0, name it: --sandbox 192.0.2.16/28@d0; else leave the address out: --sandbox 192.0.2.24/29@h0"
refuse --forward --sandbox 2001:db8:2::/64@h0 --resolver 192.0.2.1 \
	"--sandbox 2001:db8:2::/64@h0 covers 2001:db8:2::1/128, an address of this host (on d0, not h0)"
refuse --forward --sandbox 203.0.113.0/24 --resolver 192.0.2.1 \
	"--sandbox 203.0.113.0/24: no route to it but the default one"
refuse --netns "/run/netns/$E2E_PEER" "no --resolver"

# A good start names the interface it found, and --netns takes a path. The ranges hold the host's
# own addresses on h0 (its gateway): those are forged sources there, nothing else of the host.
e2e_bg fw "$FW" --socket "$E2E_WORK/fw.sock" --state "$E2E_WORK/st" --user nobody \
	--forward --sandbox 192.0.2.0/28 --sandbox 2001:db8:1::/64 --resolver 192.0.2.1
e2e_wait_log fw "listening on"
out=$(cat "$E2E_WORK/fw.log")
e2e_assert_contains "$out" "--sandbox 192.0.2.0/28 is on interface h0 (from the routing table)" "v4 iface"
e2e_assert_contains "$out" "--sandbox 2001:db8:1::/64 is on interface h0" "v6 iface"
e2e_assert_contains "$(e2e_run nft list chain inet moat forward)" 'iifname "h0" jump sandbox' "rules"
e2e_assert_contains "$(e2e_run nft list set inet moat hostsrc4)" '"h0" . 192.0.2.1 }' "v4 gateway"
e2e_assert_contains "$(e2e_run nft list set inet moat hostsrc6)" '"h0" . 2001:db8:1::1 }' "v6 gateway"
e2e_stop fw
e2e_assert_contains "$(e2e_run "$FW" --remove)" "removed table inet moat from this namespace" "--remove"
e2e_bg fw2 "$FW" --socket "$E2E_WORK/fw2.sock" --state "$E2E_WORK/st2" --user nobody \
	--netns "/run/netns/$E2E_PEER" --resolver 192.0.2.1
e2e_wait_log fw2 "listening on"
e2e_assert_contains "$(cat "$E2E_WORK/fw2.log")" "table inet moat created (netns placement" "--netns PATH"
e2e_assert_contains "$(ip netns exec "$E2E_PEER" nft list tables)" "table inet moat" "no table in the netns"
e2e_stop fw2
e2e_assert_contains "$("$FW" --remove --netns "/run/netns/$E2E_PEER")" "removed table inet moat" \
	"--remove --netns PATH"
e2e_assert_eq "" "$(ip netns exec "$E2E_PEER" nft list tables)" "table left in the netns"
e2e_pass
