#!/usr/bin/env bash
# Compiled and signed policy (issue 16): moatd with a compiled allowlist and a compiled high-risk
# list answers allowed names and denies the others (never asking the upstream for them); an
# atomic replace (moatctl compile renames over the file) plus SIGHUP switches the policy; a
# corrupt or truncated replacement is refused and the old policy keeps answering; with
# policy_pubkey only a compiled file signed by that key loads (unsigned, other key, changed
# after signing and text lists are refused, the running policy stays); a compiled file is signed
# over its header page (a whole-file signature of one is refused) and a changed block under a
# good signature fails its lookups closed, also with policy_verify: quick. moatd runs as its own
# unprivileged user, so every reload maps and checks the files as that user.
source "$(dirname "$0")/lib.sh"
e2e_init compiled

e2e_nsd 127.0.0.1 5300 "$E2E_ZONES/example.test.zone"
C=$E2E_WORK/conf
mkdir -p "$C"
ctl() { "$MOAT_BUILD/moatctl" "$@"; }
ask() { e2e_dig @127.0.0.1 "$1" A; }

printf 'www.example.test\n*.wild.example.test\nmail.example.test\n' >"$C/allow.txt"
printf 'mail.example.test\n' >"$C/hr.txt"
ctl compile -o "$C/allow.mpol" "$C/allow.txt" >/dev/null || e2e_fail "moatctl compile failed"
ctl compile --highrisk -o "$C/hr.mpol" "$C/hr.txt" >/dev/null || e2e_fail "compile --highrisk failed"
rm "$C/allow.txt" "$C/hr.txt" # moatd must need only the compiled files
cat >"$C/moatd.yaml" <<'Y'
listen: ["127.0.0.1:53"]
upstreams: ["127.0.0.1:5300"]
upstream_timeout_ms: 500
highrisk: [hr.mpol]
agents:
  - name: ci
    clients: [127.0.0.0/8]
    allow: [allow.mpol]
Y
out=$("$MOAT_BUILD/moatd" -c "$C/moatd.yaml" --check 2>&1) || e2e_fail "--check refused: $out"
e2e_assert_contains "$out" "configuration OK" "--check on compiled files"

start_moatd moatd -c "$C/moatd.yaml"
# started as root, moatd runs as its own user: every reload below maps and checks as that user
uid=$(awk '/^Uid:/ { print $3 }' "/proc/$(e2e_pid moatd)/status")
[[ $uid != 0 ]] || e2e_fail "moatd kept root: the reloads would not show the unprivileged path"
e2e_upstream_reset
out=$(ask www.example.test)
e2e_assert_eq NOERROR "$(status_of "$out")" "an allowed name"
e2e_assert_contains "$out" "192.0.2.10" "an allowed name answered as the upstream answers"
e2e_assert_contains "$(ask a.wild.example.test)" "192.0.2.20" "a name under a compiled wildcard"
out=$(ask multi.example.test)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "a name on no list"
e2e_assert_contains "$out" "not on allowlist of agent ci" "the deny says why"
out=$(ask mail.example.test)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "a compiled high-risk name, though allowed"
e2e_assert_contains "$out" "high-risk" "the high-risk deny says why"
up=$(e2e_upstream_queries)
e2e_assert_contains "$up" "www.example.test. A" "the allowed name went upstream"
e2e_assert_not_contains "$up" "multi.example.test" "a denied name never went upstream"
e2e_assert_not_contains "$up" "mail.example.test" "a high-risk name never went upstream"

reload() { reload_moatd moatd; }

# --- an atomic replace and SIGHUP switch the policy ---
printf 'multi.example.test\n' >"$E2E_WORK/new.txt"
ctl compile -o "$C/allow.mpol" "$E2E_WORK/new.txt" >/dev/null
e2e_assert_contains "$(reload)" "policy reloaded" "reload of a replaced compiled file"
e2e_assert_eq NOERROR "$(status_of "$(ask multi.example.test)")" "the new policy answers"
e2e_assert_eq NXDOMAIN "$(status_of "$(ask www.example.test)")" "the old rule is gone"

# --- a corrupt or truncated replacement is refused; the old policy keeps answering ---
good=$E2E_WORK/good.mpol
cp "$C/allow.mpol" "$good"
cp "$good" "$E2E_WORK/bad.mpol"
size=$(stat -c %s "$good")
printf '\xff' | dd of="$E2E_WORK/bad.mpol" bs=1 seek=$((size - 30)) conv=notrunc status=none
mv "$E2E_WORK/bad.mpol" "$C/allow.mpol"
line=$(reload)
e2e_assert_contains "$line" "reload failed, running policy kept: $C/allow.mpol: body checksum mismatch" "a corrupt file is refused"
e2e_assert_eq NOERROR "$(status_of "$(ask multi.example.test)")" "old policy still answers after a corrupt file"
head -c $((size / 2)) "$good" >"$E2E_WORK/short.mpol"
mv "$E2E_WORK/short.mpol" "$C/allow.mpol"
e2e_assert_contains "$(reload)" "truncated" "a truncated file is refused"
e2e_assert_eq NOERROR "$(status_of "$(ask multi.example.test)")" "old policy still answers after a truncated file"

