# tests/bench/fw_lib.sh -- what the firewall benchmarks built on the e2e harness share, sourced
# at their top level (fw_guard.sh, fw_bridge.sh; bash, set -e) with the script's arguments: sets
# MOAT_SRC and MOAT_BUILD (the first argument, else build/), sources tests/e2e/lib.sh (at the
# top level: its state must be global), defaults ROUNDS and SECS; fwb_median "V V ...": the
# median of the numbers. The script calls e2e_init itself.
export MOAT_SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export MOAT_BUILD=${1:-$MOAT_SRC/build}
source "$MOAT_SRC/tests/e2e/lib.sh"
ROUNDS=${ROUNDS:-3}
SECS=${SECS:-3}
fwb_median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{ v[NR] = $1 } END {
	print NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
