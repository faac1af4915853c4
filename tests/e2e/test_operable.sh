#!/usr/bin/env bash
# Operating moatd (issue 14): the metrics endpoint moves by exactly the queries sent (scraped
# with curl, parsed with python3-prometheus-client); every moatctl command against the control
# socket (explain agrees with the daemon's decision on 50 names; a bad reload answers file:line
# and the old policy keeps answering; flush makes the next query go upstream, seen in NSD's
# dnstap log); the query log v2 fields and its reopen on SIGUSR1; moatd's own dnstap file read
# back by dnstap-ldns. All under the seccomp filter (the default).
source "$(dirname "$0")/lib.sh"
e2e_init operable
# moatd drops to its default user (moat or nobody) and reopens its log here on SIGUSR1 as that
# user: the log's directory is that user's, as an operator sets up /var/log/moat.
chown "$(id -u moat 2>/dev/null || id -u nobody)" "$E2E_WORK"

PY=/usr/bin/python3 # Debian's, where python3-prometheus-client lives
CTL="$MOAT_BUILD/moatctl"

e2e_nsd 127.0.0.1 5300 "$E2E_ZONES/example.test.zone" "$E2E_ZONES/rebind.test.zone"
printf '*.example.test\n*.rebind.test\n' >"$E2E_WORK/allow.txt"
cat >"$E2E_WORK/moatd.yaml" <<EOF
listen: ["127.0.0.1:53"]
upstreams: ["127.0.0.1:5300"]
log: {file: $E2E_WORK/queries.jsonl}
control: $E2E_WORK/ctl.sock
control_group: daemon
metrics: 127.0.0.1:9153
dnstap: {file: $E2E_WORK/moatd.dnstap}
agents:
  - name: ops
    clients: [127.0.0.1/32]
    allow: [allow.txt]
