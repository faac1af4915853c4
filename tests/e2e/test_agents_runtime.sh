#!/usr/bin/env bash
# Agents at runtime (issue 16): `moatctl agent add/del` over the control socket. 1,000 agents,
# each with its own client address (/32 and /128 on lo, picked with dig -b) and its own pattern,
# are added in one batch (timed; the 2 s bound is tests/bench/agents_add.sh's), and each answers
# by its own policy (a sample across the range, plus agent A's name denied to agent B); they are
# still there after a restart (the LMDB state_dir) and gone after `agent del`. Config agents are
# read-only, an identical range and bad input are refused with a clear error. As user nobody
# under the seccomp filter (the default), two workers: the store is written after both are in
# place.
source "$(dirname "$0")/lib.sh"
e2e_init agentsrt

CTL="$MOAT_BUILD/moatctl"
N=1000

# Client addresses: 250 each from the three IPv4 documentation ranges, 250 in 2001:db8::/32.
addr_of() { # index 1..N
	local i=$1
	if ((i <= 250)); then echo "198.51.100.$i"
	elif ((i <= 500)); then echo "203.0.113.$((i - 250))"
	elif ((i <= 750)); then echo "192.0.2.$((i - 500))"
	else printf '2001:db8:16::%x\n' "$((i - 750))"; fi
}
bits_of() { [[ $1 == *:* ]] && echo 128 || echo 32; }
srv_of() { [[ $1 == *:* ]] && echo ::1 || echo 127.0.0.1; } # moatd's address of that family
dig_as() { # CLIENT-ADDR DIG-ARGS...
	local a=$1
	shift
	e2e_dig "@$(srv_of "$a")" -b "$a" "$@"
}
{
	for ((i = 1; i <= N; i++)); do
		a=$(addr_of "$i")
		if [[ $a == *:* ]]; then echo "addr add $a/128 dev lo nodad"; else echo "addr add $a/32 dev lo"; fi
	done
} >"$E2E_WORK/addrs.batch"
ip -n "$E2E_NS" -batch "$E2E_WORK/addrs.batch" || e2e_fail "cannot add the client addresses"

# One zone with a name per agent, answered by NSD.
{
	printf '$TTL 300\n@ IN SOA ns.fleet.test. h.fleet.test. 1 3600 600 86400 300\n@ IN NS ns\nns IN A 192.0.2.53\n'
	for ((i = 1; i <= N; i++)); do printf 'a%d IN A 192.0.2.99\n' "$i"; done
	printf 'ops IN A 192.0.2.98\n'
} >"$E2E_WORK/fleet.test.zone"
e2e_nsd 127.0.0.1 5300 "$E2E_WORK/fleet.test.zone"

printf 'ops.fleet.test\n' >"$E2E_WORK/ops.txt"
cat >"$E2E_WORK/moatd.yaml" <<EOF2
listen: ["127.0.0.1:53", "[::1]:53"]
upstreams: ["127.0.0.1:5300"]
log: {file: $E2E_WORK/queries.jsonl}
control: $E2E_WORK/ctl.sock
state_dir: $E2E_WORK/state
user: nobody # agent add writes the store after privileges dropped and the filter is on
workers: 2   # every worker gets each new snapshot
agents:
  - name: ops
    clients: [127.0.0.1/32]
    allow: [ops.txt]
EOF2
# shellcheck disable=SC2034 # read by start_moatd (lib.sh)
MOATD_BASE=(-c "$E2E_WORK/moatd.yaml")
ctl() { e2e_run "$CTL" -s "$E2E_WORK/ctl.sock" "$@"; }
start_moatd moatd

# --- refusals, each with its reason ---
refused() { e2e_refused "$1" ctl agent "${@:2}"; } # EXPECTED-TEXT ARGS...
refused "from the config file and read-only" add ops --clients 198.51.100.1/32 --pattern a1.fleet.test
refused "from the config file and read-only" del ops
refused "agent 'ops''s already" add dup --clients 127.0.0.1/32 --pattern a1.fleet.test
refused "bad pattern 'bad..name'" add bad --clients 198.51.100.1/32 --pattern a1.fleet.test --pattern bad..name
refused "bad client range" add bad --clients 198.51.100.300/32 --pattern a1.fleet.test
refused "bad agent name" add 'b@d' --clients 198.51.100.1/32 --pattern a1.fleet.test
refused "no agent 'nosuch'" del nosuch

