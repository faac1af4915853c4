#!/usr/bin/env bash
# moat-fw on its own (issue 4), netns placement, driven by a stand-in for moatd
# (peers/fw_client.py): a grant puts the address into table inet moat's allow set with a timeout
# and a real TCP connection to it works, while an ungranted address and DNS to any other resolver
# are dropped; a grant naming an always-deny address (metadata, loopback, link-local, NAT64 of
# metadata) is refused whole and never reaches the kernel; lifetimes are clamped; a table moat-fw
# does not own is left untouched; on SIGTERM the rules stay; after a restart with the same ledger
# the live grant is back and the expired one is not.
source "$(dirname "$0")/lib.sh"
e2e_init fw_alone

CLIENT="$E2E_DIR/peers/fw_client.py"
SOCK="$E2E_WORK/fw.sock"
STATE="$E2E_WORK/state"
# The system interpreter when there is one: a version-manager shim costs ~1 s per start, and this
# test starts python some forty times.
PY=$E2E_PY

# Hosts: documentation addresses on the lo of a second namespace ("net"), one veth away (the
# sandbox's own loopback is never filtered). 192.0.2.53 plays moatd, 198.51.100.53 another
# resolver.
e2e_peer net
NET=$E2E_PEER
e2e_uplink "$E2E_NS" s0 "$NET" n0 203.0.113.2/24 203.0.113.1/24 2001:db8:ff::2/64 2001:db8:ff::1/64
for a in 192.0.2.80/32 192.0.2.81/32 192.0.2.82/32 192.0.2.53/32 198.51.100.53/32; do
	e2e_addr_dev "$NET" lo "$a"
done
e2e_addr_dev "$NET" lo 2001:db8::80/128

# A tiny TCP listener on every address above, bounded in time.
cat >"$E2E_WORK/listen.py" <<'PY'
import select, socket, sys, time
socks = []
for spec in sys.argv[2:]:
    host, port = spec.rsplit(":", 1)
    host = host.strip("[]")
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, int(port)))
    s.listen(16)
    socks.append(s)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    r, _, _ = select.select(socks, [], [], 0.2)
    for s in r:
        c, _ = s.accept()
        c.close()
PY
cat >"$E2E_WORK/connect.py" <<'PY'
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
s.settimeout(2)
try:
    s.connect((host, port))
    print("connected")
except OSError as e:
    print("failed: %s" % e)
PY
e2e_bg listen ip netns exec "$NET" "$PY" "$E2E_WORK/listen.py" 240 192.0.2.80:8080 \
	192.0.2.81:8080 192.0.2.82:8080 192.0.2.53:53 198.51.100.53:53 "[2001:db8::80]:8080"
E2E_NS=$NET e2e_wait_port tcp 192.0.2.80 8080
E2E_NS=$NET e2e_wait_port tcp 198.51.100.53 53
# The sandbox's own loopback service (a dev server, a test suite): never filtered.
e2e_bg local "$PY" "$E2E_WORK/listen.py" 240 127.0.0.1:8000 "[::1]:8000"
e2e_wait_port tcp 127.0.0.1 8000

connect() { e2e_run "$PY" "$E2E_WORK/connect.py" "$1" "$2"; }
grant() { "$PY" "$CLIENT" --socket "$SOCK" "$@"; }
allow4() { e2e_run nft list set inet moat allow4; }
allow6() { e2e_run nft list set inet moat allow6; }

# Before moat-fw: everything connects (proves the listener, so "failed" later means the firewall).
e2e_assert_eq connected "$(connect 192.0.2.81 8080)" "listener not reachable without moat-fw"

# A table moat-fw must never touch.
e2e_run nft add table inet other
e2e_run nft add set inet other keep '{ type ipv4_addr; elements = { 203.0.113.9 }; }'
e2e_run nft add chain inet other out '{ type filter hook output priority 10; policy accept; }'
e2e_run nft add rule inet other out ip daddr 203.0.113.10 accept
other_before=$(e2e_run nft list table inet other)

# moat-fw in the netns placement on our own namespace (started inside it, so even a
# failed setns could not reach the root namespace's rules).
# shellcheck disable=SC2034 # read by start_fw (lib.sh)
FW_BASE=(--socket "$SOCK" --netns "$E2E_NS" --state "$STATE" --user nobody --moatd-user root
	--resolver 192.0.2.53 --min-lifetime 1 --max-lifetime 3600)
