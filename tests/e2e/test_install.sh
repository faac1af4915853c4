#!/usr/bin/env bash
# Install (issue 14): a copy of the source, configured with prefix /usr and built in a temporary
# directory, is installed into a DESTDIR; the build and source copies are then deleted. The
# installed moatd checks the installed example config with the installed lists (found beside its
# own prefix; a copy elsewhere uses the compiled-in /usr/share/moat, shown in a private mount
# namespace); sysusers.d and tmpfiles.d apply to the tree; the units pass `systemd-analyze
# verify` against the tree and rate <= 2.5 (moatd) and <= 4.0 (moat-fw) with `systemd-analyze
# security --offline=true`. None of this needs systemd as PID 1. (test_manpages checks the
# pages' content.)
source "$(dirname "$0")/lib.sh"
e2e_init install
for tool in cmake systemd-analyze systemd-sysusers systemd-tmpfiles unshare; do
	command -v "$tool" >/dev/null || e2e_fail "required tool '$tool' not found (tools/deps)"
done

SRC="$E2E_WORK/src"
BLD="$E2E_WORK/bld"
DEST="$E2E_WORK/dest"
mkdir -p "$SRC"
# The source as a release tarball would carry it: no build trees, no git metadata.
tar -C "$MOAT_SRC" --exclude='./build*' --exclude='./.git' --exclude='./CMakeCache.txt' \
	--exclude='./CMakeFiles' -cf - . | tar -C "$SRC" -xf -
cmake -S "$SRC" -B "$BLD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
	-DMOAT_TESTS=OFF >"$E2E_WORK/cmake.log" 2>&1 || {
	tail -20 "$E2E_WORK/cmake.log" >&2
	e2e_fail "configure failed"
}
targets=(moatd moat-fw moat-escape moat manpages)
# grep reads the whole list (-q would stop early, and make's broken pipe fails the pipeline)
if cmake --build "$BLD" --target help | grep '^\.\.\. moatctl$' >/dev/null; then targets+=(moatctl); fi
cmake --build "$BLD" -j2 --target "${targets[@]}" >"$E2E_WORK/build.log" 2>&1 || {
	tail -20 "$E2E_WORK/build.log" >&2
	e2e_fail "build failed"
}
DESTDIR="$DEST" cmake --install "$BLD" >"$E2E_WORK/install.log" 2>&1 || {
	tail -20 "$E2E_WORK/install.log" >&2
	e2e_fail "install failed"
}
rm -rf "$SRC" "$BLD"
[[ ! -e "$SRC" && ! -e "$BLD" ]] || e2e_fail "source or build copy left behind"

# --- the layout ---
U="$DEST/usr"
for f in sbin/moatd sbin/moat-fw bin/moat-escape bin/moat; do
	[[ -x "$U/$f" ]] || e2e_fail "not installed: /usr/$f"
done
for f in share/moat/highrisk.txt share/moat/blocked-ranges.txt share/moat/moatd.example.yaml \
	share/moat/allow/example.txt lib/systemd/system/moatd.service \
	lib/systemd/system/moat-fw.service lib/sysusers.d/moat.conf lib/tmpfiles.d/moat.conf \
	share/man/man8/moatd.8 share/man/man8/moat-fw.8 share/man/man8/moatctl.8 \
	share/man/man1/moat-escape.1 share/man/man1/moat-run.1 share/man/man5/moatd.yaml.5; do
	[[ -f "$U/$f" ]] || e2e_fail "not installed: /usr/$f"
done
[[ ! -e "$DEST/usr/local" && ! -e "$DEST/etc" ]] || e2e_fail "installed outside /usr"
version=$("$U/sbin/moatd" --version)
e2e_log "$version; $("$U/sbin/moat-fw" --version)"
[[ "$version" =~ ^moatd\ [0-9]+\.[0-9]+\.[0-9]+ ]] || e2e_fail "moatd --version: '$version'"
[[ "$("$U/sbin/moat-fw" --version)" == "moat-fw ${version#moatd }" ]] ||
	e2e_fail "moat-fw --version differs from moatd's"
[[ "$("$U/bin/moat" --version)" == "moat ${version#moatd }" ]] ||
	e2e_fail "moat --version differs from moatd's"

# --- the installed moatd finds the installed lists ---
out=$("$U/sbin/moatd" -c "$U/share/moat/moatd.example.yaml" --check 2>&1) ||
	e2e_fail "installed moatd --check failed: $out"
