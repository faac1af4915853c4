#!/usr/bin/env bash
# From audit to enforce (issue 25): a scripted agent workload of 62 names across 16 registrable
# domains (siblings under example.com, example.org, demo.test and shop.co.uk; five github.io
# names, each a registrable domain of its own; TCP 80, 443, 8443 and UDP 123; one connect by IP
# literal to an address a name resolved to, on another port) runs in a real sandbox behind
# moatd and moat-fw:
#   1. audit mode: nothing is denied (every name answered, every connection made);
#   2. moatctl report lists every name and every connection, and recommends an allowlist: a
#      wildcard where siblings were many, never on a public suffix (no *.github.io, *.co.uk),
#      ports from the connections seen (the literal connect adds tcp/8443 to its name's line);
#      the list passes moatd --check --strict;
#   3. enforce mode with that list and a fresh firewall: the same workload goes through with
#      zero denies and zero drops (moat-fw's drop log), a name outside the list is denied and
#      a port outside its line is dropped; explain says moat-fw holds the grant with its ports.
# Topology (all made here, none linked to the root namespace):
#   sandbox 198.51.100.2 --veth-- host 198.51.100.1 (moatd, NSD 192.0.2.53, moat-fw) --veth--
#   net 203.0.113.0/24 (listeners)
source "$(dirname "$0")/lib.sh"
e2e_init audit_workload
chown "$(id -u moat 2>/dev/null || id -u nobody)" "$E2E_WORK"

PY=$E2E_PY
H="$E2E_DIR/peers/hostile.py"
CTL="$MOAT_BUILD/moatctl"
e2e_peer sbx
SBX=$E2E_PEER
e2e_peer net
NET=$E2E_PEER
for ns in "$SBX" "$NET"; do
	# IPv4 only: IPv6 link-local chatter (DAD, MLD) would be drops of their own
	ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
done
e2e_veth "$SBX" sb0 "$E2E_NS" hb0
e2e_veth "$NET" nt0 "$E2E_NS" hn0
e2e_addr_dev "$SBX" sb0 198.51.100.2/24
e2e_addr_dev "$E2E_NS" hb0 198.51.100.1/24
e2e_addr_dev "$NET" nt0 203.0.113.2/24
e2e_addr_dev "$E2E_NS" hn0 203.0.113.1/24
ip -n "$SBX" route add default via 198.51.100.1
ip -n "$NET" route add default via 203.0.113.1
e2e_run sysctl -qw net.ipv4.ip_forward=1
[[ "$(ip -n "$SBX" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort | tr '\n' ' ')" == "lo sb0 " ]] ||
	e2e_fail "sandbox namespace has unexpected links"

# --- the names, their zones and the listeners ---------------------------------------------------
# zone ORIGIN ADDR NAME...: a zone whose names (relative, @ for the apex) all answer ADDR.
zone() {
	local origin=$1 addr=$2 n
	shift 2
	{
		printf '$ORIGIN %s.\n$TTL 300\n@ IN SOA ns1.%s. hostmaster.%s. 1 3600 600 86400 60\n' \
			"$origin" "$origin" "$origin"
		printf '@ IN NS ns1.%s.\nns1 IN A 192.0.2.53\n' "$origin"
		for n in "$@"; do printf '%s IN A %s\n' "$n" "$addr"; done
	} >"$E2E_WORK/$origin.zone"
	ZONES+=("$E2E_WORK/$origin.zone")
}
ZONES=()
PLAN="$E2E_WORK/plan.txt"
: >"$PLAN"
plan() { echo "$*" >>"$PLAN"; }
zone example.com 203.0.113.10 @ api pkg1 pkg2 pkg3 pkg4 pkg5 pkg6 pkg7 pkg8
plan example.com tcp/443
plan api.example.com tcp/443 lit-tcp/8443 # the IP-literal connect, after the name resolved
for i in 1 2 3 4 5 6 7 8; do plan "pkg$i.example.com" tcp/443; done
zone example.org 203.0.113.20 $(seq -f 'm%g' 1 14)
for i in $(seq 14); do plan "m$i.example.org" tcp/80; done
zone demo.test 203.0.113.30 $(seq -f 'n%g' 1 20)
for i in $(seq 20); do plan "n$i.demo.test" tcp/443; done
zone shop.co.uk 203.0.113.40 a b c d e
for s in a b c d e; do plan "$s.shop.co.uk" tcp/443; done
zone github.io 203.0.113.50 alice bob carol dave erin
for s in alice bob carol dave erin; do plan "$s.github.io" tcp/443; done
zone example.net 203.0.113.60 www cdn docs
plan www.example.net tcp/443 tcp/80
plan cdn.example.net tcp/443
plan docs.example.net tcp/443
zone example.edu 203.0.113.70 www lib
plan www.example.edu tcp/443
plan lib.example.edu tcp/443
zone example.info 203.0.113.80 ntp
plan ntp.example.info udp/123
zone example.io 203.0.113.90 api
plan api.example.io tcp/443
zone example.biz 203.0.113.95 quiet outside
plan quiet.example.biz # resolved, never connected to
NNAMES=$(grep -c . "$PLAN")
((NNAMES >= 60)) || e2e_fail "the workload has $NNAMES names"

