#!/usr/bin/env bash
# Operating moatd with moat-fw (issue 14): `moatctl grants` decodes moat-fw's ledger (through
# ledger.c) and lists what was granted, per agent; the grant counters and latency histogram
# move (moatctl stats); the query log v2 line carries the grant's outcome and lifetime, and
# "failed" once moat-fw is gone. netns placement in the test's own namespace; the control
# socket is a Unix socket, so moat-fw's output rules do not stand in its way.
source "$(dirname "$0")/lib.sh"
e2e_init operable_fw
# moatd connects to moat-fw only as the user it drops to: both daemons run with the users the
# install makes (moat, moat-fw; the host's files untouched) and their defaults, which agree.
e2e_users

PY=/usr/bin/python3
CTL="$MOAT_BUILD/moatctl"
e2e_addr 192.0.2.53/32 # NSD
e2e_addr 192.0.2.2/32  # moatd
e2e_nsd 192.0.2.53 53 "$E2E_ZONES/example.test.zone"
printf '*.example.test\n' >"$E2E_WORK/allow.txt"
start_fw fw --socket "$E2E_WORK/fw.sock" --netns "$E2E_NS" \
	--state "$E2E_WORK/fwstate" --resolver 192.0.2.2 --resolver 192.0.2.53
[[ -S "$E2E_WORK/fw.sock" ]] || e2e_fail "moat-fw did not create its socket"
start_moatd moatd --listen 192.0.2.2:53 --upstream 192.0.2.53:53 \
	--allow "$E2E_WORK/allow.txt" --firewall "$E2E_WORK/fw.sock" --log "$E2E_WORK/q.jsonl" \
	--control "$E2E_WORK/ctl.sock"

out=$(e2e_run "$CTL" --state "$E2E_WORK/fwstate" --json grants)
e2e_assert_contains "$out" '"grants":[],"count":0' "no grant before any answer"
e2e_assert_eq 192.0.2.10 "$(e2e_dig @192.0.2.2 +short www.example.test A)" "granted answer"
out=$(e2e_dig @192.0.2.2 +short multi.example.test A | sort | tr '\n' ' ')
e2e_assert_eq "192.0.2.11 192.0.2.12 192.0.2.13 192.0.2.14 " "$out" "granted answer (4 addresses)"

# --- moatctl grants: the ledger, decoded ---
out=$(e2e_run "$CTL" --state "$E2E_WORK/fwstate" --json grants)
got=$(e2e_run "$PY" -c 'import json,sys
d = json.loads(sys.argv[1])
print(d["count"], " ".join(sorted(g["destination"] for g in d["grants"])),
      sorted(set(g["agent"] for g in d["grants"])), all(0 < g["remaining_s"] <= 3700 for g in d["grants"]),
      all(g["sandbox"] is None for g in d["grants"]),
      sorted(set((g.get("proto"), g.get("port")) for g in d["grants"])))' "$out")
e2e_assert_eq "5 192.0.2.10 192.0.2.11 192.0.2.12 192.0.2.13 192.0.2.14 ['default'] True True [(0, 0)]" "$got" \
	"moatctl grants lists every granted address with its agent and lifetime"
out=$(e2e_run "$CTL" --state "$E2E_WORK/fwstate" --json grants nobody)
e2e_assert_contains "$out" '"count":0' "grants AGENT filters by agent"
if e2e_run "$CTL" --state "$E2E_WORK/nothere" grants 2>/dev/null; then
	e2e_fail "grants on a missing ledger succeeded"
fi
[[ -e "$E2E_WORK/nothere" ]] && e2e_fail "moatctl grants created a ledger directory"

# --- the grant counters ---
out=$(e2e_run "$CTL" -s "$E2E_WORK/ctl.sock" --json stats)
e2e_assert_contains "$out" '"grants":{"sent":2,"acked":2,"failed":0}' "grant counters"
e2e_assert_contains "$out" '"grant_latency":{"count":2,' "grant latency histogram"

# --- the log: the grant's outcome and lifetime ---
line=$(grep -m1 '"qname":"www.example.test."' "$E2E_WORK/q.jsonl")
e2e_assert_contains "$line" '"answer":["192.0.2.10"],"grant":"OK","grant_lifetime":' "log v2: grant ok"
life=$(sed -n 's/.*"grant_lifetime":\([0-9]*\)}.*/\1/p' <<<"$line")
((life >= 30 && life <= 3600)) || e2e_fail "grant lifetime $life out of range"

# --- moat-fw gone: the grant fails, the log says so ---
e2e_stop fw
out=$(e2e_dig @192.0.2.2 mail.example.test A)
e2e_assert_contains "$out" "status: SERVFAIL" "fail closed without moat-fw"
line=$(grep -m1 '"qname":"mail.example.test."' "$E2E_WORK/q.jsonl" || true)
for ((i = 0; i < 50; i++)); do
	[[ -n "$line" ]] && break
	sleep 0.1
	line=$(grep -m1 '"qname":"mail.example.test."' "$E2E_WORK/q.jsonl" || true)
done
e2e_assert_contains "$line" '"answer":null,"grant":"FAILED","grant_lifetime":null' "log v2: grant failed"
out=$(e2e_run "$CTL" -s "$E2E_WORK/ctl.sock" --json stats)
e2e_assert_contains "$out" '"grants":{"sent":3,"acked":2,"failed":1}' "failed grant counted"
e2e_pass
