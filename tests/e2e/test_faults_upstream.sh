#!/usr/bin/env bash
# Upstream faults (issue 7): upstreams that time out, answer late, answer with the wrong ID or
# the wrong question, answer from the wrong address or port, send truncated or malformed
# packets, reset TCP after TC=1 (or cut the TCP answer short, or never answer on TCP), or flood
# replies. Each time the client gets SERVFAIL (EDE 22) within about attempts x timeout (3 x 300
# ms here), or the one right answer when there is one; no bad answer ever reaches a client (every
# address a bad answer carries is 192.0.2.66-69 or .99); moatd stays up, keeps serving and exits
# cleanly with the mismatches counted. With two upstreams where the first is dead, the answer
# comes from the second.
source "$(dirname "$0")/lib.sh"
e2e_init faults_up

PEERS="$E2E_DIR/peers"
# The system interpreter: a version-manager shim in PATH can cost a second per start.
PY=$E2E_PY
TIMEOUT_MS=300
# 3 attempts x 300 ms = 900 ms. The lower bound shows moatd waited out each attempt (a bad
# answer did not end it early); the upper bound is generous for a loaded 2-core machine under
# ASan, yet below the 3 x 1000 ms the default timeout would give.
MIN_MS=800
MAX_MS=2500
POISON="192.0.2.66 192.0.2.68 192.0.2.69 192.0.2.99"

e2e_nsd 127.0.0.1 5300 "$E2E_ZONES/example.test.zone"
e2e_bg testns ldns-testns -v -p 5301 "$E2E_DIR/faults.testns"
e2e_bg testns_late ldns-testns -v -p 5302 "$E2E_DIR/faults.testns"
e2e_bg hole "$PY" "$PEERS/silent_udp.py" 127.0.0.1 5309 240
e2e_bg spoof "$PY" "$PEERS/spoof.py" 127.0.0.1 5310 127.0.0.2 240
e2e_bg tcreset "$PY" "$PEERS/bad_upstream.py" tcreset 127.0.0.1 5320 240
e2e_bg tchalf "$PY" "$PEERS/bad_upstream.py" tchalf 127.0.0.1 5321 240
e2e_bg tcstall "$PY" "$PEERS/bad_upstream.py" tcstall 127.0.0.1 5323 240
e2e_bg flood "$PY" "$PEERS/bad_upstream.py" flood 127.0.0.1 5322 240
e2e_wait_port udp '*' 5301
e2e_wait_port udp '*' 5302
for p in 5309 5310 5320 5321 5322 5323; do e2e_wait_port udp 127.0.0.1 $p; done
for p in 5320 5321 5323; do e2e_wait_port tcp 127.0.0.1 $p; done
printf '*.faults.test\n*.example.test\n' >"$E2E_WORK/allow.txt"

# Every moatd here: on 127.0.0.1:53, upstream timeout 300 ms; each call names its upstreams.
# shellcheck disable=SC2034 # read by start_moatd (lib.sh)
MOATD_BASE=(--listen 127.0.0.1:53 --allow "$E2E_WORK/allow.txt" --upstream-timeout "$TIMEOUT_MS")
# stop_counting NAME: stop_moatd, then MISMATCHES from its stop line.
stop_counting() {
	stop_moatd "$1"
	MISMATCHES=$(sed -n 's/.* \([0-9]*\) upstream mismatches.*/\1/p' <<<"$STOPLINE")
	[[ -n "$MISMATCHES" ]] || e2e_fail "$1: no mismatch count in '$STOPLINE'"
}
# no_leak OUT WHAT: none of the bad answers' addresses reached the client.
no_leak() {
	local a
	for a in $POISON; do
		e2e_assert_not_contains "$1" "$a" "$2: a bad answer's address reached the client"
	done
}
# servfail_timed NAME WHAT [LINGER]: SERVFAIL with EDE 22 after MIN_MS..MAX_MS, nothing else.
servfail_timed() {
	local out ms
	out=$(dq --linger "${3:-0.5}" 127.0.0.1 53 "$1")
	e2e_log "$2: $out"
	[[ "$out" == "SERVFAIL "* ]] || e2e_fail "$2: expected SERVFAIL, got: $out"
	e2e_assert_eq 22 "$(field ede "$out")" "$2: EDE 22 (no reachable authority)"
	ms=$(field ms "$out")
	((ms >= MIN_MS && ms < MAX_MS)) ||
		e2e_fail "$2: SERVFAIL after $ms ms, expected about 3 x $TIMEOUT_MS ms ($MIN_MS..$MAX_MS)"
	e2e_assert_eq 0 "$(field extra "$out")" "$2: a second datagram reached the client"
	no_leak "$out" "$2"
}
# servfail_fast NAME WHAT: SERVFAIL with EDE 22 within MAX_MS (a bad answer ends an attempt).
servfail_fast() {
	local out ms
	out=$(dq --linger 0.3 127.0.0.1 53 "$1")
	e2e_log "$2: $out"
	[[ "$out" == "SERVFAIL "* ]] || e2e_fail "$2: expected SERVFAIL, got: $out"
	e2e_assert_eq 22 "$(field ede "$out")" "$2: EDE 22"
	ms=$(field ms "$out")
	((ms < MAX_MS)) || e2e_fail "$2: SERVFAIL took $ms ms"
	e2e_assert_eq 0 "$(field extra "$out")" "$2: a second datagram reached the client"
	no_leak "$out" "$2"
}
# still_serving NAME: alive, and answers a local deny (the event loop turns).
still_serving() {
	e2e_alive "$1" || e2e_fail "$1 died"
	local out
	out=$(dq 127.0.0.1 53 denied.invalid)
	[[ "$out" == "NXDOMAIN "* ]] || e2e_fail "$1 no longer answers: $out"
}

