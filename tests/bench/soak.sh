#!/usr/bin/env bash
# tests/bench/soak.sh -- the bounded soak of issue 7: moatd under a steady high query rate for
# a few minutes, a mix of allowed names (answered from the cache, and fresh ones forwarded) and
# denied names, against a flaky upstream (drops 10% of queries, answers 10% 50-800 ms late, past
# moatd's 500 ms timeout for about 40% of those). Run by hand, as root; never part of ctest or
# tools/test. All traffic stays inside a private network namespace with only a loopback (the
# e2e harness tests/e2e/lib.sh makes it and cleans up by PID).
#
# Usage: tests/bench/soak.sh [--duration S] [--rate Q] [--build DIR] [--loadgen G] [--keep]
#                            [--out FILE] [--no-abuse]
#   --duration S   seconds of load (default 180)
#   --rate Q       queries per second dnsperf sends (default 10000)
#   --build DIR    use DIR/moatd (default: build-soak, a Release build made if missing)
#   --loadgen G    dnsperf or python (default: dnsperf when installed)
#   --keep         keep the work directory (logs, dnsperf output)
#   --out FILE     also write the figures to FILE
#   --no-abuse     leave out the abusive clients (below)
#
# Abusive clients (issue 12), beside the load unless --no-abuse: from 127.0.0.2 a TCP client
# that pipelines queries for a cached name and never reads (reconnecting each time moatd closes
# it); from 127.0.0.3 a spray of distinct allowed names the upstream never answers (sink*, 1000
# q/s, the in-flight caps' case); from 127.1.x.y 2000 clients asking in turn now and then (the
# rate-limit table's case; --ratelimit 0 here, so they are only more clients). The query log
# goes to a file with the default byte budget (its summary lines are counted in the report). Their own
# figures are in the report; moatd's RSS must stay bounded and the load's answers must not
# suffer beyond what the rates explain.
#
# The query mix (deterministic, by line number): 45% the 1000 names h0..h999.soak.test (allowed,
# cached after their first answer; the upstream's TTL is 30 s, so they are asked again now and
# then), 45% fresh names under deny.test (denied, answered locally), 10% fresh names under
# w.soak.test (allowed, each one forwarded: a cache miss). All type A, without EDNS.
#
# Load: dnsperf (Debian package dnsperf) if installed, else a python3 load generator. Figures:
# rate, duration, queries sent / answered / lost (client side), moatd's own counts (queries,
# answered, dropped, servfail, upstream timeouts through SERVFAIL), the kernel's UDP receive
# drops in the namespace, moatd's RSS at start, every 30 s and at the end, and crashes (moatd
# must be alive throughout and exit 0 on SIGTERM). Exit status: 0 when moatd neither crashed nor
# lost count (every query it read was answered or counted as dropped), 1 otherwise.
set -euo pipefail
shopt -s inherit_errexit

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DUR=180 RATE=10000 BUILD="" KEEP=0 OUT="" GEN="" ABUSE=1
while [[ $# -gt 0 ]]; do
	case "$1" in
	--duration) DUR=$2; shift 2 ;;
	--rate) RATE=$2; shift 2 ;;
	--build) BUILD=$2; shift 2 ;;
	--loadgen) GEN=$2; shift 2 ;;
	--keep) KEEP=1; shift ;;
	--out) OUT=$2; shift 2 ;;
	--no-abuse) ABUSE=0; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	*) echo "soak.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
[[ "$DUR" =~ ^[0-9]+$ && "$DUR" -ge 10 && "$DUR" -le 3600 ]] || { echo "--duration: 10..3600" >&2; exit 2; }
[[ "$RATE" =~ ^[0-9]+$ && "$RATE" -ge 100 && "$RATE" -le 200000 ]] || { echo "--rate: 100..200000" >&2; exit 2; }
if [[ -z "$BUILD" ]]; then
	BUILD="$SRC/build-soak"
	if [[ ! -x "$BUILD/moatd" ]]; then
		cmake -S "$SRC" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
		make -C "$BUILD" -j"$(nproc)" moatd >/dev/null
	fi
