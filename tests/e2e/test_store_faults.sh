#!/usr/bin/env bash
# Damaged stores never crash a daemon (issue 23). The 100 runs each of random page damage are
# tests/unit/test_store_faults.c (the stores opened as the daemons open them); here the daemons
# themselves start on a store whose pages past the meta pages are random bytes:
#   - moatd: starts and serves, says the runtime agent store is damaged and where it was moved,
#     and fails closed (the runtime agent's client is refused; a config agent still resolves);
#     `moatctl agent add` works on the new store;
#   - moat-fw: starts and serves, says the ledger is damaged and where it was moved, restores no
#     grant (closed: the allow set is empty), and takes a new grant.
source "$(dirname "$0")/lib.sh"
e2e_init store_faults

e2e_nsd 127.0.0.1 5300 "$E2E_ZONES/example.test.zone"
ctl() { "$MOAT_BUILD/moatctl" -s "$E2E_WORK/ctl.sock" "$@"; }
# Every page past the two meta pages overwritten with random bytes (the meta pages still point
# into them: LMDB follows them into garbage).
wreck() { # DIR
	local f=$1/data.mdb pages
	pages=$(($(stat -c %s "$f") / 4096))
	((pages <= 66)) || pages=66 # the ledger's file is its whole map, sparse: its first pages hold the data
	((pages > 2)) || e2e_fail "$f: no page to damage"
	head -c $(((pages - 2) * 4096)) /dev/urandom | dd of="$f" bs=4096 seek=2 conv=notrunc status=none
}

# --- moatd and its runtime agents ---
printf 'www.example.test\n' >"$E2E_WORK/allow.txt"
cat >"$E2E_WORK/moatd.yaml" <<Y
listen: ["127.0.0.1:53"]
upstreams: ["127.0.0.1:5300"]
control: $E2E_WORK/ctl.sock
state_dir: $E2E_WORK/state
agents:
  - name: conf
    clients: [127.0.0.1/32]
    allow: [$E2E_WORK/allow.txt]
Y
start_moatd moatd -c "$E2E_WORK/moatd.yaml"
for i in $(seq 1 40); do
	echo "agent add rt$i --clients 127.0.1.$i/32 --pattern www.example.test --pattern n$i.example.test"
done >"$E2E_WORK/batch.txt"
ctl batch <"$E2E_WORK/batch.txt" >/dev/null || e2e_fail "agent add batch failed"
e2e_assert_eq 192.0.2.10 "$(e2e_dig @127.0.0.1 -b 127.0.1.7 +short www.example.test A)" "a runtime agent resolves"
stop_moatd moatd
wreck "$E2E_WORK/state"
start_moatd moatd2 -c "$E2E_WORK/moatd.yaml"
LOG=$E2E_WORK/moatd2.log
e2e_assert_contains "$(cat "$LOG")" "the runtime agent store is damaged" "moatd says the store is damaged"
e2e_assert_contains "$(cat "$LOG")" "moved aside to $E2E_WORK/state/data.mdb.damaged-" "and where it went"
ls "$E2E_WORK/state"/data.mdb.damaged-* >/dev/null 2>&1 || e2e_fail "the damaged store was not moved aside"
out=$(e2e_dig @127.0.0.1 -b 127.0.1.7 www.example.test A)
e2e_assert_eq REFUSED "$(status_of "$out")" "the runtime agent's client is refused (closed)"
e2e_assert_eq 192.0.2.10 "$(e2e_dig @127.0.0.1 +short www.example.test A)" "a config agent still resolves"
ctl agent add rt7 --clients 127.0.1.7/32 --pattern www.example.test >/dev/null ||
	e2e_fail "agent add on the new store failed"
e2e_assert_eq 192.0.2.10 "$(e2e_dig @127.0.0.1 -b 127.0.1.7 +short www.example.test A)" "agent add works again"
stop_moatd moatd2

# --- moat-fw and its ledger ---
SOCK=$E2E_WORK/fw.sock
STATE=$E2E_WORK/fwstate
grant() { "$E2E_PY" "$E2E_DIR/peers/fw_client.py" --socket "$SOCK" "$@"; }
allow4() { e2e_run nft list set inet moat allow4; }
# shellcheck disable=SC2034 # read by start_fw (lib.sh)
FW_BASE=(--socket "$SOCK" --netns "$E2E_NS" --state "$STATE" --user nobody --resolver 192.0.2.53)
start_fw fw
for i in $(seq 1 120); do
	grant --seq "$i" --lifetime 600 "198.51.100.$((i % 200 + 1))" >/dev/null || e2e_fail "grant $i"
done
e2e_assert_contains "$(allow4)" "198.51.100.7 timeout" "a grant is in the set"
e2e_stop fw
wreck "$STATE"
start_fw fw2
FLOG=$E2E_WORK/fw2.log
e2e_assert_contains "$(cat "$FLOG")" "moat-fw: ledger $STATE: damaged" "moat-fw says the ledger is damaged"
e2e_assert_contains "$(cat "$FLOG")" "moved aside to $STATE/data.mdb.damaged-" "and where it went"
e2e_assert_contains "$(cat "$FLOG")" "0 grants restored" "no grant from a damaged ledger"
e2e_assert_not_contains "$(allow4)" "198.51.100." "closed: the allow set is empty"
e2e_assert_eq "seq=500 status=OK lifetime=600" "$(grant --seq 500 --lifetime 600 198.51.100.9)" \
	"moat-fw takes a new grant"
e2e_assert_contains "$(allow4)" "198.51.100.9 timeout" "the new grant is in force"
e2e_stop fw2
e2e_assert_eq 0 "$E2E_LAST_STATUS" "moat-fw stops cleanly"
e2e_run "$MOAT_BUILD/moat-fw" --remove --netns "$E2E_NS" >/dev/null
e2e_pass
