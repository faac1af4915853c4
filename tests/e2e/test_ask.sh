#!/usr/bin/env bash
# Ask mode (issue 25): an agent with `on_unknown: ask` holds a query for a name no rule decides.
# `moatctl watch` shows the ask (one for two queries of the same name: coalesced); `moatctl allow
# NAME --ports tcp/443` answers both queries through the normal path (the upstream's address, the
# grant: TCP 443 to it then connects, TCP 80 does not); `moatctl deny` answers NXDOMAIN and the
# name is not asked about again; no answer in ask_timeout_ms: denied, a "timeout" event. A burst
# of 1000 distinct unknown names never holds more than ask_max_pending (the rest are denied at
# once) and, while they wait, another agent and the agent's own allowed names are answered. A
# kept rule survives a restart (state_dir); a temporary one (--for) expires.
# Topology: this namespace is the sandbox (moat-fw's netns placement) and the moat host (moatd,
# NSD on loopback, which moat-fw never filters; two workers); "net" one veth away holds 192.0.2.10
# (TCP 80, 443).
source "$(dirname "$0")/lib.sh"
e2e_init ask
chown "$(id -u moat 2>/dev/null || id -u nobody)" "$E2E_WORK"
PY=$E2E_PY
H="$E2E_DIR/peers/hostile.py"
CTL="$MOAT_BUILD/moatctl"
e2e_peer net
NET=$E2E_PEER
e2e_uplink "$E2E_NS" s0 "$NET" n0 203.0.113.2/24 203.0.113.1/24 2001:db8:ff::2/64 2001:db8:ff::1/64
e2e_addr_dev "$NET" lo 192.0.2.10/32
e2e_bg web ip netns exec "$NET" "$PY" "$H" tcp-listen 240 192.0.2.10:443 192.0.2.10:80
E2E_NS=$NET e2e_wait_port tcp 192.0.2.10 443
e2e_addr 127.0.0.2/32
e2e_addr 127.0.0.3/32
e2e_nsd 127.0.0.1 5300 "$E2E_ZONES/example.test.zone"
printf 'known.example.test\nmail.example.test\n' >"$E2E_WORK/allow.txt"
mkdir -p "$E2E_WORK/state"
chown "$(id -u moat 2>/dev/null || id -u nobody)" "$E2E_WORK/state"
cat >"$E2E_WORK/moatd.yaml" <<EOF
listen: ["127.0.0.1:53"]
upstreams: ["127.0.0.1:5300"]
log: {file: $E2E_WORK/queries.jsonl}
control: $E2E_WORK/ctl.sock
state_dir: $E2E_WORK/state
firewall_socket: $E2E_WORK/fw.sock
workers: 2  # held queries on both workers: one registry, each its own list
agents:
  - name: asker
    clients: [127.0.0.1/32]
    allow: [allow.txt]
    on_unknown: ask
    ask_timeout_ms: 60000
  - name: quick
    clients: [127.0.0.3/32]
    allow: [allow.txt]
    on_unknown: ask
    ask_timeout_ms: 2000
    ask_max_pending: 32
  - name: other
    clients: [127.0.0.2/32]
    allow: [allow.txt]
EOF
e2e_users # the daemons' own users, as the install makes them: their defaults agree
start_fw fw --socket "$E2E_WORK/fw.sock" --netns "$E2E_NS" --state "$E2E_WORK/fwst" \
	--resolver 192.0.2.53
start_moatd moatd -c "$E2E_WORK/moatd.yaml"
ctl() { e2e_run "$CTL" -s "$E2E_WORK/ctl.sock" "$@"; }
W="$E2E_WORK/watch.log"
e2e_bg watch "$CTL" -s "$E2E_WORK/ctl.sock" watch
# events KIND NAME: how many KIND events the watcher saw for NAME.
events() { jq -c "select(.event == \"$1\" and .name == \"$2\")" "$W" 2>/dev/null | grep -c . || true; }
seen() { (($(events "$1" "$2") >= ${3:-1})); }
wait_event() { e2e_poll 10 seen "$@" || e2e_fail "watch: no $1 event for $2: $(tail -n 3 "$W")"; }
logline() { jq -c "select(.qname == \"$1\")" "$E2E_WORK/queries.jsonl" | tail -n 1; }