start_fw fw
[[ -S "$SOCK" ]] || e2e_fail "no socket at $SOCK"
# Least privilege (issues 7, 11): its own unprivileged user (nobody here), only CAP_NET_ADMIN
# (bit 12, ambient too) left, no_new_privs, and the allowlist seccomp filter.
st=$(cat "/proc/$(e2e_pid fw)/status")
e2e_assert_eq "$(id -u nobody)" "$(awk '/^Uid:/ { print $3 }' <<<"$st")" "moat-fw effective uid"
e2e_assert_eq 0000000000001000 "$(awk '/^CapEff:/ { print $2 }' <<<"$st")" "moat-fw effective caps"
e2e_assert_eq 0000000000001000 "$(awk '/^CapPrm:/ { print $2 }' <<<"$st")" "moat-fw permitted caps"
e2e_assert_eq 0000000000001000 "$(awk '/^CapAmb:/ { print $2 }' <<<"$st")" "moat-fw ambient caps"
e2e_assert_eq 0000000000001000 "$(awk '/^CapBnd:/ { print $2 }' <<<"$st")" "moat-fw bounding set"
e2e_assert_eq 1 "$(awk '/^NoNewPrivs:/ { print $2 }' <<<"$st")" "moat-fw no_new_privs"
e2e_assert_eq 2 "$(awk '/^Seccomp:/ { print $2 }' <<<"$st")" "moat-fw seccomp filter"
e2e_assert_eq 660 "$(stat -c %a "$SOCK")" "socket mode"
e2e_assert_eq $'table inet other\ntable inet moat' "$(e2e_run nft list tables)" "tables after start"
e2e_assert_eq "$other_before" "$(e2e_run nft list table inet other)" "inet other changed"

# --- nothing granted: everything but DNS to the resolver is dropped -------------------------
e2e_assert_contains "$(connect 192.0.2.80 8080)" "failed" "ungranted 192.0.2.80 reachable"
e2e_assert_eq connected "$(connect 192.0.2.53 53)" "DNS over TCP to the resolver blocked"
e2e_assert_contains "$(connect 198.51.100.53 53)" "failed" "DNS to another resolver reachable"
e2e_assert_eq connected "$(connect 127.0.0.1 8000)" "the sandbox's own loopback is blocked"
e2e_assert_eq connected "$(connect ::1 8000)" "the sandbox's own IPv6 loopback is blocked"

# --- a grant opens exactly its addresses, with a timeout -------------------------------------
e2e_assert_eq "seq=1 status=OK lifetime=300" \
	"$(grant --seq 1 --agent ci-42 --lifetime 300 192.0.2.80 2001:db8::80)" "grant 1"
e2e_assert_contains "$(allow4)" "192.0.2.80 timeout 5m2s" "allow4 lacks the element with its timeout"
e2e_assert_contains "$(allow6)" "2001:db8::80 timeout 5m2s" "allow6 lacks the element"
e2e_assert_eq connected "$(connect 192.0.2.80 8080)" "granted 192.0.2.80 blocked"
e2e_assert_eq connected "$(connect 2001:db8::80 8080)" "granted 2001:db8::80 blocked"
e2e_assert_contains "$(connect 192.0.2.81 8080)" "failed" "ungranted 192.0.2.81 reachable"
e2e_assert_contains "$(connect 198.51.100.53 53)" "failed" "DNS to another resolver reachable"
e2e_assert_contains "$(e2e_run nft list chain inet moat output)" "counter packets" "no counters"
dropped=$(e2e_run nft list chain inet moat output | awk '/^\t\tcounter packets/ { print $3 }')
((dropped > 0)) || e2e_fail "final drop counter did not count the blocked connects"

# --- evil grants: refused whole, nothing of them reaches the kernel --------------------------
e2e_assert_eq "seq=2 status=DENIED lifetime=0" \
	"$(grant --seq 2 --lifetime 300 192.0.2.81 169.254.169.254)" "metadata grant not refused"
for evil in 127.0.0.1 0.0.0.0 169.254.170.2 fe80::1 fd00:ec2::254 64:ff9b::a9fe:a9fe \
	::ffff:169.254.169.254; do
	e2e_assert_eq "seq=3 status=DENIED lifetime=0" "$(grant --seq 3 "$evil")" "$evil not refused"
