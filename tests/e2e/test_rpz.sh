#!/usr/bin/env bash
# RPZ over zone transfer (issue 16): Knot DNS is the primary of an RPZ allow zone and an RPZ
# high-risk zone, moatd pulls both by AXFR with TSIG, names resolve and deny as the zones say
# (NSD is the ordinary upstream and never sees a denied name), a change plus NOTIFY is applied
# by IXFR within 1 s (knotd's log shows an IXFR, and no new AXFR), NOTIFYs not from the
# primary or without its TSIG are refused, a wrong TSIG key is refused and the old zone stays,
# and the primary going away keeps the last zone.
source "$(dirname "$0")/lib.sh"
e2e_init rpz

command -v knotd >/dev/null || e2e_fail "knotd not installed (tools/deps lists knot)"
e2e_addr 127.0.0.2/8 2>/dev/null || true
e2e_nsd 127.0.0.1 5300 "$E2E_ZONES/example.test.zone"

SECRET=$(head -c 32 /dev/urandom | base64)
WRONG=$(head -c 32 /dev/urandom | base64)
K="$E2E_WORK/knot"
mkdir -p "$K"

allow_zone() { # SERIAL REFRESH NAMES...: the RPZ allow zone
	local serial=$1 refresh=$2
	shift 2
	{
		printf '$ORIGIN allow.rpz.\n$TTL 60\n@ SOA ns.allow.rpz. h.allow.rpz. %s %s 1 600 60\n  NS ns.allow.rpz.\n' \
			"$serial" "$refresh"
		for n in "$@"; do printf '%s CNAME rpz-passthru.\n' "$n"; done
		# enough triggers that an AXFR takes several messages, each with its own TSIG
		for ((i = 0; i < 4000; i++)); do printf 'n%d.bulk.example.test CNAME rpz-passthru.\n' "$i"; done
	} >"$K/allow.rpz.zone"
}
allow_zone 1 3600 www.example.test multi.example.test mail.example.test txt.example.test '*.wild.example.test'
cat >"$K/hr.rpz.zone" <<'Z'
$ORIGIN hr.rpz.
$TTL 60
@ SOA ns.hr.rpz. h.hr.rpz. 1 3600 1 600 60
  NS ns.hr.rpz.
mail.example.test CNAME .
txt.example.test CNAME *.
Z
cat >"$K/knot.conf" <<C
server:
    rundir: "$K"
    listen: 127.0.0.1@5310
log:
  - target: stderr
    any: info
database:
    storage: "$K"
key:
  - id: k1
    algorithm: hmac-sha256
    secret: $SECRET
remote:
  - id: moat
    address: 127.0.0.1@53
    key: k1
acl:
  - id: xfr
    address: 127.0.0.0/8
    key: k1
    action: transfer
template:
  - id: default
    storage: "$K"
    file: "%s.zone"
    zonefile-sync: -1
    zonefile-load: difference
    journal-content: changes
    notify: moat
    acl: xfr
zone:
  - domain: allow.rpz.
  - domain: hr.rpz.
C
e2e_bg knot knotd -c "$K/knot.conf"
e2e_wait_port tcp 127.0.0.1 5310

moat_cfg() { # SECRET
	cat >"$E2E_WORK/moatd.yaml" <<Y
listen: ["127.0.0.1:53"]
upstreams: ["127.0.0.1:5300"]
log: {file: $E2E_WORK/query.jsonl}
control: $E2E_WORK/ctl.sock
state_dir: $E2E_WORK/state
rpz:
  - name: allowz
    primary: "127.0.0.1:5310"
    zone: allow.rpz.
    tsig: {name: k1, algorithm: hmac-sha256, secret: "$1"}
  - name: hrz
    primary: "127.0.0.1:5310"
    zone: hr.rpz.
    tsig: {name: k1, algorithm: hmac-sha256, secret: "$SECRET"}
highrisk_rpz: [hrz]
agents:
  - name: box
    clients: [127.0.0.0/8]
    allow: ["rpz:allowz"]
Y
}
moat_cfg "$SECRET"
out=$("$MOAT_BUILD/moatd" -c "$E2E_WORK/moatd.yaml" --check 2>&1)
e2e_assert_contains "$out" "rpz hrz: high-risk zone, transferred from its primary once moatd runs" "--check names the zones"
start_moatd moatd -c "$E2E_WORK/moatd.yaml"
MLOG="$E2E_WORK/moatd.log"
KLOG="$E2E_WORK/knot.log"

wait_log() { e2e_poll_line -E "$1" "$2" $(($3 / 50)); } # FILE ERE TRIES(x 20 ms), 0 when seen