fi
[[ -x "$BUILD/moatd" ]] || { echo "soak.sh: no moatd in $BUILD" >&2; exit 2; }
export MOAT_BUILD=$BUILD E2E_KEEP=$KEEP
# shellcheck source=../e2e/lib.sh
source "$SRC/tests/e2e/lib.sh"
e2e_init soak
PY=python3
[[ -x /usr/bin/python3 ]] && PY=/usr/bin/python3
PEERS="$E2E_DIR/peers"

# --- data: the query file, one line per query, cycled by the load generator ---
lines=$((RATE * DUR))
((lines <= 3000000)) || lines=3000000
awk -v n="$lines" 'BEGIN {
	for (i = 0; i < n; i++) {
		k = i % 20
		if (k < 9) printf "h%d.soak.test A\n", (i * 7919) % 1000
		else if (k < 18) printf "d%d.deny.test A\n", i
		else printf "m%d.w.soak.test A\n", i
	}
}' >"$E2E_WORK/queries.txt"
printf 'soak.test\n*.soak.test\n' >"$E2E_WORK/allow.txt"

# --- the flaky upstream and moatd ---
e2e_bg upstream "$PY" "$PEERS/bad_upstream.py" flaky 127.0.0.1 5300 $((DUR + 120))
e2e_wait_port udp 127.0.0.1 5300
e2e_bg moatd "$BUILD/moatd" --listen 127.0.0.1:53 --upstream 127.0.0.1:5300 \
	--allow "$E2E_WORK/allow.txt" --log "$E2E_WORK/queries.jsonl" --upstream-timeout 500 \
	--ratelimit 0 --budget 0
