#!/usr/bin/env bash
# tests/bench/compiled.sh -- compiled policy (issue 16) against the text lists it replaces, in
# one run, by hand, as root (never part of tools/test). Everything runs in a private network
# namespace (unshare -n) with only lo; moatd listens on 127.0.0.1, its upstream is a
# documentation address that no query here reaches (denied names never leave; the ready name is
# local data).
#
# Usage: tests/bench/compiled.sh [--sizes "1000000 10000000"] [--big N|0] [--rounds R]
#                                [--lookups N] [--deny N] [--forms "text lazy ..."] [--out FILE]
# For each size N (list n00000000.bench.test ... plus *.w.bench.test, generated in the work
# directory under /tmp and deleted at the end) and each form -- text, compiled with
# policy_verify: lazy (the default: blocks hashed on first use), full (all hashed at open) and
# quick (body trusted), signed (lazy with policy_pubkey: the header-page signature checked at
# start) -- or those --forms names -- interleaved, R rounds:
#   start   exec to the first NOERROR answer for the last name of the list (a local_data record
#           of it, answered only once the allowlist holds it), polled every ms
#   memory  Rss and Pss (/proc/PID/smaps_rollup) at that answer, after --lookups denied names
#           (rss_deny) and after --lookups more random queries (rss: a third listed, a third
#           under the wildcard, a third absent)
#   deny    server CPU µs per query (utime+stime of moatd over --deny fresh denied names)
#   cached  compiled forms: MiB of the file in the page cache after the lookups (fincore), the
#           cache dropped before moatd starts: what the lookups read, shared by every process
#           and reclaimable, not in any RSS (slots and records are read with pread)
# then, once for the largest size: a reload (SIGHUP after an atomic replace by moatctl compile)
# under a steady query stream, counting queries lost and the time from SIGHUP to moatd's "policy
# reloaded" (reload_s; a reload that fails or never comes stops the run), for the compiled forms
# and for text; and for --big names: moatctl compile time and file size. Medians over rounds go to --out
# (default tests/bench/results-compiled-YYYYMMDD-HHMM.md) and stdout.
set -euo pipefail
shopt -s inherit_errexit

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${MOAT_BUILD:-$SRC/build}
SIZES="1000000 10000000" BIG=40000000 ROUNDS=3 LOOKUPS=100000 DENY=200000
FORMS="text lazy full quick signed"
OUT="$SRC/tests/bench/results-compiled-$(date -u +%Y%m%d-%H%M).md"
while (($#)); do
	case $1 in
	--sizes) SIZES=$2; shift 2 ;;
	--big) BIG=$2; shift 2 ;;
	--rounds) ROUNDS=$2; shift 2 ;;
	--lookups) LOOKUPS=$2; shift 2 ;;
	--deny) DENY=$2; shift 2 ;;
	--forms) FORMS=$2; shift 2 ;;
	--out) OUT=$2; shift 2 ;;
	*) echo "usage: see the head of $0" >&2; exit 2 ;;
	esac
done
. "$SRC/tests/bench/lib.sh"
bench_root
if [[ -z ${MOAT_BENCH_IN_NS:-} ]]; then
	exec unshare -n env MOAT_BENCH_IN_NS=1 "$0" --sizes "$SIZES" --big "$BIG" --rounds "$ROUNDS" \
		--lookups "$LOOKUPS" --deny "$DENY" --forms "$FORMS" --out "$OUT"
fi
ip link set lo up
bench_need moatd moatctl

bench_work compiled # size form metric value
PORT=5391
LOAD="python3 $SRC/tests/bench/dnsload.py"
rec() { printf '%s\t%s\t%s\t%s\n' "$@" >>"$RAW"; }

gen() { # gen N FILE: the list of N names and the wildcard
	awk -v n="$1" 'BEGIN { for (i = 0; i < n; i++) printf "n%08d.bench.test\n", i; print "*.w.bench.test" }' >"$2"
}

