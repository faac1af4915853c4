#!/usr/bin/env bash
# Least privilege by default and answers checked whole (issue 12):
#   - moatd started as root without --user runs as moat (when that user exists) or nobody, with
#     no capabilities, no_new_privs and its filter; --user root stays root and says so;
#   - SIGUSR2 does nothing and SIGUSR1 reopens the query log (logrotate: the old file moved
#     away, a new one is written), as the unprivileged user, under the filter; neither is fatal;
#   - SIGHUP re-reads the allowlist although the work dir above it is 0700 (root's): moatd reads
#     through the directory descriptors it kept while privileged;
#   - meta query types (AXFR, IXFR, MAILA, MAILB, TSIG, TKEY, OPT as a type) are answered
#     NOTIMP here and never reach the upstream's query log;
#   - a name with a blocked address in any position (1-2-3-4.127-0-0-1...) is denied and never
#     forwarded;
#   - RLIMIT_NOFILE is raised at start to what tcp_max_clients and the in-flight caps need;
#   - class-CH records in an answer to an IN question (an "A" of 16 bytes, an "AAAA" of 4, both
#     holding 169.254.169.254) never reach the client.
source "$(dirname "$0")/lib.sh"
e2e_init least_priv

PEERS="$E2E_DIR/peers"
PY=$E2E_PY
want_uid=$(id -u moat 2>/dev/null || id -u nobody)

e2e_nsd 127.0.0.1 5300 "$E2E_ZONES/example.test.zone"
# The work dir is 0700 (as a home or a checkout may be): the policy sits in a readable
# directory below it, the log in a directory moatd's user owns (as an operator sets up
# /var/log/moat).
chmod 0700 "$E2E_WORK"
mkdir -m 0755 "$E2E_WORK/policy" "$E2E_WORK/logs"
chown "$want_uid" "$E2E_WORK/logs"
printf 'www.example.test\n*.example.test\n' >"$E2E_WORK/policy/allow.txt"
chmod 0644 "$E2E_WORK/policy/allow.txt"
LOG="$E2E_WORK/logs/q.jsonl"
start_moatd moatd --listen 127.0.0.1:53 --upstream 127.0.0.1:5300 \
	--allow "$E2E_WORK/policy/allow.txt" --log "$LOG"
PID=$(e2e_pid moatd)

# --- root without --user: unprivileged, checked in /proc ---
st=$(cat "/proc/$PID/status")
e2e_assert_eq "$want_uid" "$(awk '/^Uid:/ { print $2 }' <<<"$st")" "real uid without --user"
e2e_assert_eq "$want_uid" "$(awk '/^Uid:/ { print $3 }' <<<"$st")" "effective uid without --user"
e2e_assert_eq "$want_uid" "$(awk '/^Uid:/ { print $4 }' <<<"$st")" "saved uid without --user"
e2e_assert_eq "0000000000000000" "$(awk '/^CapEff:/ { print $2 }' <<<"$st")" "capabilities left"
e2e_assert_eq "0000000000000000" "$(awk '/^CapPrm:/ { print $2 }' <<<"$st")" "permitted capabilities"
e2e_assert_eq "1" "$(awk '/^NoNewPrivs:/ { print $2 }' <<<"$st")" "no_new_privs"
e2e_assert_eq "2" "$(awk '/^Seccomp:/ { print $2 }' <<<"$st")" "seccomp filter mode"
e2e_assert_eq 192.0.2.10 "$(e2e_dig @127.0.0.1 +short www.example.test A)" "serves after the drop"

# --- SIGUSR2: nothing; SIGUSR1: the log is reopened (logrotate moved it away) ---
kill -USR2 "$PID"
e2e_assert_eq 192.0.2.10 "$(e2e_dig @127.0.0.1 +short www.example.test A)" "serves after SIGUSR2"
e2e_alive moatd || e2e_fail "SIGUSR2 killed moatd"
mv "$LOG" "$LOG.1"
kill -USR1 "$PID"
wait_line "$E2E_WORK/moatd.log" "query log reopened"
e2e_alive moatd || e2e_fail "SIGUSR1 killed moatd"
e2e_dig @127.0.0.1 +short a.example.test A >/dev/null
e2e_poll_line "$LOG" '"a.example.test."' 5 || true
grep -q '"a.example.test."' "$LOG" 2>/dev/null || e2e_fail "no line in the reopened log: $(cat "$E2E_WORK/moatd.log")"
grep -q '"a.example.test."' "$LOG.1" && e2e_fail "a line after SIGUSR1 went to the rotated file"
e2e_assert_eq "$want_uid" "$(stat -c %u "$LOG")" "the new log belongs to moatd's user"

# --- SIGHUP under a 0700 directory, as the unprivileged user ---
# more.test is not in NSD's zone: once allowed, NSD's own REFUSED comes back instead of moat's deny.
out=$(dq --timeout 3 127.0.0.1 53 more.test)
[[ "$out" == "NXDOMAIN "* && "$(field ede "$out")" == 15 ]] || e2e_fail "more.test before the reload: $out"
printf 'www.example.test\n*.example.test\nmore.test\n' >"$E2E_WORK/policy/allow.txt"
kill -HUP "$PID"
wait_line "$E2E_WORK/moatd.log" "policy reloaded"
e2e_assert_not_contains "$(cat "$E2E_WORK/moatd.log")" "reload failed" "reload as $want_uid"
out=$(dq --timeout 3 127.0.0.1 53 more.test)
[[ "$out" == "REFUSED "* ]] || e2e_fail "more.test after the reload was not forwarded: $out"

