#!/usr/bin/env bash
# RPZ transfers that cannot be replayed or taken unsigned (issue 23), with Knot DNS as the
# primary: under policy_pubkey a zone transferred without TSIG is refused by --check and at
# start (without a key, --check warns); a NOTIFY signed an hour ago, one signed with hmac-md5
# for a key configured as hmac-sha256, and 200 replays of one valid NOTIFY cause at most one
# transfer (knotd's outgoing transfers counted from its log), a NOTIFY signed before the last
# accepted one is refused, a burst of fresh NOTIFYs makes transfers at most a second apart; a
# zone that grows past its max_triggers fails the IXFR and keeps the last zone.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/knot.sh"
e2e_init rpz_tsig

command -v knotd >/dev/null || e2e_fail "knotd not installed (tools/deps lists knot)"
e2e_nsd 127.0.0.1 5300 "$E2E_ZONES/example.test.zone"

SECRET=$(head -c 32 /dev/urandom | base64)
K="$E2E_WORK/knot"
mkdir -p "$K"
zone() { # NAME SERIAL NAMES...: an RPZ allow zone
	local z=$1 serial=$2
	shift 2
	{
		printf '$ORIGIN %s.\n$TTL 60\n@ SOA ns.%s. h.%s. %s 3600 600 86400 60\n  NS ns.%s.\n' \
			"$z" "$z" "$z" "$serial" "$z"
		for n in "$@"; do printf '%s CNAME rpz-passthru.\n' "$n"; done
	} >"$K/$z.zone"
}
zone allow.rpz 1 www.example.test
cap_names() { for ((i = 0; i < $1; i++)); do printf 'n%d.cap.example.test ' "$i"; done; }
# shellcheck disable=SC2046
zone cap.rpz 1 $(cap_names 40) multi.example.test
knot_start "$K" "$SECRET" allow.rpz. cap.rpz.
KLOG="$E2E_WORK/knot.log"
"$MOAT_BUILD/moatctl" keygen -o "$E2E_WORK/key" >/dev/null

moat_cfg() { # EXTRA_ZONE_LINES KEY_LINE
	cat >"$E2E_WORK/moatd.yaml" <<Y
listen: ["127.0.0.1:53"]
upstreams: ["127.0.0.1:5300"]
log: {file: $E2E_WORK/query.jsonl}
$2
rpz:
  - name: allowz
    primary: "127.0.0.1:5310"
    zone: allow.rpz.
    tsig: {name: k1, algorithm: hmac-sha256, secret: "$SECRET"}
  - name: capz
    primary: "127.0.0.1:5310"
    zone: cap.rpz.
    tsig: {name: k1, algorithm: hmac-sha256, secret: "$SECRET"}
    max_triggers: 50
$1
agents:
  - name: box
    clients: [127.0.0.0/8]
    allow: ["rpz:allowz", "rpz:capz"]
Y
}

# --- a zone transferred without TSIG: refused under policy_pubkey, a warning without ---
PLAIN='  - {name: plain, primary: "127.0.0.1:5310", zone: plain.rpz.}'
moat_cfg "$PLAIN" "policy_pubkey: $E2E_WORK/key.pub"
out=$("$MOAT_BUILD/moatd" -c "$E2E_WORK/moatd.yaml" --check 2>&1) && e2e_fail "--check passed an unsigned transfer: $out"
e2e_assert_contains "$out" "rpz 'plain': policy_pubkey is set" "--check refuses a primary without tsig"
e2e_assert_contains "$out" "give it a tsig key" "and says what to do"
out=$(e2e_run timeout 10 "$MOAT_BUILD/moatd" -c "$E2E_WORK/moatd.yaml" 2>&1) && e2e_fail "moatd started with an unsigned transfer"
e2e_assert_contains "$out" "rpz 'plain': policy_pubkey is set" "the start refuses it too"
moat_cfg "$PLAIN" ""
out=$("$MOAT_BUILD/moatd" -c "$E2E_WORK/moatd.yaml" --check 2>&1) || e2e_fail "--check refused without a key: $out"
e2e_assert_contains "$out" "rpz plain: transferred without tsig" "without a key: a lint warning"

