#!/usr/bin/env bash
# Data smuggled out through allowed names (issue 26), judged at the receiver: an authoritative
# server for the attacker's zones (peers/exfil_receiver.py) counts the new label bytes that
# reach it while a sandbox agent sends fresh data the way iodine (base32 over UDP, 32 source
# ports), iodine's base64u (a new source port each query), dnscat2 (hex over pipelined TCP) and
# a slow drip do, against moatd with two workers and the default budget (4,096 bytes an hour per
# agent and wildcard zone). Then: a short window moves on; names sent before keep resolving;
# the deny's EDE, log, alert, metrics, stats and explain; qtypes outside the agent's set never
# reach the receiver; the DO bit the receiver sees is moatd's policy, never the client's; the
# inbound caps refuse answers over the agent's bytes, records or TXT caps.
source "$(dirname "$0")/lib.sh"
e2e_init exfil
PEERS="$E2E_DIR/peers"
CTL="$MOAT_BUILD/moatctl"

e2e_bg recv "$E2E_PY" "$PEERS/exfil_receiver.py" 127.0.0.1 5390 280 2 exfil.test cdn.test \
	short.test
wait_line "$E2E_WORK/recv.log" "receiver listening" 10
printf '*.exfil.test\n*.cdn.test\n*.short.test\nknown.test\n' >"$E2E_WORK/allow.txt"
printf 'big-txt.caps.test\nmany-a.caps.test\ntxt.caps.test\n' >>"$E2E_WORK/allow.txt"
cat >"$E2E_WORK/moatd.yaml" <<EOF
listen: ["127.0.0.1:53"]
upstreams: ["127.0.0.1:5390"]
workers: 2
log: {file: $E2E_WORK/queries.jsonl}
control: $E2E_WORK/ctl.sock
metrics: 127.0.0.1:9154
agents:
  - name: sbx
    clients: [127.0.0.1/32]
    allow: [allow.txt]
    budget: {zones: {"*.cdn.test": 2048}}
  - name: short
    clients: [127.0.0.2/32]
    allow: [allow.txt]
    budget: {bytes: 600, window_s: 3}
  - name: caps
    clients: [127.0.0.3/32]
    allow: [allow.txt]
    answer_txt: false
  - name: qt
    clients: [127.0.0.4/32]
    allow: [allow.txt]
    qtypes: [A]
