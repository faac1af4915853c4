# knot.sh: Knot DNS as the RPZ primary of an e2e test (sourced after lib.sh; not a test itself).
# knot_start DIR SECRET ZONE...: knotd on 127.0.0.1:5310 serving each ZONE (origin with its dot;
# DIR/ZONE.zone, written by the test) from DIR, transfers allowed to 127.0.0.0/8 signed with key
# k1 (hmac-sha256, SECRET) only, NOTIFYs to moatd on 127.0.0.1:53 signed with it, IXFR from the
# journal of zone-file differences (knotc zone-reload after a change); its log is
# $E2E_WORK/knot.log (e2e_bg knot). Returns once it listens.
knot_start() {
	local k=$1 secret=$2 z
	shift 2
	{
		cat <<C
server:
    rundir: "$k"
    listen: 127.0.0.1@5310
log:
  - target: stderr
    any: info
database:
    storage: "$k"
key:
  - id: k1
    algorithm: hmac-sha256
    secret: $secret
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
    storage: "$k"
    file: "%s.zone"
    zonefile-sync: -1
    zonefile-load: difference
    journal-content: changes
    notify: moat
    acl: xfr
zone:
C
		for z in "$@"; do printf '  - domain: %s\n' "$z"; done
	} >"$k/knot.conf"
	e2e_bg knot knotd -c "$k/knot.conf"
	e2e_wait_port tcp 127.0.0.1 5310
}
