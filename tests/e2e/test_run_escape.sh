#!/usr/bin/env bash
# moat-escape inside `moat run` holds every test (issue 24), with private daemons and with the
# system's: unknown and metadata names, the metadata address in every form, rebinding, other
# resolvers (a second NSD), an address never resolved, IPv6, an expired grant, tunnelling,
# the control, port scope, forged sources and connections into the sandbox (with a witness).
# moat-escape runs as the invoking user (uid 65534, no capability), as a user's command would.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/run_env.sh"
run_env_init run_escape

run_serve web 203.0.113.80:80 203.0.113.80:443 203.0.113.81:80 203.0.113.81:443 203.0.113.82:80
e2e_bg witness "$E2E_PY" "$RUN_BIN/witness.py" 600 203.0.113.83:7
E2E_NS=$E2E_NS e2e_wait_port tcp 203.0.113.83 7

cat >"$RUN_BIN/escape.conf" <<'E'
allowed = a.test
allowed-target = a.test:80
rebind = meta.test
rebind = rebind6.test
other-resolver = 203.0.113.54
unresolved = 203.0.113.81
v6-target = 2001:db8:3::80
expire-name = short.test
expire-port = 80
expire-wait = 12
grant-min = 3
tunnel-domain = tunnel.test
scoped-name = a.test
scoped-open = 80
witness = witness.test:7
timeout = 1000
E
chmod 0644 "$RUN_BIN/escape.conf"
ALLOW=(--allow 'a.test tcp/80' --allow 'short.test tcp/80' --allow meta.test --allow rebind6.test
	--allow 'witness.test tcp/7 udp/7')

escape() {
	local mode=$1 st=0 out
	shift
	moat_run "$@" "${ALLOW[@]}" -- "$RUN_BIN/moat-escape" --config "$RUN_BIN/escape.conf" \
		>"$E2E_WORK/escape-$mode.txt" 2>"$E2E_WORK/escape-$mode.err" || st=$?
	out=$(cat "$E2E_WORK/escape-$mode.txt")
	e2e_log "$mode: $(tail -n 1 <<<"$out")"
	e2e_assert_eq 0 "$st" "$mode: moat-escape: $out $(tail -n 5 "$E2E_WORK/escape-$mode.err")"
	e2e_assert_eq "moat-escape: 13 of 13 held" "$(tail -n 1 <<<"$out")" "$mode: the verdict"
	run_leftovers "$mode"
}

escape private --private --upstream 203.0.113.53 --min-lifetime 3
run_sys_start --min-lifetime 3
escape system "${RUN_SYSARGS[@]}"
stop_moatd sysmoatd
e2e_pass
