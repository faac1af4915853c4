#!/usr/bin/env bash
# Runtime agents within bounds (issue 22): `moatctl agent add` refuses a range that is the whole
# space (0.0.0.0/0, ::/0; also with --force) and, unless --force, a range overlapping a config
# agent's (inside it or holding it: the more specific one would take those clients over), each
# with the reason; refused agents never take a client over. moat-fw (forward placement) tells
# moatd its --sandbox ranges in its HELLO, and an accepted agent whose clients it does not cover
# gets a warning in the reply; one covered by two adjacent --sandbox ranges together does not.
source "$(dirname "$0")/lib.sh"
e2e_init agents_bounds
e2e_users

CTL=$MOAT_BUILD/moatctl
e2e_addr 192.0.2.1/32  # moatd
e2e_addr 192.0.2.53/32 # NSD
e2e_nsd 192.0.2.53 53 "$E2E_ZONES/example.test.zone"
# The sandboxes' interface, a veth to a namespace that sends nothing: the forward placement then
# filters none of this namespace's own traffic.
e2e_peer sbx
e2e_veth "$E2E_NS" d0 "$E2E_PEER" s0
start_fw fw --socket "$E2E_WORK/fw.sock" --state "$E2E_WORK/fwstate" --resolver 192.0.2.1 \
	--forward --sandbox 10.1.0.0/16@d0 --sandbox 203.0.113.0/28@d0 --sandbox 203.0.113.16/28@d0
printf 'www.example.test\n' >"$E2E_WORK/ops.txt"
cat >"$E2E_WORK/moatd.yaml" <<Y
listen: ["192.0.2.1:53"]
upstreams: ["192.0.2.53:53"]
log: {file: $E2E_WORK/queries.jsonl}
control: $E2E_WORK/ctl.sock
state_dir: $E2E_WORK/state
firewall_socket: $E2E_WORK/fw.sock
agents:
  - name: ops
    clients: [10.1.0.0/16]
    allow: [ops.txt]
  - name: lab
    clients: [127.0.0.1/32]
    allow: [ops.txt]
Y
start_moatd moatd -c "$E2E_WORK/moatd.yaml"
ctl() { e2e_run "$CTL" -s "$E2E_WORK/ctl.sock" --json "$@"; }
refused() { e2e_refused "$1" ctl agent "${@:2}"; } # EXPECTED-TEXT ARGS...
added() { # WARNING|null ARGS...: accepted, with that warning
	local want=$1 out
	shift
	out=$(ctl agent "$@") || e2e_fail "agent $* was refused: $out"
	e2e_assert_contains "$out" "\"warning\":$want" "agent $*: reply's warning"
}

refused "client range 0.0.0.0/0 is the whole address space" add wide --clients 0.0.0.0/0 --pattern a.test
refused "client range ::/0 is the whole address space" add wide6 --clients 2001:db8::1 ::/0 --pattern a.test
refused "client range 0.0.0.0/0 is the whole address space" add wide --clients 0.0.0.0/0 --pattern a.test --force
refused "client range 10.1.2.0/24 overlaps 10.1.0.0/16 of config agent 'ops'" \
	add inside --clients 10.1.2.0/24 --pattern a.test
refused "client range 10.0.0.0/8 overlaps 10.1.0.0/16 of config agent 'ops'" \
	add outside --clients 198.51.100.7 10.0.0.0/8 --pattern a.test
refused "client range 127.0.0.1/32 is agent 'lab''s already" add same --clients 127.0.0.1/32 --pattern a.test
# none of them took a client over: 10.1.2.3 is still ops's
out=$(ctl explain www.example.test client=10.1.2.3)
e2e_assert_contains "$out" '"agent":"ops"' "a refused agent took 10.1.2.3 over"
e2e_assert_contains "$out" "\"reason\":\"allowed by $E2E_WORK/ops.txt:1\"" "explain: the rule's reason"
e2e_assert_eq "" "$(ctl agents | grep -o '"name":"\(wide\|wide6\|inside\|outside\|same\)"' || true)" \
	"a refused agent is in the policy"

# --force: an overlap the operator means (covered by moat-fw's 10.1.0.0/16: no warning)
added null add inside --clients 10.1.2.0/24 --pattern a.test --force
out=$(ctl explain a.test client=10.1.2.3)
e2e_assert_contains "$out" '"agent":"inside"' "the forced agent does not serve its clients"

# moat-fw's coverage, from its HELLO
added null add covered --clients 203.0.113.5 --pattern a.test
added null add pair --clients 203.0.113.0/27 --pattern a.test # two /28s together
added '"moat-fw covers no sandbox range holding all of 198.51.100.0/24: its DNS and grants there are dropped; start moat-fw with --sandbox for it"' \
	add outside --clients 198.51.100.0/24 --pattern a.test
added '"moat-fw covers no sandbox range holding all of 203.0.113.0/26' \
	add half --clients 203.0.113.0/26 --pattern a.test
stop_moatd moatd

e2e_pass
