#!/usr/bin/env bash
# Per-domain upstreams (issue 15): a forward zone sends corp.internal to its own upstream (the
# second NSD's query log shows it, the first's shows nothing), the rest goes to the global
# upstream, the policy still decides first (a denied name in the zone reaches nobody), a zone's
# private answers pass only with allow_private, and failover works inside the zone (its first
# upstream never answers).
source "$(dirname "$0")/lib.sh"
e2e_init forward

zone() { # ORIGIN RECORDS...: a small zone file in the work dir
	local f="$E2E_WORK/$1.zone" o=$1
	shift
	printf '$ORIGIN %s.\n$TTL 300\n@ IN SOA ns.%s. host.%s. 1 3600 600 86400 300\n  IN NS ns.%s.\nns IN A 192.0.2.53\n' \
		"$o" "$o" "$o" "$o" >"$f"
	printf '%s\n' "$@" >>"$f"
	echo "$f"
}
e2e_nsd 127.0.0.1 5300 "$E2E_ZONES/example.test.zone"
corp=$(zone corp.internal "db IN A 192.0.2.77" "priv IN A 10.1.2.3" "secret IN A 192.0.2.78")
lab=$(zone lab.internal "priv IN A 10.9.8.7")
fail=$(zone fail.internal "a IN A 192.0.2.91" "b IN A 192.0.2.92" "c IN A 192.0.2.93" "d IN A 192.0.2.94")
e2e_nsd 127.0.0.1 5301 "$corp" "$lab" "$fail"
e2e_bg hole python3 "$E2E_DIR/peers/silent_udp.py" 127.0.0.1 5399 120

printf 'www.example.test\ndb.corp.internal\npriv.corp.internal\n*.lab.internal\n*.fail.internal\n' >"$E2E_WORK/allow.txt"
cat >"$E2E_WORK/moatd.yaml" <<Y
listen: ["127.0.0.1:53"]
upstreams: ["127.0.0.1:5300"]
upstream_timeout_ms: 2000
log: {file: $E2E_WORK/query.jsonl}
forward:
  - zone: corp.internal
    upstreams: ["127.0.0.1:5301"]
  - zone: lab.internal
    upstreams: ["127.0.0.1:5301"]
    allow_private: true
  - zone: fail.internal
    upstreams: ["127.0.0.1:5399", "127.0.0.1:5301"]
    timeout_ms: 300
    attempts: 2
agents:
  - name: box
    clients: [127.0.0.0/8]
    allow: [$E2E_WORK/allow.txt]
Y
out=$("$MOAT_BUILD/moatd" -c "$E2E_WORK/moatd.yaml" --check --strict 2>&1)
e2e_assert_contains "$out" "configuration OK" "--check --strict accepts the forward config"
e2e_assert_contains "$out" "3 forward zone(s), 0 local record(s), 0 warning(s)" "--check counts the zones"

start_moatd moatd -c "$E2E_WORK/moatd.yaml"

e2e_upstream_reset
out=$(e2e_dig @127.0.0.1 +short db.corp.internal A)
e2e_assert_eq 192.0.2.77 "$out" "db.corp.internal answered"
out=$(e2e_dig @127.0.0.1 +short www.example.test A)
e2e_assert_eq 192.0.2.10 "$out" "www.example.test answered"
out=$(e2e_dig @127.0.0.1 secret.corp.internal A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "a zone allows nothing by itself"
q1=$(e2e_upstream_queries 1)
q2=$(e2e_upstream_queries 2)
e2e_assert_contains "$q2" "db.corp.internal. A UDP" "the zone's upstream was asked"
e2e_assert_not_contains "$q1" "corp.internal" "the global upstream never saw the zone's names"
e2e_assert_contains "$q1" "www.example.test. A UDP" "other names go to the global upstream"
e2e_assert_not_contains "$q2" "www.example.test" "the zone's upstream saw only its names"
e2e_assert_not_contains "$q1$q2" "secret" "a denied name in the zone reached no upstream"
grep -q '"qname":"db.corp.internal.".*"upstream":"127.0.0.1:5301"' "$E2E_WORK/query.jsonl" ||
	e2e_fail "the query log does not name the zone's upstream"

# --- private answers: only where the zone (or agent) allows them ---
out=$(e2e_dig @127.0.0.1 priv.corp.internal A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "a private answer of a zone without allow_private"
e2e_assert_contains "$out" "answer contained 10.1.2.3" "EDE says why"
out=$(e2e_dig @127.0.0.1 +short priv.lab.internal A)
e2e_assert_eq 10.9.8.7 "$out" "a zone with allow_private passes private answers"

# --- failover inside the zone: its first upstream is a black hole ---
e2e_upstream_reset
for n in a b c d; do
	out=$(e2e_dig @127.0.0.1 +time=3 +short $n.fail.internal A)
	case $n in a) want=192.0.2.91 ;; b) want=192.0.2.92 ;; c) want=192.0.2.93 ;; d) want=192.0.2.94 ;; esac
	e2e_assert_eq "$want" "$out" "$n.fail.internal answered despite a dead first upstream"
done
grep -q '"qname":"[a-d].fail.internal.".*"upstream":"127.0.0.1:5301"' "$E2E_WORK/query.jsonl" ||
	e2e_fail "failover answers not from the zone's second upstream"
to=$(grep -c . <<<"$(grep -o '"upstream_ms":[0-9]*' "$E2E_WORK/query.jsonl" | awk -F: '$2 >= 250')")
((to >= 1)) || e2e_fail "no answer waited for the dead upstream's timeout (round robin never started there?)"
e2e_assert_not_contains "$(e2e_upstream_queries 1)" "fail.internal" "failover stayed inside the zone"

# --- SIGHUP: zones come and go with the policy; the zone's cached answer is not reused ---
sed -i 's/zone: corp.internal/zone: other.internal/' "$E2E_WORK/moatd.yaml"
e2e_upstream_reset
kill -HUP "$(e2e_pid moatd)"
e2e_poll_line "$E2E_WORK/moatd.log" "policy reloaded" 5 || true
e2e_assert_contains "$(cat "$E2E_WORK/moatd.log")" "policy reloaded" "reload with other zones"
e2e_dig @127.0.0.1 db.corp.internal A >/dev/null || true
e2e_assert_contains "$(e2e_upstream_queries 1)" "db.corp.internal. A UDP" "after the reload the global upstream is asked (no cache entry of the old zone)"
e2e_assert_not_contains "$(e2e_upstream_queries 2)" "db.corp.internal" "the old zone's upstream is not"

e2e_stop moatd
e2e_assert_eq 0 "$E2E_LAST_STATUS" "clean stop"
e2e_pass
