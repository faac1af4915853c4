# tests/bench/lib.sh -- what the benchmark scripts that start moatd share (sourced; bash, set -e):
# the root check, the binaries they need, and a work directory that moatd, running as nobody
# after its privilege drop, can still read (a reload reopens the files there), removed on exit
# together with the moatd the script started (MPID). Needs BUILD set.

bench_root() {
	[[ $(id -u) == 0 ]] || { echo "$0: run as root (network namespace)" >&2; exit 1; }
}

bench_need() { # bench_need PROGRAM...: each built under $BUILD
	local b
	for b; do [[ -x $BUILD/$b ]] || { echo "$0: no $BUILD/$b (build first)" >&2; exit 1; }; done
}

bench_cleanup() {
	[[ -n $MPID ]] && kill "$MPID" 2>/dev/null && wait "$MPID" 2>/dev/null
	rm -rf "$WORK"
}

bench_work() { # bench_work NAME: sets WORK (0755), RAW (empty), MPID (none) and the exit trap
	WORK=$(mktemp -d "/tmp/moat-bench-$1.XXXXXX")
	chmod 0755 "$WORK" # mktemp makes it 0700: moatd (nobody) could not reload from it
	MPID=
	trap bench_cleanup EXIT INT TERM
	RAW=$WORK/raw.tsv
	: >"$RAW"
}

log() { printf '[%s] %s\n' "$(date -u +%T)" "$*" >&2; }
