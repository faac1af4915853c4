#!/usr/bin/env bash
# The upstream UDP socket pool (resolver/serve/upstream.c), seen from the upstream's side: a logging
# upstream (peers/port_log.py) records the source port and ID of every query moatd sends.
#   1. 300 sequential queries: every one answered right; no (port, ID) pair repeats, no port
#      carries more than 128 queries (SOCK_USES), at least 3 ports are used.
#   2. 200 queries in flight at once (the upstream holds each answer 300 ms): all answered;
#      no port carries more than 16 of them (SOCK_INFLIGHT), so at least 13 ports are used.
#   3. An answer over 4096 bytes to our question: moatd asks again over TCP, the client gets
#      the record.
#   4. A socket takes no new query after 2 s (SOCK_MAX_AGE_MS): two queries 0.5 s apart share a
#      port, a third 2.5 s after the first leaves from another one.
#   5. moatd exits cleanly and counted no upstream mismatches (nothing here is spoofed).
source "$(dirname "$0")/lib.sh"
e2e_init upstream_pool

PEERS="$E2E_DIR/peers"
# The system interpreter: a version-manager shim in PATH can cost a second per start.
PY=$E2E_PY
UP_PORT=5300
PLOG="$E2E_WORK/upstream-queries.txt"

# The client, one UDP socket for all its queries (so with several moatd workers they would all
# go to the same one): MODE seq sends one query at a time (2 s each at most), optionally query i
# not before AT_MS[i] ms after the start; MODE burst sends all of them, then reads answers for up
# to 5 s. Names are PREFIX000.pool.test. ... PREFIX<COUNT-1>. Prints a line for each name without
# the right answer (NOERROR, exactly the A record port_log.py gives that name), then
# "total=COUNT good=N".
CLIENT='
import random, socket, sys, time
import dnsmini
addr, port, mode, prefix, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], int(sys.argv[5])
at = [int(x) / 1000 for x in sys.argv[6].split(",")] if len(sys.argv) > 6 else [0] * count
names = ["%s%03d.pool.test." % (prefix, i) for i in range(count)]
want = {n: "192.0.2.%d" % (1 + sum(n.encode()) % 250) for n in names}
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 21)
s.connect((addr, port))
ids = random.sample(range(65536), count)
by_id = dict(zip(ids, names))
got = {}
def take(deadline):
    s.settimeout(max(0.01, deadline - time.monotonic()))
    try:
        pkt = s.recv(65535)
    except socket.timeout:
        return False
    q = dnsmini.question(pkt)
    if q is not None and by_id.get(q[0]) == q[2] and q[2] not in got:
        info = dnsmini.records(pkt) or {"a": []}
        got[q[2]] = (dnsmini.rcode(pkt), info["a"])
    return True
start = time.monotonic()
if mode == "seq":
    for qid, n, t in zip(ids, names, at):
        time.sleep(max(0, start + t - time.monotonic()))
        s.send(dnsmini.query(qid, n))
        deadline = time.monotonic() + 2
        while n not in got and time.monotonic() < deadline and take(deadline):
            pass
else:
    for qid, n in zip(ids, names):
        s.send(dnsmini.query(qid, n))
    deadline = time.monotonic() + 5
    while len(got) < count and time.monotonic() < deadline and take(deadline):
        pass
good = 0
for n in names:
    rc, a = got.get(n, ("timeout", []))
    if rc == "NOERROR" and a == [want[n]]:
        good += 1
    else:
        print("bad %s %s a=%s want=%s" % (n, rc, ",".join(a), want[n]))
print("total=%d good=%d" % (count, good))
'
# ask MODE PREFIX COUNT [AT_MS,...]: run the client against moatd.
ask() { e2e_run env PYTHONPATH="$PEERS" "$PY" -c "$CLIENT" 127.0.0.1 53 "$@"; }
# udp_lines REGEX: the upstream's "udp PORT ID QNAME T" lines whose QNAME matches REGEX.
udp_lines() { awk -v re="$1" '$1 == "udp" && $4 ~ re' "$PLOG"; }
# count TEXT: its number of lines (0 for none).
count() { if [[ -z "$1" ]]; then echo 0; else wc -l <<<"$1"; fi; }

: >"$PLOG"
e2e_bg upstream "$PY" "$PEERS/port_log.py" 127.0.0.1 $UP_PORT 240 "$PLOG"
e2e_wait_port udp 127.0.0.1 $UP_PORT
e2e_wait_port tcp 127.0.0.1 $UP_PORT
printf '*.pool.test\n' >"$E2E_WORK/allow.txt"
start_moatd moatd --listen 127.0.0.1:53 --upstream 127.0.0.1:$UP_PORT --allow "$E2E_WORK/allow.txt"

# --- 1. sequential: 300 names, one after another ---
t0=$(date +%s%N)
out=$(ask seq seq 300)
e2e_log "sequential: ${out##*$'\n'} in $((($(date +%s%N) - t0) / 1000000)) ms"
e2e_assert_eq "total=300 good=300" "$out" "sequential queries: every name answered with its record"
lines=$(udp_lines '^seq[0-9]+[.]pool[.]test[.]$')
e2e_assert_eq 300 "$(count "$lines")" "sequential: one upstream query per name (no retries)"
e2e_assert_eq 300 "$(awk '{print $4}' <<<"$lines" | sort -u | wc -l)" "sequential: every name reached the upstream"
# A (port, ID) pair seen twice means an ID was reused on one socket (or on a port reopened).
dups=$(awk '{print $2, $3}' <<<"$lines" | sort | uniq -d)
e2e_assert_eq "" "$dups" "sequential: an ID repeated on one source port"
per_port=$(awk '{n[$2]++} END {for (p in n) print n[p], p}' <<<"$lines" | sort -rn)
e2e_log "sequential: queries per source port: $(tr '\n' ' ' <<<"$per_port")"
max=$(head -n1 <<<"$per_port" | awk '{print $1}')
((max <= 128)) || e2e_fail "sequential: one source port carried $max queries (more than 128)"
ports=$(count "$per_port")
((ports >= 3)) || e2e_fail "sequential: only $ports source port(s) for 300 queries (at least 3 needed at 128 each)"

