#!/usr/bin/env bash
# What the forward placement's guard costs (issue 22): small UDP datagrams from a sandbox through
# the moat host to an echo responder and back (bench-udp-blast against bench-floor), with no
# table active, with table inet moat alone (its accepts set the mark), and with table inet
# moat_guard as well. The tables are switched with nft's dormant flag after moat-fw stopped, in
# interleaved rounds, so all three see the same load. Run by hand as root:
# tests/bench/fw_guard.sh [BUILD_DIR]. Prints figures, asserts nothing.
set -euo pipefail
export MOAT_SRC=$(cd "$(dirname "$0")/../.." && pwd)
export MOAT_BUILD=${1:-$MOAT_SRC/build}
source "$MOAT_SRC/tests/e2e/lib.sh"
e2e_init fw_guard_bench
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-3}
source "$MOAT_SRC/tests/e2e/fw_routed.sh"
fw_routed 203.0.113.80
e2e_bg floor ip netns exec "$NET" "$MOAT_BUILD/bench-floor" 203.0.113.80 53
E2E_NS=$NET e2e_wait_port udp 203.0.113.80 53
e2e_bg fw ip netns exec "$HOST" "$MOAT_BUILD/moat-fw" --socket "$E2E_WORK/fw.sock" --forward \
	--state "$E2E_WORK/state" --sandbox 192.0.2.2/32 --resolver 192.0.2.1 --moatd-user root \
	--user nobody --min-lifetime 3600
e2e_wait_log fw 'listening on'
python3 "$E2E_DIR/peers/fw_client.py" --socket "$E2E_WORK/fw.sock" --seq 1 --client 192.0.2.2 203.0.113.80 >/dev/null
e2e_stop fw # the tables stay, unwatched: nft may switch them now
# tables STATE_MOAT STATE_GUARD: "on" or "dormant" each ("add table" without flags wakes one).
tables() {
	local m="add table inet moat" g="add table inet moat_guard"
	[[ $1 == dormant ]] && m+=" { flags dormant; }"
	[[ $2 == dormant ]] && g+=" { flags dormant; }"
	ip netns exec "$HOST" nft "$m; $g"
}
blast() { e2e_run "$MOAT_BUILD/bench-udp-blast" 203.0.113.80 53 "$SECS" | sed 's/.*pps=//'; }
declare -A all=([none]="" [moat]="" [guard]="")
echo "# fw_guard.sh, $(git -C "$MOAT_SRC" describe --always --dirty), $(date -u +%FT%TZ)"
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); $ROUNDS rounds of $SECS s each;" \
	"32-byte datagrams, echoes per second"
for ((r = 1; r <= ROUNDS; r++)); do
	line="round $r:"
	for c in none moat guard; do
		case $c in
		none) tables dormant dormant ;;
		moat) tables on dormant ;;
		guard) tables on on ;;
		esac
		pps=$(blast)
		all[$c]+=" $pps"
		line+=" $c=$pps"
	done
	echo "$line"
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{ v[NR] = $1 } END {
	print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
n=$(median "${all[none]}") m=$(median "${all[moat]}") g=$(median "${all[guard]}")
awk -v n="$n" -v m="$m" -v g="$g" 'BEGIN { printf "medians: none=%d moat=%d guard=%d; " \
	"moat/none=%.3f guard/moat=%.3f guard/none=%.3f\n", n, m, g, m / n, g / m, g / n }'
# The table stays dormant-free and is removed: nothing of the run is left.
tables on on
ip netns exec "$HOST" "$MOAT_BUILD/moat-fw" --remove >/dev/null
e2e_pass >/dev/null
