#!/usr/bin/env bash
# moatd core (issue 2): allowed names answer exactly as the upstream does, denied names get the
# deny form with an Extended DNS Error and never reach the upstream (NSD's own query log proves
# it), over UDP and TCP, for several qtypes and classes; TC fallback; upstream down; unknown
# clients; malformed packets.
source "$(dirname "$0")/lib.sh"
e2e_init core

UP=127.0.0.1
UPPORT=5300
e2e_nsd $UP $UPPORT "$E2E_ZONES/example.test.zone" "$E2E_ZONES/cdn.test.zone"

cat >"$E2E_WORK/allow.txt" <<'A'
# exact and wildcard; cdn.test is deliberately not allowed
example.test
*.example.test
A

# Every moatd here: on 127.0.0.1:53 and [::1]:53 with the shared allowlist.
# shellcheck disable=SC2034 # read by start_moatd (lib.sh)
MOATD_BASE=(--listen 127.0.0.1:53 --listen '[::1]:53' --allow "$E2E_WORK/allow.txt")

q() { e2e_dig @127.0.0.1 "$@"; }

start_moatd moatd --upstream $UP:$UPPORT

# --- allowed names answer exactly as the upstream does (records, TTLs, rcode) ---
for spec in "www.example.test A" "www.example.test AAAA" "multi.example.test A" \
	"txt.example.test TXT" "example.test MX" "alias.example.test A" "x.y.wild.example.test A" \
	"nope.example.test A" "www.example.test TXT"; do
	set -- $spec
	via_moat=$(q +noall +answer "$1" "$2" | sort)
	direct=$(e2e_dig @$UP -p $UPPORT +noall +answer "$1" "$2" | sort)
	e2e_assert_eq "$direct" "$via_moat" "answer for $spec differs from the upstream's"
	st_moat=$(status_of "$(q "$1" "$2")")
	st_direct=$(status_of "$(e2e_dig @$UP -p $UPPORT "$1" "$2")")
	e2e_assert_eq "$st_direct" "$st_moat" "rcode for $spec differs from the upstream's"
done
out=$(q +tcp www.example.test A)
e2e_assert_contains "$out" "192.0.2.10" "allowed name over TCP"
# Several queries on one TCP connection, sent back to back: every one is answered on it.
out=$(e2e_run python3 "$E2E_DIR/peers/tcp_multi.py" 127.0.0.1 www.example.test evil.test \
	multi.example.test mail.example.test | sort)
e2e_assert_eq "$(printf '1000 0 1\n1001 3 0\n1002 0 4\n1003 0 1')" "$out" "pipelined TCP queries"
out=$(e2e_dig @::1 www.example.test AAAA)
e2e_assert_contains "$out" "2001:db8::10" "allowed name over IPv6 transport"
# The client's case is echoed; the 0x20 bits are the client's business.
out=$(q +noall +question WwW.ExAmPlE.tEsT A)
e2e_assert_contains "$out" "WwW.ExAmPlE.tEsT." "question case echoed"
# Negative answers keep the SOA, so clients can cache them.
out=$(q +noall +authority nope.example.test A)
e2e_assert_contains "$out" "SOA" "NXDOMAIN from upstream keeps its SOA"

# --- denied names: NXDOMAIN + EDE, never forwarded (UDP and TCP, several qtypes) ---
e2e_upstream_reset
denied=(evil.test edge.cdn.test cdn.test exfil.abcdef0123456789.evil.test notexample.test
	"www.example.test.evil.test")
for name in "${denied[@]}"; do
	for t in A AAAA TXT MX HTTPS ANY; do
		for tr in +notcp +tcp; do
			out=$(q $tr "$name" $t)
			e2e_assert_eq NXDOMAIN "$(status_of "$out")" "$name $t $tr not denied"
			e2e_assert_contains "$out" "EDE: 15 (Blocked): (moat: not on allowlist of agent default)" \
				"$name $t $tr: EDE text"
		done
	done
