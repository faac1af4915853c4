# shellcheck shell=bash
# Variables set here are read by the sourcing test scripts:
# shellcheck disable=SC2034
# tests/e2e/lib.sh -- end-to-end test harness for moat.
#
# Sourced by tests/e2e/test_*.sh. CMake runs each script as `bash script` with
# MOAT_BUILD=<build dir> and MOAT_SRC=<source dir> in the environment.
#
# What it gives a test:
#   * a private network namespace that has only a loopback interface, so every
#     packet the test and the binaries under test send stays on that loopback;
#   * a real authoritative server (NSD) serving the zones in tests/e2e/zones/;
#   * NSD's own query log (dnstap), decoded to "QNAME QTYPE PROTO" lines, so a
#     test can prove which names reached the upstream and which never did;
#   * cleanup on EXIT/INT/TERM that stops every process the harness started by
#     PID, deletes the namespace and removes the work dir.
#
# See the API summary at the end of this file.

set -euo pipefail
# Without this, bash clears -e inside $(...), so a failing step in a function
# called as x=$(f) would be ignored instead of failing the test.
shopt -s inherit_errexit

# ---------------------------------------------------------------- state --
E2E_NAME=""          # test name given to e2e_init
E2E_WORK=""          # private work dir (mktemp -d)
E2E_NS=""            # network namespace name
E2E_OWNER_PID=""     # PID of the shell that called e2e_init (cleanup runs only there)
E2E_PASSED=0         # set by e2e_pass; exiting 0 without it is treated as a failure
E2E_PIDS=()          # every PID started by e2e_bg, in start order
declare -A E2E_BG=() # e2e_bg NAME -> PID
E2E_LAST_PID=""      # PID of the most recent e2e_bg
E2E_LAST_STATUS=""   # exit status collected by the most recent e2e_stop
E2E_NSD_COUNT=0      # NSD instances started by e2e_nsd, numbered 1..N
E2E_NSD_ADDR=()      # per instance: listen address
E2E_NSD_PORT=()      # per instance: listen port
E2E_NSD_CAP=()       # per instance: PID of its fstrm_capture
E2E_NSD_TAP=()       # per instance: dnstap capture file
E2E_NSD_SKIP=()      # per instance: decoded log lines hidden by e2e_upstream_reset
E2E_PEERS=()         # extra namespaces made by e2e_peer (deleted at cleanup)

: "${MOAT_SRC:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${MOAT_BUILD:=$MOAT_SRC/build}"
E2E_DIR="$MOAT_SRC/tests/e2e"
# shellcheck source=tools/sh/traps.sh
. "$MOAT_SRC/tools/sh/traps.sh"
E2E_ZONES="$E2E_DIR/zones"
export MOAT_SRC MOAT_BUILD
# The peers' interpreter: the system's when there is one (its packages live there, and a
# version-manager shim in PATH can cost a second per start).
E2E_PY=python3
[[ -x /usr/bin/python3 ]] && E2E_PY=/usr/bin/python3

# Bounds for every wait loop (count x 0.1 s), so no test can hang forever.
E2E_STARTUP_TRIES=${E2E_STARTUP_TRIES:-50}   # daemon start-up: 5 s
E2E_DNSTAP_TRIES=${E2E_DNSTAP_TRIES:-100}    # dnstap barrier: 10 s (measured ~1-2 s)
E2E_STOP_TRIES=${E2E_STOP_TRIES:-50}         # graceful stop before SIGKILL: 5 s

# ------------------------------------------------------------- messages --
e2e_log() { printf '[e2e %s] %s\n' "${E2E_NAME:-?}" "$*" >&2; }

# e2e_fail MSG...: print "FAIL: NAME: MSG" and exit 1 (cleanup runs from the trap).
# Inside $(...) this exits only the subshell; set -e then stops the caller too.
e2e_fail() {
	printf 'FAIL: %s: %s\n' "${E2E_NAME:-?}" "$*" >&2
	E2E_FAILED=1
	exit 1
}

# e2e_pass: print "PASS: NAME". Call it as the last line of a test.
e2e_pass() {
	E2E_PASSED=1
	printf 'PASS: %s\n' "$E2E_NAME"
}

# e2e_assert_eq EXPECTED ACTUAL [MSG]: exact string comparison (multi-line ok).
e2e_assert_eq() {
	local exp=$1 act=$2 msg=${3:-values differ}
	if [[ "$exp" != "$act" ]]; then
		printf -- '--- expected\n%s\n--- actual\n%s\n---\n' "$exp" "$act" >&2
		e2e_fail "$msg"
	fi
}

# e2e_assert_contains HAYSTACK NEEDLE [MSG]: NEEDLE is a fixed string.
e2e_assert_contains() {
	local hay=$1 needle=$2 msg=${3:-missing expected text}
	if [[ "$hay" != *"$needle"* ]]; then
		printf -- '--- looked for\n%s\n--- in\n%s\n---\n' "$needle" "$hay" >&2
		e2e_fail "$msg"
	fi
}

# e2e_assert_not_contains HAYSTACK NEEDLE [MSG]: e.g. "this name never reached NSD".
e2e_assert_not_contains() {
	local hay=$1 needle=$2 msg=${3:-found unexpected text}
	if [[ "$hay" == *"$needle"* ]]; then
		printf -- '--- did not expect\n%s\n--- in\n%s\n---\n' "$needle" "$hay" >&2
		e2e_fail "$msg"
	fi
}

# ------------------------------------------------------------- processes --
# True while PID exists and is not a zombie (kill -0 succeeds on zombies, which
# would make "wait until it exits" loops spin until their bound).
# A PID recorded with e2e__track is alive only while it is still that process: PIDs wrap
# quickly (pid_max is 32768 on small machines) and tests running side by side start processes
# all the time, so a PID whose process ended may already be another test's.
declare -A E2E_START=() # PID -> start time (clock ticks after boot), for e2e__track's PIDs

