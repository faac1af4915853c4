#!/usr/bin/env bash
# What moatd checked is what it uses (issue 23). A signed high-risk list compiled and loaded with
# policy_verify: lazy denies a name; the file is then changed in place four ways (its filter
# zeroed, a record changed, truncated, another valid compiled file copied over it): each time
# the name stays denied and never reaches the upstream, moatd stays up, the change is logged
# once and counted (moat_policy_files_changed_total); a moatctl compile (a rename) plus
# moatctl sign and SIGHUP loads normally again. A signed RPZ high-risk file rewritten in place
# keeps denying what it denied (it was parsed into memory over the bytes its signature
# covered), a reload of the changed file is refused for its signature and the running zone
# stays, and a signed replacement by rename plus SIGHUP loads.
source "$(dirname "$0")/lib.sh"
e2e_init policy_integrity

e2e_nsd 127.0.0.1 5300 "$E2E_ZONES/example.test.zone"
C=$E2E_WORK/conf
mkdir -p "$C"
ctl() { "$MOAT_BUILD/moatctl" "$@"; }
ask() { e2e_dig @127.0.0.1 "$1" A; }
# An hour old, as a compiled file is by the time moatd opens it: a change after the open then
# moves its modification time even where the clock's ticks are coarse.
age() { touch -d '1 hour ago' "$@"; }
MPORT=9391
changed() { e2e_run curl -s --max-time 5 "http://127.0.0.1:$MPORT/metrics" | awk '/^moat_policy_files_changed_total / { print $2 }'; }

ctl keygen -o "$E2E_WORK/key" >/dev/null
printf 'www.example.test\nmail.example.test\ntxt.example.test\nmulti.example.test\n' >"$C/allow.txt"
printf 'mail.example.test\n' >"$C/hr.txt"
printf 'other.example.test\nmore.example.test\n' >"$E2E_WORK/other.txt"
hr_compile() { # the high-risk list compiled, signed, aged: a rename over the old file
	ctl compile --highrisk -o "$C/hr.mpol" "$C/hr.txt" >/dev/null || e2e_fail "compile --highrisk"
	ctl sign --key "$E2E_WORK/key" "$C/hr.mpol" >/dev/null || e2e_fail "sign hr.mpol"
	age "$C/hr.mpol"
}
ctl compile -o "$C/allow.mpol" "$C/allow.txt" >/dev/null
ctl sign --key "$E2E_WORK/key" "$C/allow.mpol" >/dev/null
ctl compile --highrisk -o "$E2E_WORK/other.mpol" "$E2E_WORK/other.txt" >/dev/null
hr_compile
rpz_write() { # FILE TRIGGER...: a high-risk RPZ zone
	local f=$1
	shift
	{
		printf '$ORIGIN hr.rpz.\n$TTL 60\n@ SOA ns.hr.rpz. h.hr.rpz. 1 3600 600 86400 60\n  NS ns.hr.rpz.\n'
		for t in "$@"; do printf '%s CNAME .\n' "$t"; done
	} >"$f"
}
rpz_write "$C/hr.rpz" txt.example.test
ctl sign --key "$E2E_WORK/key" "$C/hr.rpz" >/dev/null
cat >"$C/moatd.yaml" <<Y
listen: ["127.0.0.1:53"]
upstreams: ["127.0.0.1:5300"]
upstream_timeout_ms: 500
metrics: 127.0.0.1:$MPORT
policy_pubkey: $E2E_WORK/key.pub
highrisk: [hr.mpol]
rpz:
  - {name: hrz, file: hr.rpz}
highrisk_rpz: [hrz]
agents:
  - name: ci
    clients: [127.0.0.0/8]
    allow: [allow.mpol]
Y
start_moatd moatd -c "$C/moatd.yaml"
MLOG=$E2E_WORK/moatd.log
e2e_upstream_reset
e2e_assert_eq NOERROR "$(status_of "$(ask www.example.test)")" "an allowed name"
out=$(ask mail.example.test)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "the compiled high-risk name is denied"
e2e_assert_contains "$out" "high-risk" "denied as high-risk"
e2e_assert_eq 0 "$(changed)" "no change counted at start"

