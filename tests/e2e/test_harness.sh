#!/usr/bin/env bash
# tests/e2e/test_harness.sh -- tests the e2e harness (lib.sh) and the zone data.
#
# Run without arguments it is a wrapper: it runs this same script three times
# as a child ("inner" modes), each in its own namespace, and then checks from
# outside that the child left nothing behind -- no namespace, no work dir, no
# process -- after a pass, after a failure, and after SIGTERM. A script cannot
# check its own cleanup, because cleanup runs as it exits.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

NSD_ADDR=127.0.0.1
NSD_PORT=5300

# dig against NSD instance 1 with +short, UDP unless the caller adds +tcp.
q1() { e2e_dig +short +norec "@$NSD_ADDR" -p "$NSD_PORT" "$@"; }

# ------------------------------------------------------------------ inner --
inner_main() {
	e2e_init harness-inner
	e2e_nsd "$NSD_ADDR" "$NSD_PORT" "$E2E_ZONES/example.test.zone" \
		"$E2E_ZONES/cdn.test.zone" "$E2E_ZONES/rebind.test.zone"
	e2e_wait_port udp "$NSD_ADDR" "$NSD_PORT"
	e2e_wait_port tcp "$NSD_ADDR" "$NSD_PORT"

	# The namespace must have no way out: only lo, no default route.
	e2e_assert_eq "lo" "$(e2e_run ip -o link show | awk -F': ' '{print $2}')" "namespace has links besides lo"
	e2e_assert_eq "" "$(e2e_run ip route show default)" "namespace has a default route"

	# Readiness probes of e2e_nsd are hidden from the log.
	e2e_assert_eq "" "$(e2e_upstream_queries)" "query log not empty after start-up"

	# www A over UDP and TCP.
	e2e_assert_eq "192.0.2.10" "$(q1 www.example.test A)" "www A over UDP"
	e2e_assert_eq "192.0.2.10" "$(q1 +tcp www.example.test A)" "www A over TCP"
	e2e_assert_eq $'www.example.test. A UDP\nwww.example.test. A TCP' \
		"$(e2e_upstream_queries)" "query log after www A UDP+TCP"

	# Exactly three names, mixed protocols, a mixed-case name, three zones.
	e2e_upstream_reset
	e2e_assert_eq "" "$(e2e_upstream_queries)" "query log not empty after reset"
	q1 Multi.Example.TEST A >/dev/null
	q1 +tcp edge.cdn.test AAAA >/dev/null
	q1 meta.rebind.test A >/dev/null
	local want=$'multi.example.test. A UDP\nedge.cdn.test. AAAA TCP\nmeta.rebind.test. A UDP'
	local got
	got=$(e2e_upstream_queries)
	e2e_assert_eq "$want" "$got" "query log for 3 direct queries"
	# Reading the log is idempotent: its own barrier queries never show up.
	e2e_assert_eq "$want" "$(e2e_upstream_queries)" "second read of the log differs"
	e2e_assert_contains "$(e2e_upstream_queries --src)" "meta.rebind.test. A UDP 127.0.0.1" "--src column"
	e2e_assert_not_contains "$got" "www.example.test." "old queries visible after reset"

	check_zone_data

	# A second instance on a documentation address, port 53: exercises
	# e2e_addr, per-instance logs and e2e_stop.
	e2e_addr 192.0.2.53/32
	e2e_nsd 192.0.2.53 53 "$E2E_ZONES/cdn.test.zone"
	e2e_assert_eq 2 "$E2E_NSD_ID" "second instance id"
	e2e_assert_eq "198.51.100.7" "$(e2e_dig +short @192.0.2.53 edge.cdn.test A)" "nsd2 answer"
	e2e_assert_eq "edge.cdn.test. A UDP" "$(e2e_upstream_queries 2)" "nsd2 log"
	e2e_assert_not_contains "$(e2e_upstream_queries 1)" "edge.cdn.test. A UDP" "nsd2 query in nsd1 log"
	e2e_stop nsd2
	e2e_assert_eq 0 "$E2E_LAST_STATUS" "nsd2 exit status after SIGTERM"
	if e2e_run ss -Hlnu | grep -F "192.0.2.53:53" >/dev/null; then e2e_fail "nsd2 still listening after e2e_stop"; fi
	# Addresses outside loopback/documentation ranges are refused.
	if (e2e_addr 10.0.0.1/32) 2>/dev/null; then e2e_fail "e2e_addr accepted 10.0.0.1/32"; fi

	e2e_pass
}

