#!/usr/bin/env bash
# The control socket under a burst: moatd serves 16 connections at once, and a client past
# that waits its turn instead of being cut off (a cut-off agent del of a moat run left its
# runtime agent behind). Held: 16 connections that moatd has answered once (so they are
# accepted) and that stay open; a moatctl started then is still waiting a second later, and is
# answered once they close. Then a burst as 24 moat runs make it: 24 agent adds at once, then
# 24 agent dels at once, each answered ok, and no agent of them is left.
source "$(dirname "$0")/lib.sh"
e2e_init control_conns

CTL=$MOAT_BUILD/moatctl
SOCK=$E2E_WORK/ctl.sock
N=24
e2e_addr 192.0.2.1/32
cat >"$E2E_WORK/moatd.yaml" <<Y
listen: ["192.0.2.1:53"]
upstreams: ["192.0.2.53:53"]
log: {file: $E2E_WORK/queries.jsonl}
control: $SOCK
state_dir: $E2E_WORK/state
agents:
  - name: lab
    clients: [127.0.0.1/32]
    allow: [lab.txt]
Y
printf 'lab.test\n' >"$E2E_WORK/lab.txt"
start_moatd moatd -c "$E2E_WORK/moatd.yaml"

# --- 16 held connections: the next client waits, then is served ---
cat >"$E2E_WORK/hold.py" <<'P'
import socket, sys, time, os
path, release = sys.argv[1], sys.argv[2]
held = []
for _ in range(16):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    s.sendall(b"status\n")
    reply = b""
    while b"\n" not in reply:
        chunk = s.recv(65536)
        if not chunk:
            sys.exit("closed before its reply")
        reply += chunk
    if b'"ok":true' not in reply:
        sys.exit("not ok: %r" % reply)
    held.append(s)
print("held %d" % len(held), flush=True)
for _ in range(600):  # 60 s at most
    if os.path.exists(release):
        break
    time.sleep(0.1)
for s in held:
    s.close()
print("released", flush=True)
P
e2e_bg hold "$E2E_PY" "$E2E_WORK/hold.py" "$SOCK" "$E2E_WORK/release"
e2e_wait_log hold "held 16"
e2e_bg waiter "$CTL" -s "$SOCK" --json status
# Under the cap the waiter would be answered (or cut off) at once; here it must still wait.
if e2e_poll 1 e2e__exited waiter; then
	e2e_fail "a client past 16 held connections did not wait: $(cat "$E2E_WORK/waiter.log")"
fi
touch "$E2E_WORK/release"
e2e_wait_log hold released
e2e_wait_exit waiter 10 || e2e_fail "the waiting client was not answered after the release"
st=0
wait "$(e2e_pid waiter)" || st=$?
e2e_assert_eq 0 "$st" "the waiting client: exit status ($(cat "$E2E_WORK/waiter.log"))"
e2e_assert_contains "$(cat "$E2E_WORK/waiter.log")" '"ok":true' "the waiting client's answer"

# --- a burst, as concurrent moat runs make it ---
# burst VERB: N agent VERBs at once (agent bN, client 198.51.100.N/32); each must be ok.
burst() {
	local verb=$1 i pids=() st
	for ((i = 1; i <= N; i++)); do
		if [[ $verb == add ]]; then
			e2e_run "$CTL" -s "$SOCK" --json agent add "b$i" --clients "198.51.100.$i/32" \
				--pattern "b$i.test" >"$E2E_WORK/$verb-$i.out" 2>&1 &
		else
			e2e_run "$CTL" -s "$SOCK" --json agent del "b$i" >"$E2E_WORK/$verb-$i.out" 2>&1 &
		fi
		pids+=("$!")
		e2e__track "$!"
	done
	for ((i = 1; i <= N; i++)); do
		st=0
		wait "${pids[i - 1]}" || st=$?
		e2e_assert_eq 0 "$st" "agent $verb b$i in a burst of $N: $(cat "$E2E_WORK/$verb-$i.out")"
		e2e_assert_contains "$(cat "$E2E_WORK/$verb-$i.out")" '"ok":true' "agent $verb b$i: the reply"
	done
}
burst add
out=$(e2e_run "$CTL" -s "$SOCK" --json agents)
for ((i = 1; i <= N; i++)); do
	e2e_assert_contains "$out" "\"name\":\"b$i\"" "agent b$i after the burst of adds"
done
burst del
out=$(e2e_run "$CTL" -s "$SOCK" --json agents)
e2e_assert_not_contains "$out" '"name":"b' "agents left after the burst of dels"
stop_moatd moatd
e2e_pass
