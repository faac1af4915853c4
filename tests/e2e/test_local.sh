#!/usr/bin/env bash
# Local answers (issue 15): local_data records (A, AAAA, CNAME, TXT) and a hosts(5) file are
# answered by moatd without any upstream, with the configured records; their addresses are
# granted through moat-fw before the answer (a private address too: the operator wrote it), an
# address in the always-deny ranges is never answered nor granted, and an agent whose allowlist
# lacks the names is denied them.
source "$(dirname "$0")/lib.sh"
e2e_init local
# moatd connects to moat-fw only as the user it drops to: both daemons run with the users the
# install makes (moat, moat-fw; the host's files untouched) and their defaults, which agree.
e2e_users

# moat-fw drops 127.0.0.0/8, so moatd listens on a documentation address; its upstream is a
# black hole that must never be asked (local names need none).
for a in 192.0.2.53/32 192.0.2.60/32 192.0.2.61/32 192.0.2.54/32; do e2e_addr "$a"; done
e2e_bg hole python3 "$E2E_DIR/peers/silent_udp.py" 192.0.2.54 53 120
# moat-fw refuses private grants unless told: an operator who answers names with private
# addresses opens them on moat-fw too (--allow-private); the always-deny ranges stay closed.
start_fw fw --socket "$E2E_WORK/fw.sock" --netns "$E2E_NS" \
	--state "$E2E_WORK/fwstate" --resolver 192.0.2.53 --min-lifetime 1 --allow-private

printf '192.0.2.44 build.corp.internal build-alias.corp.internal # the CI box\n' >"$E2E_WORK/hosts"
printf '*.corp.internal\n' >"$E2E_WORK/allow-box.txt"
printf 'www.example.test\n' >"$E2E_WORK/allow-other.txt"
cat >"$E2E_WORK/moatd.yaml" <<Y
listen: ["192.0.2.53:53"]
upstreams: ["192.0.2.54:53"]
upstream_timeout_ms: 300
firewall_socket: $E2E_WORK/fw.sock
log: {file: $E2E_WORK/query.jsonl}
local_data:
  - db.corp.internal A 10.1.2.3
  - v6.corp.internal AAAA 2001:db8::33
  - web.corp.internal 120 CNAME db.corp.internal
  - txt.corp.internal TXT "moat local answer"
  - meta.corp.internal A 169.254.169.254
hosts: [$E2E_WORK/hosts]
agents:
  - name: box
    clients: [192.0.2.60/32]
    allow: [$E2E_WORK/allow-box.txt]
  - name: other
    clients: [192.0.2.61/32]
    allow: [$E2E_WORK/allow-other.txt]
Y
out=$("$MOAT_BUILD/moatd" -c "$E2E_WORK/moatd.yaml" --check 2>&1)
e2e_assert_contains "$out" "moatd.yaml:11: warning: local address 169.254.169.254 is in the always-denied ranges" "--check warns about an always-denied local address"
e2e_assert_contains "$out" "7 local record(s), 1 warning(s)" "--check counts the local records"
start_moatd moatd -c "$E2E_WORK/moatd.yaml"
box() { e2e_dig @192.0.2.53 -b 192.0.2.60 "$@"; }
allow4() { e2e_run nft list set inet moat allow4; }
allow6() { e2e_run nft list set inet moat allow6; }

e2e_assert_not_contains "$(allow4)" "10.1.2.3" "nothing granted before the question"
out=$(box +short db.corp.internal A)
e2e_assert_eq 10.1.2.3 "$out" "local A answered (a private address: the operator wrote it)"
e2e_assert_contains "$(allow4)" "10.1.2.3" "the local address was granted through moat-fw"
out=$(box +short v6.corp.internal AAAA)
e2e_assert_eq 2001:db8::33 "$out" "local AAAA answered"
e2e_assert_contains "$(allow6)" "2001:db8::33" "the local IPv6 address was granted"
out=$(box +noall +answer web.corp.internal A)
e2e_assert_contains "$out" "web.corp.internal.	120	IN	CNAME	db.corp.internal." "local CNAME with its TTL"
e2e_assert_contains "$out" "db.corp.internal.	120	IN	A	10.1.2.3" "and its target's record (TTLs capped at the grant)"
out=$(box +short txt.corp.internal TXT)
e2e_assert_eq '"moat local answer"' "$out" "local TXT answered"
out=$(box +short build-alias.corp.internal A)
e2e_assert_eq 192.0.2.44 "$out" "a hosts(5) alias answered"
e2e_assert_contains "$(allow4)" "192.0.2.44" "the hosts address was granted"
out=$(box txt.corp.internal A)
e2e_assert_eq NOERROR "$(status_of "$out")" "a local name without that type: NODATA"
e2e_assert_contains "$out" "ANSWER: 0" "NODATA has no answer"

# --- always-deny ranges stay denied even for the operator's records ---
out=$(box meta.corp.internal A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "an always-denied local address is not answered"
e2e_assert_contains "$out" "answer contained 169.254.169.254" "EDE says why"
e2e_assert_not_contains "$(allow4)" "169.254.169.254" "and never granted"

# --- another agent's allowlist lacks the names: denied, nothing granted for it ---
out=$(e2e_dig @192.0.2.53 -b 192.0.2.61 build.corp.internal A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "local names are denied to an agent without them"
e2e_assert_contains "$out" "not on allowlist of agent other" "EDE names the agent"

grep -q '"agent":"box","qname":"db.corp.internal.","qtype":"A".*"decision":"allow-local".*"upstream":null' \
	"$E2E_WORK/query.jsonl" || e2e_fail "the query log does not say allow-local"
grep -q '"agent":"other","qname":"build.corp.internal.".*"decision":"deny-not-allowed"' \
	"$E2E_WORK/query.jsonl" || e2e_fail "the query log lacks the other agent's deny"
e2e_stop moatd
e2e_assert_eq 0 "$E2E_LAST_STATUS" "clean stop"
e2e_pass
