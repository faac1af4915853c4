# shellcheck shell=bash
# Variables set here are read by the sourcing test scripts:
# shellcheck disable=SC2034
# tests/e2e/run_env.sh -- the world `moat run`'s end-to-end tests run in (sourced after lib.sh
# by tests/e2e/test_run*.sh). Two namespaces, linked to each other by one veth pair and to
# nothing else:
#
#   host (RUN_HOST) h1 198.51.100.1/28 ---- n0 198.51.100.2/28 net (E2E_NS)
#     where moat run runs, as on a machine:     NSD 203.0.113.53 (zone test., moatrun.zone)
#     its sandboxes' links moat-N come here,    rogue NSD 203.0.113.54 (escape test 5)
#     from the pool 192.0.2.128/25              receivers (run_peer.py serve) on a.test
#     system mode: moatd on 192.0.2.1 (lo),     203.0.113.80, b.test .81, ntp.test .123,
#     moat-fw --forward, both with sockets      n0..n19.test .100-.119, and 169.254.169.254
#     in RUN_SYS                                (only here, in a namespace with no way out)
#
# The command inside moat run runs as uid 65534 (SUDO_UID/SUDO_GID, as sudo sets them), so
# the tools it runs are copied to RUN_BIN (a checkout may be in a 0700 home).
#
# API: run_env_init NAME; run_host NAME HOSTIF NETIF HOSTADDR NETADDR; run_sys_start [FW ARGS...]; run_sys_stop; moat_run ARGS...
# (moat run in the host namespace with the test's state directory and pool); moat_run_bg OUT
# ERR ARGS... (the same in the background, PID in RUN_BG_PID);
# run_leftovers WHAT: fails the test when anything of a run is left (links, tables, set
# elements of the pool, runtime agents, slot directories, a run's namespace still held);
# run_serve NAME ADDR:PORT...: a receiver in "net", its log in $E2E_WORK/NAME.log.

RUN_POOL=192.0.2.128/25
RUN_USER=65534

# run_host NAME HOSTIF NETIF HOSTADDR NETADDR: a host namespace (moat-e2e-TEST-NAME-PID, in
# E2E_PEER) linked to "net" by a veth (/28s), its default route through net.
run_host() {
	e2e_peer "$1"
	e2e_veth "$E2E_PEER" "$2" "$E2E_NS" "$3"
	e2e_addr_dev "$E2E_PEER" "$2" "$4/28"
	e2e_addr_dev "$E2E_NS" "$3" "$5/28"
	ip -n "$E2E_PEER" route add default via "$5"
}