done
# No EDNS from the client: the deny still holds, without an OPT record.
out=$(q +noedns evil.test A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "deny without EDNS"
e2e_assert_not_contains "$out" "OPT PSEUDOSECTION" "no OPT when the client sent none"
# Other classes are answered locally, also for allowed names.
for spec in "CH TXT version.bind" "CH TXT hostname.bind" "HS A www.example.test" "CH A www.example.test"; do
	set -- $spec
	out=$(q -c "$1" -t "$2" "$3")
	e2e_assert_eq REFUSED "$(status_of "$out")" "class $1 $3 not refused"
done
log=$(e2e_upstream_queries)
for name in "${denied[@]}" version.bind hostname.bind; do
	if grep -qi "^$name\. " <<<"$log"; then
		e2e_fail "denied name $name reached the upstream: $(grep -i "^$name\. " <<<"$log" | head -3)"
	fi
done
e2e_assert_not_contains "$log" "www.example.test. A" "a class-CH query for an allowed name was forwarded"
denied_lines=$(grep -c '"decision":"deny-not-allowed"' "$E2E_WORK/moatd.jsonl")
((denied_lines >= ${#denied[@]} * 12)) || e2e_fail "query log has only $denied_lines deny lines"
grep -q '"qname":"evil.test.","qtype":"HTTPS","qclass":1,"decision":"deny-not-allowed","reason":"moat: not on allowlist of agent default","rcode":"NXDOMAIN","upstream":null' \
	"$E2E_WORK/moatd.jsonl" || e2e_fail "query log line for a deny is missing its fields"
# An allowed line's reason and rule name the rule that allowed it (the wildcard, line 3),
# forwarded and from the cache alike.
for d in allow allow-cached; do
	l=$(grep -F "\"qname\":\"www.example.test.\",\"qtype\":\"A\",\"qclass\":1,\"decision\":\"$d\",\"reason\":\"allowed by $E2E_WORK/allow.txt:3\"," \
		"$E2E_WORK/moatd.jsonl" | head -1)
	e2e_assert_contains "$l" "\"rule\":\"$E2E_WORK/allow.txt:3\"" "$d line: its reason and rule"
done

# --- IPv4 answers are never fragmented: DF set whatever the route's MTU says (a forged ICMP
# "fragmentation needed" lowers it the same way); the kernel's default would send them without DF
# to a client behind a route of locked MTU 552, and fragment them. Seen on the wire. ---
e2e_run ip route replace local 127.0.0.9 dev lo table local mtu lock 552
for spec in "127.0.0.1 www.example.test NOERROR" "127.0.0.9 www.example.test NOERROR" \
	"127.0.0.9 evil.test NXDOMAIN"; do
	set -- $spec
	out=$(e2e_run "$E2E_PY" "$E2E_DIR/peers/answer_df.py" --src "$1" 127.0.0.1 53 "$2")
	e2e_assert_contains "$out" "df=1 frag=0 " "answer for $2 to $1 without DF: $out"
	e2e_assert_contains "$out" "rcode=$3" "the DF answer for $2 is moatd's: $out"
done
e2e_run ip route del local 127.0.0.9 dev lo table local

# --- the upstream query carries only moatd's own question and EDNS ---
e2e_upstream_reset
q +subnet=198.51.100.0/24 +cookie +nsid fresh1.wild.example.test A >/dev/null
e2e_assert_eq "fresh1.wild.example.test. A UDP" "$(e2e_upstream_queries)" "forwarded exactly one query"

# --- TC fallback: moatd retries over TCP upstream; a UDP client gets TC and retries ---
e2e_upstream_reset
out=$(q +ignore +bufsize=1232 big.example.test TXT)
e2e_assert_contains "$out" "flags: qr tc" "oversized UDP answer is truncated for the client"
out=$(q +tcp big.example.test TXT)
n=$(grep -c 'IN	TXT	"big' <<<"$out" || true)
e2e_assert_eq 10 "$n" "all 10 TXT records over TCP"
log=$(e2e_upstream_queries)
e2e_assert_contains "$log" "big.example.test. TXT TCP" "moatd retried the truncated answer over TCP"
out=$(q +noedns +ignore multi.example.test A)
e2e_assert_contains "$out" "ANSWER: 4" "small answer fits 512 bytes"

# --- unknown client: REFUSED, never forwarded ---
e2e_addr 192.0.2.77/32
e2e_upstream_reset
out=$(q -b 192.0.2.77 www.example.test A)
e2e_assert_eq REFUSED "$(status_of "$out")" "client outside every agent range"
e2e_assert_contains "$out" "EDE: 18 (Prohibited)" "EDE for unknown clients"
e2e_assert_eq "" "$(e2e_upstream_queries)" "unknown client's query reached the upstream"

# --- malformed packets: FORMERR or silence, and the daemon keeps serving ---
raw() { e2e_run python3 "$E2E_DIR/peers/udp_raw.py" 127.0.0.1 53 "$1" 1; }
# header says one question, question truncated
r=$(raw "abcd01000001000000000000037777")
[[ "$r" == abcd8* ]] && [[ "${r:7:1}" == 1 ]] || e2e_fail "truncated question: expected FORMERR, got $r"
# compression loop in the question
r=$(raw "abcd0100000100000000000003777777c00c00010001")
[[ "${r:7:1}" == 1 ]] || e2e_fail "pointer in question: expected FORMERR, got $r"
# opcode NOTIFY (4) without RPZ transfers configured: REFUSED (test_rpz.sh has the rest)
r=$(raw "abcd2000000100000000000003777777076578616d706c6504746573740000010001")
[[ "${r:7:1}" == 5 ]] || e2e_fail "NOTIFY: expected REFUSED, got $r"
# a response (QR=1) is dropped, never answered
r=$(raw "abcd8180000100000000000003777777076578616d706c6504746573740000010001")
e2e_assert_eq timeout "$r" "a response packet must not be answered"
# 5 bytes: not even a header
r=$(raw "0102030405")
e2e_assert_eq timeout "$r" "a runt packet must not be answered"
e2e_alive moatd || e2e_fail "moatd died on malformed input"
out=$(q www.example.test A)
e2e_assert_contains "$out" "192.0.2.10" "still serving after malformed packets"

# --- SIGTERM stops cleanly ---
e2e_stop moatd
e2e_assert_eq 0 "$E2E_LAST_STATUS" "moatd exit status on SIGTERM"

# --- REFUSED and sinkhole forms ---
start_moatd refused --upstream $UP:$UPPORT --deny refused
out=$(q evil.test A)
e2e_assert_eq REFUSED "$(status_of "$out")" "deny refused"
e2e_assert_contains "$out" "EDE: 15 (Blocked)" "EDE on REFUSED"
e2e_stop refused
start_moatd sinkhole --upstream $UP:$UPPORT --deny sinkhole
out=$(q +noall +answer evil.test A)
# the defaults reach nothing (0.0.0.0 and :: would reach the client's own loopback)
e2e_assert_contains "$out" "evil.test.		60	IN	A	240.0.0.1" "sinkhole A"
out=$(q +noall +answer evil.test AAAA)
e2e_assert_contains "$out" "evil.test.		60	IN	AAAA	100::1" "sinkhole AAAA"
out=$(q evil.test TXT)
e2e_assert_eq NOERROR "$(status_of "$out")" "sinkhole TXT is NODATA"
e2e_assert_contains "$out" "EDE: 15 (Blocked)" "EDE on sinkhole"
e2e_stop sinkhole

# --- upstream down: SERVFAIL within the timeout (refused port, then a black hole) ---
start_moatd down --upstream 127.0.0.1:5399 --upstream-timeout 300
start=$(date +%s%N)
out=$(q www.example.test A)
ms=$((($(date +%s%N) - start) / 1000000))
e2e_assert_eq SERVFAIL "$(status_of "$out")" "upstream port closed"
((ms < 1000)) || e2e_fail "SERVFAIL took $ms ms with a closed upstream port"
e2e_bg hole python3 "$E2E_DIR/peers/silent_udp.py" 127.0.0.1 5399 30
e2e_wait_port udp 127.0.0.1 5399
start=$(date +%s%N)
out=$(e2e_run dig +time=5 +tries=1 @127.0.0.1 www.example.test A)
ms=$((($(date +%s%N) - start) / 1000000))
e2e_assert_eq SERVFAIL "$(status_of "$out")" "silent upstream"
# 3 attempts x 300 ms, plus scheduling slack
((ms >= 800 && ms < 2000)) || e2e_fail "SERVFAIL after $ms ms, expected about 900"
e2e_assert_contains "$out" "EDE: 22" "EDE says no upstream answered"

e2e_pass
