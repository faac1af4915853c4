#!/usr/bin/env bash
# The README's Quickstart works as written (issue 22): its lines, read from README.md (the
# package and build lines aside: this build is the test's), run in a directory of their own
# where ./build and zones are this checkout's, with /etc/resolv.conf naming an upstream that
# serves example.com (a copy bind-mounted in a mount namespace of its own; the host's file is
# not touched). The allowed name is answered by that upstream, the other one is NXDOMAIN with
# the EDE the Quickstart shows, the config check passes. With an upstream that does not answer,
# dig and the query log say what the Quickstart says they do.
source "$(dirname "$0")/lib.sh"
e2e_init quickstart

e2e_addr 192.0.2.53/32
cat >"$E2E_WORK/example.com.zone" <<'Z'
$ORIGIN example.com.
$TTL 300
@    IN SOA ns1.example.com. hostmaster.example.com. 2024010101 3600 600 86400 300
     IN NS  ns1.example.com.
ns1  IN A   192.0.2.53
www  IN A   192.0.2.10
Z
e2e_nsd 192.0.2.53 53 "$E2E_WORK/example.com.zone"
QS=$E2E_WORK/qs
mkdir "$QS"
ln -s "$MOAT_BUILD" "$QS/build"
ln -s "$MOAT_SRC/zones" "$QS/zones"
printf 'nameserver 192.0.2.53\n' >"$E2E_WORK/resolv.conf"

# The Quickstart's shell block; after the line that starts moatd in the background, wait until
# it listens (as whoever types the next line does).
awk '/^## Quickstart/ { q = 1 } q && /^```sh/ { b = 1; next } b && /^```/ { exit } b' \
	"$MOAT_SRC/README.md" >"$E2E_WORK/qs.lines"
grep -q 'moatd --listen 127.0.0.1:5353' "$E2E_WORK/qs.lines" || e2e_fail "no Quickstart block: $(cat "$E2E_WORK/qs.lines")"
{
	echo 'set -e'
	echo 'trap "kill %1 2>/dev/null" EXIT'
	while IFS= read -r line; do
		case "$line" in tools/deps* | cmake\ *) continue ;; esac
		printf '%s\n' "$line"
		if [[ "$line" == *"moatd --listen"*"&"* ]]; then
			echo 'for i in $(seq 100); do ss -Hlnu | grep -q "127.0.0.1:5353" && break; sleep 0.1; done'
		fi
	done <"$E2E_WORK/qs.lines"
} >"$E2E_WORK/qs.sh"
# resolv.conf_in_ns CMD...: CMD with that resolv.conf
resolv() {
	e2e_run unshare --mount --propagation private -- sh -c \
		'mount --bind "$0" /etc/resolv.conf && exec "$@"' "$E2E_WORK/resolv.conf" "$@"
}
out=$(cd "$QS" && resolv bash "$E2E_WORK/qs.sh" 2>&1) || e2e_fail "the Quickstart failed: $out"
e2e_log "Quickstart output: $(grep -c . <<<"$out") lines"
grep -A1 'ANSWER SECTION' <<<"$out" | grep -q 'www.example.com.*IN	A	192.0.2.10' ||
	e2e_fail "the allowed name was not answered by the upstream: $out"
e2e_assert_contains "$out" "status: NXDOMAIN" "the other name"
e2e_assert_contains "$out" '; EDE: 15 (Blocked): (moat: not on allowlist of agent default)' "its EDE"
e2e_assert_contains "$(grep -F 'EDE 15' "$E2E_WORK/qs.lines")" '"moat: not on allowlist of agent default"' \
	"the Quickstart shows another EDE"
e2e_assert_contains "$out" '"decision":"allow"' "the query log on stdout"

# --- an upstream that does not answer: what the Quickstart says moatd says ---
start_moatd down --listen 127.0.0.1:5353 --upstream 192.0.2.54 --allow "$QS/allow.txt" --log "$E2E_WORK/down.jsonl"
out=$(e2e_dig @127.0.0.1 -p 5353 +time=5 www.example.com)
e2e_assert_contains "$out" "status: SERVFAIL" "an unreachable upstream"
text='EDE: 22 (No Reachable Authority): (moat: no upstream answered in time)'
e2e_assert_contains "$out" "$text" "dig's EDE"
e2e_assert_contains "$(cat "$MOAT_SRC/README.md")" "$text" "the README quotes another EDE"
line='"decision":"allow","reason":"moat: no upstream answered in time","rcode":"SERVFAIL"'
wait_line -F "$E2E_WORK/down.jsonl" "$line"
e2e_assert_contains "$(cat "$MOAT_SRC/README.md")" "$line" "the README quotes another log line"
stop_moatd down

e2e_pass