EOF
start_moatd moatd -c "$E2E_WORK/moatd.yaml"
e2e_wait_port tcp 127.0.0.1 9154
ctl() { e2e_run "$CTL" -s "$E2E_WORK/ctl.sock" --json "$@"; }
scrape() { e2e_run curl -sf http://127.0.0.1:9154/metrics; }

# rstats: the receiver's counts now, in RS (its SIGUSR1 line).
RSEQ=0
rstats() {
	RSEQ=$((RSEQ + 1))
	kill -USR1 "$(e2e_pid recv)"
	wait_line "$E2E_WORK/recv.log" "^stats seq=$RSEQ " 5
	RS=$(grep "^stats seq=$RSEQ " "$E2E_WORK/recv.log")
}
client() { # client MODE ZONE SECONDS SRC: one smuggler run, its summary line in CL
	CL=$(e2e_run "$E2E_PY" "$PEERS/exfil_client.py" "$1" 127.0.0.1 53 "$2" "$3" "$4")
	e2e_log "$1 from $4 into $2 for $3 s: $CL"
}

# --- before: a name under the wildcard resolves, and is billed 2 bytes ("a.") ---
e2e_assert_eq 192.0.2.10 "$(e2e_dig @127.0.0.1 +short a.exfil.test A)" "an allowed name resolves"

# --- the label channel at full speed, UDP from many ports: the budget and no more ---
client iodine exfil.test 3 127.0.0.1
rstats
b1=$(field bytes.exfil.test "$RS")
e2e_log "receiver after iodine: $RS"
((b1 <= 4096)) || e2e_fail "$b1 new label bytes reached the receiver under *.exfil.test (budget 4096)"
# an iodine name costs 195 bytes: a budget that was spent holds less than one name of room
((b1 > 4096 - 195)) || e2e_fail "only $b1 bytes reached the receiver: the budget was not what stopped it"
(($(field refused "$CL") > 0)) || e2e_fail "the smuggler was never refused: $CL"
first_ok=$(field first_ok "$CL")

# --- the other encoders, over TCP, from a new port each query, dripping: what room was left
# (under 195 bytes) and no more; then the room is under a drip name's 41 bytes ---
client dnscat2 exfil.test 2 127.0.0.1
(($(field sent "$CL") > 100)) || e2e_fail "the TCP smuggler hardly sent: $CL"
client base64 exfil.test 2 127.0.0.1
client drip exfil.test 2 127.0.0.1
rstats
b2=$(field bytes.exfil.test "$RS")
((b2 <= 4096)) || e2e_fail "$b2 new label bytes under *.exfil.test in all (budget 4096)"

# --- after the budget: 0 new bytes, whatever the encoding, transport or pace ---
client dnscat2 exfil.test 2 127.0.0.1
client iodine exfil.test 2 127.0.0.1
client base64 exfil.test 2 127.0.0.1
client drip exfil.test 2 127.0.0.1
e2e_assert_eq 0 "$(field noerror "$CL")" "the drip got no new name through"
rstats
e2e_assert_eq "$b2" "$(field bytes.exfil.test "$RS")" \
	"new label bytes under *.exfil.test after its budget was spent (TCP, many ports, drip)"

# --- names sent before keep resolving; a new one is refused and says why ---
e2e_assert_eq 192.0.2.10 "$(e2e_dig @127.0.0.1 +short a.exfil.test A)" "a name sent before"
e2e_assert_eq 192.0.2.10 "$(e2e_dig @127.0.0.1 +short "$first_ok" A)" "the smuggler's first name"
NEW=new-name-of-sixty-bytes-so-that-no-room-the-drip-left-fits-it.exfil.test
out=$(e2e_dig @127.0.0.1 "$NEW" A)
e2e_assert_eq REFUSED "$(status_of "$out")" "a new name past the budget"
e2e_assert_contains "$out" "exfiltration budget of agent sbx under *.exfil.test spent" "its EDE"
e2e_assert_contains "$out" "EDE: 15" "EDE code 15 (Blocked)"
log=$(grep "\"qname\":\"$NEW.\"" "$E2E_WORK/queries.jsonl")
e2e_assert_contains "$log" '"decision":"deny-budget"' "the log's decision"
e2e_assert_contains "$log" '"alert":true' "an alert"
e2e_assert_contains "$log" "\"rule\":\"$E2E_WORK/allow.txt:1\"" "the wildcard it counted under"
alerts=$(grep -c "ALERT: exfiltration budget of agent sbx under \*.exfil.test" "$E2E_WORK/moatd.log" || true)
# once each time the zone's budget is spent: at most once a smuggler run here
((alerts >= 1 && alerts <= 4)) || e2e_fail "$alerts stderr alerts for the zone"

# --- another zone has its own budget, here the rule's own (budget.zones: 2048) ---
client base64 cdn.test 2 127.0.0.1
rstats
c1=$(field bytes.cdn.test "$RS")
((c1 > 2048 - 129 && c1 <= 2048)) || e2e_fail "$c1 new label bytes under *.cdn.test (its budget 2048)"
e2e_assert_eq "$b2" "$(field bytes.exfil.test "$RS")" "still nothing new under *.exfil.test"

# --- visible: explain, metrics, stats ---
ex=$(ctl explain "$NEW" --client 127.0.0.1)
e2e_assert_contains "$ex" '"decision":"deny-budget"' "explain says the budget denies it"
e2e_assert_contains "$ex" '"zone":"*.exfil.test","limit":4096,"window_s":3600' "explain's budget"
e2e_assert_contains "$ex" '"seen":false,"would":"deny"' "explain: new, denied"
ex=$(ctl explain a.exfil.test --client 127.0.0.1)
e2e_assert_contains "$ex" '"decision":"allow"' "explain: a name sent before"
e2e_assert_contains "$ex" '"charge":0,"seen":true,"would":"allow"' "explain: free"
e2e_assert_contains "$(ctl explain known.test --client 127.0.0.1)" '"budget":null' \
	"an exact rule carries no budget"
m=$(scrape)
used=$(sed -n 's/^moat_budget_used_bytes{agent="sbx",zone="\*\.exfil\.test"} //p' <<<"$m")
((used >= b2 && used <= 4096)) || e2e_fail "metrics: used $used (receiver $b2, budget 4096)"
denied=$(sed -n 's/^moat_budget_denied_total{agent="sbx",zone="\*\.exfil\.test"} //p' <<<"$m")
((denied > 0)) || e2e_fail "metrics: no denial counted: $(grep budget <<<"$m")"
e2e_assert_contains "$m" 'moat_budget_limit_bytes{agent="sbx",zone="*.cdn.test"} 2048' \
	"the rule's own limit"
e2e_assert_contains "$m" 'moat_queries_total{agent="sbx",decision="deny-budget",transport="tcp"}' \
	"denials by agent and decision"
st=$(ctl stats)
e2e_assert_contains "$st" '"budget":{"agents":[' "stats: the budgets"
e2e_assert_contains "$st" "{\"zone\":\"*.exfil.test\",\"used\":$used,\"limit\":4096,\"denied\":$denied" \
	"stats: the zone's figures"

# --- a short window: spent, then it moves on, and no window holds more than the budget ---
client iodine short.test 1 127.0.0.2
rstats
s1=$(field bytes.short.test "$RS")
((s1 > 0 && s1 <= 600)) || e2e_fail "$s1 new label bytes under *.short.test in its first window (budget 600)"
moved() { [[ "$(status_of "$(e2e_dig @127.0.0.1 -b 127.0.0.2 "w$RANDOM.short.test" A)")" == NOERROR ]]; }
e2e_poll 15 moved || e2e_fail "a new name under *.short.test never resolved again: the window did not move"
client iodine short.test 4 127.0.0.2
rstats
s2=$(field bytes.short.test "$RS")
((s2 > s1)) || e2e_fail "nothing new after the window moved ($s1, then $s2)"
mw=$(field maxwin.short.test "$RS")
e2e_log "short window: $s1 bytes, then $s2 in all; at most $mw within 2 s at the receiver"
((mw <= 600)) || e2e_fail "$mw new label bytes arrived within 2 s under a 600-byte 3-s budget"

# --- qtypes: the agent's set reaches the receiver, nothing else does ---
sweep='import sys, socket, random
sys.path.insert(0, sys.argv[1])
import dnsmini
src, name, ok = sys.argv[2], sys.argv[3], []
for t in list(range(1, 300)) + [32769, 65280, 65534, 65535]:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((src, 0)); s.settimeout(2)
    s.sendto(dnsmini.query(random.randrange(65536), name, t), ("127.0.0.1", 53))
    try:
        p = s.recv(65535)
    except OSError:
        continue
    if dnsmini.rcode(p) not in ("REFUSED", "NOTIMP"):
        ok.append(t)
    elif dnsmini.rcode(p) == "REFUSED" and 15 not in dnsmini.records(p)["ede"]:
        ok.append(-t)
print(" ".join(map(str, ok)))'
e2e_run "$E2E_PY" -c "$sweep" "$PEERS" 127.0.0.1 a.exfil.test >"$E2E_WORK/sweep.txt"
e2e_assert_eq "1 5 15 16 28 33 64 65 255" "$(cat "$E2E_WORK/sweep.txt")" \
	"the types answered: the default set and ANY (answered by moatd itself)"
rstats
e2e_assert_eq "A,AAAA,CNAME,HTTPS,MX,SRV,SVCB,TXT" "$(field types "$RS")" \
	"the types that ever reached the receiver: 8, so 3 bits a query"
e2e_assert_eq 192.0.2.10 "$(e2e_dig @127.0.0.1 -b 127.0.0.4 +short a.exfil.test A)" "qt: A"
out=$(e2e_dig @127.0.0.1 -b 127.0.0.4 a.exfil.test AAAA)
e2e_assert_eq REFUSED "$(status_of "$out")" "qt: AAAA is not in its qtypes"
e2e_assert_contains "$out" "query type AAAA is not allowed for agent qt" "its EDE"

# --- DO: the receiver sees moatd's bit, never the client's ---
rstats
do0=$(field do1 "$RS")
q0=$(field queries "$RS")
for t in A AAAA TXT MX; do e2e_dig @127.0.0.1 +dnssec a.exfil.test "$t" >/dev/null; done
rstats
e2e_assert_eq "$do0" "$(field do1 "$RS")" "DO=1 from the client: DO=0 upstream (upstream_dnssec_ok: false)"
(($(field queries "$RS") > q0)) || e2e_fail "the DO queries did not reach the receiver"
sed -e 's/^listen: .*/listen: ["127.0.0.1:5354"]/' -e '/^control:/d' -e '/^metrics:/d' \
	-e 's/^workers: 2/upstream_dnssec_ok: true/' -e "s#queries.jsonl#queries2.jsonl#" \
	"$E2E_WORK/moatd.yaml" >"$E2E_WORK/moatd2.yaml"
start_moatd moatd2 -c "$E2E_WORK/moatd2.yaml"
for t in A AAAA TXT; do e2e_dig @127.0.0.1 -p 5354 +nodnssec known.test "$t" >/dev/null; done
rstats
e2e_assert_eq $((do0 + 3)) "$(field do1 "$RS")" "DO=0 from the client: DO=1 upstream (upstream_dnssec_ok: true)"
e2e_stop moatd2

# --- inbound caps: bytes (20 kB of TXT over TCP), records (100 A), TXT off ---
out=$(e2e_dig @127.0.0.1 +tcp big-txt.caps.test TXT)
e2e_assert_eq REFUSED "$(status_of "$out")" "an answer over the 8192-byte cap"
e2e_assert_contains "$out" "bytes is over agent sbx's cap of 8192" "its EDE"
out=$(e2e_dig @127.0.0.1 many-a.caps.test A)
e2e_assert_eq REFUSED "$(status_of "$out")" "an answer over the 64-record cap"
e2e_assert_contains "$out" "100 records is over agent sbx's cap of 64" "its EDE"
e2e_assert_eq '"hello"' "$(e2e_dig @127.0.0.1 +short txt.caps.test TXT)" "a small TXT passes"
out=$(e2e_dig @127.0.0.1 -b 127.0.0.3 txt.caps.test TXT)
e2e_assert_eq REFUSED "$(status_of "$out")" "TXT for an agent with answer_txt: false"
e2e_assert_contains "$out" "answer holds TXT records, not allowed for agent caps" "its EDE"
e2e_assert_eq 3 "$(grep -c '"decision":"deny-answer-cap"' "$E2E_WORK/queries.jsonl")" \
	"each capped answer logged as deny-answer-cap"
m=$(scrape)
e2e_assert_contains "$m" 'moat_queries_total{agent="caps",decision="deny-answer-cap",transport="udp"} 1' \
	"and counted"

stop_moatd moatd
e2e_pass
