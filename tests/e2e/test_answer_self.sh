#!/usr/bin/env bash
# The resolver is never a grant, and IPv4-mapped AAAA answers never pass (issue 22). A hostile
# upstream answers allowed names with moatd's own listen, upstream and metrics addresses (also
# as NAT64 and 6to4 forms embedding them), and AAAA records ::ffff:a.b.c.d: moatd refuses each
# answer (deny form, EDE and log reason naming what the address is), with private ranges
# allowed too, while the upstream's own address as glue (additional section, never given to
# the client) does not stop an answer. moat-fw refuses a grant of a --resolver address, of a form
# embedding one and of an IPv4-mapped address when one is sent to it directly (fw_client.py),
# and still takes a good one.
source "$(dirname "$0")/lib.sh"
e2e_init answer_self

e2e_addr 192.0.2.53/32 # the hostile upstream (NSD)
e2e_addr 192.0.2.2/32  # moatd
e2e_addr 192.0.2.3/32  # moatd's metrics endpoint
cat >"$E2E_WORK/self.test.zone" <<'Z'
$ORIGIN self.test.
$TTL 300
@        IN SOA  ns1.self.test. hostmaster.self.test. 2024010101 3600 600 86400 300
         IN NS   ns1.self.test.
; the upstream's own address as glue: in every answer's additional section
ns1      IN A    192.0.2.53
ok       IN A    192.0.2.10
listen   IN A    192.0.2.2
up       IN A    192.0.2.53
metrics  IN A    192.0.2.3
nat64    IN AAAA 64:ff9b::c000:202
sixtofour IN AAAA 2002:c000:202::1
mixed    IN A    192.0.2.10
mixed    IN A    192.0.2.2
mapped   IN AAAA ::ffff:10.0.0.5
mappedpub IN AAAA ::ffff:192.0.2.10
Z
# A zone whose glue (additional section, never passed) is the metadata address: the answer
# naming moatd's own address is refused for the glue, which is blocked wherever it stands (the
# reason a walk over every address finds first, whatever the order of the records).
cat >"$E2E_WORK/glue.test.zone" <<'Z'
$ORIGIN glue.test.
$TTL 300
@        IN SOA  ns1.glue.test. hostmaster.glue.test. 2024010101 3600 600 86400 300
         IN NS   ns1.glue.test.
ns1      IN A    169.254.169.254
listen   IN A    192.0.2.2
Z
e2e_nsd 192.0.2.53 53 "$E2E_WORK/self.test.zone" "$E2E_WORK/glue.test.zone"
printf '*.self.test\n*.glue.test\n' >"$E2E_WORK/allow.txt"
start_moatd moatd --listen 192.0.2.2:53 --upstream 192.0.2.53:53 --metrics 192.0.2.3:9153 \
	--allow "$E2E_WORK/allow.txt" --allow-private

# refused NAME TYPE TEXT: the deny, its EDE naming the address, no record leaked, the log's reason
refused() {
	local name=$1 type=$2 text=$3 out
	out=$(e2e_dig @192.0.2.2 "$name" "$type")
	e2e_assert_eq NXDOMAIN "$(status_of "$out")" "$name $type: answer not refused"
	e2e_assert_contains "$out" "EDE: 15 (Blocked): (moat: answer contained $text)" "$name $type: EDE"
	e2e_assert_contains "$out" "ANSWER: 0, AUTHORITY: 0, ADDITIONAL: 1" "$name $type: records leaked"
	wait_line -F "$E2E_WORK/moatd.jsonl" "\"qname\":\"$name.\",\"qtype\":\"$type\""
	e2e_assert_contains "$(grep -F "\"qname\":\"$name.\",\"qtype\":\"$type\"" "$E2E_WORK/moatd.jsonl")" \
		"\"decision\":\"deny-embedded-address\",\"reason\":\"moat: answer contained $text\"" "$name $type: log"
}

e2e_assert_eq 192.0.2.10 "$(e2e_dig @192.0.2.2 +short ok.self.test A)" \
	"a good answer (with the upstream's own address as glue) was refused"
refused listen.self.test A "192.0.2.2, moatd's own listen address"
refused up.self.test A "192.0.2.53, moatd's own upstream"
refused metrics.self.test A "192.0.2.3, moatd's own metrics address"
refused nat64.self.test AAAA "64:ff9b::c000:202, moatd's own listen address"
refused sixtofour.self.test AAAA "2002:c000:202::1, moatd's own listen address"
refused mixed.self.test A "192.0.2.2, moatd's own listen address"
# IPv4-mapped: never a valid AAAA, with private answers allowed and for a public address too
refused mapped.self.test AAAA "::ffff:10.0.0.5, an IPv4-mapped address"
refused mappedpub.self.test AAAA "::ffff:192.0.2.10, an IPv4-mapped address"
# Blocked glue outranks moatd's own address in the answer
refused listen.glue.test A "169.254.169.254"
stop_moatd moatd

# --- moat-fw: a grant of the resolver's address, sent directly, is refused ---
# moat-fw in a namespace of its own (the sandbox's, netns placement) where moatd's address is
# not one of its host's: the case where only the --resolver check stands in the way.
e2e_peer fwsbx
SOCK=$E2E_WORK/fw.sock
e2e_bg fw ip netns exec "$E2E_PEER" "$MOAT_BUILD/moat-fw" --socket "$SOCK" --netns "$E2E_PEER" \
	--state "$E2E_WORK/fwstate" --moatd-user root --user nobody --resolver 192.0.2.2 --allow-private
e2e_wait_log fw 'listening on'
grant() { e2e_run "$E2E_PY" "$E2E_DIR/peers/fw_client.py" --socket "$SOCK" "$@"; }
seq=1
for a in 192.0.2.2 64:ff9b::c000:202 2002:c000:202::1 ::ffff:10.0.0.5; do
	e2e_assert_eq "seq=$seq status=DENIED lifetime=0" "$(grant --seq $seq "$a")" "grant of $a"
	seq=$((seq + 1))
done
log=$(cat "$E2E_WORK/fw.log")
e2e_assert_contains "$log" "asks for the resolver's (--resolver) address 192.0.2.2" "alert: resolver"
e2e_assert_contains "$log" "asks for the resolver's (--resolver) address 64:ff9b::c000:202" \
	"alert: NAT64 form of the resolver"
e2e_assert_contains "$log" "asks for IPv4-mapped address ::ffff:10.0.0.5" "alert: IPv4-mapped"
e2e_assert_eq "seq=9 status=OK lifetime=60" "$(grant --seq 9 192.0.2.10)" "a good grant"
e2e_assert_not_contains "$(ip netns exec "$E2E_PEER" nft list set inet moat allow4)" "192.0.2.2" \
	"the resolver's address is in the allow set"

e2e_pass