# --- 2. concurrent: 200 names in flight at once, each answered after 300 ms ---
out=$(ask burst slow 200)
e2e_log "concurrent: ${out##*$'\n'}"
e2e_assert_eq "total=200 good=200" "$out" "concurrent queries: every name answered with its record"
lines=$(udp_lines '^slow[0-9]+[.]pool[.]test[.]$')
e2e_assert_eq 200 "$(count "$lines")" "concurrent: one upstream query per name (no retries)"
# The limit of 16 per port holds for queries in flight together: all 200 must have reached the
# upstream before it sent the first answer (300 ms after the first one arrived).
spread=$(awk 'NR == 1 {lo = hi = $5} {if ($5 < lo) lo = $5; if ($5 > hi) hi = $5}
	END {printf "%d", (hi - lo) * 1000}' <<<"$lines")
e2e_log "concurrent: the 200 queries reached the upstream within $spread ms"
((spread < 250)) || e2e_fail "concurrent: queries spread over $spread ms, so they were not all in flight at once"
per_port=$(awk '{n[$2]++} END {for (p in n) print n[p], p}' <<<"$lines" | sort -rn)
e2e_log "concurrent: queries per source port: $(awk '{print $1}' <<<"$per_port" | tr '\n' ' ')"
max=$(head -n1 <<<"$per_port" | awk '{print $1}')
((max <= 16)) || e2e_fail "concurrent: one source port carried $max queries in flight at once (more than 16)"
ports=$(count "$per_port")
((ports >= 13)) || e2e_fail "concurrent: only $ports source ports for 200 queries in flight (at least 13 needed at 16 each)"
dups=$(awk '{print $2, $3}' <<<"$lines" | sort | uniq -d)
e2e_assert_eq "" "$dups" "concurrent: an ID repeated on one source port"

# --- 3. an oversized UDP answer to our question: retried over TCP ---
out=$(ask seq big 1)
e2e_assert_eq "total=1 good=1" "$out" "oversized UDP answer: the client got the record (from the TCP retry)"
e2e_assert_eq 1 "$(udp_lines '^big000[.]pool[.]test[.]$' | wc -l)" "oversized: one UDP query"
e2e_assert_eq 1 "$(grep -c '^tcp big000\.pool\.test\.$' "$PLOG" || true)" "oversized: one TCP retry"

# --- 4. age: no new query on a socket older than 2 s ---
# Quiet first: every socket opened so far is then past 2 s, so age000 opens a fresh one.
sleep 2.2
out=$(ask seq age 3 0,500,2500)
e2e_assert_eq "total=3 good=3" "$out" "age: three queries answered"
age=()
for i in 0 1 2; do
	l=$(udp_lines "^age00${i}[.]pool[.]test[.]\$")
	e2e_assert_eq 1 "$(count "$l")" "age: one upstream query for age00$i"
	age+=("$l")
done
e2e_log "age: $(printf '%s | ' "${age[@]}")"
p0=$(awk '{print $2}' <<<"${age[0]}")
p1=$(awk '{print $2}' <<<"${age[1]}")
p2=$(awk '{print $2}' <<<"${age[2]}")
gap1=$(awk -v a="${age[0]}" -v b="${age[1]}" 'BEGIN {split(a, x); split(b, y); printf "%d", (y[5] - x[5]) * 1000}')
gap2=$(awk -v a="${age[0]}" -v b="${age[2]}" 'BEGIN {split(a, x); split(b, y); printf "%d", (y[5] - x[5]) * 1000}')
# The timing the checks rely on: the second query well inside 2 s, the third well past it.
((gap1 < 1500)) || e2e_fail "age: the second query came $gap1 ms after the first (test too slow)"
((gap2 > 2200)) || e2e_fail "age: the third query came only $gap2 ms after the first"
e2e_assert_eq "$p0" "$p1" "age: a query $gap1 ms after the first should reuse its socket (control)"
[[ "$p0" != "$p2" ]] || e2e_fail "age: a query $gap2 ms after the first left from the same port $p0 (socket older than 2 s took a new query)"

# --- 5. a clean stop, no mismatches ---
e2e_alive moatd || e2e_fail "moatd died"
e2e_stop moatd
e2e_assert_eq 0 "$E2E_LAST_STATUS" "moatd: exit status on SIGTERM"
line=$(grep 'moatd: stopped:' "$E2E_WORK/moatd.log") || e2e_fail "moatd: no stop line"
e2e_log "$line"
mism=$(sed -n 's/.* \([0-9][0-9]*\) upstream mismatches.*/\1/p' <<<"$line")
[[ -n "$mism" ]] || e2e_fail "no mismatch count in '$line'"
e2e_assert_eq 0 "$mism" "upstream mismatches counted with nothing spoofed"
e2e_stop upstream
e2e_log "$(cat "$E2E_WORK/upstream.log")"

e2e_pass