# --- held, shown, coalesced, answered after allow, through the grant -------------------------------
e2e_assert_contains "$(e2e_run "$PY" "$H" connect 192.0.2.10 443)" failed "192.0.2.10 open before any answer"
e2e_bg q1 dig +time=20 +tries=1 @127.0.0.1 www.example.test A
wait_event ask www.example.test.
e2e_bg q2 dig +time=20 +tries=1 @127.0.0.1 www.example.test AAAA
e2e_poll 1 grep -q www "$E2E_WORK/queries.jsonl" && e2e_fail "a held query was answered before a decision"
e2e_alive q1 || e2e_fail "the held query was answered before a decision: $(cat "$E2E_WORK/q1.log")"
e2e_assert_eq 1 "$(events ask www.example.test.)" "two queries of one name: one ask"
e2e_assert_contains "$(ctl --json status)" '"asks":{"pending":1' "status: one ask pending"
out=$(ctl --json allow www.example.test --agent asker --ports tcp/443)
e2e_assert_contains "$out" '"ok":true,"cmd":"allow","agent":"asker","pattern":"www.example.test"' "allow: reply"
e2e_assert_contains "$out" '"kept":true,"asks_answered":1' "allow: the ask it answered"
e2e_wait_exit q1 5
e2e_wait_exit q2 5
e2e_assert_contains "$(cat "$E2E_WORK/q1.log")" "status: NOERROR" "held A query after allow"
e2e_assert_contains "$(cat "$E2E_WORK/q1.log")" "192.0.2.10" "held A query: the upstream's address"
e2e_assert_contains "$(cat "$E2E_WORK/q2.log")" "2001:db8::10" "the coalesced AAAA query"
wait_event decision www.example.test.
e2e_assert_eq allow "$(jq -r 'select(.event == "decision") | .decision' "$W" | head -n 1)" "watch: the decision"
line=$(logline www.example.test.)
e2e_assert_contains "$line" '"decision":"allow"' "log: allowed"
e2e_assert_contains "$line" '"rule":"moatctl-allow:asker:1"' "log: the runtime rule"
e2e_assert_contains "$line" '"grant":"OK"' "log: granted before the answer"
e2e_assert_eq connected "$(e2e_run "$PY" "$H" connect 192.0.2.10 443)" "the granted port after allow"
e2e_assert_contains "$(e2e_run "$PY" "$H" connect 192.0.2.10 80)" failed "a port outside --ports"
e2e_assert_contains "$(ctl --json explain www.example.test)" '"ports":"tcp/443"' "explain: the rule's ports"

# --- denied on deny; not asked again --------------------------------------------------------------
e2e_bg q3 dig +time=20 +tries=1 @127.0.0.1 mail2.example.test A
wait_event ask mail2.example.test.
ctl deny mail2.example.test --agent asker >/dev/null || e2e_fail "deny refused"
e2e_wait_exit q3 5
e2e_assert_contains "$(cat "$E2E_WORK/q3.log")" "status: NXDOMAIN" "held query after deny"
e2e_assert_contains "$(logline mail2.example.test.)" "denied by moatctl deny for agent asker" "log: deny"
out=$(e2e_dig @127.0.0.1 mail2.example.test TXT)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "a denied name asked again"
e2e_assert_eq 1 "$(events ask mail2.example.test.)" "a denied name asked about again"

