#!/usr/bin/env bash
# Client faults (issue 7): oversized and undersized datagrams, compression pointers to
# themselves and forward, label overruns, several questions, bad EDNS (two OPT records, an
# option overrunning its RDATA, version 1 -> BADVERS) each get the exact rcode (or silence for
# runts) and never reach the upstream; the same over TCP leaves the connection usable. Slow TCP
# clients (a stalled message, a message trickled a byte at a time) and half-open connections are
# closed after tcp_idle_ms while other clients are served; 2000 idle TCP connections at once are
# capped at tcp_max_clients and another client is still answered over UDP and TCP. moatd stays
# up, exits cleanly, and its RSS stays bounded.
#
# Regression cases for two bugs these tests found (resolver/serve/listen_tcp.c):
#   slow-loris-trickle  on_read restarted the idle timer on every read, so a client sending one
#                       byte of a message every 0.25 s held its connection for ever; now only
#                       whole messages received count as activity (answers sent no longer do:
#                       issue 12, see test_abuse.sh).
#   tcp-full-lockout    at tcp_max_clients every new connection was closed at once, so one client
#                       holding idle connections locked every other client out of TCP for
#                       tcp_idle_ms (and for ever, by reconnecting); now the connection quiet
#                       longest with no query in flight makes room.
source "$(dirname "$0")/lib.sh"
e2e_init faults_cl

PEERS="$E2E_DIR/peers"
PY=$E2E_PY
IDLE_MS=1500
MAX_TCP=200

e2e_nsd 127.0.0.1 5300 "$E2E_ZONES/example.test.zone"
printf '*.example.test\n' >"$E2E_WORK/allow.txt"
# config mode: the TCP limits are config keys
conf() {
	cat >"$E2E_WORK/$1.yaml" <<Y
listen: ["127.0.0.1:53"]
upstreams: ["127.0.0.1:5300"]
upstream_timeout_ms: 1000
tcp_idle_ms: $2
tcp_max_clients: $3
log: {file: "$E2E_WORK/$1.jsonl"}
agents:
  - name: t
    clients: [127.0.0.0/8]
    allow: [allow.txt]
Y
}
# served WHAT: another client (127.0.0.2) gets www.example.test over UDP and TCP (within dq's
# timeout: how fast is a benchmark's question, not this test's).
served() {
	local tr out
	for tr in "" --tcp; do
		out=$(dq $tr --timeout 3 --src 127.0.0.2 127.0.0.1 53 www.example.test)
		[[ "$out" == "NOERROR "* ]] || e2e_fail "$1: another client ${tr:-udp} not served: $out"
		e2e_assert_eq 192.0.2.10 "$(field a "$out")" "$1: answer to another client ${tr:-udp}"
		e2e_log "$1: another client served over ${tr:-udp} in $(field ms "$out") ms"
	done
}
# held NAME [STATES]: TCP connections on port 53 that the moatd NAME holds (has accepted: a
# socket still in the kernel's listen backlog, or a handshake the kernel has not finished, has
# no descriptor in moatd and is not moatd's), in ss's state filter STATES (default: every state
# but listening).
held() {
	e2e_run ss -Htanp state "${2:-connected}" '( sport = :53 )' |
		grep -c "pid=$(e2e_pid "$1")," || true
}
# With ASan every freed block sits in quarantine for a while: RSS says little there.
asan=0
if ldd "$MOAT_BUILD/moatd" | grep -q libasan; then asan=1; fi

conf m $IDLE_MS $MAX_TCP
start_moatd m -c "$E2E_WORK/m.yaml"
served "warm-up"
rss0=$(rss_kb m)

# --- malformed, oversized and undersized UDP queries: exact rcodes, never forwarded ---
e2e_upstream_reset
expected="empty none
one-byte none
short-header none
header-only-qd0 FORMERR
header-only-qd1 FORMERR
qdcount-0 FORMERR
qdcount-2 FORMERR
ancount-1 FORMERR
nscount-1 FORMERR
question-ptr-self FORMERR
question-ptr-forward FORMERR
question-label-overrun FORMERR
question-label-past-end FORMERR
question-reserved-label FORMERR
question-name-too-long FORMERR
question-type-cut FORMERR
trailing-byte FORMERR
additional-ptr-self FORMERR
additional-ptr-forward FORMERR
additional-rdlen-past-end FORMERR
opt-twice FORMERR
opt-option-overrun FORMERR
opt-option-cut FORMERR
opt-owner-not-root FORMERR
edns-version-1 BADVERS
oversized-4000-good NOERROR a=192.0.2.10 small
oversized-4000-bogus FORMERR
max-datagram-65507 FORMERR
control-good NOERROR a=192.0.2.10 small"
out=$(e2e_run "$PY" "$PEERS/client_faults.py" udp 127.0.0.1 53)
e2e_assert_eq "$expected" "$out" "answers to malformed UDP queries"
# dig's own EDNS version 1 query: BADVERS too
out=$(e2e_dig @127.0.0.1 +edns=1 +noednsnegotiation www.example.test A)
e2e_assert_contains "$out" "status: BADVERS" "dig +edns=1"
# --- the same over TCP: FORMERR, runts dropped, and the connection still answers ---
out=$(e2e_run "$PY" "$PEERS/client_faults.py" tcp-bad 127.0.0.1 53)
e2e_assert_eq "FORMERR
NOERROR a=192.0.2.10 small
open" "$out" "malformed messages on one TCP connection"
# Everything valid came from the cache (warmed above): nothing else reached the upstream.
e2e_assert_eq "" "$(e2e_upstream_queries)" "a malformed query reached the upstream"
e2e_alive m || e2e_fail "moatd died on malformed queries"
formerr_sent=$(($(grep -c ' FORMERR$' <<<"$expected") + 1))