# e2e__stat PID: E2E_STAT=(state ... starttime at [19]), the fields of /proc/PID/stat after
# "(comm) " (comm may hold spaces); false when there is no such process.
e2e__stat() {
	local stat
	{ read -r stat <"/proc/$1/stat"; } 2>/dev/null || return 1
	read -r -a E2E_STAT <<<"${stat##*) }"
}

e2e__alive() {
	e2e__stat "$1" || return 1
	[[ ${E2E_STAT[0]} != Z && ${E2E_STAT[0]} != X ]] || return 1
	[[ -z "${E2E_START[$1]:-}" || "${E2E_START[$1]}" == "${E2E_STAT[19]}" ]]
}

# e2e__track PID: remember PID (a child just started) with its start time, for the cleanup.
e2e__track() {
	E2E_PIDS+=("$1")
	if e2e__stat "$1"; then E2E_START[$1]=${E2E_STAT[19]}; else E2E_START[$1]=gone; fi
}

# Append a line to $E2E_STATE_OUT if set: lets a wrapper verify cleanup later.
e2e__state() {
	if [[ -n "${E2E_STATE_OUT:-}" ]]; then printf '%s\n' "$*" >>"$E2E_STATE_OUT"; fi
}

# e2e__stop_pids SIG PID...: signal, wait (bounded) for exit, then SIGKILL the rest.
e2e__stop_pids() {
	local sig=$1 pid i left
	shift
	[[ $# -gt 0 ]] || return 0
	for pid in "$@"; do if e2e__alive "$pid"; then kill "-$sig" "$pid" 2>/dev/null || true; fi; done
	for ((i = 0; i < E2E_STOP_TRIES; i++)); do
		left=0
		for pid in "$@"; do if e2e__alive "$pid"; then left=1; fi; done
		[[ $left == 1 ]] || return 0
		sleep 0.1
	done
	for pid in "$@"; do
		if e2e__alive "$pid"; then
			e2e_log "PID $pid ignored SIG$sig for $((E2E_STOP_TRIES / 10)) s, sending SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	done
}

# Cleanup on EXIT. Stops processes by PID only: first those e2e_bg recorded
# (newest first, so the daemon stops before its upstream and fstrm_capture
# stops last), then anything still inside OUR namespace (children the daemon
# forked), found with `ip netns pids` -- never by process name.
e2e__cleanup() { # e2e__cleanup STATUS: traps_set's (INT and TERM ignored; bounded)
	local rc=$1 pid f i
	# A subshell (e.g. $(...)) must never tear down the parent's test.
	[[ "${BASHPID:-$$}" == "$E2E_OWNER_PID" ]] || return 0
	set +e
	if [[ $rc == 0 && $E2E_PASSED != 1 ]]; then
		printf 'FAIL: %s: script exited 0 without calling e2e_pass\n' "$E2E_NAME" >&2
		rc=1
	fi
	if [[ $rc != 0 && -z "${E2E_FAILED:-}" ]]; then
		printf 'FAIL: %s: exit %s without a FAIL line; the last failing command: %s\n' \
			"$E2E_NAME" "$rc" "${E2E_ERR:-none seen}" >&2
	fi
	if [[ $rc != 0 && -n "$E2E_WORK" && ! -d "$E2E_WORK" ]]; then
		printf 'FAIL: %s: the work directory %s is gone\n' "$E2E_NAME" "$E2E_WORK" >&2
	fi
	if [[ $rc != 0 && -n "$E2E_WORK" && -d "$E2E_WORK" ]]; then
		# Show the tail of every log: the reason a daemon failed is usually there.
		for f in "$E2E_WORK"/*.log; do
			[[ -s "$f" ]] || continue
			printf -- '----- %s (last 30 lines)\n' "${f##*/}" >&2
			# fstrm_capture logs every flush request; that is noise here.
			grep -v 'received SIGHUP, flushing output' "$f" | tail -n 30 >&2
		done
	fi
	[[ -z "${E2E_CLEANUP_HOOK:-}" ]] || "$E2E_CLEANUP_HOOK"
	local rev=()
	for ((i = ${#E2E_PIDS[@]} - 1; i >= 0; i--)); do rev+=("${E2E_PIDS[i]}"); done
	e2e__stop_pids TERM "${rev[@]}"
	if [[ -n "$E2E_NS" ]] && ip netns list | awk -v ns="$E2E_NS" '$1 == ns { f = 1 } END { exit !f }'; then
		local stray=()
		mapfile -t stray < <(ip netns pids "$E2E_NS" 2>/dev/null)
		if [[ ${#stray[@]} -gt 0 ]]; then
			e2e_log "stopping ${#stray[@]} leftover process(es) in $E2E_NS: ${stray[*]}"
			for pid in "${stray[@]}"; do e2e__state "swept $pid"; done
			e2e__stop_pids TERM "${stray[@]}"
		fi
		ip netns del "$E2E_NS" || e2e_log "could not delete namespace $E2E_NS"
	fi
	local peer stray=()
	for peer in "${E2E_PEERS[@]}"; do
		mapfile -t stray < <(ip netns pids "$peer" 2>/dev/null)
		[[ ${#stray[@]} -gt 0 ]] && e2e__stop_pids TERM "${stray[@]}"
		ip netns del "$peer" 2>/dev/null || e2e_log "could not delete namespace $peer"
	done
	# Reap our own children so nothing lingers as a zombie.
	for pid in "${E2E_PIDS[@]}"; do wait "$pid" 2>/dev/null; done
	if [[ -n "$E2E_WORK" && -d "$E2E_WORK" ]]; then
		if [[ "${E2E_KEEP:-0}" == 1 ]]; then
			e2e_log "E2E_KEEP=1: work dir kept at $E2E_WORK"
		else
			rm -rf -- "$E2E_WORK"
		fi
	fi
	exit "$rc"
}

# e2e_on_cleanup FUNC: the cleanup calls FUNC first (signals ignored): for what a test made
# outside its namespace and work dir. A test's own EXIT trap would race the signals (traps.sh).
e2e_on_cleanup() { E2E_CLEANUP_HOOK=$1; }

# Namespaces from earlier runs that were SIGKILLed (e.g. a ctest timeout) leak,
# because no trap runs. Their names end in the PID of the shell that made them;
# if that shell is gone, stop what is inside (by PID) and delete them.
e2e__reap_stale() {
	local ns owner pid
	while read -r ns _; do
		[[ "$ns" =~ ^moat-e2e-.*-([0-9]+)$ ]] || continue
		owner=${BASH_REMATCH[1]}
		[[ -d "/proc/$owner" ]] && continue
		e2e_log "removing stale namespace $ns (owner PID $owner is gone)"
		for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
		ip netns del "$ns" 2>/dev/null || true
	done < <(ip netns list 2>/dev/null)
}

# ------------------------------------------------------------ namespace --
# e2e_init NAME: work dir, namespace with lo up, cleanup trap. Call once, first.
# Sets E2E_NAME, E2E_WORK, E2E_NS. Prints nothing on success.
e2e_init() {
	[[ $# == 1 ]] || e2e_fail "usage: e2e_init NAME"
	E2E_NAME=$1
	[[ "$E2E_NAME" =~ ^[A-Za-z0-9_.-]{1,40}$ ]] || e2e_fail "bad test name '$E2E_NAME'"
	[[ "$(id -u)" == 0 ]] || e2e_fail "must run as root (network namespaces)"
	local tool
	for tool in ip ss nsd nsd-checkconf nsd-checkzone fstrm_capture dnstap-ldns dig awk; do
		command -v "$tool" >/dev/null || e2e_fail "required tool '$tool' not found"
	done
	E2E_OWNER_PID=$$
	# INT/TERM: exit with the conventional status; the EXIT trap does the work once.
	traps_set e2e__cleanup
	# A command that stops the test through set -e says nothing itself: remember which one, and
	# the cleanup says it (a failure without a reason is a failure nobody can fix).
	trap 'E2E_ERR="status $? at line $LINENO: $BASH_COMMAND"' ERR
	e2e__reap_stale
	E2E_WORK=$(mktemp -d "${TMPDIR:-/tmp}/moat-e2e-$E2E_NAME.XXXXXX")
	# Searchable (not listable) by others: moatd started as root drops to an unprivileged user
	# and re-reads its policy files there on SIGHUP (and reconnects to moat-fw's socket).
	chmod 0711 "$E2E_WORK"
	# AF_UNIX paths (the dnstap socket) must fit in 108 bytes.
	((${#E2E_WORK} < 70)) || e2e_fail "work dir path too long: $E2E_WORK (set TMPDIR shorter)"
	E2E_NS="moat-e2e-$E2E_NAME-$$"
	e2e__state "work $E2E_WORK"
	e2e__state "ns $E2E_NS"
	ip netns add "$E2E_NS" || { E2E_NS=""; e2e_fail "cannot create network namespace"; }
	ip -n "$E2E_NS" link set lo up
	# Guard: a fresh namespace has only lo; anything else would be a path out.
	local links
	links=$(ip -n "$E2E_NS" -o link show | awk -F': ' '{print $2}')
	[[ "$links" == lo ]] || e2e_fail "namespace $E2E_NS has unexpected links: $links"
}

# e2e_addr CIDR: add an address to lo inside the namespace. Only loopback and
# documentation ranges (RFC 5737, RFC 3849) are allowed: tests must never
# look like traffic to real hosts. Example: e2e_addr 192.0.2.53/32
e2e_addr() {
	[[ $# == 1 ]] || e2e_fail "usage: e2e_addr CIDR"
	local a=$1
	case "$a" in
	127.*/* | 192.0.2.*/* | 198.51.100.*/* | 203.0.113.*/*)
		ip -n "$E2E_NS" addr add "$a" dev lo ;;
	2001:db8:* | 2001:DB8:* | ::1/128)
		# nodad: use the address at once (no duplicate-address-detection delay).
		ip -n "$E2E_NS" addr add "$a" dev lo nodad ;;
	*) e2e_fail "e2e_addr: $a is not a loopback or documentation address" ;;
	esac
}

# e2e_peer NAME: a second namespace, moat-e2e-TEST-NAME-PID (lo up, nothing else), deleted at
# cleanup; its name is left in E2E_PEER. Link it with e2e_veth. Not inside $(...).
e2e_peer() {
	[[ "$1" =~ ^[a-z0-9]{1,8}$ ]] || e2e_fail "e2e_peer: bad name '$1'"
	[[ "${BASHPID:-$$}" == "$E2E_OWNER_PID" ]] || e2e_fail "e2e_peer called in a subshell"
	local ns="moat-e2e-$E2E_NAME-$1-$$"
	ip netns add "$ns" || e2e_fail "cannot create namespace $ns"
	E2E_PEERS+=("$ns")
	E2E_PEER=$ns
	e2e__state "ns $ns"
	ip -n "$ns" link set lo up
}

# e2e_veth NS_A IF_A NS_B IF_B: a veth pair made directly inside the two namespaces, both up.
e2e_veth() {
	ip link add "$2" netns "$1" type veth peer name "$4" netns "$3"
	ip -n "$1" link set "$2" up
	ip -n "$3" link set "$4" up
}

# e2e_addr_dev NS DEV CIDR: like e2e_addr, on any namespace and device (documentation ranges).
e2e_addr_dev() {
	case "$3" in
	192.0.2.*/* | 198.51.100.*/* | 203.0.113.*/*) ip -n "$1" addr add "$3" dev "$2" ;;
	2001:db8:* | fe80::*) ip -n "$1" addr add "$3" dev "$2" nodad ;;
	*) e2e_fail "e2e_addr_dev: $3 is not a documentation address" ;;
	esac
}

# e2e_uplink SBX SIF PEER PIF SBX4 PEER4 SBX6 PEER6: link namespace SBX to PEER with a veth
# pair (SIF in SBX, PIF in PEER), address both ends (CIDRs) and route SBX's traffic via PEER
# (default routes to PEER4's and PEER6's addresses).
e2e_uplink() {
	e2e_veth "$1" "$2" "$3" "$4"
	e2e_addr_dev "$1" "$2" "$5"
	e2e_addr_dev "$3" "$4" "$6"
	e2e_addr_dev "$1" "$2" "$7"
	e2e_addr_dev "$3" "$4" "$8"
	ip -n "$1" route add default via "${6%/*}"
	ip -n "$1" -6 route add default via "${8%/*}"
}

# e2e_wait_log NAME TEXT: wait until the e2e_bg process NAME has written TEXT to its log
# (E2E_STARTUP_TRIES x 0.1 s); fails the test if NAME exits first or the time runs out.
e2e_wait_log() {
	local i
	for ((i = 0; i < E2E_STARTUP_TRIES; i++)); do
		grep -qF -- "$2" "$E2E_WORK/$1.log" 2>/dev/null && return 0
		e2e_alive "$1" || e2e_fail "$1 exited: $(tail -n 5 "$E2E_WORK/$1.log")"
		sleep 0.1
	done
	e2e_fail "$1 did not write '$2' in $((E2E_STARTUP_TRIES / 10)) s"
}

# e2e_run CMD...: run a command inside the namespace (foreground).
e2e_run() {
	ip netns exec "$E2E_NS" "$@"
}

# e2e_dig ARGS...: dig inside the namespace, one try, 2 s timeout.
e2e_dig() {
	e2e_run dig +time=2 +tries=1 "$@"
}

# e2e_bg NAME CMD...: start CMD in the background inside the namespace; output
# to $E2E_WORK/NAME.log. Sets E2E_LAST_PID and E2E_BG[NAME]; prints nothing.
# Do not call it inside $(...): the PID would be recorded in a subshell and
# escape cleanup. `ip netns exec` execs CMD (no fork), so the PID is CMD's own.
e2e_bg() {
	[[ $# -ge 2 ]] || e2e_fail "usage: e2e_bg NAME CMD..."
	[[ "${BASHPID:-$$}" == "$E2E_OWNER_PID" ]] || e2e_fail "e2e_bg called in a subshell"
	local name=$1
	shift
	[[ -z "${E2E_BG[$name]:-}" ]] || e2e_fail "e2e_bg: name '$name' already used"
	ip netns exec "$E2E_NS" "$@" >"$E2E_WORK/$name.log" 2>&1 </dev/null &
	E2E_LAST_PID=$!
	e2e__track "$E2E_LAST_PID"
	E2E_BG[$name]=$E2E_LAST_PID
	e2e__state "pid $E2E_LAST_PID $name"
}

# e2e_pid NAME: print the PID of a process started with e2e_bg.
e2e_pid() {
	[[ -n "${E2E_BG[$1]:-}" ]] || e2e_fail "e2e_pid: no process named '$1'"
	printf '%s\n' "${E2E_BG[$1]}"
}

# e2e_alive NAME: exit 0 while the e2e_bg process NAME is running.
e2e_alive() {
	e2e__alive "$(e2e_pid "$1")"
}

# e2e_stop NAME [SIGNAL]: send SIGNAL (default TERM) to the e2e_bg process,
# wait up to 5 s (then SIGKILL), reap it and store its exit status in
# E2E_LAST_STATUS (128+n when killed by signal n). Prints nothing.
e2e_stop() {
	local pid st=0
	pid=$(e2e_pid "$1")
	e2e__stop_pids "${2:-TERM}" "$pid"
	wait "$pid" 2>/dev/null || st=$?
	E2E_LAST_STATUS=$st
}

# e2e_wait_port PROTO ADDR PORT [TRIES]: wait until a socket listens on
# ADDR:PORT (PROTO udp|tcp) inside the namespace; TRIES x 0.1 s (default 50).
# ADDR "*" accepts any address. Fails the test on timeout.
e2e_wait_port() {
	[[ $# -ge 3 ]] || e2e_fail "usage: e2e_wait_port udp|tcp ADDR PORT [TRIES]"
	local proto=$1 addr=$2 port=$3 tries=${4:-$E2E_STARTUP_TRIES} flag i
	case "$proto" in
	udp) flag=-Hlnu ;;
	tcp) flag=-Hlnt ;;
	*) e2e_fail "e2e_wait_port: protocol must be udp or tcp, not '$proto'" ;;
	esac
	for ((i = 0; i < tries; i++)); do
		# Local address is column 4: "1.2.3.4:53", "[2001:db8::1]:53", "1.2.3.4%lo:53".
		if e2e_run ss "$flag" | awk -v a="$addr" -v p="$port" '
			{ l = $4; n = split(l, x, ":"); if (x[n] != p) next
			  h = substr(l, 1, length(l) - length(p) - 1)
			  sub(/%.*$/, "", h); gsub(/^\[|\]$/, "", h)
			  if (a == "*" || h == a) { found = 1 } }
			END { exit !found }'; then
			return 0
		fi
		sleep 0.1
	done
	e2e_fail "nothing listens on $proto $addr:$port after $((tries / 10)) s"
}

# -------------------------------------------------------------- polling --
# e2e_poll SECONDS CMD...: run CMD every 0.1 s, at most SECONDS (a whole number) long, until it
# succeeds. 0 when it did, 1 when the time ran out; never fails the test (the caller says what
# the wait meant). CMD runs in this shell, so it may be a function.
e2e_poll() {
	local i n=$(($1 * 10))
	shift
	for ((i = 0; i < n; i++)); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}

# e2e_poll_line [-E|-F] FILE PATTERN SECONDS: e2e_poll until a line of FILE matches PATTERN
# (grep's basic regex, or -E/-F).
e2e_poll_line() {
	local mode=-G
	if [[ "$1" == -E || "$1" == -F ]]; then
		mode=$1
		shift
	fi
	e2e_poll "$3" e2e__has_line "$mode" "$1" "$2"
}
e2e__has_line() { grep -q "$1" -- "$3" "$2" 2>/dev/null; }

# wait_line [-E|-F] FILE PATTERN [SECONDS]: e2e_poll_line (default 5 s), failing the test
# with the file's tail when no line matches in time.
wait_line() {
	local mode=()
	if [[ "$1" == -E || "$1" == -F ]]; then
		mode=("$1")
		shift
	fi
	e2e_poll_line "${mode[@]}" "$1" "$2" "${3:-5}" ||
		e2e_fail "no line matching '$2' in ${1##*/} after ${3:-5} s: $(tail -n 3 "$1" 2>/dev/null)"
}

# e2e_refused TEXT CMD...: CMD (a function too) must fail and say TEXT (stdout or stderr).
e2e_refused() {
	local want=$1 out st=0
	shift
	out=$("$@" 2>&1) || st=$?
	((st != 0)) || e2e_fail "$* was accepted: $out"
	e2e_assert_contains "$out" "$want" "$*: refused"
}

# e2e_wait_exit NAME SECONDS: e2e_poll until the e2e_bg process NAME has exited.
e2e_wait_exit() { e2e_poll "$2" e2e__exited "$1"; }
e2e__exited() { ! e2e_alive "$1"; }

# ---------------------------------------------------------------- users --
DAEMON_WRAP=() # a command prefix start_moatd and start_fw put before the binary (e2e_users)

# e2e__free_ids N: the first N ids below 65000 that are neither a uid nor a gid here.
e2e__free_ids() {
	local id n=0
	for ((id = 64990; id > 64000 && n < $1; id--)); do
		getent passwd "$id" >/dev/null || getent group "$id" >/dev/null || { echo "$id"; n=$((n + 1)); }
	done
}

# e2e_users: users moat and moat-fw as the install makes them (tools/systemd/moat.sysusers), for
# this test's daemons only: copies of /etc/passwd and /etc/group with them added (at ids free
# here; a host that has them keeps its own) are bind-mounted over the real files in a mount
# namespace of each command run through "${E2E_USERS[@]}" CMD... (the PID stays CMD's). The
# host's files are never touched. E2E_NOUSERS is the same with neither user (a host without
# them). Sets DAEMON_WRAP to E2E_USERS (start_moatd and start_fw then run the daemons with the
# users), E2E_MOAT_UID and E2E_MOATFW_UID (each user's group has its uid as gid when added here).
e2e_users() {
	local d="$E2E_WORK/users" n="$E2E_WORK/nousers" u name ids
	mkdir -p "$d" "$n"
	cp /etc/passwd /etc/group "$d/"
	grep -v -E '^(moat|moat-fw):' /etc/passwd >"$n/passwd" || true
	grep -v -E '^(moat|moat-fw):' /etc/group >"$n/group" || true
	mapfile -t ids < <(e2e__free_ids 2)
	((${#ids[@]} == 2)) || e2e_fail "e2e_users: no two free ids in 64001..64990"
	for name in moat moat-fw; do
		if ! grep -q "^$name:" "$d/passwd"; then
			u=${ids[0]}
			ids=("${ids[@]:1}")
			printf '%s:x:%s:%s:%s:/nonexistent:/usr/sbin/nologin
' "$name" "$u" "$u" "moat e2e" >>"$d/passwd"
			grep -q "^$name:" "$d/group" || printf '%s:x:%s:
' "$name" "$u" >>"$d/group"
		fi
	done
	chmod 0644 "$d"/* "$n"/*
	E2E_MOAT_UID=$(awk -F: '$1 == "moat" { print $3 }' "$d/passwd")
	E2E_MOATFW_UID=$(awk -F: '$1 == "moat-fw" { print $3 }' "$d/passwd")
	E2E_USERS=(unshare --mount --propagation private -- "$E2E_DIR/peers/with_users.sh" "$d")
	E2E_NOUSERS=(unshare --mount --propagation private -- "$E2E_DIR/peers/with_users.sh" "$n")
	DAEMON_WRAP=("${E2E_USERS[@]}")
}

# ---------------------------------------------------------------- moatd --
MOATD_BASE=() # arguments every start_moatd of a test begins with; the test may set it

# start_moatd NAME ARGS...: start "$MOAT_BUILD/moatd" "${MOATD_BASE[@]}" ARGS as the e2e_bg
# process NAME (stderr in $E2E_WORK/NAME.log). Unless the arguments give --log or -c/--config,
# its query log goes to $E2E_WORK/NAME.jsonl. Returns once moatd says it serves ("ready in":
# sockets bound, privileges dropped, every worker running); fails the test with its exit status
# and log when it exits first or is not ready within E2E_STARTUP_TRIES x 0.1 s. Not in $(...).
start_moatd() {
	local name=$1 a log=1
	shift
	for a in "${MOATD_BASE[@]}" "$@"; do
		case "$a" in --log | --log=* | -c | --config | --config=*) log=0 ;; esac
	done
	if ((log)); then set -- "$@" --log "$E2E_WORK/$name.jsonl"; fi
	e2e_bg "$name" "${DAEMON_WRAP[@]}" "$MOAT_BUILD/moatd" "${MOATD_BASE[@]}" "$@"
	e2e_wait_ready "$name"
}

# e2e_wait_ready NAME: wait until the e2e_bg moatd NAME has written "ready in" (see
# start_moatd), for a moatd started another way (under prlimit, say).
e2e_wait_ready() {
	local i log="$E2E_WORK/$1.log"
	for ((i = 0; i < E2E_STARTUP_TRIES; i++)); do
		grep -qF "ready in" "$log" 2>/dev/null && return 0
		if ! e2e_alive "$1"; then
			e2e_stop "$1"
			e2e_fail "moatd '$1' exited during start-up (status $E2E_LAST_STATUS): $(tail -n 20 "$log")"
		fi
		sleep 0.1
	done
	e2e_fail "moatd '$1' not ready after $((E2E_STARTUP_TRIES / 10)) s: $(tail -n 5 "$log")"
}

# reload_moatd NAME: SIGHUP the e2e_bg moatd NAME, wait (10 s at most) for the next "policy
# reloaded" or "reload failed" line of its log, and print the last such line.
reload_moatd() {
	local log="$E2E_WORK/$1.log" before i
	before=$(grep -cE "policy reloaded|reload failed" "$log" || true)
	kill -HUP "$(e2e_pid "$1")"
	for ((i = 0; i < 100; i++)); do
		(($(grep -cE "policy reloaded|reload failed" "$log" || true) > before)) && break
		sleep 0.1
	done
	grep -E "policy reloaded|reload failed" "$log" | tail -1
}

# stop_moatd NAME: SIGTERM the e2e_bg moatd NAME, which must still run and must exit 0 (a crash
# or a sanitizer report would not); its "moatd: stopped: ..." line is left in STOPLINE.
stop_moatd() {
	e2e_alive "$1" || e2e_fail "$1 died: $(tail -n 5 "$E2E_WORK/$1.log")"
	e2e_stop "$1"
	e2e_assert_eq 0 "$E2E_LAST_STATUS" "$1: exit status on SIGTERM (a crash or sanitizer report?)"
	STOPLINE=$(grep 'moatd: stopped:' "$E2E_WORK/$1.log") || e2e_fail "$1: no stop line"
	e2e_log "$1: $STOPLINE"
}

# ------------------------------------------------------------- moat-fw --
FW_BASE=() # arguments every start_fw of a test begins with; the test may set it

# start_fw NAME ARGS...: start "$MOAT_BUILD/moat-fw" "${FW_BASE[@]}" ARGS as the e2e_bg process
# NAME; returns once it logs "listening on" (not the socket file: a stopped moat-fw, running as
# nobody, may leave that behind); fails the test when it exits first (see e2e_wait_log).
start_fw() {
	local name=$1
	shift
	e2e_bg "$name" "${DAEMON_WRAP[@]}" "$MOAT_BUILD/moat-fw" "${FW_BASE[@]}" "$@"
	e2e_wait_log "$name" 'listening on'
}

# rss_kb NAME: resident set size of the e2e_bg process NAME in kB.
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$(e2e_pid "$1")/status"; }

# status_of DIG_OUTPUT: the rcode of dig's header line ("NOERROR", "NXDOMAIN", ...), or nothing.
status_of() { sed -n 's/.*status: \([A-Z]*\),.*/\1/p' <<<"$1"; }

# dq ARGS...: one timed query through peers/dnsq.py in the namespace (see there for the output:
# KEY=VALUE words); field KEY TEXT: the VALUE of the word KEY=VALUE in TEXT.
dq() { e2e_run "$E2E_PY" "$E2E_DIR/peers/dnsq.py" "$@"; }
field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$2"; }

# ------------------------------------------------------------------ NSD --
# Zone origin: the file's first $ORIGIN, else the file name without ".zone".
e2e__zone_origin() {
	local f=$1 o
	o=$(awk 'toupper($1) == "$ORIGIN" { print $2; exit }' "$f")
	if [[ -z "$o" ]]; then
		o=${f##*/}
		o=${o%.zone}
	fi
	[[ "$o" == *. ]] || o="$o."
	printf '%s\n' "${o,,}"
}

# Send one barrier query to NSD instance IDX and wait until fstrm_capture has
# written it. NSD logs queries in the order its single server process handled
# them, so once the barrier is in the file every query NSD answered before it
# is in the file too. Prints the barrier qname.
e2e__barrier() {
	local idx=$1 bar i
	# Unique without shared state, because callers may run us inside $(...).
	bar="e2e-barrier-$(date +%s%N)-$RANDOM.invalid."
	e2e_run dig +time=1 +tries=3 +norec "@${E2E_NSD_ADDR[idx]}" -p "${E2E_NSD_PORT[idx]}" \
		"$bar" TXT >/dev/null 2>&1 || true
	for ((i = 0; i < E2E_DNSTAP_TRIES; i++)); do
		# SIGHUP makes fstrm_capture flush its stdio buffer to the file.
		kill -HUP "${E2E_NSD_CAP[idx]}" 2>/dev/null ||
			e2e_fail "fstrm_capture of nsd$idx is not running"
		# grep without -q reads all input: an early exit could SIGPIPE
		# dnstap-ldns and, with pipefail, turn a hit into a miss.
		if dnstap-ldns -q -r "${E2E_NSD_TAP[idx]}" 2>/dev/null | grep -F "\"$bar\"" >/dev/null; then
			printf '%s\n' "$bar"
			return 0
		fi
		sleep 0.1
	done
	e2e_fail "dnstap: barrier query to nsd$idx not logged within $((E2E_DNSTAP_TRIES / 10)) s"
}

# Decoded log of instance IDX: lines after the reset mark, up to the barrier.
e2e__nsd_queries() {
	local idx=$1 src=$2 bar
	bar=$(e2e__barrier "$idx") || exit 1
	dnstap-ldns -q -r "${E2E_NSD_TAP[idx]}" 2>/dev/null | awk -v skip="${E2E_NSD_SKIP[idx]}" \
		-v bar="$bar" -v src="$src" '
		NR <= skip || done { next }
		# Quiet format: DATE TIME AQ ADDR PROTO SIZE "QNAME" CLASS TYPE
		$3 != "AQ" { next }
		{
			line = $0
			q = index(line, "\"")
			if (q == 0) { print "UNPARSED " line; next }
			rest = substr(line, q + 1)
			# the closing quote is the last one on the line (names may contain \")
			last = 0
			for (k = 1; k <= length(rest); k++) if (substr(rest, k, 1) == "\"") last = k
			if (last == 0) { print "UNPARSED " line; next }
			qname = substr(rest, 1, last - 1)
			n = split(substr(rest, last + 1), t, " ")
			if (n < 2) { print "UNPARSED " line; next }
			# Stop at the barrier, but keep reading (no exit) so the writer
			# never gets SIGPIPE, which pipefail would report as failure.
			if (qname == bar) done = 1
			if (done) next
			if (qname ~ /^e2e-barrier-[0-9]+-[0-9]+\.invalid\.$/) next
			out = tolower(qname) " " t[2] " " $5
			if (src == 1) out = out " " $4
			print out
		}'
}

# e2e_nsd ADDR PORT ZONEFILE...: start NSD instance N (1, 2, ...) on ADDR@PORT
# serving the zone files, with dnstap query logging into $E2E_WORK/nsdN/.
# Waits until every zone's SOA answers over UDP and TCP and the dnstap pipeline
# logs queries, then hides those readiness queries from e2e_upstream_queries.
# Logs: $E2E_WORK/nsdN.log (NSD), $E2E_WORK/nsdN-dnstap.log (fstrm_capture).
# Sets E2E_NSD_ID=N; prints nothing. ADDR must already exist (lo has 127.0.0.1
# and ::1; use e2e_addr for others).
e2e_nsd() {
	[[ $# -ge 3 ]] || e2e_fail "usage: e2e_nsd ADDR PORT ZONEFILE..."
	local addr=$1 port=$2 f origin i
	shift 2
	local idx=$((E2E_NSD_COUNT + 1))
	local dir="$E2E_WORK/nsd$idx"
	mkdir -p "$dir"
	local origins=() zonecfg=""
	for f in "$@"; do
		[[ -r "$f" ]] || e2e_fail "zone file not readable: $f"
		f=$(readlink -f "$f")
		origin=$(e2e__zone_origin "$f")
		nsd-checkzone "$origin" "$f" >"$dir/checkzone.out" 2>&1 ||
			e2e_fail "nsd-checkzone $origin $f: $(cat "$dir/checkzone.out")"
		origins+=("$origin")
		zonecfg+=$'zone:\n'"    name: \"$origin\""$'\n'"    zonefile: \"$f\""$'\n'
	done
	local conf="$dir/nsd.conf" sock="$dir/dnstap.sock" tap="$dir/dnstap.fstrm"
	cat >"$conf" <<EOF
# Generated by tests/e2e/lib.sh for test $E2E_NAME, NSD instance $idx.
server:
    ip-address: $addr@$port
    server-count: 1        # one server process: dnstap keeps query order
    reuseport: no
    username: ""           # stay root; nothing to drop to in a test
    chroot: ""
    zonesdir: "$dir"
    database: ""           # serve from memory, no nsd.db
    zonelistfile: "$dir/zone.list"
    xfrdfile: "$dir/xfrd.state"
    xfrdir: "$dir"
    pidfile: "$dir/nsd.pid"
    verbosity: 2
    hide-version: yes
    round-robin: no        # deterministic RRset order for assertions
    minimal-responses: no  # keep additional-section data (glue tests)
    rrl-ratelimit: 0       # no response rate limiting: tests send bursts from one address
    rrl-whitelist-ratelimit: 0
    tcp-count: 100
    tcp-query-count: 0
remote-control:
    control-enable: no
dnstap:
    dnstap-enable: yes
    dnstap-socket-path: "$sock"
    dnstap-log-auth-query-messages: yes
    dnstap-log-auth-response-messages: no
$zonecfg
EOF
	nsd-checkconf "$conf" >"$dir/checkconf.out" 2>&1 ||
		e2e_fail "nsd-checkconf $conf: $(cat "$dir/checkconf.out")"

	E2E_NSD_COUNT=$idx
	E2E_NSD_ID=$idx
	E2E_NSD_ADDR[idx]=$addr
	E2E_NSD_PORT[idx]=$port
	E2E_NSD_TAP[idx]=$tap
	E2E_NSD_SKIP[idx]=0

	# The collector connects once at start-up and retries only every few
	# seconds, so the capture socket must exist before NSD starts.
	e2e_bg "nsd$idx-dnstap" fstrm_capture -t protobuf:dnstap.Dnstap -u "$sock" -w "$tap"
	E2E_NSD_CAP[idx]=$E2E_LAST_PID
	for ((i = 0; i < E2E_STARTUP_TRIES; i++)); do
		[[ -S "$sock" ]] && break
		e2e__alive "${E2E_NSD_CAP[idx]}" || e2e_fail "fstrm_capture for nsd$idx exited"
		sleep 0.1
	done
	[[ -S "$sock" ]] || e2e_fail "fstrm_capture did not create $sock"

	e2e_bg "nsd$idx" nsd -d -c "$conf"
	local nsd_pid=$E2E_LAST_PID ok=0 o
	for ((i = 0; i < E2E_STARTUP_TRIES; i++)); do
		e2e__alive "$nsd_pid" || e2e_fail "nsd$idx exited during start-up (see nsd$idx.log)"
		ok=1
		for o in "${origins[@]}"; do
			if ! e2e__soa_ok "$addr" "$port" "$o" +notcp || ! e2e__soa_ok "$addr" "$port" "$o" +tcp; then
				ok=0
				break
			fi
		done
		[[ $ok == 1 ]] && break
		sleep 0.1
	done
	[[ $ok == 1 ]] || e2e_fail "nsd$idx did not answer SOA for ${origins[*]} on $addr@$port"
	# Prove the query log works before the test relies on it, then hide the
	# readiness queries.
	e2e_upstream_reset "$idx"
}

# True if NSD answers ORIGIN SOA authoritatively (aa flag, NOERROR, 1 answer).
e2e__soa_ok() {
	local out
	out=$(e2e_run dig +time=1 +tries=1 +norec "$4" "@$1" -p "$2" "$3" SOA 2>/dev/null) || return 1
	[[ "$out" == *"status: NOERROR"* && "$out" =~ flags:[a-z\ ]*\ aa && "$out" == *"ANSWER: 1,"* ]]
}

# e2e_upstream_reset [IDX]: forget the queries logged so far (all instances, or
# instance IDX), so the next e2e_upstream_queries shows only newer ones.
# Must run in the test's main shell, not inside $(...).
e2e_upstream_reset() {
	[[ "${BASHPID:-$$}" == "$E2E_OWNER_PID" ]] || e2e_fail "e2e_upstream_reset called in a subshell"
	local idx bar n ids
	ids=$(e2e__instances "${1:-}") || exit 1
	for idx in $ids; do
		bar=$(e2e__barrier "$idx") || exit 1
		n=$(dnstap-ldns -q -r "${E2E_NSD_TAP[idx]}" 2>/dev/null | grep -nF "\"$bar\"" | cut -d: -f1)
		[[ -n "$n" ]] || e2e_fail "dnstap: barrier vanished from nsd$idx log"
		E2E_NSD_SKIP[idx]=$n
	done
}

e2e__instances() {
	if [[ -n "$1" ]]; then
		if ! [[ "$1" =~ ^[0-9]+$ ]] || (($1 < 1 || $1 > E2E_NSD_COUNT)); then
			e2e_fail "no NSD instance '$1'"
		fi
		echo "$1"
	else
		((E2E_NSD_COUNT > 0)) || e2e_fail "no NSD instance started"
		seq 1 "$E2E_NSD_COUNT"
	fi
}

# e2e_upstream_queries [--src] [IDX]: print the queries NSD received since
# start (or since the last e2e_upstream_reset), one per line, in arrival order:
#     QNAME QTYPE PROTO            e.g. "www.example.test. AAAA UDP"
#     QNAME QTYPE PROTO SRCADDR    with --src, e.g. "... UDP 127.0.0.1"
# QNAME lower-cased with trailing dot; QTYPE as ldns prints it (A, AAAA,
# HTTPS, TYPE65534, ...); PROTO UDP or TCP. All instances, instance 1 first,
# unless IDX is given. Prints nothing when no query arrived. A line that cannot
# be parsed is printed as "UNPARSED <raw>" instead of being dropped.
# Costs one barrier query per instance (~1-2 s; NSD's dnstap flushes ~1/s).
e2e_upstream_queries() {
	local src=0 idx
	if [[ "${1:-}" == --src ]]; then
		src=1
		shift
	fi
	local ids
	ids=$(e2e__instances "${1:-}") || exit 1
	for idx in $ids; do
		e2e__nsd_queries "$idx" "$src" || exit 1
	done
}

# ------------------------------------------------------------------ API --
# e2e_init NAME                 namespace + work dir + cleanup trap (call first)
# e2e_on_cleanup FUNC           FUNC runs first at cleanup (what the test made elsewhere)
# e2e_addr CIDR                 add loopback/documentation address to lo
# e2e_peer NAME                 namespace moat-e2e-TEST-NAME-PID, deleted at cleanup
# e2e_veth NS IF NS IF / e2e_addr_dev NS DEV CIDR   link namespaces, address a device
# e2e_uplink SBX SIF PEER PIF SBX4 PEER4 SBX6 PEER6   veth, addresses, default routes via PEER
# e2e_wait_log NAME TEXT        wait until NAME's log has TEXT (fails if NAME exits)
# e2e_run CMD...                run CMD in the namespace
# e2e_dig ARGS...               dig +time=2 +tries=1 ARGS in the namespace
# e2e_bg NAME CMD...            background CMD in the namespace -> $E2E_WORK/NAME.log
# e2e_pid NAME / e2e_alive NAME / e2e_stop NAME [SIG]
# e2e_wait_port udp|tcp ADDR PORT [TRIES]
# e2e_poll SECS CMD... / e2e_poll_line [-E|-F] FILE PAT SECS / e2e_wait_exit NAME SECS
# wait_line [-E|-F] FILE PAT [SECS]   like e2e_poll_line, failing the test on timeout (5 s)
# start_moatd NAME ARGS... (after MOATD_BASE) / e2e_wait_ready NAME / stop_moatd NAME (STOPLINE)
# reload_moatd NAME             SIGHUP, prints the next "policy reloaded"/"reload failed" line
# start_fw NAME ARGS... (after FW_BASE)
# e2e_users                     users moat and moat-fw for this test's daemons (E2E_USERS,
#                               E2E_NOUSERS, DAEMON_WRAP), the host's files untouched
# status_of DIG_OUTPUT / dq ARGS... / field KEY TEXT / rss_kb NAME
# e2e_nsd ADDR PORT ZONEFILE... NSD with dnstap; instance id in E2E_NSD_ID
# e2e_upstream_queries [--src] [IDX]   "QNAME QTYPE PROTO" lines
# e2e_upstream_reset [IDX]
# e2e_fail MSG / e2e_pass / e2e_assert_eq EXP ACT [MSG]
# e2e_refused TEXT CMD...       CMD fails and says TEXT
# e2e_assert_contains HAY NEEDLE [MSG] / e2e_assert_not_contains HAY NEEDLE [MSG]
# Variables: E2E_WORK E2E_NS E2E_ZONES E2E_DIR E2E_PY MOAT_BUILD MOAT_SRC
# Environment: E2E_KEEP=1 keeps the work dir; E2E_STATE_OUT=FILE records ns,
# work dir and PIDs so a wrapper can check that cleanup left nothing behind.
