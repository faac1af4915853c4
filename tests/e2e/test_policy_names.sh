#!/usr/bin/env bash
# Names as users write them and the lint (issue 15): an allowlist line written in UTF-8
# ("bücher.example") lets the A-label a stub sends ("xn--bcher-kva.example") resolve, a BOM
# before the first line does not hide it, a URL line is an error at file:line with a hint, and
# --check --strict fails on "*.co.uk" and passes a clean policy.
source "$(dirname "$0")/lib.sh"
e2e_init polnames

cat >"$E2E_WORK/example.zone" <<'Z'
$ORIGIN example.
$TTL 300
@                IN SOA ns.example. host.example. 1 3600 600 86400 300
                 IN NS  ns.example.
ns               IN A   192.0.2.53
xn--bcher-kva    IN A   192.0.2.81
first            IN A   192.0.2.82
Z
e2e_nsd 127.0.0.1 5300 "$E2E_WORK/example.zone"

# The BOM and the UTF-8 name, as an editor on another system would write them.
printf '\xef\xbb\xbffirst.example\nb\xc3\xbccher.example\n' >"$E2E_WORK/allow.txt"
run=("$MOAT_BUILD/moatd" --listen 127.0.0.1:53 --upstream 127.0.0.1:5300 --upstream-timeout 500)

out=$("${run[@]}" --allow "$E2E_WORK/allow.txt" --check --strict 2>&1)
e2e_assert_contains "$out" "configuration OK: 1 agent(s), 2 allow pattern(s)" "--check --strict passes a clean policy"
e2e_assert_not_contains "$out" "warning:" "a clean policy has no warning"

e2e_bg moatd "${run[@]}" --allow "$E2E_WORK/allow.txt" --log "$E2E_WORK/query.jsonl"
e2e_wait_port udp 127.0.0.1 53
e2e_upstream_reset
out=$(e2e_dig @127.0.0.1 +short +noidnin xn--bcher-kva.example A)
e2e_assert_eq 192.0.2.81 "$out" "the A-label of a UTF-8 allowlist line resolves"
out=$(e2e_dig @127.0.0.1 +short +idnin "b$(printf '\xc3\xbc')cher.example" A)
e2e_assert_eq 192.0.2.81 "$out" "dig's own IDN conversion of bücher.example resolves"
out=$(e2e_dig @127.0.0.1 +short first.example A)
e2e_assert_eq 192.0.2.82 "$out" "the line after a BOM is allowed"
e2e_assert_contains "$(e2e_upstream_queries)" "xn--bcher-kva.example. A UDP" "the upstream was asked the A-label"
e2e_stop moatd

# --- a URL line: an error at file:line with the host to write instead ---
printf 'ok.example\nhttps://example.com/path\n' >"$E2E_WORK/url.txt"
st=0
out=$("${run[@]}" --allow "$E2E_WORK/url.txt" --check 2>&1) || st=$?
((st != 0)) || e2e_fail "--check accepted a URL line"
e2e_assert_contains "$out" "$E2E_WORK/url.txt:2: bad pattern 'https://example.com/path': a URL, not a name; write the host name only: example.com" "URL line error"

# --- lint: --check warns, --check --strict refuses ---
printf 'ok.example\n*.co.uk\n' >"$E2E_WORK/wide.txt"
st=0
out=$("${run[@]}" --allow "$E2E_WORK/wide.txt" --check 2>&1) || st=$?
e2e_assert_eq 0 "$st" "--check without --strict passes with warnings"
e2e_assert_contains "$out" "$E2E_WORK/wide.txt:2: warning: wildcard on the public suffix 'co.uk'" "*.co.uk warned"
st=0
out=$("${run[@]}" --allow "$E2E_WORK/wide.txt" --check --strict 2>&1) || st=$?
e2e_assert_eq 1 "$st" "--check --strict fails on *.co.uk"
e2e_assert_contains "$out" "--strict: 1 warning(s), configuration refused" "strict says why"
e2e_assert_not_contains "$out" "configuration OK" "strict does not say OK"

st=0
out=$("${run[@]}" --allow "$E2E_WORK/wide.txt" --strict 2>&1) || st=$?
e2e_assert_eq 2 "$st" "--strict without --check is a usage error"
e2e_assert_contains "$out" "--strict goes with --check" "and says so"

# --- load prints the warnings too ---
e2e_bg moatd2 "${run[@]}" --allow "$E2E_WORK/wide.txt" --log "$E2E_WORK/query2.jsonl"
e2e_wait_port udp 127.0.0.1 53
e2e_assert_contains "$(cat "$E2E_WORK/moatd2.log")" "moatd: $E2E_WORK/wide.txt:2: warning: wildcard on the public suffix" "start-up prints the lint"
e2e_stop moatd2
e2e_pass