done
out=$(allow4)
e2e_assert_not_contains "$out" "169.254" "metadata address entered the allow set"
e2e_assert_not_contains "$out" "192.0.2.81" "a denied grant's good address entered the set"
e2e_assert_not_contains "$(allow6)" "fe80" "link-local entered allow6"
e2e_assert_contains "$(connect 192.0.2.81 8080)" "failed" "denied grant opened 192.0.2.81"
e2e_assert_contains "$(cat "$E2E_WORK/fw.log")" \
	"ALERT: grant seq 2 for agent ci asks for always-denied address 169.254.169.254" "no alert"

# --- clamping, bad messages, refresh --------------------------------------------------------
e2e_assert_eq "seq=4 status=OK lifetime=3600" "$(grant --seq 4 --lifetime 999999 203.0.113.7)" \
	"lifetime not clamped to --max-lifetime"
e2e_assert_eq "seq=5 status=BADMSG lifetime=0" "$(grant --raw 0101000100000005)" "bad version"
# Longer than any valid message (FWPROTO_MAXMSG 1231): refused whole, not read in part.
e2e_assert_eq "seq=16843009 status=BADMSG lifetime=0" "$(grant --raw "$(printf '01%.0s' {1..1300})")" \
	"oversized message"
e2e_assert_eq "seq=6 status=OK lifetime=600" "$(grant --seq 6 --lifetime 600 192.0.2.80)" "refresh"
e2e_assert_contains "$(allow4)" "192.0.2.80 timeout 10m2s" "refresh did not extend the timeout"
e2e_assert_eq "seq=7 status=OK lifetime=60" "$(grant --seq 7 --lifetime 60 192.0.2.80)" "shorter"
# (A kernel may rewrite the element with the ledger's remaining time: still about 10 minutes.)
out=$(allow4)
[[ "$out" =~ 192\.0\.2\.80\ timeout\ (10m|9m5[0-9]s) ]] ||
	e2e_fail "a shorter grant shortened the timeout: $out"

# A batch of 100 grants in one go: all acknowledged.
e2e_assert_contains "$(grant --seq 100 --count 100 --quiet --lifetime 120 198.51.100.100)" \
	"acks=100 ok=100" "batch of 100"

# --- expiry and restart ---------------------------------------------------------------------
e2e_assert_eq "seq=8 status=OK lifetime=2" "$(grant --seq 8 --lifetime 2 192.0.2.82)" "short grant"
e2e_assert_contains "$(allow4)" "192.0.2.82 timeout 4s" "short grant not in the set"
e2e_stop fw
e2e_assert_eq 0 "$E2E_LAST_STATUS" "moat-fw exit status after SIGTERM"
# (The socket file may stay: moat-fw runs as nobody by then. Nobody answers on it.)
grant --seq 99 192.0.2.81 >/dev/null 2>&1 && e2e_fail "a stopped moat-fw still answers"
e2e_assert_contains "$(allow4)" "192.0.2.80 timeout" "rules were removed on stop"
e2e_assert_contains "$(connect 192.0.2.81 8080)" "failed" "closed did not stay closed on stop"
sleep 5.5 # the 2 s grant (+2 s slack) is now expired in the ledger and the kernel
e2e_assert_not_contains "$(allow4)" "192.0.2.82" "kernel kept an expired element"

start_fw fw2
e2e_assert_contains "$(cat "$E2E_WORK/fw2.log")" "grants restored" "no restore line"
out=$(allow4)
e2e_assert_contains "$out" "192.0.2.80 timeout" "live grant lost across the restart"
e2e_assert_contains "$out" "203.0.113.7 timeout" "clamped grant lost across the restart"
e2e_assert_not_contains "$out" "192.0.2.82" "expired grant came back after the restart"
e2e_assert_contains "$(allow6)" "2001:db8::80 timeout" "IPv6 grant lost across the restart"
e2e_assert_eq connected "$(connect 192.0.2.80 8080)" "granted address blocked after restart"
e2e_assert_contains "$(connect 192.0.2.82 8080)" "failed" "expired address reachable"
e2e_assert_eq "seq=9 status=OK lifetime=30" "$(grant --seq 9 --lifetime 30 192.0.2.81)" \
	"grant after restart"
e2e_assert_eq connected "$(connect 192.0.2.81 8080)" "grant after restart did not open"
e2e_assert_eq $'table inet other\ntable inet moat' "$(e2e_run nft list tables)" "tables at end"
e2e_assert_eq "$other_before" "$(e2e_run nft list table inet other)" "inet other changed"
e2e_stop fw2
e2e_assert_eq 0 "$E2E_LAST_STATUS" "moat-fw exit status after SIGTERM"
e2e_pass