conf() { # conf N FORM: the config of moatd with the N-name list in that form
	local n=$1 form=$2 list=$WORK/allow-$1.txt verify=$2
	[[ $form != text ]] && list=$WORK/allow-$1.mpol
	[[ $form == text || $form == signed ]] && verify=lazy
	cat >"$WORK/moatd-$n-$form.yaml" <<-EOC
	listen: ["127.0.0.1:$PORT"]
	upstreams: ["192.0.2.53:53"]
	log: {file: /dev/null}
	ratelimit_qps: 0
	policy_verify: $verify
	$([[ $form != signed ]] || echo "policy_pubkey: $WORK/key.pub")
	local_data: ["$(printf 'n%08d' $((n - 1))).bench.test A 192.0.2.1"]
	agents:
	  - name: bench
	    clients: [127.0.0.0/8]
	    allow: [$list]
	    budget: off  # the lookups under *.w.bench.test are fresh names (issue 26)
	EOC
}

mem() { awk '/^Rss:/ { r = $2 } /^Pss:/ { p = $2 } END { printf "%.1f %.1f", r / 1024, p / 1024 }' "/proc/$1/smaps_rollup"; }
ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }

start() { # start N FORM: moatd started, first answer timed; sets MPID, records start
	local n=$1 form=$2 t0 t1
	rm -f "$WORK/first.ready"
	$LOAD first $PORT "$(printf 'n%08d' $((n - 1))).bench.test" 120 "$WORK/first.ready" >"$WORK/first.out" &
	local ppid=$! i
	for ((i = 0; i < 500; i++)); do [[ -e $WORK/first.ready ]] && break; sleep 0.01; done
	t0=$(date +%s%N)
	taskset -c 0 "$BUILD/moatd" -c "$WORK/moatd-$n-$form.yaml" --no-seccomp 2>"$WORK/moatd.log" &
	MPID=$!
	wait "$ppid" || { cat "$WORK/moatd.log" >&2; echo "no first answer" >&2; exit 1; }
	t1=$(cat "$WORK/first.out")
	rec "$n" "$form" start "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')"
}

stop() { kill "$MPID"; wait "$MPID" || true; MPID=; }

# The page cache of a file dropped (a hint the kernel honours for pages nobody maps).
uncache() { python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)' "$1"; }
cached() { fincore -b -n -o RES "$1" | awk '{ printf "%.1f", $1 / 1048576 }'; }

one() { # one N FORM: start, memory, lookups, memory, deny cost
	local n=$1 form=$2 r p a b out
	[[ $form != text ]] && uncache "$WORK/allow-$n.mpol"
	start "$n" "$form"
	read -r r p <<<"$(mem "$MPID")"
	rec "$n" "$form" rss0 "$r"; rec "$n" "$form" pss0 "$p"
	taskset -c 1 $LOAD run $PORT "$LOOKUPS" deny >/dev/null
	read -r r p <<<"$(mem "$MPID")"
	rec "$n" "$form" rss_deny "$r"; rec "$n" "$form" pss_deny "$p"
	LIST_N=$n taskset -c 1 $LOAD run $PORT "$LOOKUPS" mix >/dev/null
	read -r r p <<<"$(mem "$MPID")"
	rec "$n" "$form" rss "$r"; rec "$n" "$form" pss "$p"
	[[ $form != text ]] && rec "$n" "$form" cached_mb "$(cached "$WORK/allow-$n.mpol")"
	a=$(ticks "$MPID")
	out=$(taskset -c 1 $LOAD run $PORT "$DENY" deny)
	b=$(ticks "$MPID")
	rec "$n" "$form" deny_us "$(awk -v a="$a" -v b="$b" -v q="$(cut -d' ' -f2 <<<"$out")" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.2f", (b - a) / hz / q * 1e6 }')"
	stop
}

compile_rec() { # compile_rec N TXT MPOL: moatctl compile timed, file size recorded
	local t0 t1
	t0=$(date +%s%N)
	"$BUILD/moatctl" compile -o "$3" "$2" >"$WORK/compile.out"
	t1=$(date +%s%N)
	rec "$1" compiled compile_s "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", (b - a) / 1e9 }')"
	rec "$1" compiled file_mb "$(stat -c %s "$3" | awk '{ printf "%.1f", $1 / 1048576 }')"
	cat "$WORK/compile.out" >&2
}
"$BUILD/moatctl" keygen -o "$WORK/key" >/dev/null
read -ra forms <<<"$FORMS"
for n in $SIZES; do
	log "generating $n names"
	gen "$n" "$WORK/allow-$n.txt"
	compile_rec "$n" "$WORK/allow-$n.txt" "$WORK/allow-$n.mpol"
	"$BUILD/moatctl" sign --key "$WORK/key" "$WORK/allow-$n.mpol" >/dev/null
	for f in "${forms[@]}"; do conf "$n" "$f"; done
