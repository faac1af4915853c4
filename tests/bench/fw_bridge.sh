#!/usr/bin/env bash
# What the bridge tables cost (issue 22, layer 2): 32-byte UDP datagrams to an echo responder and
# back (bench-udp-blast against bench-floor) on the two paths bridge moat and moat_guard may be on:
#   routed: from sandbox A on a port of the sandbox bridge br-x, through the host (inet moat,
#           A's grant) to "net" (fw_bridged.sh's topology): frames to and from the bridge device
#           never pass the bridge forward hook;
#   switched: between C and D, two ports of br-o, another bridge of the host: every frame passes
#           both bridge tables' forward chains (and, without meta ibrname, their port sets).
# Each path with the bridge tables dormant and active (nft's dormant flag, moat-fw stopped), in
# interleaved rounds, so both see the same load. Run by hand as root:
# tests/bench/fw_bridge.sh [BUILD_DIR]. Prints figures, asserts nothing.
set -euo pipefail
source "$(dirname "$0")/fw_lib.sh"
e2e_init fw_bridge_bench
source "$MOAT_SRC/tests/e2e/fw_bridged.sh"
fw_bridged
fw_other_bridge
e2e_bg floor ip netns exec "$NET" "$MOAT_BUILD/bench-floor" 203.0.113.80 53
e2e_bg floor2 ip netns exec "$D" "$MOAT_BUILD/bench-floor" 198.51.100.66 53
E2E_NS=$NET e2e_wait_port udp 203.0.113.80 53
E2E_NS=$D e2e_wait_port udp 198.51.100.66 53
e2e_bg fw "$MOAT_BUILD/moat-fw" --socket "$E2E_WORK/fw.sock" --forward --state "$E2E_WORK/state" \
	--sandbox 192.0.2.0/24@br-x --resolver 192.0.2.1 --moatd-user root --user nobody \
	--min-lifetime 3600
e2e_wait_log fw 'listening on'
python3 "$E2E_DIR/peers/fw_client.py" --socket "$E2E_WORK/fw.sock" --seq 1 --client 192.0.2.2 203.0.113.80 >/dev/null
mode=$(grep -o 'matched by bridge name\|this kernel has no meta ibrname' "$E2E_WORK/fw.log" | head -n 1)
e2e_stop fw # the tables stay, unwatched: nft may switch them now
# bridge on|dormant: both bridge tables ("add table" without flags wakes one).
bridge() {
	local f=""
	[[ $1 == dormant ]] && f=" { flags dormant; }"
	e2e_run nft "add table bridge moat$f; add table bridge moat_guard$f"
}
blast() { ip netns exec "$1" "$MOAT_BUILD/bench-udp-blast" "$2" 53 "$SECS" | sed 's/.*pps=//'; }
declare -A all=()
echo "# fw_bridge.sh, $(git -C "$MOAT_SRC" describe --always --dirty), $(date -u +%FT%TZ)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds of $SECS s each;" \
	"32-byte datagrams, echoes per second; bridge tables: $mode"
for ((r = 1; r <= ROUNDS; r++)); do
	line="round $r:"
	for c in routed-off routed-on switched-off switched-on; do
		bridge "$([[ $c == *-on ]] && echo on || echo dormant)"
		if [[ $c == routed-* ]]; then pps=$(blast "$A" 203.0.113.80); else pps=$(blast "$C" 198.51.100.66); fi
		all[$c]+=" $pps"
		line+=" $c=$pps"
	done
	echo "$line"
done
ro=$(fwb_median "${all[routed-off]}") rn=$(fwb_median "${all[routed-on]}")
so=$(fwb_median "${all[switched-off]}") sn=$(fwb_median "${all[switched-on]}")
awk -v ro="$ro" -v rn="$rn" -v so="$so" -v sn="$sn" 'BEGIN { printf "medians: routed " \
	"off=%d on=%d (on/off %.3f); switched off=%d on=%d (on/off %.3f)\n", ro, rn, rn / ro, so, sn,
	sn / so }'
bridge on
e2e_run "$MOAT_BUILD/moat-fw" --remove >/dev/null
e2e_pass >/dev/null