# --- no answer in time: denied --------------------------------------------------------------------
out=$(e2e_run dig +time=10 +tries=1 @127.0.0.1 -b 127.0.0.3 late.example.test A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "no decision: not denied"
wait_event timeout late.example.test.
e2e_assert_contains "$(logline late.example.test.)" "no answer to the ask in 2000 ms" "log: timeout"

# --- a burst of 1000 distinct unknown names: at most 32 held, other agents answered ---------------
cat >"$E2E_WORK/burst.py" <<'PY'
import random, socket, struct, sys, time
n = int(sys.argv[1])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 21)
s.bind(("127.0.0.3", 0))
for i in range(n):
    q = b"".join(bytes([len(l)]) + l.encode() for l in ("b%d" % i, "burst", "example", "test"))
    s.sendto(struct.pack(">HHHHHH", i, 0x0100, 1, 0, 0, 0) + q + b"\0\0\1\0\1", ("127.0.0.1", 53))
rc, end = {}, time.time() + 10
while len(rc) < n and time.time() < end:
    s.settimeout(max(0.01, end - time.time()))
    try:
        d, _ = s.recvfrom(4096)
    except socket.timeout:
        break
    rc[struct.unpack(">H", d[:2])[0]] = d[3] & 15
print("answered=%d nxdomain=%d" % (len(rc), sum(1 for v in rc.values() if v == 3)))
PY
e2e_bg burst "$PY" "$E2E_WORK/burst.py" 1000
wait_event ask b0.burst.example.test.
# While the burst's names wait: another agent, and the agent's own listed name, are answered.
e2e_assert_contains "$(e2e_dig @127.0.0.1 -b 127.0.0.2 mail.example.test A)" "192.0.2.25" \
	"another agent blocked by the burst"
e2e_assert_contains "$(e2e_dig @127.0.0.1 -b 127.0.0.3 mail.example.test A)" "192.0.2.25" \
	"the bursting agent's listed name blocked by the burst"
e2e_assert_contains "$(ctl --json status)" '"quick":32' "burst: the cap not reached while its names wait"
e2e_wait_exit burst 15
e2e_assert_eq "answered=1000 nxdomain=1000" "$(cat "$E2E_WORK/burst.log")" "burst: every query answered, denied"
st=$(ctl --json status)
e2e_assert_contains "$st" '"quick":32}' "burst: more than 32 names held at once"
e2e_assert_eq 32 "$(jq -c 'select(.event == "ask" and (.name | endswith(".burst.example.test.")))' "$W" | grep -c .)" \
	"burst: asks shown"
e2e_assert_eq 968 "$(jq -r 'select(.qname != null and (.qname | endswith(".burst.example.test."))) | .reason' \
	"$E2E_WORK/queries.jsonl" | grep -c 'names already wait for an answer')" "burst: denied at once over the cap"
# The pending count the watcher saw never passed the cap.
max=$(jq -s '[foreach (.[] | select(.agent == "quick")) as $e (0;
	if $e.event == "ask" then . + 1 elif ($e.event == "timeout" or $e.event == "decision") then . - 1 else . end)] | max' "$W")
((max <= 32)) || e2e_fail "watch: $max asks pending at once"

# --- kept across a restart; a temporary rule expires ------------------------------------------------
ctl allow tmp.example.test --agent asker --for 2s >/dev/null || e2e_fail "temporary allow refused"
e2e_assert_contains "$(e2e_dig @127.0.0.1 tmp.example.test A)" "status: NXDOMAIN" "tmp: answered by the upstream"
e2e_assert_contains "$(logline tmp.example.test.)" '"decision":"allow"' "tmp: allowed while it lasts"
expired() { ctl --json explain tmp.example.test | grep -q '"decision":"deny-not-allowed"'; }
e2e_poll 10 expired || e2e_fail "the temporary rule never expired"
e2e_stop watch
stop_moatd moatd
start_moatd moatd2 -c "$E2E_WORK/moatd.yaml"
e2e_assert_contains "$(e2e_dig @127.0.0.1 www.example.test A)" "192.0.2.10" "the kept allow lost in a restart"
e2e_assert_contains "$(logline www.example.test.)" '"rule":"moatctl-allow:asker:1"' "restart: the kept rule"
out=$(e2e_dig @127.0.0.1 mail2.example.test A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "the kept deny lost in a restart"
e2e_assert_contains "$(ctl --json explain mail2.example.test)" "denied by moatctl deny" "restart: the kept deny"
stop_moatd moatd2
e2e_pass