# --- 1,000 adds in one batch ---
{
	for ((i = 1; i <= N; i++)); do
		a=$(addr_of "$i")
		echo "agent add a$i --clients $a/$(bits_of "$a") --pattern a$i.fleet.test"
	done
} >"$E2E_WORK/adds.txt"
t0=$(date +%s%N)
out=$(ctl --json batch <"$E2E_WORK/adds.txt") || e2e_fail "batch add failed: $(grep -v '"ok":true' <<<"$out" | head -3)"
t1=$(date +%s%N)
ms=$(((t1 - t0) / 1000000))
e2e_assert_eq "$N" "$(grep -c '"ok":true' <<<"$out")" "every add answered ok"
# The time is logged, not bounded: a bound here failed under ASan on a loaded machine; the
# target (<= 2 s) is measured by tests/bench/agents_add.sh.
e2e_log "1000 runtime agents added in $ms ms (one moatctl batch)"

# --- each agent answered by its own policy ---
sample="1 2 50 125 250 251 300 375 500 501 600 700 750 751 800 900 999 1000"
for ((k = 0; k < 32; k++)); do sample+=" $((RANDOM % N + 1))"; done
check_agents() { # LABEL
	local i j a b out
	for i in $sample; do
		a=$(addr_of "$i")
		out=$(dig_as "$a" +short "a$i.fleet.test" A)
		e2e_assert_eq 192.0.2.99 "$out" "$1: agent a$i ($a) resolves its own name"
		j=$((i % N + 1))
		out=$(dig_as "$a" "a$j.fleet.test" A)
		e2e_assert_contains "$out" "status: NXDOMAIN" "$1: agent a$i is denied a$j's name"
	done
	out=$(e2e_dig @127.0.0.1 -b 127.0.0.1 a1.fleet.test A)
	e2e_assert_contains "$out" "status: NXDOMAIN" "$1: the config agent is denied a runtime agent's name"
	out=$(e2e_dig @127.0.0.1 -b 127.0.0.1 +short ops.fleet.test A)
	e2e_assert_eq 192.0.2.98 "$out" "$1: the config agent keeps its own policy"
}
check_agents "after add"
out=$(ctl --json agents)
e2e_assert_contains "$(grep -o '{"name":"a1000"[^}]*}' <<<"$out")" '"runtime":true' "moatctl agents marks runtime agents"
e2e_assert_contains "$(grep -o '{"name":"ops"[^}]*}' <<<"$out")" '"runtime":false' "moatctl agents marks config agents"
out=$(ctl --json explain a7.fleet.test --client "$(addr_of 7)")
e2e_assert_contains "$out" '"rule":"runtime:a7:1"' "explain names the runtime rule"

# --- restart: the store brings them back ---
e2e_stop moatd
start_moatd moatd2
e2e_wait_log moatd2 "$N runtime agent(s) from"
check_agents "after restart"

# --- del: gone, and stays gone after a restart ---
ctl agent del a7 >/dev/null || e2e_fail "agent del a7 failed"
{ for i in $(seq 500 520); do echo "agent del a$i"; done; echo "agent del a751"; } | ctl batch >/dev/null || e2e_fail "batch del failed"
for i in 7 500 510 520; do # 500: IPv4; deletes also reach an IPv6 agent below
	out=$(dig_as "$(addr_of "$i")" "a$i.fleet.test" A)
	e2e_assert_contains "$out" "status: REFUSED" "agent a$i is gone after del (its client is refused)"
done
out=$(dig_as "$(addr_of 8)" +short a8.fleet.test A)
e2e_assert_eq 192.0.2.99 "$out" "a neighbour of a deleted agent keeps its policy"
e2e_stop moatd2
# This run stays root, so that the reload below can read the config in the private work dir.
sed -i '/^user: nobody/d' "$E2E_WORK/moatd.yaml"
start_moatd moatd3
e2e_wait_log moatd3 "$((N - 23)) runtime agent(s) from"
out=$(dig_as "$(addr_of 7)" a7.fleet.test A)
e2e_assert_contains "$out" "status: REFUSED" "a deleted agent stays gone after a restart"
out=$(dig_as "$(addr_of 751)" a751.fleet.test A)
e2e_assert_contains "$out" "status: REFUSED" "a deleted IPv6 agent stays gone after a restart"

# --- a reload keeps the runtime agents ---
ctl reload >/dev/null || e2e_fail "reload failed"
out=$(dig_as "$(addr_of 9)" +short a9.fleet.test A)
e2e_assert_eq 192.0.2.99 "$out" "a runtime agent survives a reload"
e2e_pass