e2e_log "$out"
e2e_assert_contains "$out" "configuration OK" "check of the installed example"
# Which lists: one more name in the installed highrisk.txt is one more pattern in the check.
n=$(sed -n 's/.* \([0-9]*\) high-risk pattern(s).*/\1/p' <<<"$out")
cp "$U/share/moat/highrisk.txt" "$E2E_WORK/highrisk.txt"
echo "only-in-the-installed-list.example" >>"$U/share/moat/highrisk.txt"
out=$("$U/sbin/moatd" -c "$U/share/moat/moatd.example.yaml" --check 2>&1)
e2e_assert_contains "$out" " $((n + 1)) high-risk pattern(s)" "the installed list is the one used"
cp "$E2E_WORK/highrisk.txt" "$U/share/moat/highrisk.txt"
# --zones-dir points elsewhere (and is what a missing directory is reported as).
out=$("$U/sbin/moatd" -c "$U/share/moat/moatd.example.yaml" --zones-dir "$E2E_WORK/none" \
	--check 2>&1) && e2e_fail "check passed with an empty --zones-dir"
e2e_assert_contains "$out" "$E2E_WORK/none/highrisk.txt" "--zones-dir"
# A copy with no share/moat beside it uses the compiled-in prefix: absent on this host...
mkdir -p "$E2E_WORK/elsewhere"
cp "$U/sbin/moatd" "$E2E_WORK/elsewhere/moatd"
out=$("$E2E_WORK/elsewhere/moatd" -c "$U/share/moat/moatd.example.yaml" --check 2>&1) &&
	[[ ! -d /usr/share/moat ]] && e2e_fail "a copy found lists that are not installed"
[[ -d /usr/share/moat ]] ||
	e2e_assert_contains "$out" "/usr/share/moat/highrisk.txt" "compiled-in path of a copy"
# ...and found there once the tree's share/moat is mounted at /usr/share/moat (private mounts).
# shellcheck disable=SC2016 # $1 and $2 are the inner shell's
out=$(unshare --mount --propagation private sh -ec '
	mount -t tmpfs moat-test /usr/share
	mkdir /usr/share/moat
	mount --bind "$1/share/moat" /usr/share/moat
	"$2" -c /usr/share/moat/moatd.example.yaml --check' sh "$U" "$E2E_WORK/elsewhere/moatd" 2>&1) ||
	e2e_fail "copy with /usr/share/moat mounted: $out"
e2e_assert_contains "$out" "configuration OK" "compiled-in /usr/share/moat"

# --- a root to check the units against: the tree plus what Debian 12 has under it ---
R="$E2E_WORK/root"
cp -a "$DEST" "$R"
mkdir -p "$R/usr/bin" "$R/etc"
ln -s usr/bin "$R/bin"
cp /usr/bin/kill "$R/usr/bin/kill"
for f in /usr/lib/systemd/system/*; do
	[[ -e "$R/usr/lib/systemd/system/${f##*/}" ]] || cp -a "$f" "$R/usr/lib/systemd/system/"
done
: >"$R/etc/passwd"
: >"$R/etc/group"
systemd-sysusers --root="$R" >"$E2E_WORK/sysusers.log" 2>&1 ||
	e2e_fail "sysusers: $(cat "$E2E_WORK/sysusers.log")"
grep -q '^moat:x:[0-9]*:[0-9]*:.*:/nonexistent:/usr/sbin/nologin$' "$R/etc/passwd" ||
	e2e_fail "sysusers.d made no moat user: $(cat "$R/etc/passwd")"
grep -q '^moat:x:' "$R/etc/group" || e2e_fail "sysusers.d made no moat group"
grep -q '^moat-fw:x:' "$R/etc/passwd" || e2e_fail "sysusers.d made no moat-fw user"
systemd-tmpfiles --root="$R" --create >"$E2E_WORK/tmpfiles.log" 2>&1 ||
	e2e_fail "tmpfiles: $(cat "$E2E_WORK/tmpfiles.log")"
[[ -d "$R/etc/moat" && -d "$R/var/log/moat" ]] || e2e_fail "tmpfiles.d made no directories"
# moatd (group moat) may add its control socket to /run/moat but not remove moat-fw's.
moat_gid=$(awk -F: '$1 == "moat" { print $3 }' "$R/etc/group")
e2e_assert_eq "1770 0 $moat_gid" "$(stat -c '%a %u %g' "$R/run/moat")" "/run/moat: 1770 root:moat"

out=$(MANPATH="$R/usr/share/man" systemd-analyze verify --root="$R" moatd.service \
	moat-fw.service 2>&1) || e2e_fail "systemd-analyze verify: $out"
e2e_assert_eq "" "$out" "systemd-analyze verify has something to say"

# --- exposure scores ---
score() {
	systemd-analyze security --offline=true --root="$DEST" "$1" 2>/dev/null |
		sed -n "s/^→ Overall exposure level for $1: \([0-9.]*\) .*/\1/p"
}
for pair in moatd.service:2.5 moat-fw.service:4.0; do
	unit=${pair%%:*} max=${pair#*:}
	s=$(score "$unit")
	[[ -n "$s" ]] || e2e_fail "no exposure level for $unit"
	echo "exposure: $unit $s (at most $max)"
	awk -v s="$s" -v m="$max" 'BEGIN { exit !(s <= m) }' || e2e_fail "$unit rates $s, above $max"
done

e2e_pass