done
for ((round = 0; round < ROUNDS; round++)); do
	for n in $SIZES; do
		for ((k = 0; k < ${#forms[@]}; k++)); do
			f=${forms[(k + round) % ${#forms[@]}]}
			log "round $((round + 1)): $n names, $f"
			one "$n" "$f"
		done
	done
done

# Reload under load: a steady stream of queries while the file is replaced and SIGHUP sent.
reload_lost() { # reload_lost N FORM
	local n=$1 form=$2 res i
	start "$n" "$form"
	rm -f "$WORK/stop"
	LIST_N=$n taskset -c 1 $LOAD steady $PORT 600 "$WORK/stop" >"$WORK/steady.out" &
	local spid=$!
	sleep 1 # the stream runs before the reload (timing only; nothing waits on it)
	if [[ $form == text ]]; then
		cp "$WORK/allow-$n.txt" "$WORK/allow-$n.txt.new" && mv "$WORK/allow-$n.txt.new" "$WORK/allow-$n.txt"
	else
		"$BUILD/moatctl" compile -o "$WORK/allow-$n.mpol" "$WORK/allow-$n.txt" >/dev/null
	fi
	local before t0 t1 done=0
	before=$(grep -c "policy reloaded" "$WORK/moatd.log" || true)
	t0=$(date +%s%N)
	kill -HUP "$MPID"
	for ((i = 0; i < 12000; i++)); do
		if (($(grep -c "policy reloaded" "$WORK/moatd.log" || true) > before)); then
			done=1
			break
		fi
		grep -q "reload failed" "$WORK/moatd.log" && break
		sleep 0.005
	done
	t1=$(date +%s%N)
	if ((!done)); then # a figure of queries lost over a reload that did not happen is none
		touch "$WORK/stop"
		wait "$spid" || true
		tail -5 "$WORK/moatd.log" >&2
		echo "$0: $form: the reload did not happen" >&2
		exit 1
	fi
	rec "$n" "$form" reload_s "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')"
	sleep 1
	touch "$WORK/stop"
	wait "$spid"
	res=$(cat "$WORK/steady.out")
	rec "$n" "$form" reload_sent "$(cut -d' ' -f1 <<<"$res")"
	rec "$n" "$form" reload_lost "$(cut -d' ' -f3 <<<"$res")"
	stop
}
nmax=$(tr ' ' '\n' <<<"$SIZES" | sort -n | tail -1)
log "reload under load: $nmax names"
for f in lazy full quick text; do # (signed: a reload would need the new file signed too)
	[[ " $FORMS " != *" $f "* ]] || reload_lost "$nmax" "$f"
done
for n in $SIZES; do rm -f "$WORK/allow-$n.txt" "$WORK/allow-$n.mpol"; done

if [[ $BIG != 0 ]]; then
	log "generating $BIG names"
	gen "$BIG" "$WORK/big.txt"
	compile_rec "$BIG" "$WORK/big.txt" "$WORK/big.mpol"
	rm -f "$WORK/big.txt" "$WORK/big.mpol"
fi

# Medians (with [min-max] over rounds).
{
	printf '# compiled policy vs text lists (tests/bench/compiled.sh)\n\n'
	printf -- '- %s, %s round(s), %s random lookups (mix), %s denied names for the deny cost; moatd on CPU 0, client on CPU 1; host load at start: %s\n\n' \
		"$(date -u '+%F %T UTC')" "$ROUNDS" "$LOOKUPS" "$DENY" "$(cut -d' ' -f1-3 /proc/loadavg)"
	printf '| names | form | metric | median | [min-max] |\n|---|---|---|---|---|\n'
	python3 -c '
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    n, form, metric, v = line.rstrip("\n").split("\t")
    rows.setdefault((int(n), form, metric), []).append(float(v))
for (n, form, metric), v in sorted(rows.items()):
    print("| %d | %s | %s | %g | [%g-%g] |" % (n, form, metric, statistics.median(v), min(v), max(v)))
' "$RAW"
} | tee "$OUT"
