#!/usr/bin/env bash
# Serve-stale (RFC 8767, issue 6): with serve_stale set, an answer that expired less than that
# long ago is served when no upstream answers, with a TTL of at most 30 s and EDE 3 (Stale
# Answer), after the same address checks as any answer; without it, or past the window, or for
# a name never cached, the client gets SERVFAIL.
source "$(dirname "$0")/lib.sh"
e2e_init stale

e2e_nsd 127.0.0.1 5300 "$E2E_ZONES/example.test.zone" "$E2E_ZONES/rebind.test.zone"
printf '*.example.test\n*.rebind.test\n' >"$E2E_WORK/allow.txt"

# Entries expire after 2 s whatever the records say (cache_max_ttl), so the test need not
# wait out the zone's TTLs; stale ones are kept 6 s more.
conf() { # conf ADDR SERVE_STALE
	cat >"$E2E_WORK/moatd-$2.yaml" <<EOF
listen: ["$1:53"]
upstreams: ["127.0.0.1:5300"]
upstream_timeout_ms: 200
upstream_attempts: 2
cache_max_ttl: 2
serve_stale: $2
log: {file: $E2E_WORK/moatd-$2.jsonl}
agents:
  - name: stale-test
    clients: [127.0.0.0/8]
    allow: [$E2E_WORK/allow.txt]
EOF
	echo "$E2E_WORK/moatd-$2.yaml"
}
start_moatd stale -c "$(conf 127.0.0.1 6)"
start_moatd fresh -c "$(conf 127.0.0.2 0)"
ttl_of() { awk '$1 !~ /^;/ && $4 == "A" { print $2; exit }' <<<"$1"; }

# --- while the upstream is up: fresh answers, cached by both ---
for a in 127.0.0.1 127.0.0.2; do
	out=$(e2e_dig "@$a" www.example.test A)
	e2e_assert_eq NOERROR "$(status_of "$out")" "fresh answer from $a"
	e2e_assert_contains "$out" "192.0.2.10" "fresh record from $a"
	out=$(e2e_dig "@$a" meta.rebind.test A)
	e2e_assert_eq NXDOMAIN "$(status_of "$out")" "internal answer refused by $a"
done

# --- the upstream goes away; the entries expire ---
e2e_stop nsd1
sleep 2.5

out=$(e2e_dig @127.0.0.1 www.example.test A)
e2e_assert_eq NOERROR "$(status_of "$out")" "stale answer served"
e2e_assert_contains "$out" "192.0.2.10" "stale answer is the cached record"
e2e_assert_contains "$out" "EDE: 3 (Stale Answer)" "stale answer carries EDE 3"
ttl=$(ttl_of "$out")
[[ "$ttl" =~ ^[0-9]+$ ]] && ((ttl >= 1 && ttl <= 30)) ||
	e2e_fail "stale TTL '$ttl' is not within 1..30 (RFC 8767 caps it at 30)"
grep -q '"qname":"www.example.test.","qtype":"A","qclass":1,"decision":"allow-stale"' \
	"$E2E_WORK/moatd-6.jsonl" || e2e_fail "log does not say the answer was stale"
# over TCP too, and without EDNS (no OPT record, so no EDE, but the answer)
out=$(e2e_dig @127.0.0.1 +tcp www.example.test A)
e2e_assert_contains "$out" "192.0.2.10" "stale answer over TCP"
out=$(e2e_dig @127.0.0.1 +noedns www.example.test A)
e2e_assert_eq NOERROR "$(status_of "$out")" "stale answer without EDNS"
e2e_assert_not_contains "$out" "OPT PSEUDOSECTION" "no OPT record for a client without EDNS"

# A stale answer goes through the address checks like any other.
out=$(e2e_dig @127.0.0.1 meta.rebind.test A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "stale internal answer still refused"
e2e_assert_contains "$out" "moat: answer contained 169.254.169.254" "EDE on the stale refusal"
e2e_assert_not_contains "$out" "169.254.169.254	" "no internal record in the stale refusal"

# Never cached: nothing to serve.
out=$(e2e_dig @127.0.0.1 other.example.test A)
e2e_assert_eq SERVFAIL "$(status_of "$out")" "name never cached: SERVFAIL"
# Without serve_stale: SERVFAIL, as before.
out=$(e2e_dig @127.0.0.2 www.example.test A)
e2e_assert_eq SERVFAIL "$(status_of "$out")" "no serve_stale: SERVFAIL"
e2e_assert_not_contains "$out" "192.0.2.10" "no serve_stale: no record"

# --- past the window (2 s TTL + 6 s) nothing stale is served ---
sleep 6
out=$(e2e_dig @127.0.0.1 www.example.test A)
e2e_assert_eq SERVFAIL "$(status_of "$out")" "past the stale window: SERVFAIL"

e2e_stop stale
e2e_assert_eq 0 "$E2E_LAST_STATUS" "moatd exits 0"
e2e_stop fresh
e2e_pass
