/* moat-fw's drop log (droplog.c): every packet from a sandbox that table inet moat drops, and
 * every new connection it lets through, as one JSON line, so an operator (and `moatctl report`)
 * sees where an agent tried to go and why it did not get there.
 *
 * The drop rules carry `log prefix "moat CHAIN KIND" group G` (nfnetlink_log; nft.c asks
 * fwdroplog_stmt for the text, so the prefix is written and read here only), and so do the
 * accept rules of the allow sets (KIND "connect", a flow's first packet: established flows are
 * accepted before them). moat-fw reads the group with libnetfilter_log and writes, format
 * version 1:
 *   {"ts":"2026-12-01T22:00:05.123Z","v":1,"event":"drop","sandbox":"sbx1","src":"198.51.100.2",
 *    "dst":"203.0.113.9","proto":"tcp","proto_num":6,"port":443,"chain":"output",
 *    "reason":"never-resolved","agent":null}
 * event "drop" (reason below) or "connect" (no reason); "agent" is the agent of a grant the
 * ledger holds or held for dst, else null; "port" is the destination port (0 without one).
 * Reasons: spoofed (a source that is not the sandbox's), always-deny (the always-deny ranges,
 * 0.0.0.0, ::), icmp (ICMP other than echo outside a flow), never-resolved (no grant of dst
 * ever, as far as the ledger remembers: an IP-literal connect, another resolver), expired (the
 * ledger still holds an expired grant of dst), wrong-port (dst is granted for other ports),
 * inbound (a new connection toward the sandbox outside --inbound), host (to the moat host
 * itself, not DNS to a --resolver; forward placement).
 * Lines are rate-limited per reason (FWDROPLOG_RATE a second, bursts of FWDROPLOG_BURST); what
 * is held back is counted and written once a second as
 *   {"ts":...,"v":1,"event":"suppressed","reason":"never-resolved","count":1234}
 * and every packet is counted in the metrics (moatfw_droplog_packets_total{reason}), exactly:
 * the group's sequence numbers show every message the kernel could not deliver, counted as
 * moatfw_droplog_lost_total and written as {"event":"lost","count":N}. A connection is written
 * once per (source, destination, protocol, port) in FWDROPLOG_CONN_S seconds. */
#ifndef MOAT_FW_DROPLOG_H
#define MOAT_FW_DROPLOG_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "ledger.h"
#include "nft.h"

#define FWDROPLOG_GROUP 27 /* --log-group default */
#define FWDROPLOG_RATE 20  /* lines a second per reason */
#define FWDROPLOG_BURST 50
#define FWDROPLOG_CONN_S 600

struct fwdroplog;

/* The log statement of a rule in chain for kind ("spoofed", "connect", ...): ' log prefix
 * "moat output spoofed" group 27' into buf, or "" when group is 0 (no drop log). Returns buf. */
const char *fwdroplog_stmt(uint16_t group, const char *chain, const char *kind, char *buf,
                           size_t cap);

/* Bind the nfnetlink_log group (in the network namespace current now: where the rules are)
 * and open path for appending; then watch the group on loop. ledger (borrowed) tells expired
 * and wrong-port drops from never-resolved ones; label names the sandbox (netns placement) or
 * NULL (forward: the --sandbox range of the source). Call as root, before the privilege drop.
 * Returns 0 with *out set, or MOAT_EIO with err set. Ownership: fwdroplog_close. */
int fwdroplog_start(uv_loop_t *loop, uint16_t group, const char *path, struct ledger **ledger,
                    const struct fwnft_setup *setup, const char *label, struct fwdroplog **out,
                    char *err, size_t errlen);
/* After the loop has closed its handles: free everything. */
void fwdroplog_close(struct fwdroplog *d);

/* The reasons' counters as Prometheus text (moatfw_droplog_*), into out. */
int fwdroplog_metrics(const struct fwdroplog *d, char *out, size_t cap);

/* For tests: parse a packet as the log reads it (IPv4 or IPv6 header first): addresses,
 * protocol, destination port. 0 or MOAT_EINVAL. */
struct fwdroplog_pkt {
	uint8_t family, proto;
	uint8_t src[16], dst[16];
	uint16_t port;
};
int fwdroplog_parse(const uint8_t *p, size_t len, struct fwdroplog_pkt *out);

#endif
