#!/usr/bin/env bash
# What `moat run -- true` costs (issue 24): wall time of `moat run -- true` with the system's
# daemons and with private ones, beside `unshare -n true` and `bwrap --unshare-net --ro-bind / /
# true` in the same run, interleaved (one of each in turn, so all four see the same load),
# ROUNDS rounds (default 50): p50 and p99 of each, and moat run's overhead over unshare -n as
# p50 differences. Targets (issue 24): p50 overhead <= 150 ms with the system's daemons, <= 400
# ms with private ones. Run by hand as root: tests/bench/run_bench.sh [BUILD_DIR]; writes
# tests/bench/results-run-DATE.md. Not a timed test: it prints figures, asserts nothing.
set -euo pipefail
export MOAT_SRC=$(cd "$(dirname "$0")/../.." && pwd)
export MOAT_BUILD=${1:-$MOAT_SRC/build}
ROUNDS=${ROUNDS:-50}
source "$MOAT_SRC/tests/e2e/lib.sh"
source "$MOAT_SRC/tests/e2e/run_env.sh"
command -v bwrap >/dev/null || { echo "$0: bwrap missing (tools/deps installs bubblewrap)" >&2; exit 1; }
run_env_init run_bench
run_sys_start
# Private runs cannot share a namespace with moat-fw's forward table (moat run refuses): they
# get a host namespace of their own, host2, with its own link to "net". Every command below
# starts with the same `ip netns exec NS`, so none pays more for it than another.
run_host host2 h2 n1 198.51.100.17 198.51.100.18
HOST2=$E2E_PEER
mkdir -m 0711 "$E2E_WORK/runstate2"

M=("$MOAT_BUILD/moat" run --quiet --state-dir "$RUN_STATE" --pool "$RUN_POOL")
cat >"$E2E_WORK/drive.py" <<'PY'
import json, subprocess, sys, time
rounds = int(sys.argv[1])
cmds = json.loads(sys.argv[2])
times = {name: [] for name in cmds}
for _ in range(rounds):
    for name, argv in cmds.items():
        t = time.perf_counter()
        rc = subprocess.run(argv, stdin=subprocess.DEVNULL).returncode
        dt = (time.perf_counter() - t) * 1000
        if rc != 0:
            sys.exit("%s exited %d" % (name, rc))
        times[name].append(dt)
print(json.dumps(times))
PY
cmds=$("$E2E_PY" - "${M[*]}" "${RUN_SYSARGS[*]}" "$RUN_HOST" "$HOST2" "$E2E_WORK/runstate2" <<'PY'
import json, sys
m = sys.argv[1].split()
sysargs, host, host2, state2 = sys.argv[2].split(), sys.argv[3], sys.argv[4], sys.argv[5]
def ns(name, argv):
    return ["ip", "netns", "exec", name] + argv
print(json.dumps({
    "unshare -n true": ns(host, ["unshare", "-n", "true"]),
    "bwrap --unshare-net true": ns(host, ["bwrap", "--unshare-net", "--ro-bind", "/", "/", "true"]),
    "moat run -- true (system daemons)": ns(host, m + sysargs + ["--", "true"]),
    "moat run -- true (private daemons)": ns(host2, m + ["--state-dir", state2, "--private",
                                                         "--upstream", "203.0.113.53", "--", "true"]),
}))
PY
)
e2e_log "$ROUNDS rounds of: $(tr ',' '\n' <<<"$cmds" | grep -o '"[^"]*": \[' | tr -d '":[' | paste -sd, -)"
load=$(cut -d' ' -f1-3 /proc/loadavg)
out=$("$E2E_PY" "$E2E_WORK/drive.py" "$ROUNDS" "$cmds")
load2=$(cut -d' ' -f1-3 /proc/loadavg)
RES="$MOAT_SRC/tests/bench/results-run-$(date -u +%Y%m%d-%H%M).md"
"$E2E_PY" - "$out" "$ROUNDS" "$load" "$load2" "$(nproc)" "$(uname -r)" >"$RES" <<'PY'
import json, sys
t = json.loads(sys.argv[1])
def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]
print("# moat run: start-to-exit cost of `moat run -- true` (tests/bench/run_bench.sh)\n")
print("%s rounds, interleaved; %s cores, kernel %s; load average %s at start, %s at end.\n" %
      (sys.argv[2], sys.argv[5], sys.argv[6], sys.argv[3], sys.argv[4]))
print("| command | p50 ms | p99 ms | p50 overhead over unshare -n ms |")
print("|---|---|---|---|")
base = pct(t["unshare -n true"], 50)
for name, v in t.items():
    print("| %s | %.1f | %.1f | %s |" % (name, pct(v, 50), pct(v, 99),
          "" if name.startswith("unshare") else "%.1f" % (pct(v, 50) - base)))
print("\nTargets (issue 24): p50 overhead <= 150 ms with the system's daemons, <= 400 ms with private ones.")
PY
cat "$RES"
stop_moatd sysmoatd
e2e_pass
