#!/usr/bin/env bash
# moat-fw's metrics endpoint (issue 14): moat-fw in the netns placement with --metrics on a
# loopback address of the namespace it starts in; a stand-in for moatd (peers/fw_client.py)
# sends grants. A scrape parses with python3-prometheus-client; the grant counters move by
# exactly the grants sent and their outcomes; each allow set's element count equals what
# `nft -j list set` holds; the output chain's final drop counter moves after a connect to an
# ungranted address; the ledger's entry count matches the live grants; build info is there.
# Without --metrics nothing listens.
source "$(dirname "$0")/lib.sh"
e2e_init fw_metrics

CLIENT="$E2E_DIR/peers/fw_client.py"
SOCK="$E2E_WORK/fw.sock"
STATE="$E2E_WORK/state"
PY=/usr/bin/python3 # Debian's, where python3-prometheus-client lives
PORT=9154

# A second namespace one veth away, so a connect from the sandbox has a route and meets the
# output chain (192.0.2.81 is never granted; nothing needs to listen there).
e2e_peer net
e2e_uplink "$E2E_NS" s0 "$E2E_PEER" n0 203.0.113.2/24 203.0.113.1/24 2001:db8:ff::2/64 \
	2001:db8:ff::1/64

cat >"$E2E_WORK/connect.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
s.settimeout(2)
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    print("connected")
except OSError as e:
    print("failed: %s" % e)
PY
# Every sample of a scrape as "name{k=v,...} value", labels sorted; fails on a parse error.
cat >"$E2E_WORK/samples.py" <<'PY'
import sys
from prometheus_client.parser import text_string_to_metric_families as parse
for fam in parse(sys.stdin.read()):
    for s in fam.samples:
        labels = ",".join("%s=%s" % kv for kv in sorted(s.labels.items()))
        print("%s{%s} %d" % (s.name, labels, s.value))
PY
# The number of elements of one set, read by nft's JSON output and Python's JSON parser.
cat >"$E2E_WORK/elems.py" <<'PY'
import json, sys
n = 0
for o in json.load(sys.stdin)["nftables"]:
    if "set" in o:
        n += len(o["set"].get("elem", []))
print(n)
PY

grant() { "$PY" "$CLIENT" --socket "$SOCK" "$@"; }
scrape() { e2e_run curl -sf --max-time 5 "http://127.0.0.1:$PORT/metrics"; }
samples() { scrape | "$PY" "$E2E_WORK/samples.py" || e2e_fail "scrape does not parse"; }
# value KEY: the sample KEY's value in the last snapshot ($snap), or "absent".
value() { awk -v k="$1" '$1 == k { print $2; f = 1 } END { if (!f) print "absent" }' <<<"$snap"; }
elems() { e2e_run nft -j list set inet moat "$1" | "$PY" "$E2E_WORK/elems.py"; }
# wait_value KEY WANT: poll the scrape (the table is re-read once a second) until KEY is WANT.
wait_value() {
	local i
	for ((i = 0; i < 50; i++)); do
		snap=$(samples)
		[[ "$(value "$1")" == "$2" ]] && return 0
		sleep 0.2
	done
	e2e_fail "$1 is $(value "$1"), wanted $2"
}

# shellcheck disable=SC2034 # read by start_fw (lib.sh)
FW_BASE=(--socket "$SOCK" --netns "$E2E_NS" --state "$STATE" --user nobody --moatd-user root
	--resolver 192.0.2.53 --min-lifetime 1 --max-lifetime 3600)

# --- off by default -------------------------------------------------------------------------
start_fw fw0
e2e_assert_eq "" "$(e2e_run ss -Htln "sport = :$PORT")" "something listens without --metrics"
e2e_stop fw0

