#!/usr/bin/env bash
# Internal addresses never come back (issue 3): answers carrying metadata, loopback, link-local or
# private addresses in any encoding or section are replaced by the deny form and logged as
# alerts; the same names with good addresses resolve; IP-literal and high-risk query names never
# reach the upstream; chains to high-risk names and (with --strict-chain) to unlisted names fail.
source "$(dirname "$0")/lib.sh"
e2e_init rebind

e2e_nsd 127.0.0.1 5300 "$E2E_ZONES/example.test.zone" "$E2E_ZONES/cdn.test.zone" \
	"$E2E_ZONES/rebind.test.zone"
e2e_bg testns ldns-testns -p 5301 "$E2E_DIR/crafted.testns"
e2e_wait_port udp '*' 5301

cat >"$E2E_WORK/allow.txt" <<'A'
rebind.test
*.rebind.test
*.example.test
*.crafted.test
# listed on purpose: high-risk and literal names stay denied even when allowed
metadata.google.internal
*.nip.io
169.254.169.254
A

# shellcheck disable=SC2034 # read by start_moatd (lib.sh)
MOATD_BASE=(--allow "$E2E_WORK/allow.txt")

start_moatd moatd --listen 127.0.0.1:53 --upstream 127.0.0.1:5300
start_moatd crafted --listen 127.0.0.2:53 --upstream 127.0.0.1:5301

# expect_blocked SERVER NAME TYPE ADDRTEXT: denied, EDE names the address, nothing leaks.
expect_blocked() {
	local server=$1 name=$2 type=$3 addr=$4 out
	out=$(e2e_dig @"$server" "$name" "$type")
	e2e_assert_eq NXDOMAIN "$(status_of "$out")" "$name $type: internal answer not refused"
	e2e_assert_contains "$out" "EDE: 15 (Blocked): (moat: answer contained $addr)" "$name $type: EDE"
	e2e_assert_contains "$out" "ANSWER: 0, AUTHORITY: 0, ADDITIONAL: 1" "$name $type: records leaked"
	out=$(e2e_dig @"$server" +tcp "$name" "$type")
	e2e_assert_eq NXDOMAIN "$(status_of "$out")" "$name $type over TCP: internal answer not refused"
}

# --- every encoding of an internal address, from a real authoritative server ---
expect_blocked 127.0.0.1 meta.rebind.test A 169.254.169.254
expect_blocked 127.0.0.1 loop.rebind.test A 127.0.0.1
expect_blocked 127.0.0.1 mapped.rebind.test AAAA ::ffff:169.254.169.254
expect_blocked 127.0.0.1 compat.rebind.test AAAA ::169.254.169.254
expect_blocked 127.0.0.1 nat64.rebind.test AAAA 64:ff9b::a9fe:a9fe
expect_blocked 127.0.0.1 nat64b.rebind.test AAAA 64:ff9b:1:a9fe:a9:fe00::
expect_blocked 127.0.0.1 sixtofour.rebind.test AAAA 2002:a9fe:a9fe::1
expect_blocked 127.0.0.1 teredo.rebind.test AAAA 2001:0:4136:e378:8000:63bf:5601:5601
expect_blocked 127.0.0.1 link6.rebind.test AAAA fe80::1
expect_blocked 127.0.0.1 ec2v6.rebind.test AAAA fd00:ec2::254
expect_blocked 127.0.0.1 mcast.rebind.test A 224.0.0.1
expect_blocked 127.0.0.1 priv.rebind.test A 10.0.0.5
expect_blocked 127.0.0.1 svcb.rebind.test HTTPS 169.254.169.254
expect_blocked 127.0.0.1 svcb6.rebind.test HTTPS fd00:ec2::254
expect_blocked 127.0.0.1 chain.rebind.test A 169.254.169.254
expect_blocked 127.0.0.1 privchain.rebind.test A 10.0.0.5
# NSD puts the MX target's address in the additional section: glue counts too.
expect_blocked 127.0.0.1 glue.rebind.test MX 169.254.169.254

# --- the same kinds of names with good addresses resolve ---
out=$(e2e_dig @127.0.0.1 +short good.rebind.test A)
e2e_assert_eq 192.0.2.30 "$out" "good A"
out=$(e2e_dig @127.0.0.1 +short good6.rebind.test AAAA)
e2e_assert_eq 2001:db8::30 "$out" "good AAAA"
out=$(e2e_dig @127.0.0.1 +short goodsvcb.rebind.test HTTPS)
e2e_assert_contains "$out" "ipv4hint=192.0.2.31" "good HTTPS hint"
out=$(e2e_dig @127.0.0.1 +short alias.example.test A)
e2e_assert_contains "$out" "192.0.2.10" "in-zone chain with good address"

