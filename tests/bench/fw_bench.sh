#!/usr/bin/env bash
# What the firewall step costs (issues 4, 11): resolve latency (p50/p99) of fresh names through
# moatd without and with moat-fw (netns placement; also with a port-scoped allowlist), answers per
# second under a burst, and moat-fw's own grants per second (N grants written to its socket at
# once by peers/fw_client.py). Run by hand as root: tests/bench/fw_bench.sh [BUILD_DIR]. Not a
# timed test: it prints figures, asserts nothing.
set -euo pipefail
export MOAT_SRC=$(cd "$(dirname "$0")/../.." && pwd)
export MOAT_BUILD=${1:-$MOAT_SRC/build}
source "$MOAT_SRC/tests/e2e/lib.sh"
e2e_init fw_bench
N=${N:-2000}
PY=python3
[[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3
{
	printf '$ORIGIN race.test.\n$TTL 120\n@ IN SOA ns1 hostmaster 1 3600 600 86400 60\n  IN NS ns1\nns1 IN A 192.0.2.53\n'
	for ((i = 1; i <= 8 * N + 10; i++)); do printf 'r%d IN AAAA 2001:db8:5::%x\n' "$i" "$i"; done
} >"$E2E_WORK/race.test.zone"
e2e_addr 192.0.2.53/32
e2e_addr 192.0.2.2/32
e2e_addr 192.0.2.3/32 # a moatd without moat-fw beside the one with it (the interleaved run)
e2e_nsd 192.0.2.53 53 "$E2E_WORK/race.test.zone"
e2e_run ip -6 route add local 2001:db8:5::/64 dev lo
e2e_bg listen "$PY" -c 'import socket,time
s=socket.socket(socket.AF_INET6); s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)
s.bind(("::",80)); s.listen(512); s.settimeout(0.2); end=time.time()+600
while time.time()<end:
    try: s.accept()[0].close()
    except socket.timeout: pass'
e2e_wait_port tcp '*' 80
printf '*.race.test\n' >"$E2E_WORK/allow.txt"
printf '*.race.test tcp/80\n' >"$E2E_WORK/allow-ports.txt"
moatd() { # moatd NAME ALLOWLIST [--firewall SOCK]
	local n=$1 allow=$2
	shift 2
	local listen=192.0.2.2
	[[ "$n" == beside ]] && listen=192.0.2.3
	e2e_bg "$n" "$MOAT_BUILD/moatd" --listen "$listen:53" --upstream 192.0.2.53:53 \
		--allow "$allow" --log /dev/null --budget 0 "$@" # N fresh names (issue 26)
	e2e_wait_port udp "$listen" 53
}
moatd plain "$E2E_WORK/allow.txt"
plain=$(e2e_run "$PY" "$E2E_DIR/peers/race.py" 192.0.2.2 "$N" 80 1 | head -1)
burst_plain=$(e2e_run "$PY" "$E2E_DIR/peers/grant_burst.py" 192.0.2.2 "$N" $((N + 1)) 64)
e2e_stop plain
e2e_bg fw "$MOAT_BUILD/moat-fw" --socket "$E2E_WORK/fw.sock" --netns "$E2E_NS" \
	--state "$E2E_WORK/fwstate" --resolver 192.0.2.2 --resolver 192.0.2.3 --resolver 192.0.2.53
for ((i = 0; i < 50; i++)); do [[ -S "$E2E_WORK/fw.sock" ]] && break; sleep 0.1; done
moatd withfw "$E2E_WORK/allow.txt" --firewall "$E2E_WORK/fw.sock"
# Interleaved: each round asks the moatd without moat-fw (192.0.2.3) a fresh name, then the one
# with it, so both series see the same load on this shared machine.
moatd beside "$E2E_WORK/allow.txt"
ab=$(e2e_run "$PY" "$E2E_DIR/peers/race.py" 192.0.2.2 "$N" 80 $((6 * N + 1)) 192.0.2.3)
e2e_stop beside
fw=$(e2e_run "$PY" "$E2E_DIR/peers/race.py" 192.0.2.2 "$N" 80 $((2 * N + 1)) | head -1)
burst_fw=$(e2e_run "$PY" "$E2E_DIR/peers/grant_burst.py" 192.0.2.2 "$N" $((3 * N + 1)) 64)
e2e_stop withfw
moatd ports "$E2E_WORK/allow-ports.txt" --firewall "$E2E_WORK/fw.sock"
fwp=$(e2e_run "$PY" "$E2E_DIR/peers/race.py" 192.0.2.2 "$N" 80 $((4 * N + 1)) | head -1)
burst_fwp=$(e2e_run "$PY" "$E2E_DIR/peers/grant_burst.py" 192.0.2.2 "$N" $((5 * N + 1)) 64)
# moat-fw alone: N grants (one address each, every port) written at once, then every ACK read.
direct=$("$PY" "$E2E_DIR/peers/fw_client.py" --socket "$E2E_WORK/fw.sock" --count "$N" --quiet \
	--lifetime 300 --seq 1000000 2001:db8:6::1)
direct_ms=${direct##*ms=}
cat <<T
| moatd, fresh names (each forwarded) | resolve-then-connect, one at a time | burst, 64 outstanding |
|---|---|---|
| without moat-fw | $plain | $burst_plain |
| with moat-fw | $fw | $burst_fw |
| with moat-fw, \`*.race.test tcp/80\` | $fwp | $burst_fwp |
| interleaved, without moat-fw | $(tail -1 <<<"$ab") | |
| interleaved, with moat-fw | $(head -1 <<<"$ab") | |

moat-fw alone, $N grants at once: $direct ($(awk -v n="$N" -v ms="$direct_ms" 'BEGIN { printf "%.0f", n / ms * 1000 }') grants/s)
T
grep -c "moat-fw: batch" "$E2E_WORK/fw.log" | sed 's/^/moat-fw batches (nft transactions): /'
e2e_pass