run_env_init() {
	e2e_init "$1"
	run_host host h1 n0 198.51.100.1 198.51.100.2
	RUN_HOST=$E2E_PEER
	local a
	for a in 203.0.113.53 203.0.113.54 203.0.113.80 203.0.113.81 203.0.113.82 203.0.113.83 \
		203.0.113.123; do
		e2e_addr "$a/32"
	done
	for a in $(seq 100 119); do e2e_addr "203.0.113.$a/32"; done
	# The guard before any packet to 169.254.169.254: each namespace has exactly the links
	# this file made (no path to the root namespace), then the address goes on net's lo.
	local links
	links=$(ip -n "$RUN_HOST" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort | tr '\n' ' ')
	[[ "$links" == "h1 lo " ]] || e2e_fail "host namespace has unexpected links: $links"
	links=$(ip -n "$E2E_NS" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort | tr '\n' ' ')
	[[ "$links" == "lo n0 " ]] || e2e_fail "net namespace has unexpected links: $links"
	ip -n "$E2E_NS" addr add 169.254.169.254/32 dev lo
	e2e_nsd 203.0.113.53 53 "$E2E_ZONES/moatrun.zone"
	e2e_nsd 203.0.113.54 53 "$E2E_ZONES/moatrun.zone"
	RUN_BIN=$E2E_WORK/bin
	mkdir -m 0755 "$RUN_BIN"
	cp "$E2E_DIR/peers/run_peer.py" "$MOAT_BUILD/moat-escape" "$MOAT_SRC/tools/escape/witness.py" "$RUN_BIN/"
	chmod 0755 "$RUN_BIN"/*
	RUN_STATE=$E2E_WORK/runstate
	mkdir -m 0711 "$RUN_STATE"
	RUN_SYS=$E2E_WORK/sys
	mkdir -m 0711 "$RUN_SYS"
	RUN_PEER=("$E2E_PY" "$RUN_BIN/run_peer.py")
}

# run_serve NAME ADDR:PORT...: receivers in "net" (TCP and UDP), started and ready.
run_serve() {
	local name=$1
	shift
	e2e_bg "$name" "$E2E_PY" "$RUN_BIN/run_peer.py" serve 600 "$@"
	e2e_wait_log "$name" ready
}

# run_sys_start [MOAT-FW ARGS...]: the system's daemons in the host namespace, as an installed
# moat would run them: moat-fw --forward (one start-up sandbox of its own, so the runs' ranges
# are runtime ones beside it) and moatd with a control socket and a state directory.
run_sys_start() {
	[ -n "${E2E_MOAT_UID:-}" ] || e2e_users # the installed users: the daemons' defaults agree
	ip -n "$RUN_HOST" addr add 192.0.2.1/32 dev lo
	: >"$RUN_SYS/other.txt"
	cat >"$RUN_SYS/moatd.yaml" <<Y
listen: ["192.0.2.1:53"]
upstreams: ["203.0.113.53:53"]
upstream_timeout_ms: 500
log: {file: $RUN_SYS/queries.jsonl}
firewall_socket: $RUN_SYS/fw.sock
control: $RUN_SYS/ctl.sock
state_dir: $RUN_SYS/agents
agents:
  - name: other
    clients: [198.51.100.240/30]
    allow: [$RUN_SYS/other.txt]
Y
	mkdir -m 0711 "$RUN_SYS/agents"
	E2E_NS=$RUN_HOST start_fw sysfw --socket "$RUN_SYS/fw.sock" --forward \
		--sandbox 198.51.100.240/30@fixed0 --resolver 192.0.2.1 --state "$RUN_SYS/fwstate" "$@"
	E2E_NS=$RUN_HOST start_moatd sysmoatd -c "$RUN_SYS/moatd.yaml"
	RUN_SYSARGS=(--system --fw-socket "$RUN_SYS/fw.sock" --control "$RUN_SYS/ctl.sock"
		--moatd-log "$RUN_SYS/queries.jsonl")
}

run_sys_stop() {
	stop_moatd sysmoatd
	e2e_stop sysfw
	ip netns exec "$RUN_HOST" "$MOAT_BUILD/moat-fw" --remove >/dev/null
	ip -n "$RUN_HOST" addr del 192.0.2.1/32 dev lo
	rm -rf "$RUN_SYS"/*
}

# moat_run ARGS...: moat run in the host namespace, as root on behalf of uid RUN_USER.
moat_run() {
	ip netns exec "$RUN_HOST" env SUDO_UID=$RUN_USER SUDO_GID=$RUN_USER \
		"$MOAT_BUILD/moat" run --state-dir "$RUN_STATE" --pool "$RUN_POOL" "$@"
}

# moat_run_bg OUT ERR ARGS...: moat run in the background, its output to OUT and ERR; its PID
# (moat run's own: the subshell execs it) in RUN_BG_PID. Not in $(...).
moat_run_bg() {
	local out=$1 err=$2
	shift 2
	(exec ip netns exec "$RUN_HOST" env SUDO_UID=$RUN_USER SUDO_GID=$RUN_USER \
		"$MOAT_BUILD/moat" run --state-dir "$RUN_STATE" --pool "$RUN_POOL" "$@") >"$out" 2>"$err" &
	RUN_BG_PID=$!
}

# run_ns_held INODE:COOKIE...: how many of these network namespaces (as run_peer.py's self
# reports them) are still held by a process (its namespace) or a descriptor (one open on the
# namespace). A run's namespace that nothing holds is gone. The inode finds the holders; the
# cookie says whether a holder's namespace is the run's: inode numbers are reused as soon as a
# namespace is freed, and tests running beside this one make namespaces all the time.
run_ns_held() {
	local n=0 id ino cookie path
	for id in "$@"; do
		ino=${id%%:*} cookie=${id#*:}
		[[ -n "$ino" && "$cookie" =~ ^[0-9]+$ ]] || e2e_fail "run_ns_held: bad namespace '$id'"
		while read -r path; do
			[[ "$(nsenter --net="$path" "$E2E_PY" "$RUN_BIN/run_peer.py" cookie 2>/dev/null)" == "cookie $cookie" ]] || continue
			n=$((n + 1))
			break
		done < <(find /proc/[0-9]*/ns/net /proc/[0-9]*/fd -maxdepth 1 -lname "net:\[$ino\]" 2>/dev/null || true)
	done
	echo "$n"
}

# run_netns [FILE]: the INODE:COOKIE of the last sandbox run_peer.py's self reported in FILE
# (default: standard input).
run_netns() {
	sed -n 's/.*netns \([0-9]*\) cookie \([0-9]*\).*/\1:\2/p' "${1:-/dev/stdin}" | tail -n 1
}

# run_leftovers WHAT [NETNS...]: nothing of any run is left in the host namespace, in the
# system's daemons (when they run) or in the state directory; nothing holds the given network
# namespaces (the runs' sandboxes, as run_netns gives them) any more.
run_leftovers() {
	local what=$1 ino out
	shift
	out=$(ip -n "$RUN_HOST" -o link show | awk -F': ' '{print $2}' | grep '^moat-' || true)
	e2e_assert_eq "" "$out" "$what: links left"
	out=$(ip netns exec "$RUN_HOST" nft list tables | grep moatrun || true)
	e2e_assert_eq "" "$out" "$what: tables left"
	out=$(find "$RUN_STATE" -mindepth 1 -maxdepth 1 -type d)
	e2e_assert_eq "" "$out" "$what: slot directories left"
	if [[ -S "$RUN_SYS/ctl.sock" ]]; then
		out=$(ip netns exec "$RUN_HOST" nft list table inet moat |
			grep -cE '192\.0\.2\.(12[89]|1[3-9][0-9]|2[0-5][0-9])' || true)
		e2e_assert_eq 0 "$out" "$what: elements of the pool left in table inet moat"
		out=$(ip netns exec "$RUN_HOST" "$MOAT_BUILD/moatctl" -s "$RUN_SYS/ctl.sock" --json agents)
		e2e_assert_not_contains "$out" '"moat-run-' "$what: runtime agents left"
	fi
	if (($#)); then
		e2e_assert_eq 0 "$(run_ns_held "$@")" "$what: the run's network namespace is still held ($*)"
	fi
}