# --- chains: a chain to a high-risk name is denied ---
out=$(e2e_dig @127.0.0.1 hr.rebind.test A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "CNAME to a high-risk name"
e2e_assert_contains "$out" "moat: high-risk name" "EDE for chain to high-risk name"
# leaving the allowlist is fine by default (CDNs), not with --strict-chain
out=$(e2e_dig @127.0.0.1 cdn.example.test A)
e2e_assert_contains "$out" "edge.cdn.test." "chain may leave the allowlist by default"
e2e_assert_eq NOERROR "$(status_of "$out")" "chain leaving the allowlist"

# --- crafted answers: addresses in any section, records of another class, DNAME ---
expect_blocked 127.0.0.2 atxt.crafted.test TXT 169.254.169.254
expect_blocked 127.0.0.2 auth.crafted.test A 169.254.169.254
expect_blocked 127.0.0.2 addl.crafted.test A ::1
# A class-CH record is dropped before any check (issue 12): the client gets the IN record only.
for tr in +notcp +tcp; do
	out=$(e2e_dig @127.0.0.2 $tr chaos.crafted.test A)
	e2e_assert_eq NOERROR "$(status_of "$out")" "chaos.crafted.test ($tr): the IN answer"
	e2e_assert_contains "$out" "ANSWER: 1," "chaos.crafted.test ($tr): one answer record"
	e2e_assert_contains "$out" "192.0.2.42" "chaos.crafted.test ($tr): the IN address"
	e2e_assert_not_contains "$out" "169.254" "chaos.crafted.test ($tr): the class-CH address reached the client"
done
expect_blocked 127.0.0.2 www.dn.crafted.test A 10.1.2.3
out=$(e2e_dig @127.0.0.2 tohr.crafted.test A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "chain in one answer to a high-risk name"
# unrelated owners are dropped, the rest passes
out=$(e2e_dig @127.0.0.2 extra.crafted.test A)
e2e_assert_eq NOERROR "$(status_of "$out")" "unrelated records are no reason to deny"
e2e_assert_contains "$out" "ANSWER: 1, AUTHORITY: 0, ADDITIONAL: 1" "only the asked record passes"
e2e_assert_contains "$out" "192.0.2.43" "the answer itself"
e2e_assert_not_contains "$out" "198.51.100" "records of other owners reach the client"

# --- query side: literals and high-risk names never reach the upstream ---
e2e_upstream_reset
literals=(169.254.169.254 2852039166 0xa9fea9fe 0251.0376.0251.0376 169.254.43518 169.16689662
	0xa9.0376.43518 127.1 0x7f000001 '::1' 'fd00:ec2::254' '::ffff:169.254.169.254')
for n in "${literals[@]}"; do
	out=$(e2e_dig @127.0.0.1 "$n" A)
	e2e_assert_eq NXDOMAIN "$(status_of "$out")" "IP literal $n"
	e2e_assert_contains "$out" "moat: query name is the IP literal" "IP literal $n: EDE"
done
highrisk=(metadata.google.internal instance-data 169-254-169-254.nip.io app.10.0.0.1.nip.io
	use-application-dns.net _dns.resolver.arpa)
for n in "${highrisk[@]}"; do
	out=$(e2e_dig @127.0.0.1 "$n" A)
	e2e_assert_eq NXDOMAIN "$(status_of "$out")" "high-risk $n"
	e2e_assert_contains "$out" "EDE: 15 (Blocked): (moat: high-risk name" "high-risk $n: EDE"
done
log=$(e2e_upstream_queries)
e2e_assert_eq "" "$log" "literal or high-risk names reached the upstream"

# --- every refusal of an internal address or high-risk name is an alert in the log ---
for n in meta.rebind.test. metadata.google.internal. 169.254.169.254. glue.rebind.test.; do
	grep -F "\"qname\":\"$n\"" "$E2E_WORK/moatd.jsonl" | grep -q '"alert":true' ||
		e2e_fail "no alert logged for $n"
done
grep -F '"qname":"good.rebind.test."' "$E2E_WORK/moatd.jsonl" | grep -q '"alert":false' ||
	e2e_fail "a good answer was logged as an alert"

# --- --allow-private opts into private answers; metadata stays refused ---
e2e_stop moatd
start_moatd private --listen 127.0.0.1:53 --upstream 127.0.0.1:5300 --allow-private
out=$(e2e_dig @127.0.0.1 +short priv.rebind.test A)
e2e_assert_eq 10.0.0.5 "$out" "private answer with --allow-private"
expect_blocked 127.0.0.1 meta.rebind.test A 169.254.169.254
expect_blocked 127.0.0.1 loop.rebind.test A 127.0.0.1
e2e_stop private

# --- --strict-chain: every name in the chain must be allowed ---
start_moatd strict --listen 127.0.0.1:53 --upstream 127.0.0.1:5300 --strict-chain
out=$(e2e_dig @127.0.0.1 cdn.example.test A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "strict chain leaving the allowlist"
e2e_assert_contains "$out" "strict-chain" "EDE names strict-chain"
out=$(e2e_dig @127.0.0.1 +short alias.example.test A)
e2e_assert_contains "$out" "192.0.2.10" "strict chain inside the allowlist"

e2e_pass
