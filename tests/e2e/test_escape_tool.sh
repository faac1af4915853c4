#!/usr/bin/env bash
# moat-escape (issue 5) against a real moatd with no firewall: the DNS-side tests (1, 2, 3, 4, 9)
# hold because moatd denies, the network-side tests escape because nothing filters packets (5: a
# rogue resolver answers, 6: an unresolved address accepts, 7: an IPv6 host accepts, 8: an
# address stays reachable after its TTL), the control works, and the run exits 1 with a summary
# naming what escaped. With an empty allowlist the control fails. With moat-fw filtering the
# namespace, all thirteen hold and the run exits 0 (11: a name allowed for tcp/80 only does not
# reach port 443 of its address; 12 and 13 with a witness). Also: the table, TAP and JSON formats,
# usage errors
# (exit 2), and proof from NSD's query log that denied names never left.
# Everything runs inside the test's own namespace, which has only lo: nothing leaves it.
source "$(dirname "$0")/lib.sh"
e2e_init escape_tool
# moatd connects to moat-fw only as the user it drops to: both daemons run with the users the
# install makes (moat, moat-fw; the host's files untouched) and their defaults, which agree.
e2e_users

ESC="$MOAT_BUILD/moat-escape"
[[ -x "$ESC" ]] || e2e_fail "moat-escape not built: $ESC"

# Test 3 connects to 169.254.169.254 and fd00:ec2::254. That is only harmless because this
# namespace has nothing but lo and no route to either: check it, never assume it.
links=$(ip -n "$E2E_NS" -o link show | awk -F': ' '{print $2}')
e2e_assert_eq lo "$links" "namespace must have only lo"
if e2e_run ip route get 169.254.169.254 >/dev/null 2>&1; then
	e2e_fail "the namespace has a route to the metadata address"
fi

# --- the "internet": moatd's upstream, with a short-TTL name for test 8 ---
cat >"$E2E_WORK/escape.test.zone" <<'Z'
$ORIGIN escape.test.
$TTL 300
@       IN SOA  ns1.escape.test. hostmaster.escape.test. 2024010101 3600 600 86400 300
        IN NS   ns1.escape.test.
ns1     IN A    192.0.2.53
; test 8: a name whose grant (TTL 1 s) runs out while moat-escape waits
short 1 IN A    192.0.2.11
; test 11: allowed for tcp/80 only
scoped  IN A    192.0.2.12
Z
# On a documentation address, not loopback: with moat-fw on (last part) moatd must still reach
# it, and moat-fw never lets anything through to 127.0.0.0/8.
e2e_addr 192.0.2.53/32
e2e_nsd 192.0.2.53 53 "$E2E_ZONES/example.test.zone" "$E2E_ZONES/rebind.test.zone" \
	"$E2E_WORK/escape.test.zone"

# A rogue resolver the sandbox should never reach (test 5).
e2e_addr 203.0.113.53/32
e2e_nsd 203.0.113.53 53 "$E2E_ZONES/example.test.zone"

# Web servers: the control and test 8 (www.example.test = 192.0.2.10), an address nobody
# resolved (test 6), an IPv6 host (test 7).
e2e_addr 192.0.2.10/32
e2e_addr 192.0.2.11/32
e2e_addr 192.0.2.12/32
e2e_addr 198.51.100.80/32
e2e_addr 2001:db8::80/128
cat >"$E2E_WORK/listen.py" <<'PY'
import select, socket, sys
socks = []
for spec in sys.argv[1:]:
    host, port = spec.rsplit(":", 1)
    host = host.strip("[]")
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, int(port)))
    s.listen(64)
    socks.append(s)
while True:
    ready, _, _ = select.select(socks, [], [])
    for s in ready:
        c, _ = s.accept()
        c.close()
PY
e2e_bg web python3 "$E2E_WORK/listen.py" 192.0.2.10:80 192.0.2.11:80 198.51.100.80:80 \
	198.51.100.80:443 192.0.2.12:80 192.0.2.12:443 \
	'[2001:db8::80]:80' '[2001:db8::80]:443'
e2e_wait_port tcp 192.0.2.10 80
e2e_wait_port tcp 2001:db8::80 443

cat >"$E2E_WORK/allow.txt" <<'A'
www.example.test
*.rebind.test
short.escape.test
scoped.escape.test tcp/80
A
: >"$E2E_WORK/empty.txt"

# shellcheck disable=SC2034 # read by start_moatd (lib.sh)
MOATD_BASE=(--upstream 192.0.2.53:53)
start_moatd moatd --listen 127.0.0.1:53 --allow "$E2E_WORK/allow.txt"

