#!/usr/bin/env bash
# Readiness (issue 14): with $NOTIFY_SOCKET set, moatd sends READY=1 only once its policy is
# loaded and its sockets are bound, from its main PID (NotifyAccess=main): a listener standing in
# for the service manager queries a name that only the last line of a large allowlist allows the
# moment READY=1 arrives, and gets the upstream's answer. The abstract-namespace form ('@name')
# works too, after privileges are dropped and the seccomp filter is in. moat-fw sends READY=1
# once its socket accepts connections.
source "$(dirname "$0")/lib.sh"
e2e_init readiness

e2e_nsd 127.0.0.1 5300 "$E2E_ZONES/example.test.zone"
LISTEN="$E2E_DIR/peers/notify_listen.py"
WAIT_TRIES=600 # 60 s: a large allowlist under the sanitizers is slow to load

# wait_exit NAME: until the listener has seen READY=1 (or given up) and exited.
wait_exit() {
	e2e_wait_exit "$1" $((WAIT_TRIES / 10)) || e2e_fail "$1 still running after $((WAIT_TRIES / 10)) s"
}

# --- 1. a large policy: 500000 names, the one we ask for last ---
awk 'BEGIN { for (i = 0; i < 500000; i++) printf "n%d.big.test\n", i; print "www.example.test" }' \
	>"$E2E_WORK/big.txt"
chmod 0755 "$E2E_WORK"
chmod 0644 "$E2E_WORK/big.txt"
e2e_bg notify1 python3 "$LISTEN" --query 127.0.0.1 53 www.example.test "$E2E_WORK/notify.sock" 60
wait_line "$E2E_WORK/notify1.log" '^listening'
e2e_bg moatd1 env NOTIFY_SOCKET="$E2E_WORK/notify.sock" "$MOAT_BUILD/moatd" \
	--listen 127.0.0.1:53 --upstream 127.0.0.1:5300 --allow "$E2E_WORK/big.txt" \
	--log "$E2E_WORK/q1.jsonl"
wait_exit notify1
out=$(cat "$E2E_WORK/notify1.log")
e2e_log "listener: $(tr '\n' ' ' <<<"$out")"
e2e_assert_eq 1 "$(grep -c '^msg ' <<<"$out")" "READY=1 must be the first message"
e2e_assert_contains "$out" "msg pid=$(e2e_pid moatd1) READY=1|STATUS=serving" \
	"READY=1 from moatd's main PID"
e2e_assert_contains "$out" "answer NOERROR a=192.0.2.10" \
	"at READY=1 the policy (its last line) is loaded and the socket answers"
e2e_assert_contains "$(cat "$E2E_WORK/moatd1.log")" "serving 1 agent(s)" "moatd started"
e2e_stop moatd1

# --- 2. abstract socket, two workers, after dropping to nobody under the seccomp filter ---
printf 'www.example.test\n' >"$E2E_WORK/small.txt"
chmod 0644 "$E2E_WORK/small.txt"
abs="@moat-readiness-$$"
e2e_bg notify2 python3 "$LISTEN" --query 127.0.0.1 53 www.example.test "$abs" 60
wait_line "$E2E_WORK/notify2.log" '^listening'
e2e_bg moatd2 env NOTIFY_SOCKET="$abs" "$MOAT_BUILD/moatd" --listen 127.0.0.1:53 \
	--upstream 127.0.0.1:5300 --allow "$E2E_WORK/small.txt" --log "$E2E_WORK/q2.jsonl" \
	--workers 2 --user nobody
wait_exit notify2
out=$(cat "$E2E_WORK/notify2.log")
e2e_log "listener (abstract): $(tr '\n' ' ' <<<"$out")"
e2e_assert_contains "$out" "msg pid=$(e2e_pid moatd2) READY=1|STATUS=serving" "abstract socket"
e2e_assert_contains "$out" "answer NOERROR a=192.0.2.10" "serving at READY=1 (abstract)"
e2e_assert_eq 2 "$(awk '/^Seccomp:/ { print $2 }' "/proc/$(e2e_pid moatd2)/status")" \
	"the filter is in while the notification socket stays usable"
e2e_stop moatd2

# --- 3. moat-fw: READY=1 once its socket accepts connections ---
SOCK="$E2E_WORK/fw.sock"
e2e_bg notify3 python3 "$LISTEN" --connect "$SOCK" "@moat-fw-readiness-$$" 60
wait_line "$E2E_WORK/notify3.log" '^listening'
e2e_bg fw env NOTIFY_SOCKET="@moat-fw-readiness-$$" "$MOAT_BUILD/moat-fw" --socket "$SOCK" \
	--netns "$E2E_NS" --state "$E2E_WORK/fwstate" --resolver 192.0.2.53
wait_exit notify3
out=$(cat "$E2E_WORK/notify3.log")
e2e_log "listener (moat-fw): $(tr '\n' ' ' <<<"$out")"
e2e_assert_contains "$out" "msg pid=$(e2e_pid fw) READY=1|STATUS=table inet moat in place; listening" \
	"moat-fw READY=1 from its main PID"
e2e_assert_contains "$out" "connect ok" "at READY=1 moat-fw's socket accepts connections"
e2e_run nft list table inet moat >/dev/null || e2e_fail "no table inet moat after READY=1"
e2e_stop fw
e2e_run nft delete table inet moat

e2e_pass
