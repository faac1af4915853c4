#!/usr/bin/env bash
# The two daemons' defaults agree (issue 22). With the users the install makes (moat, moat-fw)
# and no user flags on either daemon: moatd drops to moat and says so, moat-fw admits moat and
# gives its socket group moat, each runs as its own user, and a normal start leaves no "refused"
# line. moat-fw is restarted 3 times: after each restart every allowed name resolves again
# (moatd reconnects as moat). When they do not agree moatd refuses to start and names the
# moat-fw flags that would admit it: a moat-fw admitting another user (closed before its
# HELLO), a socket of another group (Permission denied). Without a moat user moatd with a
# firewall refuses to start (never nobody) and moat-fw admits only root, each saying so. The
# "refused" lines of a peer that keeps connecting are rate-limited (300 connects, a few lines).
# netns placement in the test's own namespace (dig runs there, as the sandbox).
source "$(dirname "$0")/lib.sh"
e2e_init defaults
e2e_users

e2e_addr 192.0.2.53/32 # NSD
e2e_addr 192.0.2.2/32  # moatd
e2e_nsd 192.0.2.53 53 "$E2E_ZONES/example.test.zone"
printf '*.example.test\n' >"$E2E_WORK/allow.txt"
SOCK=$E2E_WORK/fw.sock
# shellcheck disable=SC2034 # read by start_fw (lib.sh)
FW_BASE=(--socket "$SOCK" --netns "$E2E_NS" --state "$E2E_WORK/fwstate"
	--resolver 192.0.2.2 --resolver 192.0.2.53)
# shellcheck disable=SC2034 # read by start_moatd (lib.sh)
MOATD_BASE=(--listen 192.0.2.2:53 --upstream 192.0.2.53:53 --allow "$E2E_WORK/allow.txt"
	--firewall "$SOCK")
# name -> the addresses it must resolve to (sorted, space-separated)
declare -A WANT=([www.example.test]="192.0.2.10" [mail.example.test]="192.0.2.25"
	[multi.example.test]="192.0.2.11 192.0.2.12 192.0.2.13 192.0.2.14")
answer() { e2e_dig @192.0.2.2 +short "$1" A | sort | tr '\n' ' ' | sed 's/ $//'; }
www_resolves() { [[ "$(answer www.example.test)" == 192.0.2.10 ]]; }
every_name_resolves() { # WHEN
	local n
	for n in "${!WANT[@]}"; do
		e2e_assert_eq "${WANT[$n]}" "$(answer "$n")" "$n $1"
	done
}
uid_of() { awk '/^Uid:/ { print $3 }' "/proc/$(e2e_pid "$1")/status"; }
no_refused_line() { # NAME
	e2e_assert_not_contains "$(cat "$E2E_WORK/$1.log")" refused "$1: a refused line at a normal start"
}

# --- no user flags: they agree ---
start_fw fw0
e2e_assert_contains "$(cat "$E2E_WORK/fw0.log")" "grants only from user moat (uid $E2E_MOAT_UID)" \
	"moat-fw's default --moatd-user"
e2e_assert_contains "$(cat "$E2E_WORK/fw0.log")" "socket group $E2E_MOAT_UID (moat)" \
	"moat-fw's default --socket-group"
e2e_assert_eq "$E2E_MOAT_UID" "$(stat -c %g "$SOCK")" "the socket's group"
start_moatd moatd
e2e_assert_contains "$(cat "$E2E_WORK/moatd.log")" \
	"running as user moat (uid $E2E_MOAT_UID, gid $E2E_MOAT_UID)" "moatd says its user"
e2e_assert_contains "$(cat "$E2E_WORK/moatd.log")" "moat-fw admits user moat" "moatd's check at start"
e2e_assert_eq "$E2E_MOAT_UID" "$(uid_of moatd)" "moatd's uid"
e2e_assert_eq "$E2E_MOATFW_UID" "$(uid_of fw0)" "moat-fw's uid"
[[ "$E2E_MOAT_UID" != "$E2E_MOATFW_UID" ]] || e2e_fail "the two daemons share a user"
every_name_resolves "at start"
no_refused_line fw0

# --- moat-fw restarted three times: every allowed name resolves after each ---
prev=fw0
for i in 1 2 3; do
	e2e_stop "$prev"
	e2e_assert_eq 0 "$E2E_LAST_STATUS" "$prev: exit status on SIGTERM"
	start_fw "fw$i"
	# moatd reconnects at its next grant; until moat-fw listens a grant fails (SERVFAIL)
	e2e_poll 10 www_resolves || e2e_fail "www.example.test does not resolve after restart $i"
	every_name_resolves "after moat-fw restart $i"
	no_refused_line "fw$i"
	prev=fw$i
