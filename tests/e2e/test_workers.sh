#!/usr/bin/env bash
# moatd --workers N: N threads, each with its own loop, SO_REUSEPORT listeners and cache share,
# one shared policy. Every thread runs unprivileged under the seccomp filter with no_new_privs;
# queries from many source ports are spread over the workers and all answered exactly as the
# upstream answers (allowed) or denied without reaching it, over UDP and TCP; SIGHUP gives every
# worker the new policy; the per-worker caches ask the upstream at most once per worker; the
# stop report has one line per worker that adds up; `workers:` in the config works and
# out-of-range counts are rejected.
source "$(dirname "$0")/lib.sh"
e2e_init workers

UP=127.0.0.1
UPPORT=5300
SRC=127.0.0.9 # moatd's upstream source: tells its queries apart from the test's direct ones
e2e_nsd $UP $UPPORT "$E2E_ZONES/example.test.zone" "$E2E_ZONES/cdn.test.zone"
e2e_addr $SRC/32

# moatd drops to nobody and reads the allowlist again on SIGHUP.
chmod 0755 "$E2E_WORK"
ALLOW="$E2E_WORK/allow.txt"
cat >"$ALLOW" <<'A'
# no wildcard over example.test: multi.example.test is removed by the reload below
example.test
www.example.test
multi.example.test
txt.example.test
alias.example.test
nope.example.test
*.wild.example.test
A
chmod 0644 "$ALLOW"

# --------------------------------------------------------------- helpers --
# A DNS client that opens a new socket for every query (UDP sockets stay open until the end, so
# every query has its own source port) and checks each answer: an allowed name must get the
# upstream's rcode and the same answer records (owner, type, class, rdata; TTL not above the
# upstream's) as NSD gives directly to the same question; a denied name NXDOMAIN, no answer
# records, EDE 15. Prints one "BAD ..." line per wrong answer, then
# "sent=N ok=N bad=N ports=DISTINCT_SOURCE_PORTS".
cat >"$E2E_WORK/wclient.py" <<'PY'
import random, socket, struct, sys, time

args = sys.argv[1:]
tcp = args[0] == "--tcp"
if tcp:
    args.pop(0)
srv, port, ref, refport, specfile = args[0], int(args[1]), args[2], int(args[3]), args[4]
TYPES = {"A": 1, "NS": 2, "CNAME": 5, "SOA": 6, "MX": 15, "TXT": 16, "AAAA": 28}
RCODES = {0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED"}

def wire(name):
    return b"".join(bytes([len(l)]) + l.encode() for l in name.strip(".").split(".")) + b"\0"

def read_name(p, off):
    labels, end, hops = [], None, 0
    while True:
        n = p[off]
        if n & 0xC0 == 0xC0:
            if end is None:
                end = off + 2
            hops += 1
            if hops > 64:
                raise ValueError("pointer loop")
            off = (n & 0x3F) << 8 | p[off + 1]
            continue
        off += 1
        if n == 0:
            break
        labels.append(p[off:off + n].decode("latin-1").lower())
        off += n
    return ".".join(labels) + ".", (end if end is not None else off)

def rdata(p, t, rd, rdlen):
    if t in (2, 5, 12, 39):                      # NS CNAME PTR DNAME
        return read_name(p, rd)[0]
    if t == 15:                                  # MX
        return "%d %s" % (struct.unpack(">H", p[rd:rd + 2])[0], read_name(p, rd + 2)[0])
    if t == 6:                                   # SOA
        m, o = read_name(p, rd)
        r, o = read_name(p, o)
        return "%s %s %s" % (m, r, p[o:o + 20].hex())
    return p[rd:rd + rdlen].hex()

def parse(p):
    qid, flags, qd, an, ns, ar = struct.unpack(">HHHHHH", p[:12])
    off, q = 12, None
    for _ in range(qd):
        name, off = read_name(p, off)
        q = (name, struct.unpack(">H", p[off:off + 2])[0])
        off += 4
    secs, ede, rc = [[], [], []], [], flags & 0xF
    for i, cnt in enumerate((an, ns, ar)):
        for _ in range(cnt):
            owner, off = read_name(p, off)
            t, c, ttl, rdlen = struct.unpack(">HHIH", p[off:off + 10])
            rd = off + 10
            if t == 41:
                rc |= (ttl >> 24) << 4
                o = rd
                while o + 4 <= rd + rdlen:
                    code, olen = struct.unpack(">HH", p[o:o + 4])
                    if code == 15:
                        ede.append(struct.unpack(">H", p[o + 4:o + 6])[0])
                    o += 4 + olen
            else:
                secs[i].append((owner, t, c, rdata(p, t, rd, rdlen), ttl))
            off = rd + rdlen
    return {"id": qid, "qr": flags >> 15, "q": q, "rcode": RCODES.get(rc, str(rc)),
            "an": secs[0], "ede": ede}

keep = []
def ask(addr, prt, name, qtype, use_tcp):
    qid = random.randrange(65536)
    msg = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 1) + wire(name) + struct.pack(">HH", qtype, 1)
    msg += b"\0" + struct.pack(">HHIH", 41, 1232, 0, 0)
    if use_tcp:
        s = socket.create_connection((addr, prt), timeout=2)
        lport = s.getsockname()[1]
        s.sendall(struct.pack(">H", len(msg)) + msg)
        buf = b""
        while len(buf) < 2 or len(buf) < 2 + struct.unpack(">H", buf[:2])[0]:
            chunk = s.recv(65535)
            if not chunk:
                raise ValueError("connection closed")
            buf += chunk
        s.close()
        return parse(buf[2:2 + struct.unpack(">H", buf[:2])[0]]), lport, qid
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    keep.append(s)                               # stays open: the next query gets another port
    s.bind(("127.0.0.1", 0))
    lport = s.getsockname()[1]
    s.sendto(msg, (addr, prt))
    end = time.time() + 2
    while True:
        s.settimeout(max(0.01, end - time.time()))
        data, _ = s.recvfrom(65535)              # socket.timeout propagates
        r = parse(data)
        if r["id"] == qid:
            return r, lport, qid