# --- meta query types: NOTIMP here, never upstream ---
e2e_upstream_reset
for t in 252 251 253 254 250 249 41; do
	out=$(dq --timeout 3 127.0.0.1 53 www.example.test $t)
	[[ "$out" == "NOTIMP "* ]] || e2e_fail "qtype $t: $out (expected NOTIMP)"
	e2e_assert_eq 21 "$(field ede "$out")" "qtype $t: EDE 21 (Not Supported)"
done
out=$(e2e_dig @127.0.0.1 +tcp example.test AXFR)
e2e_assert_not_contains "$out" "SOA" "an AXFR over TCP came back with records"
# --- an embedded blocked address in any position: denied, never upstream ---
out=$(dq --timeout 3 127.0.0.1 53 1-2-3-4.127-0-0-1.example.test)
[[ "$out" == "NXDOMAIN "* ]] || e2e_fail "1-2-3-4.127-0-0-1.example.test: $out"
out=$(dq --timeout 3 127.0.0.1 53 x.8.8.8.8.a9fea9fe.example.test)
[[ "$out" == "NXDOMAIN "* ]] || e2e_fail "x.8.8.8.8.a9fea9fe.example.test: $out"
grep -q '"1-2-3-4.127-0-0-1.example.test.".*deny-embedded' "$LOG" ||
	e2e_fail "the embedded address was not the reason: $(grep 1-2-3-4 "$LOG")"
e2e_dig @127.0.0.1 +short www.example.test TXT >/dev/null # something that does reach NSD
log=$(e2e_upstream_queries)
e2e_assert_contains "$log" "www.example.test. TXT UDP" "the control query reached NSD"
for t in AXFR IXFR MAILA MAILB TSIG TKEY OPT TYPE249 TYPE250 TYPE251 TYPE252 TYPE253 TYPE254 TYPE41; do
	e2e_assert_not_contains "$log" " $t " "a $t query reached the upstream"
done
e2e_assert_not_contains "$log" "127-0-0-1" "a name embedding 127.0.0.1 reached the upstream"
e2e_assert_not_contains "$log" "a9fea9fe" "a name embedding 169.254.169.254 reached the upstream"
e2e_stop moatd
e2e_assert_eq 0 "$E2E_LAST_STATUS" "clean stop as $want_uid under the filter"

# --- --user root: stays root, with a warning ---
start_moatd root --listen 127.0.0.1:5354 --upstream 127.0.0.1:5300 \
	--allow "$E2E_WORK/policy/allow.txt" --log /dev/null --user root
e2e_assert_contains "$(cat "$E2E_WORK/root.log")" "warning: --user root" "the warning"
e2e_assert_eq 0 "$(awk '/^Uid:/ { print $3 }' "/proc/$(e2e_pid root)/status")" "--user root stays root"
e2e_assert_eq 2 "$(awk '/^Seccomp:/ { print $2 }' "/proc/$(e2e_pid root)/status")" "filter as root"
e2e_stop root
e2e_assert_eq 0 "$E2E_LAST_STATUS" "clean stop as root"

# --- RLIMIT_NOFILE raised at start to what the caps need (the soft limit, hard 8192) ---
e2e_bg nofile prlimit --nofile=1024:8192 "$MOAT_BUILD/moatd" --listen 127.0.0.1:5356 \
	--upstream 127.0.0.1:5300 --allow "$E2E_WORK/policy/allow.txt" --log /dev/null
e2e_wait_ready nofile
soft=$(awk '/^Max open files/ { print $4 }' "/proc/$(e2e_pid nofile)/limits")
e2e_log "moatd's descriptor limit after start: $soft (started with 1024, hard 8192)"
((soft > 1024 + 2048)) || e2e_fail "RLIMIT_NOFILE not raised for tcp_max_clients + inflight_max: $soft"
e2e_assert_not_contains "$(cat "$E2E_WORK/nofile.log")" "lowered" "caps lowered although the hard limit allows them"
e2e_stop nofile
e2e_assert_eq 0 "$E2E_LAST_STATUS" "clean stop (nofile)"

# --- class-CH records from the upstream never reach the client ---
e2e_bg up "$PY" "$PEERS/bad_upstream.py" chclass 127.0.0.1 5301 60
e2e_wait_port udp 127.0.0.1 5301
start_moatd ch --listen 127.0.0.1:5355 --upstream 127.0.0.1:5301 \
	--allow "$E2E_WORK/policy/allow.txt"
out=$(e2e_dig @127.0.0.1 -p 5355 +noall +answer www.example.test A)
grep -q chclass "$E2E_WORK/up.log" || e2e_fail "the CH-class upstream was not asked"
e2e_assert_eq "www.example.test.	60	IN	A	192.0.2.10" "$out" "only the class-IN record reaches the client"
out=$(e2e_dig @127.0.0.1 -p 5355 +tcp www.example.test A)
e2e_assert_not_contains "$out" "CH" "a class-CH record over TCP"
e2e_assert_not_contains "$out" "169.254" "169.254.169.254 over TCP"
e2e_assert_contains "$out" "ANSWER: 1," "one answer record"
e2e_stop ch
e2e_assert_eq 0 "$E2E_LAST_STATUS" "clean stop (class-CH upstream)"
e2e_pass