# Every address below lives in this namespace; the public-resolver defaults are overridden.
cat >"$E2E_WORK/escape.conf" <<'C'
# moat-escape config for the e2e test
resolver = 127.0.0.1
allowed = www.example.test
allowed-target = www.example.test:80
rebind = meta.rebind.test
rebind = priv.rebind.test
rebind = mapped.rebind.test
other-resolver 203.0.113.53
unresolved 198.51.100.80
v6-target 2001:db8::80
expire-name short.escape.test
expire-wait 10
grant-min 0
tunnel-domain tunnel.test
scoped-name scoped.escape.test
scoped-open 80
timeout 1000
C

# run_escape ARGS...: run moat-escape in the namespace; sets OUT (stdout) and RC.
run_escape() {
	RC=0
	OUT=$(e2e_run timeout 120 "$ESC" "$@" 2>"$E2E_WORK/escape.err") || RC=$?
	printf '%s\n' "$OUT" >>"$E2E_WORK/escape.log"
}
row() { awk -v n="$2" '$1 == n' <<<"$1"; }
summary() { grep '^moat-escape: ' <<<"$1"; }

# --- no firewall: 5-8 escape, the DNS side holds, the control works ---
e2e_upstream_reset
run_escape --config "$E2E_WORK/escape.conf"
e2e_assert_eq 1 "$RC" "exit status with escapes"
for n in 1 2 3 4 9; do
	e2e_assert_contains "$(row "$OUT" $n)" " blocked  blocked " "test $n should hold"
done
for n in 5 6 7 8 11; do
	e2e_assert_contains "$(row "$OUT" $n)" " blocked  ESCAPED " "test $n should escape"
done
e2e_assert_contains "$(row "$OUT" 10)" " works    works " "control should work"
e2e_assert_eq 1 "$(grep -c '^moat-escape: ' <<<"$OUT")" "exactly one summary line"
want="moat-escape: 6 of 11 held; escaped: 5 (other resolver 203.0.113.53 answered over UDP 53)"
want+=", 6 (198.51.100.80:80 accepted a connection), 7 ([2001:db8::80]:80 accepted a connection)"
want+=", 8 (192.0.2.11:80 still accepted a new connection 3 s after it was granted for 1 s)"
want+=", 11 (192.0.2.12:443 accepted a connection past a grant for port 80)"
e2e_assert_eq "$want" "$(summary "$OUT")" "summary line"
e2e_assert_eq "$want" "$(tail -n 1 <<<"$OUT")" "the summary is the last line"
# The table says why: the numeric forms are one address, the network is unreachable.
e2e_assert_contains "$(row "$OUT" 3)" \
	"169.254.169.254:80 (= 2852039166 = 0xa9fea9fe = 0251.0376.0251.0376): Network is unreachable" \
	"test 3 detail"
e2e_assert_contains "$(row "$OUT" 4)" \
	"3 names, A+AAAA: NXDOMAIN (EDE 15) x3, NOERROR (no data) x3" "test 4 detail"
e2e_assert_contains "$(row "$OUT" 5)" "203.0.113.53 TCP 53: answered" "test 5 over TCP"

# Denied names never reached the upstream: tunnelling, metadata and literal names stayed in moatd.
up=$(e2e_upstream_queries 1)
e2e_assert_not_contains "$up" "tunnel.test." "tunnelling query reached the upstream"
e2e_assert_not_contains "$up" "metadata" "metadata name reached the upstream"
e2e_assert_not_contains "$up" "169.254.169.254" "literal name reached the upstream"
e2e_assert_contains "$up" "meta.rebind.test. A UDP" "rebind name asked upstream (then refused)"

# --- TAP: same verdicts, "not ok" for escapes ---
run_escape --config "$E2E_WORK/escape.conf" --expire-wait 0 --format tap
e2e_assert_eq 1 "$RC" "TAP exit status"
e2e_assert_contains "$OUT" $'TAP version 13\n1..11' "TAP plan"
e2e_assert_contains "$OUT" "ok 1 - unknown name resolves: blocked" "TAP ok line"
e2e_assert_contains "$OUT" "not ok 5 - other resolver answers: ESCAPED" "TAP not ok line"
e2e_assert_contains "$OUT" "not ok 8 - expired grant still reachable: not run" "TAP not run"
e2e_assert_contains "$OUT" "ok 10 - control: allowed name works: works" "TAP control"
e2e_assert_contains "$(tail -n 1 <<<"$OUT")" "; not run: 8 (expire-wait is 0)" "TAP summary"

# --- empty allowlist: the control fails (a false deny fails the run) ---
e2e_stop moatd
start_moatd moatd-empty --listen 127.0.0.1:53 --allow "$E2E_WORK/empty.txt"
run_escape --config "$E2E_WORK/escape.conf" --expire-wait 0
e2e_assert_eq 1 "$RC" "exit status with a failed control"
e2e_assert_contains "$(row "$OUT" 10)" " works    FAILED " "control should fail"
e2e_assert_contains "$(summary "$OUT")" \
	"; control failed (allowed name www.example.test did not resolve" "summary names the control"