specs = [l.split() for l in open(specfile) if l.strip()]
refs = {}
for name, t, exp in specs:
    if exp == "allow" and (name, t) not in refs:
        refs[(name, t)] = ask(ref, refport, name, TYPES[t], False)[0]
ok = bad = 0
ports = set()
for name, t, exp in specs:
    why = None
    try:
        r, lport, qid = ask(srv, port, name, TYPES[t], tcp)
        ports.add(lport)
    except Exception as e:                       # timeout, closed connection, bad packet
        r, why = None, "no answer: %r" % e
    if r is not None:
        if r["qr"] != 1 or r["q"] != (name.lower().rstrip(".") + ".", TYPES[t]):
            why = "bad header/question %r" % (r["q"],)
        elif exp == "deny":
            if r["rcode"] != "NXDOMAIN" or r["an"] or 15 not in r["ede"]:
                why = "not denied: %s an=%r ede=%r" % (r["rcode"], r["an"], r["ede"])
        else:
            f = refs[(name, t)]
            got = sorted(x[:4] for x in r["an"])
            want = sorted(x[:4] for x in f["an"])
            if r["rcode"] != f["rcode"] or got != want:
                why = "differs from upstream: %s %r, upstream %s %r" % (r["rcode"], got, f["rcode"], want)
            elif any(x[4] > max(y[4] for y in f["an"]) for x in r["an"]):
                why = "TTL above the upstream's: %r" % (r["an"],)
    if why:
        bad += 1
        print("BAD %s %s %s: %s" % (name, t, exp, why))
    else:
        ok += 1
for s in keep:
    s.close()
print("sent=%d ok=%d bad=%d ports=%d" % (len(specs), ok, bad, len(ports)))
PY

