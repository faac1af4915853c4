#!/usr/bin/env bash
# Least privilege and abuse limits (issue 7): moatd drops to an unprivileged user, sets
# no_new_privs and runs under its seccomp filter while serving (UDP, TCP, forwarding, reload);
# ANY is answered locally with the RFC 8482 HINFO and never forwarded; a client over its rate
# limit gets REFUSED while another client is still served.
source "$(dirname "$0")/lib.sh"
e2e_init hardening

e2e_nsd 127.0.0.1 5300 "$E2E_ZONES/example.test.zone"
printf '*.example.test\n' >"$E2E_WORK/allow.txt"
chmod 0644 "$E2E_WORK/allow.txt"
chmod 0755 "$E2E_WORK"
start_moatd moatd --listen 127.0.0.1:53 --upstream 127.0.0.1:5300 \
	--allow "$E2E_WORK/allow.txt" --log "$E2E_WORK/q.jsonl" --user nobody --ratelimit 50

# --- what the running process holds ---
st=$(cat "/proc/$(e2e_pid moatd)/status")
e2e_assert_eq "65534" "$(awk '/^Uid:/ { print $2 }' <<<"$st")" "real uid"
e2e_assert_eq "65534" "$(awk '/^Uid:/ { print $3 }' <<<"$st")" "effective uid"
e2e_assert_eq "0000000000000000" "$(awk '/^CapEff:/ { print $2 }' <<<"$st")" "capabilities left"
e2e_assert_eq "1" "$(awk '/^NoNewPrivs:/ { print $2 }' <<<"$st")" "no_new_privs"
e2e_assert_eq "2" "$(awk '/^Seccomp:/ { print $2 }' <<<"$st")" "seccomp filter mode"

# --- and it still does its job ---
e2e_upstream_reset
e2e_assert_eq 192.0.2.10 "$(e2e_dig @127.0.0.1 +short www.example.test A)" "forwarded answer (UDP)"
e2e_assert_contains "$(e2e_dig @127.0.0.1 +tcp +short www.example.test AAAA)" "2001:db8::10" "TCP"
e2e_assert_eq NXDOMAIN "$(status_of "$(e2e_dig @127.0.0.1 evil.test A)")" "deny"
# --- ANY: answered here with HINFO "RFC8482", never forwarded ---
out=$(e2e_dig @127.0.0.1 +noall +answer www.example.test ANY)
e2e_assert_contains "$out" 'HINFO	"RFC8482" ""' "RFC 8482 answer"
e2e_assert_eq NXDOMAIN "$(status_of "$(e2e_dig @127.0.0.1 evil.test ANY)")" "ANY for a denied name"
log=$(e2e_upstream_queries)
e2e_assert_not_contains "$log" " ANY " "ANY reached the upstream"
e2e_assert_contains "$log" "www.example.test. A UDP" "the forwarded query reached the upstream"
# --- reload as nobody, under the filter ---
printf '*.example.test\nmore.test\n' >"$E2E_WORK/allow.txt"
kill -HUP "$(e2e_pid moatd)"
e2e_poll_line "$E2E_WORK/moatd.log" "policy reloaded" 5 || true
e2e_assert_contains "$(cat "$E2E_WORK/moatd.log")" "policy reloaded" "SIGHUP reload after dropping privileges"

# --- rate limit: 50 q/s per client, burst 50 ---
e2e_addr 127.0.0.2/32
out=$(e2e_run python3 "$E2E_DIR/peers/flood.py" 127.0.0.1 127.0.0.1 evil.test 300)
e2e_log "flood of 300 from one client: $out"
nx=$(grep -o 'NXDOMAIN=[0-9]*' <<<"$out" | cut -d= -f2)
rf=$(grep -o 'REFUSED=[0-9]*' <<<"$out" | cut -d= -f2)
((nx >= 45 && nx <= 70)) || e2e_fail "the limited client got $nx normal answers (expected about 50)"
((rf >= 200)) || e2e_fail "only ${rf:-0} queries were refused by the rate limit"
[[ "$out" == *"ratelimit-text=$rf"* ]] || e2e_fail "refused answers lack the rate-limit text: $out"
out=$(e2e_run python3 "$E2E_DIR/peers/flood.py" 127.0.0.1 127.0.0.2 evil.test 20)
e2e_assert_eq "NXDOMAIN=20" "$out" "another client is still served"

e2e_stop moatd
e2e_assert_eq 0 "$E2E_LAST_STATUS" "clean stop as nobody under the filter"
e2e_assert_contains "$(cat "$E2E_WORK/moatd.log")" "rate-limited" "the count is reported"
e2e_pass
