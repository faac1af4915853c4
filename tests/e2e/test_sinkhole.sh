#!/usr/bin/env bash
# The sinkhole never reaches a service (issue 22). A sinkhole agent's answers are 240.0.0.1 and
# 100::1 by default; a sandbox that connects to them never reaches the services on its own
# 127.0.0.1 and ::1 (judged by a listener there), in the forward and in the netns placement,
# and moat-fw's drop of those packets is counted; a grant of either address is refused in both.
# The control: a sinkhole configured as 0.0.0.0 and :: is warned about at load, and a connect
# to 0.0.0.0 does reach the sandbox's own listener (why the default is not that), with moat-fw
# running: no firewall hook sees it.
#   sandbox 192.0.2.2 --veth-- host 192.0.2.1 (moatd, NSD 192.0.2.53, moat-fw) --veth-- net
# Packets to 240.0.0.1 and 100::1 leave the sandbox only towards these test namespaces (none has
# a link to the root namespace), and moat-fw drops them on the way.
source "$(dirname "$0")/lib.sh"
e2e_init sinkhole

HOST=$E2E_NS
e2e_peer sbx
SBX=$E2E_PEER
e2e_peer net
NET=$E2E_PEER
e2e_uplink "$SBX" s0 "$HOST" h0 192.0.2.2/28 192.0.2.1/28 2001:db8:1::2/64 2001:db8:1::1/64
e2e_uplink "$HOST" h1 "$NET" n0 198.51.100.1/28 198.51.100.2/28 2001:db8:2::1/64 2001:db8:2::2/64
ip netns exec "$HOST" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
for ns in "$SBX" "$HOST" "$NET"; do
	links=$(ip -n "$ns" -o link show | awk -F': ' '{ print $2 }' | sed 's/@.*//' | sort | tr '\n' ' ')
	case "$links" in
	"lo s0 " | "h0 h1 lo " | "lo n0 ") ;;
	*) e2e_fail "namespace $ns has unexpected links: $links" ;;
	esac
done

e2e_addr 192.0.2.53/32
e2e_nsd 192.0.2.53 53 "$E2E_ZONES/example.test.zone"
printf 'www.example.test\n' >"$E2E_WORK/allow.txt"
conf() { # conf NAME [SINKHOLE-LINE]
	cat >"$E2E_WORK/$1.yaml" <<Y
listen: ["192.0.2.1:53", "[2001:db8:1::1]:53"]
upstreams: ["192.0.2.53:53"]
log: {file: $E2E_WORK/$1.jsonl}
agents:
  - name: sbx
    clients: [192.0.2.0/28, "2001:db8:1::/64"]
    allow: [$E2E_WORK/allow.txt]
    deny: sinkhole
${2:-}
Y
}
# The sandbox's own services: a listener on its 127.0.0.1 and ::1 that logs every connection.
cat >"$E2E_WORK/lo_listen.py" <<'PY'
import socket, sys, threading
log = open(sys.argv[1], "a")
def serve(fam, addr):
    s = socket.socket(fam)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((addr, 8000))
    s.listen(16)
    while True:
        c, peer = s.accept()
        log.write("accepted %s from %s\n" % (addr, peer[0]))
        log.flush()
        c.close()