done
e2e_alive moatd || e2e_fail "moatd died: $(tail -n 5 "$E2E_WORK/moatd.log")"
e2e_assert_not_contains "$(cat "$E2E_WORK/moatd.log")" "not admitted" "moatd was refused on the way"
stop_moatd moatd
e2e_stop "$prev"

# start_refused NAME WHAT...: start a moatd that must refuse to start; its log in OUT
start_refused() {
	local name=$1
	shift
	e2e_bg "$name" "$@"
	e2e_wait_exit "$name" 10 || e2e_fail "$name did not stop: $(tail -n 3 "$E2E_WORK/$name.log")"
	e2e_stop "$name"
	e2e_assert_eq 1 "$E2E_LAST_STATUS" "$name: exit status"
	OUT=$(cat "$E2E_WORK/$name.log")
}

# --- a moat-fw that admits another user: moatd refuses to start, naming the flags ---
start_fw fwroot --moatd-user root --socket-group moat
start_refused bad-user "${E2E_USERS[@]}" "$MOAT_BUILD/moatd" "${MOATD_BASE[@]}" --log /dev/null
e2e_assert_contains "$OUT" "refusing to start: firewall channel $SOCK: not admitted" "the refusal"
e2e_assert_contains "$OUT" "start moat-fw with --moatd-user moat --socket-group moat" \
	"the flags that would admit moatd"
# A peer that keeps connecting (a wrong moatd, or anyone in the group) does not drive the log.
e2e_run setpriv --reuid "$E2E_MOAT_UID" --regid "$E2E_MOAT_UID" --clear-groups "$E2E_PY" -c '
import socket, sys
n = 0
for _ in range(300):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(sys.argv[1])
    n += s.recv(64) == b""
    s.close()
print("closed before HELLO: %d" % n)' "$SOCK" >"$E2E_WORK/hammer.out"
e2e_assert_eq "closed before HELLO: 300" "$(cat "$E2E_WORK/hammer.out")" "every refused peer closed at once"
lines=$(grep -c 'refused: only uid 0' "$E2E_WORK/fwroot.log" || true)
e2e_log "refused lines for 301 refused connections: $lines"
((lines >= 1 && lines <= 10)) || e2e_fail "$lines refused lines for 301 refused connections"
e2e_stop fwroot

# --- a socket of another group: Permission denied, and the flag that fixes it ---
start_fw fwgroup --socket-group root
start_refused bad-group "${E2E_USERS[@]}" "$MOAT_BUILD/moatd" "${MOATD_BASE[@]}" --log /dev/null
e2e_assert_contains "$OUT" "refusing to start: firewall channel $SOCK: Permission denied" \
	"the refusal (socket group)"
e2e_assert_contains "$OUT" "--socket-group moat" "the flag that would admit moatd"
e2e_stop fwgroup

# --- no moat user: moatd with a firewall refuses to start (never nobody), moat-fw admits root ---
start_refused no-user "${E2E_NOUSERS[@]}" "$MOAT_BUILD/moatd" "${MOATD_BASE[@]}" --log /dev/null
e2e_assert_contains "$OUT" "no user 'moat' to drop to" "moatd without a moat user"
e2e_assert_not_contains "$OUT" "running as user nobody" "moatd fell back to nobody"
e2e_bg fwnouser "${E2E_NOUSERS[@]}" "$MOAT_BUILD/moat-fw" "${FW_BASE[@]}" --user root
e2e_wait_log fwnouser 'listening on'
e2e_assert_contains "$(cat "$E2E_WORK/fwnouser.log")" "grants only from user root (uid 0)" \
	"moat-fw without a moat user"
e2e_assert_contains "$(cat "$E2E_WORK/fwnouser.log")" "no user moat" "moat-fw says why"
e2e_stop fwnouser
# moat-fw never runs as moatd's user
out=$(e2e_run "${E2E_USERS[@]}" "$MOAT_BUILD/moat-fw" "${FW_BASE[@]}" --user moat 2>&1) && e2e_fail "moat-fw ran as moatd's user"
e2e_assert_contains "$out" "--user is --moatd-user too" "moat-fw as moatd's user"

e2e_pass