# --- signed transfers under policy_pubkey ---
moat_cfg "" "policy_pubkey: $E2E_WORK/key.pub"
start_moatd moatd -c "$E2E_WORK/moatd.yaml"
MLOG="$E2E_WORK/moatd.log"
QLOG="$E2E_WORK/query.jsonl"
wait_line -E "$MLOG" 'rpz allowz: AXFR from 127.0.0.1#5310 serial 1 loaded \(1 triggers\)' 10
wait_line -E "$MLOG" 'rpz capz: AXFR from 127.0.0.1#5310 serial 1 loaded \(41 triggers\)' 10
e2e_assert_eq 192.0.2.10 "$(e2e_dig @127.0.0.1 +short www.example.test A)" "the signed zone allows"

more() { (($($1) > $2)); } # FN N: FN's count above N (for e2e_poll)
current() { grep -c 'rpz allowz: serial 1 is current' "$MLOG" || true; }
xfrs() { grep -cE '\[allow\.rpz\.\] [AI]XFR, outgoing, remote [^,]*, (started|zone is up-to-date)' "$KLOG" || true; }
accepted() { grep -c '"decision":"notify","reason":"rpz NOTIFY accepted"' "$QLOG" || true; }
refused() { grep -c "\"decision\":\"notify-refused\",\"reason\":\"$1" "$QLOG" || true; }
nt() { e2e_run "$E2E_PY" "$E2E_DIR/peers/notify_tsig.py" "$@" 127.0.0.1 53 allow.rpz. k1. "$SECRET"; }
x0=$(xfrs) a0=$(accepted)
e2e_log "knotd's outgoing transfers of allow.rpz so far: $x0"

out=$(nt --at -3600)
e2e_assert_contains "$out" "REFUSED=1" "a NOTIFY signed an hour ago is refused"
out=$(nt --alg hmac-md5.sig-alg.reg.int)
e2e_assert_contains "$out" "REFUSED=1" "a NOTIFY signed hmac-md5 for an hmac-sha256 key is refused"
e2e_assert_eq 2 "$(refused "NOTIFY for rpz allowz without a valid TSIG")" "both logged with their reason"
out=$(nt --replay --count 200)
e2e_assert_contains "$out" "sent=200 NOERROR=1 REFUSED=199" "one NOTIFY replayed 200 times: accepted once"
e2e_assert_eq 199 "$(refused "NOTIFY for rpz allowz replayed")" "the replays are logged as such"
e2e_assert_eq $((a0 + 1)) "$(accepted)" "one NOTIFY accepted"
wait_line -E "$MLOG" 'rpz allowz: serial 1 is current' 10
e2e_poll 5 more xfrs "$x0" || e2e_fail "no transfer at knotd after the NOTIFY"
e2e_assert_eq $((x0 + 1)) "$(xfrs)" "one transfer for all of them at knotd"
out=$(nt --at -30)
e2e_assert_contains "$out" "REFUSED=1" "a NOTIFY signed before the last accepted one is refused"
e2e_assert_eq 1 "$(refused "NOTIFY for rpz allowz signed at")" "as older than the last one"

# A burst of fresh, valid NOTIFYs (each signed anew, ~1 ms apart): the transfers they start are
# a second apart per zone, the NOTIFYs in between counted once (without the gap, the feed would
# transfer again as soon as each transfer ends: a dozen or more here).
x1=$(xfrs)
n1=$(current)
out=$(nt --count 50)
e2e_assert_contains "$out" "sent=50 NOERROR=50" "fresh NOTIFYs are accepted"
e2e_poll 10 more current "$n1" ||
	e2e_fail "the burst of NOTIFYs made no transfer"
x2=$(xfrs)
e2e_log "a burst of 50 NOTIFYs: $((x2 - x1)) transfer(s) at knotd so far"
((x2 - x1 <= 3)) || e2e_fail "50 NOTIFYs made $((x2 - x1)) transfers (the gap: one a second)"

# --- a zone past its max_triggers: the IXFR fails, the last zone stays ---
# shellcheck disable=SC2046
zone cap.rpz 2 $(cap_names 60) multi.example.test alias.example.test
e2e_run knotc -c "$K/knot.conf" zone-reload cap.rpz. >/dev/null
wait_line -E "$MLOG" 'rpz capz: transfer from 127.0.0.1#5310 failed, serial 1 kept: .*more than 50 triggers' 10
e2e_assert_eq NOERROR "$(status_of "$(e2e_dig @127.0.0.1 multi.example.test A)")" "the last zone stays"
out=$(e2e_dig @127.0.0.1 alias.example.test A)
e2e_assert_contains "$out" "not on allowlist" "the new triggers are not in force"
e2e_alive moatd || e2e_fail "moatd died"
stop_moatd moatd
e2e_pass