# The zone files are test data for later tests: check they say what they claim.
check_zone_data() {
	local out
	e2e_assert_eq "2001:db8::10" "$(q1 www.example.test AAAA)" "www AAAA"
	e2e_assert_eq $'192.0.2.11\n192.0.2.12\n192.0.2.13\n192.0.2.14' "$(q1 multi.example.test A)" "multi A"
	e2e_assert_eq '"v=moat-test; hello world"' "$(q1 txt.example.test TXT)" "TXT"
	e2e_assert_eq "10 mail.example.test." "$(q1 example.test MX)" "MX"
	e2e_assert_eq $'www.example.test.\n192.0.2.10' "$(q1 alias.example.test A)" "in-zone CNAME"
	# CNAME into the other zone: NSD serves cdn.test. too, so it adds the
	# target itself (an instance serving only example.test. would not).
	e2e_assert_eq $'edge.cdn.test.\n198.51.100.7' "$(q1 cdn.example.test A)" "cross-zone CNAME"
	e2e_assert_eq "192.0.2.20" "$(q1 anything.wild.example.test A)" "wildcard"
	out=$(q1 example.test SOA)
	e2e_assert_eq "300" "${out##* }" "SOA minimum"
	# big: > 1500 bytes, so UDP is truncated and TCP carries all 10 strings.
	out=$(e2e_dig +norec +ignore "@$NSD_ADDR" -p "$NSD_PORT" big.example.test TXT)
	[[ "$out" =~ flags:[a-z\ ]*\ tc ]] || e2e_fail "big TXT over UDP is not truncated"
	e2e_assert_eq 10 "$(q1 +tcp big.example.test TXT | wc -l)" "big TXT over TCP"
	out=$(e2e_dig +norec "@$NSD_ADDR" -p "$NSD_PORT" +tcp big.example.test TXT)
	[[ "$out" =~ MSG\ SIZE\ +rcvd:\ ([0-9]+) ]] || e2e_fail "no message size for big TXT"
	((BASH_REMATCH[1] > 1500)) || e2e_fail "big TXT answer only ${BASH_REMATCH[1]} bytes"

	# rebind.test: internal addresses as data.
	e2e_assert_eq "169.254.169.254" "$(q1 meta.rebind.test A)" "meta"
	e2e_assert_eq "127.0.0.1" "$(q1 loop.rebind.test A)" "loop"
	e2e_assert_eq "::ffff:169.254.169.254" "$(q1 mapped.rebind.test AAAA)" "mapped"
	e2e_assert_eq "64:ff9b::a9fe:a9fe" "$(q1 nat64.rebind.test AAAA)" "nat64"
	e2e_assert_eq "2002:a9fe:a9fe::1" "$(q1 sixtofour.rebind.test AAAA)" "sixtofour"
	e2e_assert_eq "10.0.0.5" "$(q1 priv.rebind.test A)" "priv"
	e2e_assert_eq "192.0.2.30" "$(q1 good.rebind.test A)" "good"
	e2e_assert_eq $'meta.rebind.test.\n169.254.169.254' "$(q1 chain.rebind.test A)" "chain"
	e2e_assert_contains "$(q1 svcb.rebind.test HTTPS)" "ipv4hint=169.254.169.254" "HTTPS ipv4hint"
	out=$(e2e_dig +norec "@$NSD_ADDR" -p "$NSD_PORT" glue.rebind.test MX)
	e2e_assert_contains "$out" "10 meta.rebind.test." "glue MX answer"
	[[ "$out" =~ ADDITIONAL\ SECTION:.*meta\.rebind\.test\.[[:space:]]+[0-9]+[[:space:]]+IN[[:space:]]+A[[:space:]]+169\.254\.169\.254 ]] ||
		e2e_fail "glue MX answer lacks meta A 169.254.169.254 in ADDITIONAL"
	e2e_upstream_reset
}

inner_fail() {
	e2e_init harness-fail
	e2e_nsd "$NSD_ADDR" "$NSD_PORT" "$E2E_ZONES/example.test.zone"
	e2e_fail "deliberate failure"
}

inner_term() {
	e2e_init harness-term
	e2e_nsd "$NSD_ADDR" "$NSD_PORT" "$E2E_ZONES/example.test.zone"
	e2e_bg sleeper sleep 60
	: >"$E2E_READY_FILE"
	# `wait` (unlike a foreground command) is interrupted by the TERM trap.
	wait "$(e2e_pid sleeper)"
	e2e_fail "sleeper ended before the wrapper sent SIGTERM"
}

