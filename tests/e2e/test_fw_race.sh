#!/usr/bin/env bash
# moatd + moat-fw together (issue 4), netns placement: the grant comes before the answer. A
# client resolves a name and connects to the answer at once, 1,000 times, each name with its own
# address: every connection must succeed (zero failures). An address never resolved stays
# blocked. Restarting moat-fw and moatd keeps the live grants; moatd without moat-fw fails closed.
# The race runs again with a port-scoped allowlist (`*.race.test tcp/80`, issue 11): still zero
# failures, and port 443 of a granted address stays closed (judged at the listener).
source "$(dirname "$0")/lib.sh"
e2e_init fw_race
# moatd connects to moat-fw only as the user it drops to: both daemons run with the users the
# install makes (moat, moat-fw; the host's files untouched) and their defaults, which agree.
e2e_users

PY=$E2E_PY
N=${RACE_COUNT:-1000}

# The zone: r1..rN.race.test, each an AAAA of its own in 2001:db8:5::/64.
{
	printf '$ORIGIN race.test.\n$TTL 120\n@ IN SOA ns1 hostmaster 1 3600 600 86400 60\n  IN NS ns1\nns1 IN A 192.0.2.53\n'
	for ((i = 1; i <= 2 * N + 30; i++)); do printf 'r%d IN AAAA 2001:db8:5::%x\n' "$i" "$i"; done
} >"$E2E_WORK/race.test.zone"
e2e_addr 192.0.2.53/32 # NSD
e2e_addr 192.0.2.2/32  # moatd
e2e_nsd 192.0.2.53 53 "$E2E_WORK/race.test.zone"
# The hosts live one veth away, in namespace "net" (the sandbox's own loopback is never
# filtered): every address of 2001:db8:5::/64 is local there (AnyIP), and one listener on
# [::]:80 accepts them all (and one on [::]:443, which logs each connection it accepts to the
# file named last).
e2e_peer net
NET=$E2E_PEER
e2e_veth "$E2E_NS" s0 "$NET" n0
e2e_addr_dev "$E2E_NS" s0 2001:db8:ff::2/64
e2e_addr_dev "$NET" n0 2001:db8:ff::1/64
e2e_run ip -6 route add 2001:db8:5::/64 via 2001:db8:ff::1
ip -n "$NET" -6 route add local 2001:db8:5::/64 dev lo
cat >"$E2E_WORK/listen.py" <<'PY'
import socket, sys, time
import select
socks = []
for port in (80, 443):
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("::", port))
    s.listen(512)
    socks.append(s)
log = open(sys.argv[2], "a")
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for s in select.select(socks, [], [], 0.2)[0]:
        c, peer = s.accept()
        if s.getsockname()[1] == 443:
            log.write("443 %s\n" % c.getsockname()[0])
            log.flush()
        c.close()
PY
e2e_bg listen ip netns exec "$NET" "$PY" "$E2E_WORK/listen.py" 400 "$E2E_WORK/443.log"
E2E_NS=$NET e2e_wait_port tcp '*' 80
E2E_NS=$NET e2e_wait_port tcp '*' 443
printf '*.race.test\n' >"$E2E_WORK/allow.txt"

# shellcheck disable=SC2034 # read by start_fw (lib.sh)
FW_BASE=(--socket "$E2E_WORK/fw.sock" --netns "$E2E_NS" --state "$E2E_WORK/fwstate"
	--resolver 192.0.2.2 --resolver 192.0.2.53)
# shellcheck disable=SC2034 # read by start_moatd (lib.sh)
MOATD_BASE=(--listen 192.0.2.2:53 --upstream 192.0.2.53:53 --firewall "$E2E_WORK/fw.sock")
connect() { # connect ADDR [PORT]: "connected" or "failed: ..."
	e2e_run "$PY" -c 'import socket,sys
s=socket.socket(socket.AF_INET6); s.settimeout(1)
try:
    s.connect((sys.argv[1], int(sys.argv[2]))); print("connected")
except OSError as e:
    print("failed: %s" % e)' "$1" "${2:-80}"
}