# --- slow TCP clients and a half-open connection, while others are served ---
# (trickle: regression case slow-loris-trickle)
for mode in stall trickle silent; do
	e2e_bg "loris_$mode" "$PY" "$PEERS/client_faults.py" loris $mode 127.0.0.1 53 12
done
# until the three slow clients hold their connections
lorises_in() { (($(e2e_run ss -Htn state established '( dport = :53 )' | wc -l) >= 3)); }
e2e_poll 5 lorises_in || e2e_fail "the slow TCP clients did not connect"
served "during slow TCP clients"
for mode in stall trickle silent; do
	e2e_wait_exit "loris_$mode" 15 || true
	out=$(cat "$E2E_WORK/loris_$mode.log")
	e2e_log "slow TCP client ($mode): $out"
	# Closed within the client's 12 s (a trickle that restarted the idle timer never would be),
	# and by the idle timer, not at once (x0.8: libuv starts a timer from its loop's cached
	# time, which may lag; later is only the machine's load, not a bound of this test).
	[[ "$out" == "closed "* ]] || e2e_fail "slow TCP client ($mode) was not closed: $out"
	ms=$(field ms "$out")
	((ms >= IDLE_MS * 8 / 10)) ||
		e2e_fail "slow TCP client ($mode) closed after $ms ms, before tcp_idle_ms ($IDLE_MS)"
done
served "after slow TCP clients"

rss1=$(rss_kb m)
e2e_log "moatd RSS: $rss0 kB at start, $rss1 kB after the client faults"
stop_moatd m
e2e_assert_contains "$STOPLINE" " $formerr_sent formerr," "every malformed query counted as formerr"
if ((asan == 0)); then
	((rss1 - rss0 < 4096)) || e2e_fail "RSS grew by $((rss1 - rss0)) kB over the client faults"
fi

# --- 2000 idle TCP connections at once: capped, and another client is still served ---
# (regression case tcp-full-lockout: the TCP query below was reset before the fix.)
# Its own moatd with a long idle time, so the connections stay open while we look.
conf c 30000 $MAX_TCP
start_moatd c -c "$E2E_WORK/c.yaml"
served "warm-up"
rss0=$(rss_kb c)
e2e_bg idle "$PY" "$PEERS/client_faults.py" idle 127.0.0.1 53 2000 "$E2E_WORK/release:90" 127.0.0.3
wait_line "$E2E_WORK/idle.log" '^open ' 40
e2e_log "idle TCP clients: $(head -1 "$E2E_WORK/idle.log")"
# What moatd holds, judged by the kernel: sockets with a descriptor in moatd. Never more than
# tcp_max_clients, sampled while the rest of the 2000 come through the backlog and evict the
# quietest (the client's own view counts those the kernel has not handed to moatd yet).
most=0
for ((i = 0; i < 20; i++)); do
	h=$(held c established)
	((h <= MAX_TCP)) || e2e_fail "moatd holds $h TCP connections, tcp_max_clients is $MAX_TCP"
	((h > most)) && most=$h
	sleep 0.1
done
e2e_log "TCP connections moatd held: at most $most"
((most >= MAX_TCP / 2)) || e2e_fail "moatd held only $most idle connections: did they connect?"
served "2000 idle TCP connections open"
e2e_alive idle || e2e_fail "the idle-connection peer stopped early: $(cat "$E2E_WORK/idle.log")"
touch "$E2E_WORK/release"
wait_line "$E2E_WORK/idle.log" '^closed_by_server=' 30
out=$(tail -1 "$E2E_WORK/idle.log")
# Not a bound: "still open" from the client's side also counts connections the kernel never
# handed to moatd (in the listen backlog, or handshakes it dropped or has not finished: with
# 2000 at once their number depends on the machine's load, which made a bound here fail).
e2e_log "idle TCP clients at the end: $out"
# Afterwards moatd closes every connection whose close reached it: none stays in CLOSE-WAIT (the
# client's FIN came, moatd read its EOF). A socket still ESTABLISHED is one whose FIN has not
# come yet. With 2000 connections at once the listen backlog overflows: the kernel then drops
# the client's last handshake ACK and, later, its FIN, and completes the connection only when
# a SYN-ACK or FIN is sent again, seconds later on TCP's backoff. Such a socket reaches moatd
# after the client closed, and its FIN follows as TCP sends it again (a CI run under ASan saw
# 33 left after 5 s). So all of them go within tcp_idle_ms at the latest (30 s here).
held_states() {
	e2e_run ss -Htanp state connected '( sport = :53 )' | grep "pid=$(e2e_pid c)," |
		awk '{ n[$1]++ } END { for (s in n) printf "%s=%d ", s, n[s] }'
}
none_closing() { (($(held c close-wait) == 0)); }
e2e_poll 5 none_closing ||
	e2e_fail "moatd still holds $(held c close-wait) connections the clients closed ($(held_states))"
none_held() { (($(held c) == 0)); }
e2e_poll 40 none_held || e2e_fail "moatd still holds $(held c) connections ($(held_states))"
served "after the idle connections closed"
rss1=$(rss_kb c)
e2e_log "moatd RSS: $rss0 kB before 2000 idle TCP connections, $rss1 kB after"
if ((asan == 0)); then
	((rss1 - rss0 < 4096)) || e2e_fail "RSS grew by $((rss1 - rss0)) kB over 2000 connections"
fi
stop_moatd c

e2e_pass
