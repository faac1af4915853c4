#!/usr/bin/env bash
# Audit mode and the explanations of issue 25. An agent with `mode: audit` (every agent with
# --audit) gets the upstream's answer for a name no allowlist allows, logged `would-deny` with
# enforce's own reason (and the upstream saw the question); what moat denies for safety stays
# denied in audit mode: metadata and other high-risk names (alert, never forwarded), IP
# literals, names that embed an internal address, answers that hold one. A runtime agent added
# with --audit audits too, and is still in audit mode after a restart (its store record).
# explain names the rule's ports and the audit; `status` shows the last reload error; a failed
# `agent add` names its command; `--check` reports every bad line of a file in one run,
# `name:443` with the `name tcp/443` form, and an unknown config key with the nearest known one.
source "$(dirname "$0")/lib.sh"
e2e_init audit
chown "$(id -u moat 2>/dev/null || id -u nobody)" "$E2E_WORK"
CTL="$MOAT_BUILD/moatctl"

e2e_nsd 127.0.0.1 5300 "$E2E_ZONES/example.test.zone" "$E2E_ZONES/rebind.test.zone"
printf 'www.example.test tcp/443,8443\nmetadata.google.internal\n' >"$E2E_WORK/allow.txt"
cat >"$E2E_WORK/moatd.yaml" <<EOF
listen: ["127.0.0.1:53"]
upstreams: ["127.0.0.1:5300"]
log: {file: $E2E_WORK/queries.jsonl}
control: $E2E_WORK/ctl.sock
state_dir: $E2E_WORK/state
agents:
  - name: aud
    clients: [127.0.0.1/32]
    allow: [allow.txt]
    mode: audit
  - name: enf
    clients: [127.0.0.2/32]
    allow: [allow.txt]
EOF
mkdir -p "$E2E_WORK/state"
chown "$(id -u moat 2>/dev/null || id -u nobody)" "$E2E_WORK/state"
e2e_addr 127.0.0.2/32
e2e_addr 127.0.0.3/32
start_moatd moatd -c "$E2E_WORK/moatd.yaml"
ctl() { e2e_run "$CTL" -s "$E2E_WORK/ctl.sock" "$@"; }
# logline NAME: the last query log line for NAME (after a query, the line is written by the
# time the answer is out: the log is flushed each loop turn, before the next read).
logline() {
	e2e_poll 5 grep -q "\"qname\":\"$1\"" "$E2E_WORK/queries.jsonl" || e2e_fail "no log line for $1"
	grep "\"qname\":\"$1\"" "$E2E_WORK/queries.jsonl" | tail -n 1
}

# --- audit: a name on no allowlist is answered as the upstream answers, logged would-deny ---
out=$(e2e_dig @127.0.0.1 mail.example.test A)
e2e_assert_eq NOERROR "$(status_of "$out")" "audit: unlisted name not answered"
e2e_assert_contains "$out" "192.0.2.25" "audit: the upstream's address"
line=$(logline mail.example.test.)
e2e_assert_contains "$line" '"decision":"would-deny"' "audit: decision"
e2e_assert_contains "$line" '"reason":"moat: not on allowlist of agent aud"' "audit: enforce's reason"
e2e_assert_contains "$line" '"answer":["192.0.2.25"]' "audit: the released address"
e2e_assert_contains "$line" '"alert":false' "audit: not an alert"
e2e_assert_contains "$(e2e_upstream_queries)" "mail.example.test. A" "audit: the upstream was asked"
# The same name for the enforcing agent: denied, never forwarded beyond what audit sent.
out=$(e2e_dig @127.0.0.1 -b 127.0.0.2 mail.example.test MX)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "enforce: unlisted name answered"
e2e_assert_contains "$(logline mail.example.test.)" '"decision":"deny-not-allowed"' "enforce: decision"
e2e_assert_not_contains "$(e2e_upstream_queries)" "mail.example.test. MX" "enforce: forwarded a denied name"
# A listed name keeps its rule in audit mode.
e2e_assert_contains "$(e2e_dig @127.0.0.1 www.example.test A)" "192.0.2.10" "audit: listed name"
e2e_assert_contains "$(logline www.example.test.)" '"decision":"allow"' "audit: listed name's decision"