EOF
start_moatd moatd -c "$E2E_WORK/moatd.yaml"
e2e_wait_port tcp 127.0.0.1 9153
ctl() { e2e_run "$CTL" -s "$E2E_WORK/ctl.sock" "$@"; }
scrape() { e2e_run curl -sf http://127.0.0.1:9153/metrics; }

# Every sample that differs between two scrapes, as "name{labels} delta" (labels sorted);
# histogram buckets and sums and the byte gauges are left out (their values depend on timing
# and sizes), their _count is kept.
cat >"$E2E_WORK/delta.py" <<'PY'
import sys
from prometheus_client.parser import text_string_to_metric_families as parse
def load(path):
    out = {}
    for fam in parse(open(path).read()):
        for s in fam.samples:
            if s.name.endswith(("_bucket", "_sum")) or s.name in ("moat_cache_bytes",
                                                                   "moat_budget_memory_bytes"):
                continue
            key = s.name + "{" + ",".join("%s=%s" % kv for kv in sorted(s.labels.items())) + "}"
            out[key] = s.value
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
for k in sorted(set(a) | set(b)):
    d = b.get(k, 0) - a.get(k, 0)
    if d:
        print("%s %g" % (k, d))
PY

# --- metrics: one query of each kind, then the exact deltas ---
scrape >"$E2E_WORK/m0.txt"
e2e_dig @127.0.0.1 www.example.test A >/dev/null                      # allow (forwarded)
e2e_dig @127.0.0.1 www.example.test A >/dev/null                      # allow-cached
e2e_dig @127.0.0.1 +tcp www.example.test AAAA >/dev/null              # allow over TCP
e2e_dig @127.0.0.1 evil.test A >/dev/null                             # deny-not-allowed
e2e_dig @127.0.0.1 metadata.google.internal A >/dev/null              # deny-high-risk
e2e_dig @127.0.0.1 169.254.169.254 A >/dev/null                       # deny-ip-literal
e2e_dig @127.0.0.1 meta.rebind.test A >/dev/null                      # answer holds 169.254.169.254
e2e_dig @127.0.0.1 -b 127.0.0.2 www.example.test A >/dev/null || true # refuse-client
# formerr: a header that promises two questions and carries none
e2e_run "$PY" -c 'import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2)
s.sendto(bytes.fromhex("123401000002000000000000"), ("127.0.0.1", 53)); s.recv(512)'
scrape >"$E2E_WORK/m1.txt"
e2e_run "$PY" "$E2E_WORK/delta.py" "$E2E_WORK/m0.txt" "$E2E_WORK/m1.txt" >"$E2E_WORK/delta.txt"
expected='moat_budget_charged_bytes_total{agent=ops,zone=*.example.test} 4
moat_budget_charged_bytes_total{agent=ops,zone=*.rebind.test} 5
moat_budget_limit_bytes{agent=ops,zone=*.example.test} 4096
moat_budget_limit_bytes{agent=ops,zone=*.rebind.test} 4096
moat_budget_names{agent=ops} 2
moat_budget_used_bytes{agent=ops,zone=*.example.test} 4
moat_budget_used_bytes{agent=ops,zone=*.rebind.test} 5
moat_cache_entries{} 3
moat_cache_hits_total{} 1
moat_cache_misses_total{} 3
moat_queries_total{agent=,decision=formerr,transport=udp} 1
moat_queries_total{agent=,decision=refuse-client,transport=udp} 1
moat_queries_total{agent=ops,decision=allow,transport=tcp} 1
moat_queries_total{agent=ops,decision=allow,transport=udp} 1
moat_queries_total{agent=ops,decision=allow-cached,transport=udp} 1
moat_queries_total{agent=ops,decision=deny-embedded-address,transport=udp} 1
moat_queries_total{agent=ops,decision=deny-high-risk,transport=udp} 1
moat_queries_total{agent=ops,decision=deny-ip-literal,transport=udp} 1
moat_queries_total{agent=ops,decision=deny-not-allowed,transport=udp} 1
moat_responses_total{rcode=FORMERR} 1
moat_responses_total{rcode=NOERROR} 3
moat_responses_total{rcode=NXDOMAIN} 4
moat_responses_total{rcode=REFUSED} 1
moat_upstream_latency_seconds_count{} 3'
e2e_assert_eq "$expected" "$(grep -v '^moat_tcp_connections' "$E2E_WORK/delta.txt")" \
	"metrics moved by exactly the queries sent"
for m in moat_build_info moat_policy_agents moat_policy_patterns moat_grants_sent_total \
	moat_grant_latency_seconds_count moat_inflight_questions moat_ratelimited_total \
	moat_tcp_connections moat_policy_last_reload_success moat_workers; do
	grep -q "^$m[{ ]" "$E2E_WORK/m1.txt" || e2e_fail "metric $m missing"
done
e2e_assert_contains "$(cat "$E2E_WORK/m1.txt")" 'moat_build_info{version="' "build info"
e2e_assert_contains "$(cat "$E2E_WORK/m1.txt")" 'moat_policy_patterns 2' "policy size"
e2e_assert_contains "$(cat "$E2E_WORK/m1.txt")" 'moat_inflight_questions 0' "nothing left in flight"
code=$(e2e_run curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:9153/other)
e2e_assert_eq 404 "$code" "only /metrics is served"

# --- moatctl status, stats, agents ---
out=$(ctl --json status)
e2e_assert_contains "$out" '"ok":true,"cmd":"status"' "status"
e2e_assert_contains "$out" '"agents":1,"patterns":2' "status: policy size"
out=$(ctl --json stats)
e2e_assert_contains "$out" '{"agent":"ops","decision":"deny-high-risk","transport":"udp","count":1}' \
	"stats: queries by agent, decision and transport"
e2e_assert_contains "$out" '"cache":{"hits":1,' "stats: cache"
human=$(ctl stats)
e2e_assert_contains "$human" '"hits": 1' "stats without --json is indented"
out=$(ctl --json agents)
e2e_assert_contains "$out" '"agents":[{"name":"ops","deny":"nxdomain","allow_patterns":2' "agents"
e2e_assert_contains "$out" '"clients":["127.0.0.1/32"]' "agents: clients"

# --- explain agrees with the daemon on 50 names ---
names=()
for i in $(seq 1 12); do names+=("n$i.wild.example.test"); done  # allowed by *.example.test
for i in $(seq 1 12); do names+=("x$i.evil.test"); done          # on no allowlist
for i in $(seq 1 8); do names+=("h$i.google.internal"); done     # high-risk *.google.internal
for i in $(seq 1 8); do names+=("10-0-0-$i.example.test"); done  # embeds a private address
names+=(metadata.google.internal 169.254.169.254 2852039166 0xa9fea9fe 127.0.0.1 \
	www.example.test mail.example.test example.test rebind.test x.y.rebind.test)
e2e_assert_eq 50 "${#names[@]}" "fifty names"
printf '%s A\n' "${names[@]}" >"$E2E_WORK/names.txt"
: >"$E2E_WORK/queries.jsonl.mark"
before=$(wc -l <"$E2E_WORK/queries.jsonl")
e2e_run dig +time=2 +tries=1 @127.0.0.1 -f "$E2E_WORK/names.txt" >/dev/null
for n in "${names[@]}"; do
	ctl --json explain "$n" --client 127.0.0.1 --type A
done >"$E2E_WORK/explain.jsonl"
# The daemon's decision from its log (allow-cached is still "allow" for the policy).
for ((t = 0; t < 50; t++)); do
	(($(wc -l <"$E2E_WORK/queries.jsonl") >= before + 50)) && break
	sleep 0.1
done
cmp=$(e2e_run "$PY" - "$E2E_WORK/queries.jsonl" "$before" "$E2E_WORK/explain.jsonl" <<'PY'
import json, sys
log = [json.loads(l) for l in open(sys.argv[1]).read().splitlines()[int(sys.argv[2]):]]
exp = [json.loads(l) for l in open(sys.argv[3])]
daemon = {}
for e in log:
    d = e["decision"]
    daemon[e["qname"].lower()] = "allow" if d.startswith("allow") else d
agree = sum(1 for x in exp if daemon.get(x["name"]) == x["decision"])
bad = [(x["name"], x["decision"], daemon.get(x["name"])) for x in exp if daemon.get(x["name"]) != x["decision"]]
kinds = sorted(set(x["decision"] for x in exp))
print(agree, " ".join(kinds), bad)
PY
)
e2e_assert_eq "50 allow deny-embedded-address deny-high-risk deny-ip-literal deny-not-allowed []" \
	"$cmp" "explain agrees with the daemon on 50 names"
out=$(ctl --json explain n1.wild.example.test)
e2e_assert_contains "$out" "\"rule\":\"$E2E_WORK/allow.txt:1\",\"wildcard\":true" "explain: allowing rule"
out=$(ctl --json explain h1.google.internal)
e2e_assert_contains "$out" '"decision":"deny-high-risk"' "explain: high-risk"
e2e_assert_contains "$out" 'highrisk.txt:' "explain: the high-risk rule's file:line"
out=$(ctl --json explain www.example.test --client 127.0.0.9)
e2e_assert_contains "$out" '"decision":"refuse-client"' "explain: client in no agent's range"

# --- reload: a bad file answers file:line, the running policy stays ---
cp "$E2E_WORK/allow.txt" "$E2E_WORK/allow.good"
printf 'ok.other.test\nbad..name\n' >>"$E2E_WORK/allow.txt"
if out=$(ctl reload 2>&1); then e2e_fail "reload of a bad file succeeded"; fi
e2e_assert_contains "$out" "$E2E_WORK/allow.txt:4:" "reload error names file:line"
out=$(e2e_dig @127.0.0.1 +short n1.wild.example.test A)
e2e_assert_eq 192.0.2.20 "$out" "old policy keeps answering after a bad reload"
out=$(e2e_dig @127.0.0.1 ok.other.test A)
e2e_assert_contains "$out" "status: NXDOMAIN" "half-read new policy not in force"
e2e_assert_contains "$(scrape)" 'moat_policy_last_reload_success 0' "metrics: failed reload"
cp "$E2E_WORK/allow.good" "$E2E_WORK/allow.txt"
printf 'ok.other.test\n' >>"$E2E_WORK/allow.txt"
out=$(ctl --json reload)
e2e_assert_contains "$out" '"ok":true,"cmd":"reload","agents":1,"patterns":3' "good reload"
out=$(ctl --json explain ok.other.test)
e2e_assert_contains "$out" '"decision":"allow"' "reloaded policy in force for explain"
e2e_assert_contains "$(scrape)" 'moat_policy_reloads_total{result="error"} 1' "metrics: reloads"

# --- flush: the next query goes upstream ---
e2e_dig @127.0.0.1 mail.example.test A >/dev/null # cached (asked above)
e2e_upstream_reset
e2e_dig @127.0.0.1 mail.example.test A >/dev/null
e2e_assert_eq "" "$(e2e_upstream_queries)" "before flush: answered from the cache"
out=$(ctl --json flush mail.example.test)
e2e_assert_contains "$out" '"ok":true,"cmd":"flush","removed":1,' "flush NAME removed its entry"
e2e_dig @127.0.0.1 mail.example.test A >/dev/null
e2e_dig @127.0.0.1 www.example.test A >/dev/null # other names stay cached
e2e_assert_eq "mail.example.test. A UDP" "$(e2e_upstream_queries)" "after flush NAME: upstream again"
e2e_upstream_reset
out=$(ctl --json flush)
e2e_assert_contains "$out" '"ok":true,"cmd":"flush"' "flush all"
e2e_dig @127.0.0.1 www.example.test A >/dev/null
e2e_assert_eq "www.example.test. A UDP" "$(e2e_upstream_queries)" "after flush: upstream again"

# --- protocol errors get an error reply, not a hang ---
if out=$(ctl frobnicate 2>&1); then e2e_fail "unknown command accepted"; fi
e2e_assert_contains "$out" "unknown command" "moatctl refuses an unknown command"
out=$(e2e_run "$PY" -c 'import socket,sys
s = socket.socket(socket.AF_UNIX); s.settimeout(5); s.connect(sys.argv[1])
s.sendall(b"x" * 3000 + b"\nstatus\n"); buf = b""
while buf.count(b"\n") < 2: buf += s.recv(65536)
print(buf.decode())' "$E2E_WORK/ctl.sock")
e2e_assert_contains "$out" '{"v":1,"ok":false,"error":"request too long"}' "overlong request refused"
e2e_assert_contains "$out" '"cmd":"status"' "the connection goes on after an error"
e2e_assert_eq "srw-rw---- daemon" "$(stat -c '%A %G' "$E2E_WORK/ctl.sock")" \
	"control socket mode 0660, group control_group"

# --- check CONFIG ---
out=$(e2e_run "$CTL" check "$E2E_WORK/moatd.yaml")
e2e_assert_contains "$out" "configuration OK: 1 agent(s), 3 allow pattern(s)" "check: good config"
printf 'bad..name\n' >"$E2E_WORK/bad.txt"
sed "s|allow: \[allow.txt\]|allow: [bad.txt]|" "$E2E_WORK/moatd.yaml" >"$E2E_WORK/bad.yaml"
if out=$(e2e_run "$CTL" check "$E2E_WORK/bad.yaml"); then e2e_fail "check accepted a bad file"; fi
e2e_assert_contains "$out" "$E2E_WORK/bad.txt:1:" "check: file:line"

# --- the query log, version 2 ---
line=$(grep -m1 '"qname":"www.example.test.","qtype":"A","qclass":1,"decision":"allow"' \
	"$E2E_WORK/queries.jsonl")
e2e_assert_contains "$line" "\"v\":2,\"rule\":\"$E2E_WORK/allow.txt:1\",\"answer\":[\"192.0.2.10\"],\"grant\":\"none\",\"grant_lifetime\":null}" \
	"log v2: rule, answer, grant"
line=$(grep -m1 '"qname":"h1.google.internal."' "$E2E_WORK/queries.jsonl")
e2e_assert_contains "$line" '"rule":"' "log v2: the high-risk rule"
e2e_assert_contains "$line" '"answer":null' "log v2: no answer released for a deny"

# --- logrotate: SIGUSR1 reopens the log ---
mv "$E2E_WORK/queries.jsonl" "$E2E_WORK/queries.jsonl.1"
kill -USR1 "$(e2e_pid moatd)"
e2e_poll 5 test -e "$E2E_WORK/queries.jsonl" || true
[[ -e "$E2E_WORK/queries.jsonl" ]] || e2e_fail "log not reopened on SIGUSR1"
e2e_dig @127.0.0.1 after.rotate.example.test A >/dev/null
e2e_poll_line "$E2E_WORK/queries.jsonl" after.rotate 5 || true
grep -q after.rotate "$E2E_WORK/queries.jsonl" || e2e_fail "new lines not in the reopened log"
grep -q after.rotate "$E2E_WORK/queries.jsonl.1" && e2e_fail "new lines went to the rotated file"

# --- two workers: stats sum both, flush reaches both ---
printf '*.example.test\n' >"$E2E_WORK/allow2.txt"
start_moatd moatd2 --listen 127.0.0.3:53 --upstream 127.0.0.1:5300 --workers 2 \
	--allow "$E2E_WORK/allow2.txt" --log /dev/null --control "$E2E_WORK/ctl2.sock" \
	--metrics 127.0.0.3:9153
e2e_wait_port tcp 127.0.0.3 9153
# each name asked 6 times from random source ports: cached in both workers' shares
for i in $(seq 1 10); do for k in 1 2 3 4 5 6; do echo "w$i.wild.example.test A"; done; done \
	>"$E2E_WORK/names2.txt"
e2e_run dig +time=2 +tries=1 @127.0.0.3 -f "$E2E_WORK/names2.txt" >/dev/null
out=$(e2e_run "$CTL" -s "$E2E_WORK/ctl2.sock" --json stats)
total=$(e2e_run "$PY" -c 'import json,sys; d=json.loads(sys.argv[1]); print(sum(q["count"] for q in d["queries"]), d["workers"])' "$out")
e2e_assert_eq "60 2" "$total" "stats sum every worker's queries"
e2e_upstream_reset
out=$(e2e_run "$CTL" -s "$E2E_WORK/ctl2.sock" --json flush)
e2e_assert_contains "$out" '"workers":2' "flush answered after both workers"
for i in $(seq 1 10); do echo "w$i.wild.example.test A"; done >"$E2E_WORK/names3.txt"
e2e_run dig +time=2 +tries=1 @127.0.0.3 -f "$E2E_WORK/names3.txt" >/dev/null
n=$(e2e_upstream_queries | grep -c '^w[0-9]*\.wild\.example\.test\. A UDP$' || true)
e2e_assert_eq 10 "$n" "after flush every name goes upstream, whichever worker answers"
e2e_stop moatd2

# --- moatd's dnstap file ---
e2e_stop moatd
e2e_assert_eq 0 "$E2E_LAST_STATUS" "moatd stopped cleanly"
tap=$(dnstap-ldns -q -r "$E2E_WORK/moatd.dnstap")
for kind in CQ CR FQ FR; do
	e2e_assert_contains "$tap" " $kind 127.0.0.1 UDP " "dnstap: $kind message"
done
e2e_assert_contains "$tap" 'CQ 127.0.0.1 TCP' "dnstap: TCP client query"
n=$(grep -c ' CQ .*"evil.test." IN A' <<<"$tap")
e2e_assert_eq 1 "$n" "dnstap: one client query for evil.test"
grep -q ' FQ .*"evil.test."' <<<"$tap" && e2e_fail "dnstap: a denied name was forwarded"
full=$(dnstap-ldns -y -r "$E2E_WORK/moatd.dnstap")
e2e_assert_contains "$full" 'identity: "moatd"' "dnstap: identity"
e2e_assert_contains "$full" 'version: "moatd ' "dnstap: version"

# --- dnstap to a Frame Streams socket (fstrm_capture as the collector) ---
e2e_bg capture fstrm_capture -t protobuf:dnstap.Dnstap -u "$E2E_WORK/tap.sock" \
	-w "$E2E_WORK/captured.dnstap"
e2e_poll 5 test -S "$E2E_WORK/tap.sock" || true
sed -e "s|dnstap: {file: .*}|dnstap: {socket: $E2E_WORK/tap.sock}|" \
	-e "s|control: .*|control: $E2E_WORK/ctl3.sock|" -e "s|^metrics: .*||" \
	"$E2E_WORK/moatd.yaml" >"$E2E_WORK/moatd3.yaml"
start_moatd moatd3 -c "$E2E_WORK/moatd3.yaml"
for ((t = 0; t < 50; t++)); do
	e2e_dig @127.0.0.1 tap.evil.test A >/dev/null
	dnstap-ldns -q -r "$E2E_WORK/captured.dnstap" 2>/dev/null | grep -q '"tap.evil.test."' && break
	sleep 0.2
done
e2e_stop moatd3
e2e_stop capture
tap=$(dnstap-ldns -q -r "$E2E_WORK/captured.dnstap")
e2e_assert_contains "$tap" 'CQ 127.0.0.1 UDP' "dnstap socket: client query"
e2e_assert_contains "$tap" 'CR 127.0.0.1 UDP' "dnstap socket: client response"
e2e_pass