for a in 10 20 30 40 50 60 70 80 90 95; do ip -n "$NET" addr add "203.0.113.$a/32" dev lo; done
listen=()
for a in 10 30 40 50 60 70 90; do listen+=("203.0.113.$a:443"); done
listen+=(203.0.113.20:80 203.0.113.60:80 203.0.113.10:8443)
e2e_bg web ip netns exec "$NET" "$PY" "$H" tcp-listen 300 "${listen[@]}"
e2e_bg ntp ip netns exec "$NET" "$PY" "$H" udp-log 300 203.0.113.80:123
for ((i = 0; i < 50; i++)); do
	(($(ip netns exec "$NET" ss -Hlnt | wc -l) >= ${#listen[@]})) && break
	sleep 0.1
done
e2e_addr 192.0.2.53/32
e2e_nsd 192.0.2.53 53 "${ZONES[@]}"

# --- moat: moatd in audit mode, moat-fw with its drop log ----------------------------------------
e2e_users # the daemons' own users, as the install makes them: their defaults agree
# conf MODE ALLOW LOG: moatd's config for the sandbox's agent.
conf() {
	cat <<EOF
listen: ["198.51.100.1:53"]
upstreams: ["192.0.2.53:53"]
log: {file: $E2E_WORK/$3}
control: $E2E_WORK/ctl.sock
firewall_socket: $E2E_WORK/fw.sock
agents:
  - name: sbx
    clients: [198.51.100.2/32]
    allow: [$2]
    mode: $1
EOF
}
# shellcheck disable=SC2034 # read by start_fw (lib.sh)
FW_BASE=(--socket "$E2E_WORK/fw.sock" --resolver 198.51.100.1 --netns "$SBX")
workload() { ip netns exec "$SBX" "$PY" "$E2E_DIR/peers/workload.py" 198.51.100.1 "$PLAN"; }
ctl() { e2e_run "$CTL" -s "$E2E_WORK/ctl.sock" "$@"; }

echo 'example.com tcp/443' >"$E2E_WORK/known.txt"
conf audit known.txt audit.jsonl >"$E2E_WORK/audit.yaml"
start_fw fw1 --state "$E2E_WORK/st1" --drop-log "$E2E_WORK/fw-audit.jsonl"
start_moatd moatd1 -c "$E2E_WORK/audit.yaml"
out=$(workload)
printf '%s\n' "$out" >"$E2E_WORK/workload-audit.txt"
e2e_assert_eq "names=$NNAMES answered=$NNAMES connects=$((NNAMES + 1)) connected=$((NNAMES + 1))" \
	"$(tail -n 1 <<<"$out")" "audit: the workload was held back: $(grep -v '=connected\|=sent' <<<"$out" | head -3)"
q="$E2E_WORK/audit.jsonl"
e2e_assert_eq 0 "$(jq -s '[.[] | select(.decision | startswith("deny"))] | length' "$q")" "audit: denies"
e2e_assert_eq $((NNAMES - 1)) "$(jq -s '[.[] | select(.decision == "would-deny")] | length' "$q")" \
	"audit: would-deny lines"
stop_moatd moatd1
e2e_stop fw1
drops() { jq -s '[.[] | select(.event == "drop")] | length' "$1"; }
e2e_assert_eq 0 "$(drops "$E2E_WORK/fw-audit.jsonl")" "audit: moat-fw dropped something"

# --- the report and its recommendation --------------------------------------------------------
rep() { "$CTL" report sbx --log "$q" --fw-log "$E2E_WORK/fw-audit.jsonl" "$@"; }
json=$(rep --format json) || e2e_fail "report failed"
e2e_assert_eq "$NNAMES" "$(jq '.agents[0].names | length' <<<"$json")" "report: every name"
while read -r name _; do
	[[ -z "$name" || "$name" == \#* ]] && continue
	jq -e --arg n "$name." '.agents[0].names[] | select(.name == $n and .count == 1)' <<<"$json" >/dev/null ||
		e2e_fail "report: $name missing"
done <"$PLAN"
conns=$(jq -c '[.agents[0].connections[] | "\(.dst) \(.proto)/\(.port) \(.outcome)"] | sort' <<<"$json")
for c in 203.0.113.10\ tcp/443 203.0.113.10\ tcp/8443 203.0.113.20\ tcp/80 203.0.113.30\ tcp/443 \
	203.0.113.40\ tcp/443 203.0.113.50\ tcp/443 203.0.113.60\ tcp/443 203.0.113.60\ tcp/80 \
	203.0.113.70\ tcp/443 203.0.113.80\ udp/123 203.0.113.90\ tcp/443; do
	e2e_assert_contains "$conns" "\"$c connected\"" "report: connection $c"
done
e2e_assert_eq 11 "$(jq '.agents[0].connections | length' <<<"$json")" "report: connections"
rep --format allowlist >"$E2E_WORK/recommended.txt" || e2e_fail "report --format allowlist failed"
rec=$(grep -v '^#' "$E2E_WORK/recommended.txt")
# A connection is seen by address: names that share one share its ports (example.com gets the
# literal connect's tcp/8443, cdn.example.net www's tcp/80).
for l in '*.example.com tcp/443,8443' 'example.com tcp/443,8443' '*.example.org tcp/80' '*.demo.test tcp/443' \
	'*.shop.co.uk tcp/443' 'alice.github.io tcp/443' 'erin.github.io tcp/443' 'www.example.net tcp/80,443' \
	'cdn.example.net tcp/80,443' 'ntp.example.info udp/123' 'api.example.io tcp/443' \
	'quiet.example.biz   # no connection seen: every port'; do
	grep -qxF -- "$l" <<<"$rec" || e2e_fail "recommended: no line '$l': $rec"
done
e2e_assert_eq "" "$(grep -E '^\*\.(github\.io|co\.uk|io|com|net|org|edu|info|biz|test|uk)( |$)' <<<"$rec")" \
	"recommended: a wildcard on a public suffix"
e2e_assert_eq 18 "$(grep -c . <<<"$rec")" "recommended: lines"
out=$("$MOAT_BUILD/moatd" --listen 127.0.0.1:53 --upstream 192.0.2.53:53 \
	--allow "$E2E_WORK/recommended.txt" --check --strict 2>&1) || e2e_fail "--check --strict: $out"
e2e_assert_contains "$out" "0 warning(s)" "recommended: lint warnings"
e2e_assert_contains "$(rep --format text)" "recommended allowlist (18 line(s))" "report: text form"

# --- enforce the recommendation: the same workload, zero denies, zero drops ----------------------
ip netns exec "$SBX" nft delete table inet moat # a fresh firewall: none of audit's grants
conf enforce recommended.txt enforce.jsonl >"$E2E_WORK/enforce.yaml"
start_fw fw2 --state "$E2E_WORK/st2" --drop-log "$E2E_WORK/fw-enforce.jsonl"
start_moatd moatd2 -c "$E2E_WORK/enforce.yaml"
out=$(workload)
e2e_assert_eq "names=$NNAMES answered=$NNAMES connects=$((NNAMES + 1)) connected=$((NNAMES + 1))" \
	"$(tail -n 1 <<<"$out")" "enforce: the workload was held back: $(grep -v '=connected\|=sent' <<<"$out" | head -3)"
q2="$E2E_WORK/enforce.jsonl"
e2e_assert_eq 0 "$(jq -s '[.[] | select(.decision != "allow")] | length' "$q2")" "enforce: denies"
e2e_assert_eq "$NNAMES" "$(jq -s 'length' "$q2")" "enforce: queries"
e2e_assert_eq 0 "$(drops "$E2E_WORK/fw-enforce.jsonl")" "enforce: moat-fw dropped part of the workload"
out=$(e2e_run "$CTL" -s "$E2E_WORK/ctl.sock" --state "$E2E_WORK/st2" --json explain api.example.com \
	--client 198.51.100.2)
e2e_assert_contains "$out" '"ports":"tcp/443,8443"' "explain: the rule's ports"
e2e_assert_contains "$out" '"addresses":["203.0.113.10"]' "explain: the cached address"
e2e_assert_contains "$out" '"grant":{"held":true,"addresses":["203.0.113.10"]' "explain: moat-fw holds it"
e2e_assert_contains "$out" '"ports":["tcp/443","tcp/8443"]}' "explain: the granted ports"
# Outside the list: a name, a port.
out=$(ip netns exec "$SBX" dig +time=2 +tries=1 @198.51.100.1 outside.example.biz A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "enforce: a name outside the list answered"
e2e_assert_eq deny-not-allowed "$(jq -r 'select(.qname == "outside.example.biz.") | .decision' "$q2")" \
	"enforce: its decision"
e2e_assert_contains "$(ip netns exec "$SBX" "$PY" "$H" connect 203.0.113.60 8443)" failed \
	"enforce: a port outside www.example.net's line reachable"
ok() { [[ "$(jq -r 'select(.event == "drop" and .port == 8443) | .reason' "$E2E_WORK/fw-enforce.jsonl")" == wrong-port* ]]; }
e2e_poll 5 ok || e2e_fail "enforce: the port outside the line not logged as wrong-port"
stop_moatd moatd2
e2e_stop fw2
e2e_pass