# --- on: under the same privileges and filter as without ------------------------------------
start_fw fw --metrics "127.0.0.1:$PORT"
e2e_wait_port tcp 127.0.0.1 "$PORT"
st=$(cat "/proc/$(e2e_pid fw)/status")
e2e_assert_eq 2 "$(awk '/^Seccomp:/ { print $2 }' <<<"$st")" "moat-fw seccomp filter"
# Every thread, the HTTP server's too: unprivileged, only CAP_NET_ADMIN, filtered.
for t in /proc/"$(e2e_pid fw)"/task/*; do
	ts=$(cat "$t/status")
	e2e_assert_eq "$(id -u nobody)" "$(awk '/^Uid:/ { print $3 }' <<<"$ts")" "thread $t uid"
	e2e_assert_eq 0000000000001000 "$(awk '/^CapEff:/ { print $2 }' <<<"$ts")" "thread $t caps"
	e2e_assert_eq 2 "$(awk '/^Seccomp:/ { print $2 }' <<<"$ts")" "thread $t seccomp"
done
(($(ls "/proc/$(e2e_pid fw)/task" | wc -l) >= 2)) || e2e_fail "no HTTP server thread"

snap=$(samples)
for o in received ok denied failed; do
	e2e_assert_eq 0 "$(value "moatfw_grants_total{outcome=$o}")" "grants $o before any grant"
done
e2e_assert_contains "$snap" "moatfw_build_info{version=" "no build info"
e2e_assert_eq 0 "$(value 'moatfw_set_elements{set=allow4}')" "allow4 before any grant"
e2e_assert_eq 0 "$(value 'moatfw_ledger_entries{}')" "ledger entries before any grant"
e2e_assert_eq 404 "$(e2e_run curl -s -o /dev/null -w '%{http_code}' \
	"http://127.0.0.1:$PORT/other")" "a path other than /metrics"

# --- grants: three sent, two granted, one refused -------------------------------------------
e2e_assert_eq "seq=1 status=OK lifetime=300" \
	"$(grant --seq 1 --agent ci-42 --lifetime 300 192.0.2.80 2001:db8::80)" "grant 1"
e2e_assert_eq "seq=2 status=OK lifetime=300" \
	"$(grant --seq 2 --agent ci-42 --lifetime 300 192.0.2.82)" "grant 2"
e2e_assert_eq "seq=3 status=DENIED lifetime=0" \
	"$(grant --seq 3 --lifetime 300 192.0.2.81 169.254.169.254)" "metadata grant not refused"
wait_value 'moatfw_ledger_entries{}' 3
e2e_assert_eq 3 "$(value 'moatfw_grants_total{outcome=received}')" "grants received"
e2e_assert_eq 2 "$(value 'moatfw_grants_total{outcome=ok}')" "grants ok"
e2e_assert_eq 1 "$(value 'moatfw_grants_total{outcome=denied}')" "grants denied"
e2e_assert_eq 0 "$(value 'moatfw_grants_total{outcome=failed}')" "grants failed"
for set in allow4 allow6; do
	e2e_assert_eq "$(elems "$set")" "$(value "moatfw_set_elements{set=$set}")" "$set elements"
done
e2e_assert_eq 2 "$(elems allow4)" "allow4 in the kernel"
e2e_assert_eq 3 "$(($(elems allow4) + $(elems allow6)))" "ledger entries = allow elements"
(($(value 'moatfw_ledger_bytes{}') > 0)) || e2e_fail "ledger bytes not counted"

# --- drops: a connect to an ungranted address moves the output chain's final drop ----------
key='moatfw_dropped_packets_total{chain=output,reason=any}'
e2e_assert_contains "$snap" "$key" "no final drop counter of the output chain"
before=$(value "$key")
e2e_assert_contains "$(e2e_run "$PY" "$E2E_WORK/connect.py" 192.0.2.81 8080)" failed \
	"ungranted 192.0.2.81 reachable"
kernel=$(e2e_run nft list chain inet moat output | awk '/^\t\tcounter packets/ { print $3 }')
((kernel > before)) || e2e_fail "the kernel's counter did not move ($before -> $kernel)"
wait_value "$key" "$kernel"

e2e_stop fw
e2e_pass