reload() { reload_moatd moatd; }

# A small list's layout: the header page, the block table's page, then the slots (data block
# 0), the filter (block 1) and the records (block 2).
DATA=8192
inplace() { # WAY: change hr.mpol in place
	case $1 in
	filter) dd if=/dev/zero of="$C/hr.mpol" bs=1 seek=$((DATA + 4096)) count=64 conv=notrunc status=none ;;
	record) printf '\x55' | dd of="$C/hr.mpol" bs=1 seek=$((DATA + 8192 + 5)) conv=notrunc status=none ;;
	truncate) truncate -s $((DATA + 100)) "$C/hr.mpol" ;;
	cp) cp "$E2E_WORK/other.mpol" "$C/hr.mpol" ;;
	esac
}
n=0
for way in filter record truncate cp; do
	inplace "$way"
	out=$(ask mail.example.test)
	e2e_assert_eq NXDOMAIN "$(status_of "$out")" "$way: the high-risk name stays denied"
	e2e_alive moatd || e2e_fail "$way: moatd died: $(tail -3 "$MLOG")"
	n=$((n + 1))
	e2e_assert_eq "$n" "$(grep -c "hr.mpol: the file changed after moatd opened it" "$MLOG")" \
		"$way: the change is logged once"
	e2e_assert_eq "$n" "$(changed)" "$way: the change is counted"
	# The names the private filter rules out are still answered from what was checked.
	e2e_assert_eq NOERROR "$(status_of "$(ask www.example.test)")" "$way: an allowed name still resolves"
	# A moatctl compile (rename) plus SIGHUP brings a verified replacement in.
	hr_compile
	e2e_assert_contains "$(reload)" "policy reloaded" "$way: the replacement loads"
	e2e_assert_eq NXDOMAIN "$(status_of "$(ask mail.example.test)")" "$way: the new list denies"
	e2e_assert_eq "$n" "$(changed)" "$way: the replacement is no change"
done
e2e_assert_not_contains "$(e2e_upstream_queries)" "mail.example.test" "the high-risk name never went upstream"

# --- a signed RPZ file rewritten in place (the same inode, other bytes) ---
out=$(ask txt.example.test)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "the RPZ high-risk name is denied"
e2e_assert_contains "$out" "hr.rpz:5" "by the zone (file:line)"
rpz_write "$E2E_WORK/evil.rpz" nothing.example.test
cat "$E2E_WORK/evil.rpz" >"$C/hr.rpz" # truncated and rewritten in place, the old .sig beside it
age "$C/hr.rpz"
e2e_assert_eq NXDOMAIN "$(status_of "$(ask txt.example.test)")" "the zone in force is the one checked"
line=$(reload)
e2e_assert_contains "$line" "reload failed, running policy kept" "the changed zone file is refused"
e2e_assert_contains "$line" "bad signature" "for its signature"
e2e_assert_eq NXDOMAIN "$(status_of "$(ask txt.example.test)")" "the running zone stays"
e2e_alive moatd || e2e_fail "moatd died"
# A signed replacement by rename loads.
rpz_write "$E2E_WORK/new.rpz" txt.example.test multi.example.test
ctl sign --key "$E2E_WORK/key" "$E2E_WORK/new.rpz" >/dev/null
mv "$E2E_WORK/new.rpz.sig" "$C/hr.rpz.sig"
mv "$E2E_WORK/new.rpz" "$C/hr.rpz"
e2e_assert_contains "$(reload)" "policy reloaded" "a signed replacement loads"
e2e_assert_eq NXDOMAIN "$(status_of "$(ask multi.example.test)")" "the new zone denies its new trigger"
e2e_assert_eq NXDOMAIN "$(status_of "$(ask txt.example.test)")" "and its old one"
e2e_assert_not_contains "$(e2e_upstream_queries)" "txt.example.test" "an RPZ high-risk name never went upstream"

stop_moatd moatd
e2e_pass