# ---------------------------------------------------------------- wrapper --
# clean_fail MSG: fail, with the child's own output first (its cleanup says why it could not).
clean_fail() {
	[[ -s "${child_out:-}" ]] && sed 's/^/  child| /' "$child_out" >&2
	e2e_fail "$@"
}

# check_clean STATEFILE: everything the child recorded must be gone.
check_clean() {
	local sf=$1 kind a rest work="" ns=""
	[[ -s "$sf" ]] || clean_fail "child wrote no state to $sf"
	while read -r kind a rest; do
		case "$kind" in
		work) work=$a ;;
		ns) ns=$a ;;
		pid | swept)
			if e2e__alive "$a" && grep -qaF -- "$work" "/proc/$a/cmdline" 2>/dev/null; then
				clean_fail "process $a ($kind $rest) of the child is still running"
			fi
			;;
		esac
	done <"$sf"
	[[ -n "$ns" && -n "$work" ]] || clean_fail "state file lacks ns/work lines"
	if ip netns list | awk -v ns="$ns" '$1 == ns { f = 1 } END { exit !f }'; then
		clean_fail "namespace $ns still exists"
	fi
	[[ ! -e "$work" ]] || clean_fail "work dir $work still exists"
	# Any process of the child has the work dir on its command line (nsd -c,
	# fstrm_capture -u); none may survive, whatever its PID.
	local p
	for p in /proc/[0-9]*; do
		[[ "${p#/proc/}" == "$$" ]] && continue
		if grep -qaF -- "$work" "$p/cmdline" 2>/dev/null; then
			clean_fail "leftover process ${p#/proc/}: $(tr '\0' ' ' <"$p/cmdline")"
		fi
	done
	# Only this child's own names are checked: other e2e tests may run in
	# parallel (ctest -j) with namespaces of their own.
	printf 'cleanup ok: namespace %s and %s gone, %s recorded processes gone\n' \
		"$ns" "$work" "$(grep -cE '^(pid|swept) ' "$sf")"
}

wrapper_cleanup() { rm -rf -- "$tmp"; } # traps_set's

wrapper_main() {
	E2E_NAME=harness
	local sf out rc
	child_out=""
	# Global, not local: the cleanup runs after this function has returned.
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/moat-e2e-wrap.XXXXXX")
	traps_set wrapper_cleanup

	# 1. The real checks; must pass and clean up.
	sf=$tmp/inner.state
	rc=0
	child_out=$tmp/inner.out
	E2E_STATE_OUT=$sf timeout 240 bash "$0" inner >"$child_out" 2>&1 || rc=$?
	out=$(<"$child_out")
	printf '%s\n' "$out" | sed 's/^/  inner| /'
	child_out="" # shown already
	e2e_assert_eq 0 "$rc" "inner run exit status"
	e2e_assert_contains "$out" "PASS: harness-inner" "inner run did not print PASS"
	check_clean "$sf"

	# 2. A failing test must still clean up, and report the failure.
	sf=$tmp/fail.state
	rc=0
	child_out=$tmp/fail.out
	E2E_STATE_OUT=$sf timeout 60 bash "$0" inner-fail >"$child_out" 2>&1 || rc=$?
	out=$(<"$child_out")
	e2e_assert_eq 1 "$rc" "failing run exit status"
	e2e_assert_contains "$out" "FAIL: harness-fail: deliberate failure" "failing run message"
	check_clean "$sf"

	# 3. SIGTERM (as from a ctest timeout or Ctrl-C) must clean up too.
	sf=$tmp/term.state
	local ready=$tmp/term.ready pid i
	child_out=$tmp/term.out
	E2E_STATE_OUT=$sf E2E_READY_FILE=$ready timeout 60 bash "$0" inner-term >"$child_out" 2>&1 &
	pid=$!
	for ((i = 0; i < 300; i++)); do
		[[ -e "$ready" ]] && break
		e2e__alive "$pid" || break
		sleep 0.1
	done
	[[ -e "$ready" ]] || clean_fail "term run never became ready"
	# $pid is `timeout`; it forwards SIGTERM to the script.
	kill -TERM "$pid"
	rc=0
	wait "$pid" || rc=$?
	e2e_assert_eq 143 "$rc" "terminated run exit status"
	check_clean "$sf"

	e2e_pass
}

case "${1:-}" in
inner) inner_main ;;
inner-fail) inner_fail ;;
inner-term) inner_term ;;
"") wrapper_main ;;
*) e2e_fail "unknown mode '$1'" ;;
esac