for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    threading.Thread(target=serve, args=(fam, addr), daemon=True).start()
threading.Event().wait(300)
PY
: >"$E2E_WORK/lo.log"
e2e_bg lo ip netns exec "$SBX" "$E2E_PY" "$E2E_WORK/lo_listen.py" "$E2E_WORK/lo.log"
E2E_NS=$SBX e2e_wait_port tcp 127.0.0.1 8000
E2E_NS=$SBX e2e_wait_port tcp ::1 8000
sbx() { ip netns exec "$SBX" "$@"; }
connect() { # connect ADDR: "connected" or "failed: ..."
	sbx "$E2E_PY" -c 'import socket,sys
a = sys.argv[1]
s = socket.socket(socket.AF_INET6 if ":" in a else socket.AF_INET); s.settimeout(1)
try:
    s.connect((a, 8000)); print("connected")
except OSError as e:
    print("failed: %s" % e)' "$1"
}
# drops NS CHAIN SET: the packets the "daddr @SET counter drop" rule of CHAIN (table inet moat
# in namespace NS) has dropped
drops() {
	ip netns exec "$1" nft list chain inet moat "$2" |
		awk -v s="@$3" '$0 ~ "daddr " s " counter" { for (i = 1; i < NF; i++) if ($i == "packets") print $(i + 1) }'
}
grant() { ip netns exec "$HOST" "$E2E_PY" "$E2E_DIR/peers/fw_client.py" --socket "$E2E_WORK/fw.sock" "$@"; }
never_reached() { # WHEN
	e2e_assert_eq "" "$(cat "$E2E_WORK/lo.log")" "the sandbox's own loopback was reached $1"
}
# holds PLACEMENT NS CHAIN [CLIENT4 CLIENT6]: with that moat-fw running, neither default sinkhole
# address reaches anything, the deny rules of CHAIN (table inet moat in NS) counted the drops,
# and a grant of either (for that client) is refused
seq=0
holds() {
	local where=$1 ns=$2 chain=$3 a set n client
	for a in 240.0.0.1 100::1; do
		e2e_assert_contains "$(connect "$a")" failed "$where: $a reachable"
	done
	never_reached "in the $where placement"
	for set in deny4 deny6; do
		n=$(drops "$ns" "$chain" "$set")
		e2e_log "$where placement: the @$set rule of chain $chain dropped $n"
		((n >= 1)) || e2e_fail "$where: no drop counted by the @$set rule"
	done
	for a in 240.0.0.1 100::1; do
		client=${4:-}
		[[ "$a" == *:* ]] && client=${5:-}
		seq=$((seq + 1))
		e2e_assert_eq "seq=$seq status=DENIED lifetime=0" \
			"$(grant --seq $seq ${client:+--client "$client"} "$a")" "$where: grant of $a"
	done
}

# --- the default sinkhole answers ---
conf m
start_moatd moatd -c "$E2E_WORK/m.yaml"
e2e_assert_eq 240.0.0.1 "$(sbx dig +time=2 +tries=1 @192.0.2.1 +short denied.example.test A)" "sinkhole A"
e2e_assert_eq 100::1 "$(sbx dig +time=2 +tries=1 @192.0.2.1 +short denied.example.test AAAA)" "sinkhole AAAA"
e2e_assert_not_contains "$(cat "$E2E_WORK/moatd.log")" "loopback" "a warning for the default sinkhole"
e2e_assert_contains "$(connect 240.0.0.1)" failed "240.0.0.1 reachable without moat-fw"
never_reached "without moat-fw"

# --- forward placement: dropped and counted, never the loopback; grants refused ---
FW_ARGS=(--socket "$E2E_WORK/fw.sock" --moatd-user root --user nobody --state "$E2E_WORK/fwstate"
	--resolver 192.0.2.1 --resolver 2001:db8:1::1)
e2e_bg fwd ip netns exec "$HOST" "$MOAT_BUILD/moat-fw" "${FW_ARGS[@]}" --forward \
	--sandbox 192.0.2.2/32@h0 --sandbox 2001:db8:1::2/128@h0
e2e_wait_log fwd 'listening on'
holds forward "$HOST" sandbox 192.0.2.2 2001:db8:1::2
e2e_stop fwd
ip netns exec "$HOST" "$MOAT_BUILD/moat-fw" --remove >/dev/null

# --- netns placement (the sandbox's own namespace): the same ---
e2e_bg fwns ip netns exec "$HOST" "$MOAT_BUILD/moat-fw" "${FW_ARGS[@]}" --netns "$SBX" \
	--state "$E2E_WORK/fwstate-ns"
e2e_wait_log fwns 'listening on'
holds netns "$SBX" output
stop_moatd moatd

# --- the control: 0.0.0.0 and :: only when configured, with a warning, and they do reach ---
conf z '    sinkhole: [0.0.0.0, "::"]'
start_moatd zero -c "$E2E_WORK/z.yaml"
e2e_assert_contains "$(cat "$E2E_WORK/zero.log")" "sinkhole 0.0.0.0 (agent sbx) reaches the client's own loopback" \
	"no warning for a 0.0.0.0 sinkhole"
e2e_assert_contains "$(cat "$E2E_WORK/zero.log")" "sinkhole :: (agent sbx) reaches the client's own loopback" \
	"no warning for a :: sinkhole"
e2e_assert_eq 0.0.0.0 "$(sbx dig +time=2 +tries=1 @192.0.2.1 +short denied.example.test A)" "configured sinkhole A"
e2e_assert_eq connected "$(connect 0.0.0.0)" "0.0.0.0 did not reach the sandbox's loopback"
e2e_assert_contains "$(cat "$E2E_WORK/lo.log")" "accepted 127.0.0.1" "the listener did not see 0.0.0.0's connection"
stop_moatd zero
e2e_stop fwns

e2e_pass