e2e_wait_port udp 127.0.0.1 53
MPID=$(e2e_pid moatd)
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$MPID/status"; }
hwm() { awk '/^VmHWM:/ { print $2 }' "/proc/$MPID/status"; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$MPID/stat"; }
# InErrors RcvbufErrors of the namespace (/proc/net is per network namespace)
# shellcheck disable=SC2016
udp_errs() { e2e_run awk '/^Udp: [0-9]/ { print $4, $6 }' /proc/net/snmp; }
# warm up: every cached name asked once, so "start" is a resolver in service
for i in $(seq 0 999); do echo "h$i.soak.test A"; done >"$E2E_WORK/warm.txt"
e2e_run "$PY" "$SRC/tests/bench/soakload.py" 127.0.0.1 53 "$E2E_WORK/warm.txt" 1000 1 >"$E2E_WORK/warm.log"
rss_start=$(rss)
read -r inerr0 rcvbuf0 <<<"$(udp_errs)"
cpu0=$(cpu_ticks)
e2e_log "moatd pid $MPID, RSS at start $rss_start kB; load: $RATE q/s for $DUR s"

# --- load ---
if [[ -z "$GEN" ]]; then
	GEN=python
	if command -v dnsperf >/dev/null; then GEN=dnsperf; fi
fi
if [[ $GEN == dnsperf ]]; then
	e2e_bg load dnsperf -s 127.0.0.1 -p 53 -d "$E2E_WORK/queries.txt" -l "$DUR" -Q "$RATE" \
		-c 8 -q 2000 -t 5 -S 30
elif [[ $GEN == python ]]; then
	e2e_bg load "$PY" "$SRC/tests/bench/soakload.py" 127.0.0.1 53 "$E2E_WORK/queries.txt" "$RATE" "$DUR"
else
	e2e_fail "--loadgen: dnsperf or python, not '$GEN'"
fi
if ((ABUSE)); then
	# each abuser loops (bounded by the soak's duration), so it is there the whole time
	e2e_bg ab_pipe bash -c 'end=$((SECONDS + $1))
		while ((SECONDS < end)); do "$2" "$3/abuse.py" pipeline 127.0.0.1 53 h1.soak.test 1 $((end - SECONDS)) || sleep 1; done' _ "$DUR" "$PY" "$PEERS"
	e2e_bg ab_spray "$PY" "$PEERS/abuse.py" spray 127.0.0.1 53 127.0.0.3 soak.test "$DUR" 1000
	e2e_bg ab_collide bash -c 'end=$((SECONDS + $1)); n=0
		while ((SECONDS < end)); do "$2" "$3/abuse.py" collide 127.0.0.1 53 d1.deny.test 2000 2 || true; n=$((n + 1)); sleep 5; done' _ "$DUR" "$PY" "$PEERS"
fi
t0=$(date +%s)
samples=("0s:${rss_start}kB")
rss_half=""
next_sample=30
crashed=0
while e2e_alive load; do
	sleep 1
	el=$(($(date +%s) - t0))
	if ! e2e_alive moatd; then
		crashed=1
		e2e_log "moatd died after $el s"
		break
	fi
	if ((el >= next_sample)); then
		r=$(rss)
		samples+=("${el}s:${r}kB")
		e2e_log "t=${el}s RSS $r kB"
		next_sample=$((next_sample + 30))
	fi
	if [[ -z "$rss_half" ]] && ((el >= DUR / 2)); then rss_half=$(rss); fi
	((el < DUR + 60)) || { e2e_log "load generator overran; stopping it"; e2e_stop load; break; }
done
elapsed=$(($(date +%s) - t0))
if ((crashed == 0)) && e2e_alive moatd; then
	rss_end=$(rss)
	hwm_end=$(hwm)
	cpu1=$(cpu_ticks)
else
	crashed=1
	rss_end="-" hwm_end="-" cpu1=$cpu0
fi
read -r inerr1 rcvbuf1 <<<"$(udp_errs)"
# drops on moatd's own listening socket (ss: skmem ... d<drops>)
sockdrops=$(e2e_run ss -Huamn 'sport = :53' | sed -n 's/.*skmem:(.*,d\([0-9]*\)).*/\1/p' | head -1)
e2e_stop load || true
abuse="none (--no-abuse)"
if ((ABUSE)); then
	for a in ab_pipe ab_spray ab_collide; do
		for ((i = 0; i < 100; i++)); do e2e_alive "$a" || break; sleep 0.1; done
		e2e_alive "$a" && e2e_stop "$a"
	done
	np=$(grep -c '^pipeline sent.*closed_ms=[0-9]' "$E2E_WORK/ab_pipe.log" || true)
	abuse="${np:-0} pipelining connections that never read, closed by moatd"
	abuse+=" (last: $(grep '^pipeline sent' "$E2E_WORK/ab_pipe.log" | tail -1 | cut -d' ' -f2- || true));"
	abuse+=" $(tail -1 "$E2E_WORK/ab_spray.log" || true);"
	nc=$(grep -c '^collide' "$E2E_WORK/ab_collide.log" || true)
	abuse+=" ${nc:-0} rounds of 2000 clients (last: $(tail -1 "$E2E_WORK/ab_collide.log" | cut -d' ' -f2- || true))"
fi
e2e_stop upstream
e2e_stop moatd
status=$E2E_LAST_STATUS
((status == 0)) || crashed=1
stopline=$(grep 'moatd: stopped:' "$E2E_WORK/moatd.log" || echo "none")
num() { sed -n "s/.* \\([0-9][0-9]*\\) $1.*/\\1/p" <<<"$stopline"; }
m_q=$(sed -n 's/.*stopped: \([0-9]*\) queries.*/\1/p' <<<"$stopline")
m_ans=$(num answered) m_drop=$(num dropped) m_sf=$(num servfail) m_den=$(num denied)
m_fwd=$(num forwarded) m_mm=$(num "upstream mismatches") m_cap=$(num "over the in-flight caps")

# client-side figures
L="$E2E_WORK/load.log"
if [[ $GEN == dnsperf ]]; then
	sent=$(awk '/Queries sent:/ { print $3 }' "$L")
	done_=$(awk '/Queries completed:/ { print $3 }' "$L")
	lost=$(awk '/Queries lost:/ { print $3 }' "$L")
	qps=$(awk '/Queries per second:/ { print $4 }' "$L")
	rcodes=$(sed -n 's/.*Response codes: *//p' "$L")
	lat=$(awk '/Average Latency/ { gsub(/[,()]/, ""); print $4 " s average, min " $6 " s, max " $8 " s" }' "$L")
else
	sent=$(sed -n 's/.*sent=\([0-9]*\).*/\1/p' "$L")
	done_=$(sed -n 's/.*answered=\([0-9]*\).*/\1/p' "$L")
	lost=$(sed -n 's/.*lost=\([0-9]*\).*/\1/p' "$L")
	qps=$(sed -n 's/.*qps=\([0-9.]*\).*/\1/p' "$L")
	rcodes=$(sed -n 's/.*rcodes: *//p' "$L")
	lat="n/a"
fi
upline=$(grep '^flaky:' "$E2E_WORK/upstream.log" || echo "flaky: (no totals)")
# the query log: lines, what its summary lines counted, bytes a second
qlog=$(awk -v d="$DUR" '{ n++; b += length($0) + 1 }
	match($0, /"repeated":[0-9]+/) { r += substr($0, RSTART + 11, RLENGTH - 11) }
	match($0, /"suppressed":[0-9]+/) { s += substr($0, RSTART + 13, RLENGTH - 13) }
	END { printf "%d lines, %.0f kB/s; %d queries counted in repeated lines, %d suppressed", n, d ? b / d / 1024 : 0, r, s }' \
	"$E2E_WORK/queries.jsonl" 2>/dev/null || echo "?")
cpu_s=$(awk -v t=$((cpu1 - cpu0)) -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f", t / hz }')

# accounting: every query moatd read was answered or counted as dropped
accounted=1
if [[ -n "$m_q" && -n "$m_ans" && -n "$m_drop" ]]; then
	((m_q == m_ans + m_drop)) || accounted=0
else
	accounted=0
fi

report=$(
	cat <<R
## moat soak ($(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg))

| figure | value |
|---|---|
| load generator | $GEN, target rate $RATE q/s |
| duration | $elapsed s (requested $DUR s) |
| achieved rate | ${qps:-?} q/s |
| queries sent | ${sent:-?} |
| answered (client) | ${done_:-?} |
| lost (client, no answer in 5 s) | ${lost:-?} |
| response codes | ${rcodes:-?} |
| latency | ${lat} |
| moatd: queries read | ${m_q:-?} |
| moatd: answered | ${m_ans:-?} (of which SERVFAIL ${m_sf:-?}) |
| moatd: dropped | ${m_drop:-?} |
| moatd: denied / forwarded | ${m_den:-?} / ${m_fwd:-?} |
| moatd: upstream mismatches | ${m_mm:-?} |
| moatd: over the in-flight caps (SERVFAIL, EDE 14) | ${m_cap:-?} |
| abusive clients | ${abuse} |
| every query answered or dropped | $([[ $accounted == 1 ]] && echo "yes (queries = answered + dropped)" || echo "NO") |
| kernel UDP drops in the namespace | InErrors $((inerr1 - inerr0)), RcvbufErrors $((rcvbuf1 - rcvbuf0)); on moatd's listening socket ${sockdrops:-?} |
| flaky upstream | ${upline#flaky: } |
| query log (file, default budget) | ${qlog} |
| moatd CPU | $cpu_s s |
| moatd RSS at start / end | $rss_start kB / $rss_end kB (peak $hwm_end kB) |
| RSS over the second half | ${rss_half:-?} kB at $((DUR / 2)) s -> $rss_end kB at the end |
| RSS samples | ${samples[*]} |
| crashes | $([[ $crashed == 0 ]] && echo "none (alive throughout, exit 0 on SIGTERM)" || echo "YES (exit status $status)") |
R
)
printf '%s\n' "$report"
[[ -z "$OUT" ]] || printf '%s\n' "$report" >"$OUT"
((crashed == 0)) || e2e_fail "moatd crashed (see moatd.log)"
((accounted == 1)) || e2e_fail "moatd's counts do not add up: $stopline"
e2e_pass