# --- policy_pubkey: only files signed with that key ---
ctl keygen -o "$E2E_WORK/key" >/dev/null
ctl keygen -o "$E2E_WORK/other" >/dev/null
cp "$good" "$C/allow.mpol"
printf 'policy_pubkey: %s\n' "$E2E_WORK/key.pub" >>"$C/moatd.yaml"
e2e_assert_contains "$(reload)" "$C/allow.mpol: no signature" "an unsigned file is refused"
e2e_assert_eq NOERROR "$(status_of "$(ask multi.example.test)")" "old policy stays (unsigned)"
ctl sign --key "$E2E_WORK/other" "$C/allow.mpol" "$C/hr.mpol" >/dev/null
e2e_assert_contains "$(reload)" "signed with key" "a file signed with another key is refused"
ctl sign --key "$E2E_WORK/key" "$C/hr.mpol" >/dev/null
printf 'www.example.test\n' >"$E2E_WORK/evil.txt"
ctl compile -o "$E2E_WORK/evil.mpol" "$E2E_WORK/evil.txt" >/dev/null
ctl sign --key "$E2E_WORK/key" "$C/allow.mpol" >/dev/null
cp "$E2E_WORK/evil.mpol" "$C/allow.mpol" # a new file under the old signature
e2e_assert_contains "$(reload)" "bad signature" "a file changed after signing is refused"
e2e_assert_eq NXDOMAIN "$(status_of "$(ask www.example.test)")" "the changed file's rule is not in force"
printf 'www.example.test\n' >"$C/plain.txt"
sed -i 's|allow: \[allow.mpol\]|allow: [plain.txt]|' "$C/moatd.yaml"
e2e_assert_contains "$(reload)" "only signed compiled files" "a text list is refused with a key"
sed -i 's|allow: \[plain.txt\]|allow: [allow.mpol]|' "$C/moatd.yaml"
ctl sign --key "$E2E_WORK/key" "$C/allow.mpol" >/dev/null
e2e_assert_contains "$(reload)" "policy reloaded" "a well-signed file loads"
e2e_assert_eq NOERROR "$(status_of "$(ask www.example.test)")" "the signed policy answers"
e2e_assert_eq NXDOMAIN "$(status_of "$(ask multi.example.test)")" "and replaced the old one"

# --- a compiled file is signed over its header page; its blocks are checked before use ---
e2e_assert_contains "$(cat "$C/allow.mpol.sig")" "moat-sig 2 " "a compiled file gets a header signature"
e2e_assert_contains "$(cat "$C/allow.mpol.sig")" " head " "the .sig line names its kind"
out=$(ctl verify --pubkey "$E2E_WORK/key.pub" "$C/allow.mpol" 2>&1) || e2e_fail "moatctl verify refused a good file: $out"
e2e_assert_contains "$out" "signature good" "moatctl verify checks the header signature"
cp "$C/allow.mpol.sig" "$E2E_WORK/head.sig"
cp "$C/allow.mpol" "$E2E_WORK/whole.bin"
ctl sign --key "$E2E_WORK/key" "$E2E_WORK/whole.bin" >/dev/null
e2e_assert_contains "$(cat "$E2E_WORK/whole.bin.sig")" "moat-sig 1 " "any other file is signed whole"
cp "$E2E_WORK/whole.bin.sig" "$C/allow.mpol.sig"
e2e_assert_contains "$(reload)" "whole-file signature" "a whole-file signature of a compiled file is refused"
e2e_assert_eq NOERROR "$(status_of "$(ask www.example.test)")" "old policy stays (whole-file signature)"
cp "$E2E_WORK/head.sig" "$C/allow.mpol.sig"
printf 'x.example.test\n' >"$E2E_WORK/x.mpol"
out=$(ctl sign --key "$E2E_WORK/key" "$E2E_WORK/x.mpol" 2>&1) && e2e_fail "a text file named .mpol was signed"
e2e_assert_contains "$out" "not a compiled moat policy" "moatctl sign refuses a text file named .mpol"
# A changed block under the good header signature (replaced by rename, the header page kept):
# it loads, reading only the header page, and the lookups that need the block fail closed, also
# with policy_verify: quick (run as lazy with a key: a signed body is never trusted unchecked).
printf 'policy_verify: quick\n' >>"$C/moatd.yaml"
cp "$C/allow.mpol" "$E2E_WORK/dmg.mpol"
printf '\x40' | dd of="$E2E_WORK/dmg.mpol" bs=1 seek=$((8192 + 5)) conv=notrunc status=none
out=$(ctl sign --key "$E2E_WORK/key" "$E2E_WORK/dmg.mpol" 2>&1) && e2e_fail "a damaged compiled file was signed"
e2e_assert_contains "$out" "body checksum mismatch" "moatctl sign checks a compiled file in full first"
cp "$C/allow.mpol.sig" "$E2E_WORK/dmg.mpol.sig" # the header page is unchanged: it verifies
out=$(ctl verify --pubkey "$E2E_WORK/key.pub" "$E2E_WORK/dmg.mpol" 2>&1) && e2e_fail "moatctl verify passed a damaged file"
e2e_assert_contains "$out" "body checksum mismatch" "moatctl verify checks every block under a good header signature"
mv "$E2E_WORK/dmg.mpol" "$C/allow.mpol"
e2e_assert_contains "$(reload)" "policy reloaded" "a changed block under a good header signature loads"
e2e_upstream_reset
out=$(ask www.example.test)
e2e_assert_eq NXDOMAIN "$(status_of "$out")" "a name in the changed block fails closed (quick, with a key)"
e2e_assert_contains "$(cat "$E2E_WORK/moatd.log")" "does not match its hash" "the damaged block is logged"
e2e_assert_not_contains "$(e2e_upstream_queries)" "www.example.test" "the failed-closed name never went upstream"

e2e_stop moatd
e2e_assert_eq 0 "$E2E_LAST_STATUS" "clean stop"
e2e_pass