SENT=0 # every query sent to the main moatd, to check its stop report
# client [--tcp] SPECFILE: run wclient.py against moatd on 127.0.0.1:53; prints its output.
client() {
	local tcp=()
	if [[ $1 == --tcp ]]; then
		tcp=(--tcp)
		shift
	fi
	e2e_run timeout 120 python3 "$E2E_WORK/wclient.py" "${tcp[@]}" 127.0.0.1 53 $UP $UPPORT "$1"
}
# expect_clean OUT N MSG [PORTS]: OUT reports N queries, all correct (and PORTS distinct ports).
expect_clean() {
	local out=$1 n=$2 msg=$3 ports=${4:-}
	local want="sent=$n ok=$n bad=0"
	[[ -n "$ports" ]] && want+=" ports=$ports"
	local last=${out##*$'\n'}
	[[ -n "$ports" ]] || last=${last% ports=*}
	if [[ "$want" != "$last" ]]; then
		printf -- '--- client output (first 20 lines)\n%s\n---\n' "$(head -n 20 <<<"$out")" >&2
		e2e_assert_eq "$want" "$last" "$msg"
	fi
}
threads_of() { find "/proc/$1/task" -mindepth 1 -maxdepth 1 | wc -l; }
# field PID TID KEY COLUMN: a column of a line of /proc/PID/task/TID/status (here in place of
# lib.sh's field KEY TEXT, which this test does not use).
field() { awk -v k="$3:" -v c="$4" '$1 == k { print $c }' "/proc/$1/task/$2/status"; }
# fwd_count QNAME QTYPE PROTO LOG: how many times moatd (source $SRC) forwarded QNAME QTYPE.
fwd_count() { grep -cxF "$1 $2 $3 $SRC" <<<"$4" || true; }

# ------------------------------------------- 1. threads and privileges --
# The sockets are bound before privileges drop: start_moatd waits until moatd says it serves.
start_moatd moatd --listen 127.0.0.1:53 --upstream $UP:$UPPORT \
	--upstream-source $SRC --allow "$ALLOW" --workers 2 --user nobody
PID=$(e2e_pid moatd)
e2e_wait_port udp 127.0.0.1 53
e2e_wait_port tcp 127.0.0.1 53
e2e_assert_contains "$(cat "$E2E_WORK/moatd.log")" "2 worker(s)" "start-up line names the workers"
# Two workers and the query log's writer (serve/log_sink.h; the root starts below log to
# /dev/null, which is no log and no writer); every one of them under the filter (below).
e2e_assert_eq 3 "$(threads_of "$PID")" "threads of moatd --workers 2 with a query log"
# Two UDP and two TCP listening sockets on port 53 (one each per worker).
n=$(e2e_run ss -Hlnu 'sport = :53' | wc -l)
e2e_assert_eq 2 "$n" "UDP sockets listening on port 53"
n=$(e2e_run ss -Hlnt 'sport = :53' | wc -l)
e2e_assert_eq 2 "$n" "TCP sockets listening on port 53"
for task in "/proc/$PID/task/"*; do
	tid=${task##*/}
	e2e_assert_eq 2 "$(field "$PID" "$tid" Seccomp 2)" "thread $tid: seccomp filter mode"
	e2e_assert_eq 1 "$(field "$PID" "$tid" NoNewPrivs 2)" "thread $tid: no_new_privs"
	e2e_assert_eq 65534 "$(field "$PID" "$tid" Uid 2)" "thread $tid: real uid"
	e2e_assert_eq 65534 "$(field "$PID" "$tid" Uid 3)" "thread $tid: effective uid"
	e2e_assert_eq 0000000000000000 "$(field "$PID" "$tid" CapEff 2)" "thread $tid: effective capabilities"
done

# ------------------------- 2. 300 UDP queries from distinct source ports --
allowed=("www.example.test A" "www.example.test AAAA" "multi.example.test A"
	"txt.example.test TXT" "example.test MX" "alias.example.test A" "nope.example.test A"
	"w@.wild.example.test A")
denied=("evil.test A" "edge.cdn.test A" "mail.example.test A" "cdn.example.test A"
	"d@.deny.example.test TXT" "x@.evil.test AAAA" "cdn.test SOA")
for ((i = 0; i < 300; i++)); do
	if ((i % 2)); then
		s=${denied[i / 2 % ${#denied[@]}]}
		printf '%s deny\n' "${s//@/$i}"
	else
		s=${allowed[i / 2 % ${#allowed[@]}]}
		printf '%s allow\n' "${s//@/$i}"
	fi
done >"$E2E_WORK/mix.txt"
e2e_upstream_reset
out=$(client "$E2E_WORK/mix.txt")
SENT=$((SENT + 300))
expect_clean "$out" 300 "300 UDP queries from distinct ports" 300

# ------------------------------------------------------------- 3. TCP --
head -n 40 "$E2E_WORK/mix.txt" >"$E2E_WORK/tcp.txt"
out=$(client --tcp "$E2E_WORK/tcp.txt")
SENT=$((SENT + 40))
expect_clean "$out" 40 "40 TCP queries, one connection each"
for spec in "www.example.test A" "www.example.test AAAA" "multi.example.test A" \
	"txt.example.test TXT" "example.test MX" "alias.example.test A"; do
	read -r qn qt <<<"$spec"
	# TTL ($2) left out: a cached answer counts it down.
	via_moat=$(e2e_dig +tcp @127.0.0.1 +noall +answer "$qn" "$qt" | awk '{ $2 = ""; print }' | sort)
	direct=$(e2e_dig +tcp @$UP -p $UPPORT +noall +answer "$qn" "$qt" | awk '{ $2 = ""; print }' | sort)
	[[ -n "$direct" ]] || e2e_fail "NSD gave no answer for $spec"
	e2e_assert_eq "$direct" "$via_moat" "dig +tcp $spec: records differ from the upstream's"
	SENT=$((SENT + 1))
done
out=$(e2e_dig +tcp @127.0.0.1 edge.cdn.test A)
SENT=$((SENT + 1))
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "dig +tcp: denied name"

# Denied names never reached NSD; allowed ones were forwarded by moatd (not only asked by us).
log=$(e2e_upstream_queries --src)
for name in evil.test edge.cdn.test mail.example.test cdn.example.test cdn.test; do
	if grep -q "^$name\. " <<<"$log"; then
		e2e_fail "denied name $name reached the upstream: $(grep "^$name\. " <<<"$log" | head -3)"
	fi
done
if grep -qE '^[^ ]*\.(deny\.example|evil)\.test\. ' <<<"$log"; then
	e2e_fail "a denied name reached the upstream: $(grep -E '\.(deny\.example|evil)\.test\. ' <<<"$log" | head -3)"
fi
want=$(grep -c '^w[0-9]*\.wild\.example\.test A allow$' "$E2E_WORK/mix.txt")
n=$(grep "^w[0-9]*\.wild\.example\.test\. A UDP $SRC\$" <<<"$log" | sort -u | wc -l)
e2e_assert_eq "$want" "$n" "distinct wildcard names forwarded by moatd"

# ------------------------------------------------ 6. cache per worker --
for ((i = 0; i < 100; i++)); do echo "cached.wild.example.test A allow"; done >"$E2E_WORK/same.txt"
# wclient asks NSD directly once (from 127.0.0.1) for the reference; moatd's come from $SRC.
e2e_upstream_reset
out=$(client "$E2E_WORK/same.txt")
SENT=$((SENT + 100))
expect_clean "$out" 100 "100 queries for one name" 100
log=$(e2e_upstream_queries --src)
n=$(fwd_count cached.wild.example.test. A UDP "$log")
((n >= 1 && n <= 2)) || e2e_fail "moatd asked NSD $n times for one name over 100 queries (want 1..2): $log"
e2e_log "one name, 100 queries, 2 workers: NSD asked $n time(s)"

# ----------------------------------------------------- 4. SIGHUP reload --
sed -i -e '/^multi\.example\.test$/d' "$ALLOW"
echo edge.cdn.test >>"$ALLOW"
kill -HUP "$PID"
wait_line -F "$E2E_WORK/moatd.log" "policy reloaded"
e2e_upstream_reset
for ((i = 0; i < 40; i++)); do echo "edge.cdn.test A allow"; done >"$E2E_WORK/added.txt"
out=$(client "$E2E_WORK/added.txt")
SENT=$((SENT + 40))
expect_clean "$out" 40 "name added by the reload, 40 queries" 40
for ((i = 0; i < 40; i++)); do echo "multi.example.test A deny"; done >"$E2E_WORK/removed.txt"
out=$(client "$E2E_WORK/removed.txt")
SENT=$((SENT + 40))
expect_clean "$out" 40 "name removed by the reload, 40 queries" 40
log=$(e2e_upstream_queries --src)
n=$(fwd_count edge.cdn.test. A UDP "$log")
((n >= 1 && n <= 2)) || e2e_fail "edge.cdn.test forwarded $n times after the reload (want 1..2)"
e2e_assert_not_contains "$log" "multi.example.test." "removed name reached the upstream"

# ------------------------------------------------- 2. stop and report --
start=$(date +%s%N)
e2e_stop moatd
ms=$((($(date +%s%N) - start) / 1000000))
e2e_assert_eq 0 "$E2E_LAST_STATUS" "moatd exit status on SIGTERM"
((ms < 2000)) || e2e_fail "moatd took $ms ms to stop"
mlog=$(cat "$E2E_WORK/moatd.log")
total=$(sed -n 's/^moatd: stopped: \([0-9]*\) queries,.*/\1/p' <<<"$mlog")
w0=$(sed -n 's/^moatd: worker 0: \([0-9]*\) queries$/\1/p' <<<"$mlog")
w1=$(sed -n 's/^moatd: worker 1: \([0-9]*\) queries$/\1/p' <<<"$mlog")
[[ -n "$total" && -n "$w0" && -n "$w1" ]] || e2e_fail "stop report incomplete: $mlog"
e2e_assert_eq 0 "$(grep -c '^moatd: worker 2:' <<<"$mlog" || true)" "a third worker in the report"
e2e_log "stopped after $ms ms: $total queries, worker 0: $w0, worker 1: $w1"
e2e_assert_eq "$SENT" "$total" "queries in the stop report vs. queries sent"
((w0 > 0)) || e2e_fail "worker 0 got no queries (worker 1: $w1)"
((w1 > 0)) || e2e_fail "worker 1 got no queries (worker 0: $w0)"
e2e_assert_eq "$total" "$((w0 + w1))" "per-worker counts add up to the total"

# ----------------------------------------- 1b. start-up as root, repeated --
# Start-up as root (no --user: the default user, moat or nobody): every worker thread must be running
# before the filter arrives, whatever the scheduling. Ten starts in a row, each must serve.
for ((i = 1; i <= 10; i++)); do
	start_moatd "root$i" --listen "127.0.0.1:$((5400 + i))" --upstream $UP:$UPPORT \
		--allow "$ALLOW" --log /dev/null --workers 2
	pid=$(e2e_pid "root$i")
	e2e_assert_eq 2 "$(threads_of "$pid")" "root start $i: threads"
	for task in "/proc/$pid/task/"*; do
		e2e_assert_eq 2 "$(field "$pid" "${task##*/}" Seccomp 2)" "root start $i: thread ${task##*/} filter"
	done
	e2e_stop "root$i"
	e2e_assert_eq 0 "$E2E_LAST_STATUS" "root start $i: exit status"
done

# --------------------------------------------------- 5. config and flags --
cat >"$E2E_WORK/moatd.yaml" <<Y
listen: ["127.0.0.1:53"]
upstreams: ["$UP:$UPPORT"]
workers: 2
log: {file: "$E2E_WORK/conf.jsonl"}
agents:
  - name: w
    clients: [127.0.0.0/8]
    allow: [allow.txt]
Y
out=$("$MOAT_BUILD/moatd" -c "$E2E_WORK/moatd.yaml" --check)
e2e_assert_contains "$out" "configuration OK: 1 agent(s)" "--check on a config with workers: 2"
start_moatd conf -c "$E2E_WORK/moatd.yaml"
e2e_wait_port udp 127.0.0.1 53
e2e_assert_contains "$(cat "$E2E_WORK/conf.log")" "2 worker(s)" "config: start-up line"
e2e_assert_eq 3 "$(threads_of "$(e2e_pid conf)")" "threads with workers: 2 in the config (and the log's writer)"
e2e_assert_eq 192.0.2.10 "$(e2e_dig @127.0.0.1 +short www.example.test A)" "config mode answers"
e2e_stop conf
e2e_assert_eq 0 "$E2E_LAST_STATUS" "config mode: exit status"
n=$(grep -c '^moatd: worker [01]: [0-9]* queries$' "$E2E_WORK/conf.log" || true)
e2e_assert_eq 2 "$n" "config mode: one stop line per worker"
# The flag beside a config wins over it.
start_moatd conf3 -c "$E2E_WORK/moatd.yaml" --workers 3
e2e_assert_eq 4 "$(threads_of "$(e2e_pid conf3)")" "--workers 3 beside workers: 2 (and the log's writer)"
e2e_stop conf3
e2e_assert_eq 0 "$E2E_LAST_STATUS" "--workers 3: exit status"
# One worker: one thread, no per-worker lines.
start_moatd one --listen 127.0.0.1:53 --upstream $UP:$UPPORT --allow "$ALLOW" --log /dev/null
e2e_assert_eq 1 "$(threads_of "$(e2e_pid one)")" "threads without --workers"
e2e_stop one
e2e_assert_eq 0 "$E2E_LAST_STATUS" "one worker: exit status"
e2e_assert_not_contains "$(cat "$E2E_WORK/one.log")" "worker 0:" "per-worker line with one worker"

# Out of range: rejected before anything starts.
for bad in 0 65 -1 2x ""; do
	st=0
	out=$(e2e_run timeout 5 "$MOAT_BUILD/moatd" --listen 127.0.0.1:53 --upstream $UP:$UPPORT \
		--allow "$ALLOW" --log /dev/null --workers "$bad" 2>&1) || st=$?
	e2e_assert_eq 2 "$st" "exit status of --workers '$bad'"
	e2e_assert_contains "$out" "moatd: --workers: 1 to 64" "message for --workers '$bad'"
done
sed -i 's/^workers: 2$/workers: 65/' "$E2E_WORK/moatd.yaml"
st=0
out=$("$MOAT_BUILD/moatd" -c "$E2E_WORK/moatd.yaml" --check 2>&1) || st=$?
e2e_assert_eq 2 "$st" "--check with workers: 65"
e2e_assert_contains "$out" "moatd.yaml:3: workers: 65 is out of range 1..64" "config error for workers: 65"

e2e_pass