# --- times out: a black hole ---
start_moatd m_silent --upstream 127.0.0.1:5309
servfail_timed t1.faults.test "silent upstream"
servfail_timed t2.faults.test "silent upstream, again"
out=$(dq --tcp 127.0.0.1 53 t3.faults.test)
[[ "$out" == "SERVFAIL "* ]] || e2e_fail "silent upstream, TCP client: $out"
still_serving m_silent
stop_counting m_silent
e2e_assert_eq 0 "$MISMATCHES" "a silent upstream sends nothing to mismatch"

# --- answers late: 2 s after each query; the late answers must be ignored ---
start_moatd m_late --upstream 127.0.0.1:5302
# Linger past the third late answer (sent at about 6 s: ldns-testns answers one at a time).
servfail_timed late.faults.test "late upstream" 6
# Each attempt carried a fresh ID (ldns-testns -v logs "query N: id I: UDP ...").
ids=$(sed -n 's/^query [0-9]*: id \([0-9]*\): UDP.*late\.faults\.test\..*/\1/p' "$E2E_WORK/testns_late.log")
e2e_assert_eq 3 "$(wc -l <<<"$ids")" "three attempts reached the late upstream"
e2e_assert_eq 3 "$(sort -u <<<"$ids" | wc -l)" "every attempt has its own ID"
# Once the sleeper is free again (a direct query waits for it), a fresh query works ...
out=$(dq --timeout 10 127.0.0.1 5302 fresh.faults.test)
[[ "$out" == "NOERROR "* ]] || e2e_fail "late upstream did not recover: $out"
out=$(dq 127.0.0.1 53 fresh.faults.test)
[[ "$out" == "NOERROR "* ]] || e2e_fail "fresh query after the late answers: $out"
e2e_assert_eq 192.0.2.67 "$(field a "$out")" "fresh query after the late answers"
# ... and the late answer was not cached: asking again waits out the timeouts again.
servfail_timed late.faults.test "late upstream, second time (nothing cached)"
stop_counting m_late

# --- wrong ID, wrong question name, wrong question type: ignored and counted ---
start_moatd m_wrong --upstream 127.0.0.1:5301
servfail_timed wrongid.faults.test "answer with the wrong ID"
servfail_timed wrongq.faults.test "answer for another name"
servfail_timed wrongtype.faults.test "answer for another type"
out=$(dq 127.0.0.1 53 fresh.faults.test)
e2e_assert_eq 192.0.2.67 "$(field a "$out")" "a good answer after the spoofed ones"
stop_counting m_wrong
e2e_assert_eq 9 "$MISMATCHES" "every wrong answer (3 names x 3 attempts) counted as a mismatch"

# --- truncated and malformed answers to our question: SERVFAIL, no crash ---
start_moatd m_bad --upstream 127.0.0.1:5301
servfail_fast cut.faults.test "record cut short"
servfail_fast loop.faults.test "owner name is a pointer to itself"
servfail_fast loop2.faults.test "CNAME target is a pointer to itself"
servfail_fast counts.faults.test "answer count larger than the records"
servfail_fast cut.faults.test "record cut short, again"
out=$(dq --tcp 127.0.0.1 53 loop.faults.test)
[[ "$out" == "SERVFAIL "* ]] || e2e_fail "malformed answer, TCP client: $out"
still_serving m_bad
out=$(dq 127.0.0.1 53 fresh.faults.test)
e2e_assert_eq 192.0.2.67 "$(field a "$out")" "a good answer after the malformed ones"
stop_counting m_bad
e2e_assert_eq 0 "$MISMATCHES" "answers to our question are malformed, not mismatched"