wait_log "$MLOG" 'rpz allowz: AXFR from 127.0.0.1#5310 serial 1 loaded \(4005 triggers\)' 500 ||
	e2e_fail "allow zone not transferred: $(cat "$MLOG")"
wait_log "$MLOG" 'rpz hrz: AXFR from 127.0.0.1#5310 serial 1 loaded \(2 triggers\)' 500 ||
	e2e_fail "high-risk zone not transferred: $(cat "$MLOG")"
grep -qE '\[allow.rpz.\] AXFR, outgoing.*finished.*, ([2-9]|[1-9][0-9]+) messages' "$KLOG" ||
	e2e_fail "the allow zone's AXFR was not several messages: $(grep 'AXFR.*finished' "$KLOG")"
# knotd's ACL takes transfers signed with k1 only: moatd's were
out=$(e2e_dig @127.0.0.1 -p 5310 allow.rpz. AXFR 2>&1 || true)
e2e_assert_contains "$out" "Transfer failed" "knotd refuses an unsigned AXFR"

# --- the zones decide ---
e2e_upstream_reset
e2e_assert_eq 192.0.2.10 "$(e2e_dig @127.0.0.1 +short www.example.test A)" "rpz-passthru allows"
e2e_assert_eq 192.0.2.20 "$(e2e_dig @127.0.0.1 +short a.wild.example.test A)" "*.name allows below"
out=$(e2e_dig @127.0.0.1 alias.example.test A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "a name on no zone is denied"
out=$(e2e_dig @127.0.0.1 mail.example.test A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "CNAME . in the high-risk zone: NXDOMAIN"
e2e_assert_contains "$out" "high-risk name by rpz:hrz" "EDE names the zone"
out=$(e2e_dig @127.0.0.1 txt.example.test TXT)
e2e_assert_eq NOERROR "$(status_of "$out")" "CNAME *. in the high-risk zone: NODATA"
e2e_assert_contains "$out" "ANSWER: 0," "NODATA has no answer"
grep -q '"qname":"mail.example.test.".*"alert":true' "$E2E_WORK/query.jsonl" ||
	e2e_fail "a high-risk RPZ deny is not logged as an alert"
q=$(e2e_upstream_queries)
e2e_assert_contains "$q" "www.example.test. A" "allowed names reached the upstream"
e2e_assert_not_contains "$q" "mail.example.test" "a high-risk name never left"
e2e_assert_not_contains "$q" "txt.example.test" "a NODATA name never left"
e2e_assert_not_contains "$q" "alias.example.test" "a name on no zone never left"

# --- NOTIFY only from the primary, with its key ---
out=$(e2e_dig @127.0.0.1 -b 127.0.0.2 +opcode=notify allow.rpz. SOA -y "hmac-sha256:k1:$SECRET")
e2e_assert_eq REFUSED "$(status_of "$out")" "NOTIFY from another address is refused"
out=$(e2e_dig @127.0.0.1 +opcode=notify allow.rpz. SOA)
e2e_assert_eq REFUSED "$(status_of "$out")" "NOTIFY without TSIG is refused"
out=$(e2e_dig @127.0.0.1 +opcode=notify allow.rpz. SOA -y "hmac-sha256:k1:$WRONG")
e2e_assert_eq REFUSED "$(status_of "$out")" "NOTIFY with a wrong key is refused"
out=$(e2e_dig @127.0.0.1 +opcode=notify other.zone. SOA -y "hmac-sha256:k1:$SECRET")
e2e_assert_eq REFUSED "$(status_of "$out")" "NOTIFY for another zone is refused"
grep -q '"decision":"notify-refused","reason":"NOTIFY not from a configured primary' "$E2E_WORK/query.jsonl" ||
	e2e_fail "refused NOTIFY not logged with its reason"

# --- a runtime agent (its own /32, not the allow zone) beside the transferred zones ---
# (inside the config agent's 127.0.0.0/8 on purpose: --force)
e2e_run "$MOAT_BUILD/moatctl" -s "$E2E_WORK/ctl.sock" agent add rt --clients 127.0.0.9/32 \
	--pattern rt.example.test --force >/dev/null || e2e_fail "agent add beside RPZ zones failed"
out=$(e2e_dig @127.0.0.1 -b 127.0.0.9 www.example.test A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "the runtime agent has its own policy"
e2e_assert_eq 192.0.2.10 "$(e2e_dig @127.0.0.1 +short www.example.test A)" "the zone stays after agent add"

# --- a change plus NOTIFY: applied by IXFR within 1 s ---
axfrs=$(grep -c 'AXFR, outgoing' "$KLOG" || true)
notifies=$(grep -c '"decision":"notify","reason":"rpz NOTIFY accepted"' "$E2E_WORK/query.jsonl" || true)
allow_zone 2 3600 www.example.test multi.example.test mail.example.test txt.example.test '*.wild.example.test' alias.example.test
t0=$(date +%s%N)
e2e_run knotc -c "$K/knot.conf" zone-reload allow.rpz. >/dev/null
wait_log "$MLOG" 'rpz allowz: IXFR from 127.0.0.1#5310 serial 1 -> 2 applied \(1 changes, 4006 triggers\)' 250 ||
	e2e_fail "no IXFR applied after the NOTIFY: $(tail -5 "$MLOG")"
ms=$((($(date +%s%N) - t0) / 1000000))
# moatd times it from the NOTIFY's arrival to the new snapshot handed to the workers
after=$(sed -n 's/.*rpz allowz: IXFR .*serial 1 -> 2 applied.*, \([0-9.]*\) ms after NOTIFY$/\1/p' "$MLOG")
[[ -n "$after" ]] || e2e_fail "the IXFR was not asked for by a NOTIFY: $(grep 'serial 1 -> 2' "$MLOG")"
e2e_log "IXFR of one changed name: applied ${after} ms after the NOTIFY (${ms} ms after knotc zone-reload, polled)"
echo "BENCH rpz_ixfr_after_notify_ms=$after rpz_ixfr_after_zone_reload_ms=$ms" >&2
awk -v a="$after" 'BEGIN { exit !(a <= 1000) }' || e2e_fail "IXFR applied ${after} ms after NOTIFY (target <= 1000)"
out=$(e2e_dig @127.0.0.1 -b 127.0.0.9 www.example.test A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "the IXFR's snapshot keeps the runtime agent"
wait_log "$KLOG" '\[allow.rpz.\] IXFR, outgoing.*serial 1 -> 2' 100 || e2e_fail "knotd logged no IXFR"
e2e_assert_eq "$axfrs" "$(grep -c 'AXFR, outgoing' "$KLOG" || true)" "no AXFR for the change"
n=$(grep -c '"decision":"notify","reason":"rpz NOTIFY accepted"' "$E2E_WORK/query.jsonl" || true)
((n > notifies)) || e2e_fail "knotd's NOTIFY was not accepted (the SOA refresh is an hour: the NOTIFY drove the IXFR)"
e2e_assert_eq 192.0.2.10 "$(e2e_dig @127.0.0.1 +short alias.example.test A | tail -1)" "the new name is allowed"

# --- short SOA timers from now on: the refresh timer drives the next transfers ---
allow_zone 3 1 www.example.test multi.example.test mail.example.test txt.example.test '*.wild.example.test' alias.example.test
e2e_run knotc -c "$K/knot.conf" zone-reload allow.rpz. >/dev/null
wait_log "$MLOG" 'rpz allowz: IXFR .*serial 2 -> 3' 250 || e2e_fail "serial 3 not applied"

# --- a wrong TSIG key: refused by the primary, the old zone stays ---
moat_cfg "$WRONG"
kill -HUP "$(e2e_pid moatd)"
wait_log "$MLOG" 'rpz allowz: transfer from 127.0.0.1#5310 failed, serial 3 kept: .*(NOTAUTH|TSIG)' 250 ||
	e2e_fail "a wrong key did not fail the transfer: $(tail -5 "$MLOG")"
e2e_assert_eq 192.0.2.10 "$(e2e_dig @127.0.0.1 +short alias.example.test A | tail -1)" "old zone kept after a bad key"
out=$(e2e_dig @127.0.0.1 mail.example.test A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "the high-risk zone still denies"

# --- the primary goes away: the last zone stays ---
moat_cfg "$SECRET"
kill -HUP "$(e2e_pid moatd)"
wait_log "$MLOG" 'rpz allowz: serial 3 is current' 250 || e2e_fail "the right key did not work again"
e2e_stop knot
n0=$(grep -c 'failed, serial 3 kept: cannot connect' "$MLOG" || true)
wait_log "$MLOG" 'rpz allowz: transfer from 127.0.0.1#5310 failed, serial 3 kept: cannot connect' 250 ||
	e2e_fail "no failed refresh logged with the primary gone"
e2e_assert_eq 192.0.2.10 "$(e2e_dig @127.0.0.1 +short www.example.test A)" "the last zone stays without the primary"
out=$(e2e_dig @127.0.0.1 nope.example.test A)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "still default deny"
: "$n0"
e2e_pass
