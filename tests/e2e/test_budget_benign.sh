#!/usr/bin/env bash
# The label budget denies no benign lookup (issue 26): two hours of a synthetic agent workload
# (peers/benign_workload.py: git, npm with its burst of new CDN names, pip, cloud APIs, error
# reporting; ~1,100 queries and ~108 names an hour, up to 45 new names in a minute, leftmost
# labels up to 40 bytes) replayed through moatd 60 times faster, with the budget's window 60
# times shorter (60 s for the default 3600 s, the default 4,096 bytes): the sliding windows hold
# exactly what they would in real time. Every query must be answered NOERROR, none denied by the
# budget or the qtypes; the busiest zone's use is logged beside the budget.
source "$(dirname "$0")/lib.sh"
e2e_init budget_benign
PEERS="$E2E_DIR/peers"
CTL="$MOAT_BUILD/moatctl"

e2e_run "$E2E_PY" "$PEERS/benign_workload.py" --allowlist >"$E2E_WORK/allow.txt"
e2e_run "$E2E_PY" "$PEERS/benign_workload.py" --hours 2 --queries >"$E2E_WORK/queries.txt"
e2e_log "workload: $(e2e_run "$E2E_PY" "$PEERS/benign_workload.py" --hours 2 --summary |
	grep -E '^(queries|max_zone|all_zones)' | tr '\n' ' ')"
e2e_bg recv "$E2E_PY" "$PEERS/exfil_receiver.py" 127.0.0.1 5390 250 60
wait_line "$E2E_WORK/recv.log" "receiver listening" 10
cat >"$E2E_WORK/moatd.yaml" <<EOF
listen: ["127.0.0.1:53"]
upstreams: ["127.0.0.1:5390"]
workers: 2
log: {file: $E2E_WORK/log.jsonl}
control: $E2E_WORK/ctl.sock
agents:
  - name: agent
    clients: [127.0.0.1/32]
    allow: [allow.txt]
    budget: {window_s: 60}
EOF
start_moatd moatd -c "$E2E_WORK/moatd.yaml"

# the busiest zone's use, sampled while the workload runs (stats: the window's sums now)
busiest=0
sample() {
	local u
	u=$(e2e_run "$CTL" -s "$E2E_WORK/ctl.sock" --json stats | { grep -o '"used":[0-9]*' || true; } |
		cut -d: -f2 | sort -n | tail -1)
	((${u:-0} > busiest)) && busiest=$u
	return 0
}
e2e_bg replay "$E2E_PY" "$PEERS/replay.py" 127.0.0.1 53 60 "$E2E_WORK/queries.txt"
while e2e_alive replay; do
	sample
	e2e_wait_exit replay 2 || true
done
sample
out=$(cat "$E2E_WORK/replay.log")
e2e_log "$out"
e2e_log "busiest zone's window held $busiest of 4096 bytes (sampled every 2 s)"
sent=$(field sent "$out")
((sent > 2000)) || e2e_fail "the replay sent only $sent queries: $out"
e2e_assert_eq "$sent" "$(field NOERROR "$out")" "every query of the workload answered NOERROR"
e2e_assert_eq 0 "$(grep -c '"decision":"deny-' "$E2E_WORK/log.jsonl" || true)" "no query denied"
((busiest > 0)) || e2e_fail "the budget never counted anything: the test measured nothing"
stop_moatd moatd
e2e_pass