# --- wrong source: answers from another address and from another port are ignored ---
start_moatd m_spoof --upstream 127.0.0.1:5310
out=$(dq 127.0.0.1 53 honest.faults.test)
e2e_assert_eq 192.0.2.98 "$(field a "$out")" "control: the same answer from the right source is taken"
servfail_timed spoof1.faults.test "answers from the wrong address and port"
servfail_timed spoof2.faults.test "answers from the wrong address and port, again"
n=$(grep -c '^spoofed spoof[12]\.faults\.test\. 2$' "$E2E_WORK/spoof.log" || true)
e2e_assert_eq 6 "$n" "the spoofer answered every attempt (2 wrong-source answers each)"
still_serving m_spoof
stop_counting m_spoof

# --- TC=1 over UDP, then TCP reset / TCP cut short / TCP silent: SERVFAIL, bounded ---
start_moatd m_tcreset --upstream 127.0.0.1:5320
servfail_fast tcreset.faults.test "TC=1, then TCP reset"
n=$(grep -c '^tcp-reset$' "$E2E_WORK/tcreset.log" || true)
((n >= 1 && n <= 3)) || e2e_fail "moatd retried over TCP $n times (expected 1..3)"
e2e_log "TCP resets seen by the peer: $n"
still_serving m_tcreset
stop_counting m_tcreset
start_moatd m_tchalf --upstream 127.0.0.1:5321
servfail_fast tchalf.faults.test "TC=1, then a TCP answer cut short"
n=$(grep -c '^tcp-half$' "$E2E_WORK/tchalf.log" || true)
((n >= 1 && n <= 3)) || e2e_fail "moatd read $n cut-short TCP answers (expected 1..3)"
still_serving m_tchalf
stop_counting m_tchalf

start_moatd m_tcstall --upstream 127.0.0.1:5323
servfail_timed tcstall.faults.test "TC=1, then a TCP connection that never answers"
n=$(grep -c '^tcp-stall$' "$E2E_WORK/tcstall.log" || true)
e2e_assert_eq 3 "$n" "every attempt went to TCP after TC=1 and timed out there"
still_serving m_tcstall
stop_counting m_tcstall

# --- a flood of 100 replies per query, most with wrong IDs: one right answer ---
start_moatd m_flood --upstream 127.0.0.1:5322
for name in flood1.faults.test flood2.faults.test; do
	out=$(dq --linger 1 127.0.0.1 53 $name)
	e2e_log "flood: $out"
	[[ "$out" == "NOERROR "* ]] || e2e_fail "flood of replies: $out"
	e2e_assert_eq 192.0.2.80 "$(field a "$out")" "the right answer, once, out of a flood ($name)"
	e2e_assert_eq 0 "$(field extra "$out")" "the flood reached the client ($name)"
	no_leak "$out" "flood"
done
still_serving m_flood
stop_counting m_flood
# 20 wrong IDs come before the first right one for each of the 2 questions.
((MISMATCHES >= 20 && MISMATCHES <= 200)) ||
	e2e_fail "flood: $MISMATCHES mismatches counted, expected 20..200 (40 when none is lost)"

# --- two upstreams, the first dead: the second answers ---
# a black hole first: the attempt that starts there times out and moves on
start_moatd m_two --upstream 127.0.0.1:5309 --upstream 127.0.0.1:5300
e2e_upstream_reset
slow=0
for i in 1 2 3 4; do
	out=$(dq 127.0.0.1 53 two$i.wild.example.test)
	e2e_log "first upstream silent: $out"
	e2e_assert_eq 192.0.2.20 "$(field a "$out")" "answer from the second upstream (query $i)"
	ms=$(field ms "$out")
	((ms < MAX_MS)) || e2e_fail "answer took $ms ms with one upstream dead"
	((ms >= TIMEOUT_MS - 50)) && slow=$((slow + 1))
done
# Attempts start at the upstreams in turn: half the queries first wait out the dead one.
((slow >= 1)) || e2e_fail "no query waited for the dead upstream: was it ever tried?"
log=$(e2e_upstream_queries)
for i in 1 2 3 4; do
	e2e_assert_contains "$log" "two$i.wild.example.test. A UDP" "query $i reached the live upstream"
done
stop_counting m_two
# a closed port first (ICMP refused): moves on at once
start_moatd m_refused --upstream 127.0.0.1:5399 --upstream 127.0.0.1:5300
for i in 1 2 3 4; do
	out=$(dq 127.0.0.1 53 ref$i.wild.example.test)
	e2e_assert_eq 192.0.2.20 "$(field a "$out")" "answer past a refusing upstream (query $i)"
	ms=$(field ms "$out")
	((ms < TIMEOUT_MS)) || e2e_fail "a refused port cost $ms ms: moatd waited for the timeout"
done
stop_counting m_refused

e2e_pass