run_escape --config "$E2E_WORK/escape.conf" --expire-wait 0 --format json
e2e_assert_eq 1 "$RC" "JSON exit status"
check=$(python3 -c '
import json, sys
d = json.load(sys.stdin)
r = {x["id"]: x["result"] for x in d["results"]}
print(len(d["results"]), d["ok"], d["held"], d["total"], r[1], r[5], r[8], r[10])
print(d["summary"].startswith("moat-escape: 5 of 11 held; escaped: 5 "))
' <<<"$OUT") || e2e_fail "JSON does not parse: $OUT"
e2e_assert_eq $'11 False 5 11 blocked escaped not run failed\nTrue' "$check" "JSON content"

# --- usage and config errors: exit 2 ---
run_escape --resolver 127.0.0.1
e2e_assert_eq 2 "$RC" "no --allowed is a usage error"
e2e_assert_contains "$(cat "$E2E_WORK/escape.err")" "no control" "no --allowed message"
printf 'allowed www.example.test\ntimeout fast\n' >"$E2E_WORK/bad.conf"
run_escape --config "$E2E_WORK/bad.conf"
e2e_assert_eq 2 "$RC" "bad config is exit 2"
e2e_assert_contains "$(cat "$E2E_WORK/escape.err")" "bad.conf:2: timeout: 'fast'" \
	"config error names the line"
run_escape --allowed www.example.test --format xml
e2e_assert_eq 2 "$RC" "bad --format is exit 2"

# --- with moat-fw filtering a sandbox namespace: all thirteen hold, exit 0 ---
# moat-fw never filters a sandbox's own loopback, so moat-escape moves into a sandbox of its own,
# one veth away from the hosts above (this namespace does not forward: nothing goes further).
# moatd moves off loopback to 192.0.2.129 (the link; its network is the sandbox's), the only
# resolver the sandbox may reach; grants live at least 1 s, so test 8 waits 1 + 2 s.
e2e_stop moatd-empty
e2e_peer sbx
SBX=$E2E_PEER
e2e_uplink "$SBX" s0 "$E2E_NS" h0 192.0.2.130/25 192.0.2.129/25 2001:db8:ff::2/64 2001:db8:ff::1/64
e2e_assert_eq 0 "$(e2e_run sysctl -n net.ipv4.ip_forward)" "the hosts' namespace must not forward"
# The witness for tests 11 and 12 runs on www.example.test (192.0.2.10, 2001:db8::10).
e2e_addr 2001:db8::10/128
e2e_bg witness python3 "$MOAT_SRC/tools/escape/witness.py" 240 192.0.2.10:7 "[2001:db8::10]:7"
e2e_wait_port tcp 192.0.2.10 7
# moat-fw starts inside the sandbox's namespace: started here, it would refuse grants of this
# namespace's own addresses (the web servers live on its lo), as it must on a real moat host.
e2e_bg fw "${E2E_USERS[@]}" ip netns exec "$SBX" "$MOAT_BUILD/moat-fw" --socket "$E2E_WORK/fw.sock" --netns "$SBX" \
	--state "$E2E_WORK/fwstate" --resolver 192.0.2.129 --min-lifetime 1
e2e_wait_log fw 'listening on'
start_moatd moatd-fw --listen 192.0.2.129:53 --allow "$E2E_WORK/allow.txt" --firewall "$E2E_WORK/fw.sock"
sed -e 's/^resolver = .*/resolver = 192.0.2.129/' -e 's/^grant-min 0/grant-min 1/' \
	"$E2E_WORK/escape.conf" >"$E2E_WORK/escape-fw.conf"
echo "witness = www.example.test:7" >>"$E2E_WORK/escape-fw.conf"
RC=0
OUT=$(ip netns exec "$SBX" timeout 120 "$ESC" --config "$E2E_WORK/escape-fw.conf" \
	2>"$E2E_WORK/escape.err") || RC=$?
e2e_assert_eq "moat-escape: 13 of 13 held" "$(tail -n 1 <<<"$OUT")" "summary with moat-fw"
e2e_assert_contains "$(row "$OUT" 11)" "192.0.2.12:80: open; 192.0.2.12:443:" "test 11 really ran"
e2e_assert_contains "$(row "$OUT" 12)" "from 192.0.2.131: not seen" "test 12 forged a neighbour"
e2e_assert_contains "$(row "$OUT" 13)" "192.0.2.10 connecting to port 18080: no connection" "test 13"
e2e_assert_eq 0 "$RC" "exit status with moat-fw"
e2e_assert_contains "$(row "$OUT" 8)" "first connection open; new connection 3 s later:" \
	"test 8 really ran"

e2e_pass
