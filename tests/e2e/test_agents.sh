#!/usr/bin/env bash
# Config mode (issue 2): -c loads agents, listeners, upstreams and logging from YAML; each client
# range maps to its own agent with its own allowlist and deny form; --check reports bad files
# with file:line; SIGHUP with a bad policy keeps the running policy; --upstream-source is used;
# moatd reports its start-up time (the bound on it lives in tests/bench/run's load phase:
# a timed check here failed on a loaded machine under ASan).
source "$(dirname "$0")/lib.sh"
e2e_init agents

e2e_nsd 127.0.0.1 5300 "$E2E_ZONES/example.test.zone" "$E2E_ZONES/cdn.test.zone"
e2e_addr 127.0.0.9/32 # moatd's upstream source address

mkdir -p "$E2E_WORK/conf/allow"
printf 'www.example.test\n' >"$E2E_WORK/conf/allow/ci.txt"
printf '*.cdn.test\nmulti.example.test\n' >"$E2E_WORK/conf/allow/build.txt"
cat >"$E2E_WORK/conf/moatd.yaml" <<'Y'
listen: ["127.0.0.1:53"]
upstreams: ["127.0.0.1:5300"]
upstream_source: 127.0.0.9
upstream_timeout_ms: 500
log: {file: QUERYLOG}
agents:
  - name: ci-42
    clients: [127.0.0.0/8]
    allow: [allow/ci.txt]        # relative to this file
  - name: build-7
    clients: [127.0.0.2/32]      # more specific than ci-42's range: wins
    allow: [allow/build.txt]
    deny: refused
Y
sed -i "s|QUERYLOG|$E2E_WORK/query.jsonl|" "$E2E_WORK/conf/moatd.yaml"

# --- --check accepts the good config and names file:line for bad ones ---
out=$("$MOAT_BUILD/moatd" -c "$E2E_WORK/conf/moatd.yaml" --check)
e2e_assert_contains "$out" "configuration OK: 2 agent(s), 3 allow pattern(s)" "--check on a good config"
cp -r "$E2E_WORK/conf" "$E2E_WORK/bad"
printf 'www.example.test\nbad..name\n' >"$E2E_WORK/bad/allow/ci.txt"
st=0
out=$("$MOAT_BUILD/moatd" -c "$E2E_WORK/bad/moatd.yaml" --check 2>&1) || st=$?
((st != 0)) || e2e_fail "--check accepted a bad allowlist"
e2e_assert_contains "$out" "$E2E_WORK/bad/allow/ci.txt:2: bad pattern 'bad..name'" "allowlist error names file:line"
printf 'agents:\n  - name: x\n    clients: [10.0.0.1/8]\n' >"$E2E_WORK/bad/cidr.yaml"
st=0
out=$("$MOAT_BUILD/moatd" -c "$E2E_WORK/bad/cidr.yaml" --check 2>&1) || st=$?
((st != 0)) || e2e_fail "--check accepted a bad config"
e2e_assert_contains "$out" "cidr.yaml:3:" "config error names file:line"

# --- start, and report the start-up time ---
start_moatd moatd -c "$E2E_WORK/conf/moatd.yaml"
ready=$(sed -n 's/.*ready in \([0-9.]*\) ms.*/\1/p' "$E2E_WORK/moatd.log")
[[ -n "$ready" ]] || e2e_fail "moatd did not report its start-up time"
e2e_log "moatd ready in $ready ms"

# --- per-agent policy ---
e2e_upstream_reset
out=$(e2e_dig @127.0.0.1 -b 127.0.0.1 +short www.example.test A)
e2e_assert_eq 192.0.2.10 "$out" "ci-42 may resolve www"
out=$(e2e_dig @127.0.0.1 -b 127.0.0.1 multi.example.test A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "ci-42 may not resolve multi"
e2e_assert_contains "$out" "not on allowlist of agent ci-42" "EDE names agent ci-42"
out=$(e2e_dig @127.0.0.1 -b 127.0.0.2 +short edge.cdn.test A)
e2e_assert_eq 198.51.100.7 "$out" "build-7 may resolve *.cdn.test"
out=$(e2e_dig @127.0.0.1 -b 127.0.0.2 www.example.test A)
e2e_assert_eq REFUSED "$(status_of "$out")" "build-7 denies with REFUSED"
e2e_assert_contains "$out" "not on allowlist of agent build-7" "EDE names agent build-7"
grep -q '"client":"127.0.0.2","transport":"udp","agent":"build-7","qname":"www.example.test."' \
	"$E2E_WORK/query.jsonl" || e2e_fail "query log lacks the agent of a deny"
# --- upstream queries come from --upstream-source ---
srcs=$(e2e_upstream_queries --src | awk '{print $4}' | sort -u)
e2e_assert_eq 127.0.0.9 "$srcs" "upstream queries' source address"

# --- SIGHUP: a bad file keeps the running policy; a good one takes effect ---
printf 'www.example.test\nbad..name\n' >"$E2E_WORK/conf/allow/ci.txt"
kill -HUP "$(e2e_pid moatd)"
e2e_poll_line "$E2E_WORK/moatd.log" "reload failed" 5 || true
e2e_assert_contains "$(cat "$E2E_WORK/moatd.log")" "reload failed, running policy kept: $E2E_WORK/conf/allow/ci.txt:2:" "bad reload reported"
out=$(e2e_dig @127.0.0.1 -b 127.0.0.1 +short www.example.test A)
e2e_assert_eq 192.0.2.10 "$out" "running policy kept after a bad reload"
printf 'multi.example.test\n' >"$E2E_WORK/conf/allow/ci.txt"
kill -HUP "$(e2e_pid moatd)"
e2e_poll_line "$E2E_WORK/moatd.log" "policy reloaded" 5 || true
out=$(e2e_dig @127.0.0.1 -b 127.0.0.1 multi.example.test A)
e2e_assert_eq NOERROR "$(status_of "$out")" "new policy after a good reload"
out=$(e2e_dig @127.0.0.1 -b 127.0.0.1 www.example.test A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "old rule gone after a good reload"

e2e_stop moatd
e2e_assert_eq 0 "$E2E_LAST_STATUS" "clean stop"
e2e_pass