# --audit in flag mode: the default agent audits.
e2e_addr 127.0.0.4/32
start_moatd flagaud --listen 127.0.0.4:53 --upstream 127.0.0.1:5300 --allow "$E2E_WORK/allow.txt" --audit
e2e_assert_contains "$(e2e_dig @127.0.0.4 mail.example.test A)" "192.0.2.25" "--audit: unlisted name not answered"
e2e_assert_contains "$(jq -c 'select(.qname == "mail.example.test.")' "$E2E_WORK/flagaud.jsonl")" \
	'"decision":"would-deny","reason":"moat: not on allowlist of agent default"' "--audit: decision"
stop_moatd flagaud

# --- what audit never relaxes ---
e2e_upstream_reset
# metadata.google.internal is even listed: the high-risk list wins, in audit mode too.
out=$(e2e_dig @127.0.0.1 metadata.google.internal A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "audit: high-risk name answered"
line=$(logline metadata.google.internal.)
e2e_assert_contains "$line" '"decision":"deny-high-risk"' "audit: high-risk decision"
e2e_assert_contains "$line" '"alert":true' "audit: high-risk alert"
out=$(e2e_dig @127.0.0.1 169.254.169.254 A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "audit: IP literal answered"
e2e_assert_contains "$(logline 169.254.169.254.)" '"decision":"deny-ip-literal"' "audit: IP literal decision"
out=$(e2e_dig @127.0.0.1 169-254-169-254.example.test A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "audit: embedded address answered"
e2e_assert_contains "$(logline 169-254-169-254.example.test.)" '"decision":"deny-embedded-address"' \
	"audit: embedded address decision"
# An unlisted name whose answer holds the metadata address: forwarded (audit), refused on the
# answer like any other.
out=$(e2e_dig @127.0.0.1 meta.rebind.test A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "audit: internal answer released"
e2e_assert_contains "$out" "moat: answer contained 169.254.169.254" "audit: EDE of the internal answer"
e2e_assert_not_contains "$out" "169.254.169.254	" "audit: the internal address leaked"
line=$(logline meta.rebind.test.)
e2e_assert_contains "$line" '"decision":"deny-embedded-address"' "audit: internal answer decision"
e2e_assert_contains "$line" '"alert":true' "audit: internal answer alert"
up=$(e2e_upstream_queries)
for n in metadata.google.internal. 169.254.169.254. 169-254-169-254.example.test.; do
	e2e_assert_not_contains "$up" "$n" "audit: $n reached the upstream"
done

# --- explain: the audit, the rule's ports ---
out=$(ctl --json explain mail.example.test --client 127.0.0.1)
e2e_assert_contains "$out" '"decision":"would-deny"' "explain: audit decision"
e2e_assert_contains "$out" '"mode":"audit"' "explain: mode"
out=$(ctl --json explain www.example.test --client 127.0.0.2)
e2e_assert_contains "$out" '"rule":"'"$E2E_WORK"'/allow.txt:1"' "explain: rule"
e2e_assert_contains "$out" '"ports":"tcp/443,8443"' "explain: the rule's ports"
e2e_assert_contains "$out" '"addresses":null' "explain: no firewall, no grant to look for"
e2e_assert_contains "$(ctl --json agents)" '"clients":["127.0.0.1/32"],"runtime":false,"mode":"audit"' "agents: mode"

# --- a runtime agent in audit mode, across a restart ---
out=$(ctl --json agent add rt --clients 127.0.0.3/32 --pattern www.example.test --audit)
e2e_assert_contains "$out" '"cmd":"agent add"' "agent add: reply names its command"
out=$(ctl --json agent add rt --clients 127.0.0.3/32 --pattern www.example.test) && e2e_fail "agent added twice"
e2e_assert_contains "$out" '"ok":false,"cmd":"agent add","error"' "agent add: an error names its command"
stop_moatd moatd
start_moatd moatd2 -c "$E2E_WORK/moatd.yaml"
out=$(e2e_dig @127.0.0.1 -b 127.0.0.3 mail.example.test TXT)
e2e_assert_eq NOERROR "$(status_of "$out")" "runtime audit agent: unlisted name denied after restart"
e2e_assert_contains "$(logline mail.example.test.)" '"agent":"rt"' "runtime audit agent: agent"
e2e_assert_contains "$(logline mail.example.test.)" '"decision":"would-deny"' "runtime audit agent: decision"
e2e_assert_contains "$(ctl --json agents)" '"clients":["127.0.0.3/32"],"runtime":true,"mode":"audit"' "runtime agent: mode kept"

# --- status: the firewall link and the last reload error ---
cp "$E2E_WORK/allow.txt" "$E2E_WORK/allow.good"
printf 'ok.example.test\nbad..example.test\n' >>"$E2E_WORK/allow.txt"
ctl reload >/dev/null 2>&1 && e2e_fail "reload took a bad file"
out=$(ctl --json status)
e2e_assert_contains "$out" '"last_reload_ok":false' "status: reload failed"
e2e_assert_contains "$out" "\"last_reload_error\":\"$E2E_WORK/allow.txt:4: bad pattern" "status: its reason"
e2e_assert_contains "$out" '"firewall":null' "status: no firewall configured"
cp "$E2E_WORK/allow.good" "$E2E_WORK/allow.txt"
ctl reload >/dev/null || e2e_fail "reload of the good file failed"
e2e_assert_contains "$(ctl --json status)" '"last_reload_error":null' "status: error cleared by a good reload"
stop_moatd moatd2

# --- --check: every error of a file in one run, the port hint, the nearest key ---
cat >"$E2E_WORK/bad.txt" <<'B'
good.example.test
api.example.test:443
bad..example.test
https://example.test/path
also-good.example.test tcp/80
nope.example.test tcp/0
B
st=0
out=$("$MOAT_BUILD/moatd" --listen 127.0.0.1:53 --upstream 127.0.0.1:5300 --allow "$E2E_WORK/bad.txt" \
	--check 2>&1) || st=$?
e2e_assert_eq 1 "$st" "--check: exit status"
e2e_assert_contains "$out" "bad.txt:2: bad pattern 'api.example.test:443': a port glued to the name; ports follow it after a blank: api.example.test tcp/443" "--check: port hint"
e2e_assert_contains "$out" "bad.txt:3: bad pattern 'bad..example.test'" "--check: second error"
e2e_assert_contains "$out" "bad.txt:4: bad pattern 'https://example.test/path'" "--check: third error"
e2e_assert_contains "$out" "bad.txt:6: bad port" "--check: fourth error"
e2e_assert_eq 4 "$(grep -c 'bad.txt:' <<<"$out")" "--check: one line per error"
# Capped: 30 bad lines report 20 and how many more.
for i in $(seq 30); do echo "x$i..example.test"; done >"$E2E_WORK/many.txt"
out=$("$MOAT_BUILD/moatd" --listen 127.0.0.1:53 --upstream 127.0.0.1:5300 --allow "$E2E_WORK/many.txt" \
	--check 2>&1) || true
e2e_assert_eq 20 "$(grep -c 'many.txt:' <<<"$out")" "--check: capped at 20"
e2e_assert_contains "$out" "... and 10 more error(s)" "--check: the rest counted"
cat >"$E2E_WORK/typo.yaml" <<EOF
listen: ["127.0.0.1:53"]
upstream: ["127.0.0.1:5300"]
agents:
  - name: a
    clients: [127.0.0.1/32]
    allowlist: [allow.good]
    deny: nope
EOF
out=$("$MOAT_BUILD/moatd" -c "$E2E_WORK/typo.yaml" --check 2>&1) || true
e2e_assert_contains "$out" "typo.yaml:2: unknown key 'upstream' (did you mean 'upstreams'?)" "--check: nearest root key"
e2e_assert_contains "$out" "typo.yaml:6: unknown key 'allowlist' (did you mean 'allow'?)" "--check: nearest agent key"
e2e_assert_contains "$out" "typo.yaml:7: deny: expected nxdomain, refused or sinkhole" "--check: the config's third error"
out=$("$CTL" check "$E2E_WORK/typo.yaml") && e2e_fail "moatctl check took a bad config"
e2e_assert_contains "$out" "did you mean 'allow'?" "moatctl check: the same report"
e2e_pass