start_fw fw
start_moatd moatd --allow "$E2E_WORK/allow.txt"

# Before any grant, nothing in the range is reachable.
e2e_assert_contains "$(connect 2001:db8:5::1)" "failed" "an address reached before it was resolved"

# --- the race: resolve then connect at once, N times ---
out=$(e2e_run "$PY" "$E2E_DIR/peers/race.py" 192.0.2.2 "$N" 80 1)
e2e_log "race with moat-fw: $out"
e2e_assert_contains "$out" "ok=$N fail=0" "resolve-then-connect failures with moat-fw"
# A cached answer, asked over TCP, is granted again before it is released (every path grants).
before=$(grep -c "moat-fw: batch" "$E2E_WORK/fw.log" || true)
out=$(e2e_dig @192.0.2.2 +tcp +short r1.race.test AAAA)
e2e_assert_eq "2001:db8:5::1" "$out" "cached answer over TCP"
grep -q '"qname":"r1.race.test.","qtype":"AAAA","qclass":1,"decision":"allow-cached"' \
	"$E2E_WORK/moatd.jsonl" || e2e_fail "the second answer did not come from the cache"
for ((i = 0; i < 20; i++)); do
	after=$(grep -c "moat-fw: batch" "$E2E_WORK/fw.log" || true)
	((after > before)) && break
	sleep 0.1
done
((after > before)) || e2e_fail "a cached answer was released without a grant"
# A neighbour of the granted addresses, never resolved, stays blocked.
e2e_assert_contains "$(connect "2001:db8:5::$(printf %x $((N + 5)))")" "failed" "unresolved address"

# --- restart moat-fw and moatd: live grants survive ---
e2e_stop moatd
e2e_stop fw
e2e_assert_contains "$(connect 2001:db8:5::1)" "connected" "grant gone while both daemons were down"
start_fw fw2
start_moatd moatd2 --allow "$E2E_WORK/allow.txt"
e2e_assert_contains "$(connect 2001:db8:5::2)" "connected" "grant gone after both restarted"
e2e_assert_contains "$(connect "2001:db8:5::$(printf %x $((N + 6)))")" "failed" "unresolved address after restart"
# the restarted pair still grants before answering
out=$(e2e_run "$PY" "$E2E_DIR/peers/race.py" 192.0.2.2 5 80 $((N + 1)))
e2e_assert_contains "$out" "ok=5 fail=0" "resolve-then-connect after restart"

# --- the race with ports: `*.race.test tcp/80`, fresh names, zero failures ---
e2e_stop moatd2
printf '*.race.test tcp/80\n' >"$E2E_WORK/allow-ports.txt"
start_moatd moatd3 --allow "$E2E_WORK/allow-ports.txt"
out=$(e2e_run "$PY" "$E2E_DIR/peers/race.py" 192.0.2.2 "$N" 80 $((N + 20)))
e2e_log "race with moat-fw and ports: $out"
e2e_assert_contains "$out" "ok=$N fail=0" "resolve-then-connect failures with port-scoped grants"
a=$(printf '2001:db8:5::%x' $((N + 20)))
e2e_assert_contains "$(e2e_run nft list set inet moat port6)" "$a . tcp . 80 timeout" "port6 element"
e2e_assert_contains "$(connect "$a" 443)" "failed" "port 443 of a tcp/80 grant"
e2e_assert_eq connected "$(connect "$a" 80)" "port 80 of a tcp/80 grant (barrier)"
e2e_assert_eq "" "$(cat "$E2E_WORK/443.log")" "the 443 listener accepted a connection"

# --- moat-fw gone: moatd fails closed (SERVFAIL), and nothing new opens ---
e2e_stop fw2
out=$(e2e_dig @192.0.2.2 r$((N + 7)).race.test AAAA)
e2e_assert_contains "$out" "status: SERVFAIL" "answer released without a grant"
e2e_assert_contains "$out" "firewall did not confirm" "EDE says why"
e2e_assert_contains "$(connect "2001:db8:5::$(printf %x $((N + 7)))")" "failed" "address opened without moat-fw"
e2e_pass
