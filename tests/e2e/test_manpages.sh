#!/usr/bin/env bash
# Man pages (issue 14) stay accurate: every flag a program's --help lists is in its page, every
# key the config parser knows is in moatd.yaml(5), every moatctl command in moatctl(8). The pages
# are the ones this build made (build/man, from doc/man/*.scd); each missing item is named, with
# the source file to add it to.
source "$(dirname "$0")/lib.sh"
e2e_init manpages
command -v man >/dev/null || e2e_fail "required tool 'man' not found (tools/deps: man-db)"

MAN="$MOAT_BUILD/man"
[[ -d "$MAN" ]] || e2e_fail "no $MAN: the build made no man pages (scdoc missing?)"
render() { man -l -P cat "$1" 2>/dev/null | sed 's/.\x08//g'; }
missing=()

# checkflags PROGRAM PAGE: every --flag of PROGRAM --help is in PAGE.
checkflags() {
	local text flag
	text=$(render "$MAN/$2")
	[[ -n "$text" ]] || e2e_fail "man -l $2 rendered nothing"
	for flag in $("$MOAT_BUILD/$1" --help 2>&1 | grep -oE -- '--[a-z][a-z0-9-]+' | sort -u); do
		grep -qF -- "$flag" <<<"$text" || missing+=("doc/man/$2.scd: $flag")
	done
}
checkflags moatd moatd.8
checkflags moat-fw moat-fw.8
checkflags moat-escape moat-escape.1
checkflags moat moat-run.1
ctl=$(render "$MAN/moatctl.8")
for cmd in status stats reload flush agents grants explain check; do
	grep -qw -- "$cmd" <<<"$ctl" || missing+=("doc/man/moatctl.8.scd: command $cmd")
done
if [[ -x "$MOAT_BUILD/moatctl" ]]; then
	checkflags moatctl moatctl.8
	for cmd in $("$MOAT_BUILD/moatctl" --help 2>&1 | awk '/^  [a-z]+( |$)/ { print $1 }'); do
		grep -qw -- "$cmd" <<<"$ctl" || missing+=("doc/man/moatctl.8.scd: command $cmd")
	done
fi

# Every key the config reader accepts (resolver/config/config_yaml*.c), at any depth (and the few
# enumerated values it compares the same way, such as nxdomain), and every numeric key of the
# limits table (resolver/config/config_limits.c) and every deny form (config.c), is in moatd.yaml(5): keys as "key:", values as words.
yaml=$(render "$MAN/moatd.yaml.5")
keys=$({
	cat "$MOAT_SRC"/resolver/config/config*.c | grep -oE 'config_key_is\([a-z]+, [a-z]+, "[a-z_]+"\)' |
		sed 's/.*"\(.*\)")/\1/'
	sed -n 's/^    {"\([a-z_]*\)", .*/\1/p' "$MOAT_SRC/resolver/config/config_limits.c"
	grep -A3 '^int config_deny_parse' "$MOAT_SRC/resolver/config/config.c" | grep -oE '"[a-z]+"' | tr -d '"'
} | sort -u)
(($(wc -l <<<"$keys") > 20)) || e2e_fail "found few config keys in resolver/config/config*.c: $keys"
for k in $keys; do
	grep -qF -- "$k:" <<<"$yaml" || grep -qw -- "$k" <<<"$yaml" ||
		missing+=("doc/man/moatd.yaml.5.scd: key $k")
done

if ((${#missing[@]})); then
	printf 'undocumented: %s\n' "${missing[@]}" >&2
	e2e_fail "${#missing[@]} item(s) missing from the man pages"
fi
e2e_pass
