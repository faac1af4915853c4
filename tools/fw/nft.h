/* moat-fw's nftables side: the text of every nft command moat-fw sends (built by pure functions,
 * unit-tested without a kernel) and the thin libnftables wrapper that runs it.
 *
 * moat-fw owns exactly one table, `inet moat`, and never names any other. Layout:
 *   set deny4 / deny6   interval sets of the always-deny ranges (from the ranges files)
 *   set allow4 / allow6 timeout sets of granted destinations (any port); in the forward
 *                       placement their elements are `sandbox source . destination`
 *   set port4 / port6   the same with `. proto . port`: grants whose rule names ports
 *   set echo4 / echo6   every granted destination, for ICMP echo (layout in nft_batch.h)
 *   netns placement:    chain output (policy drop): the sandbox's loopback, then sources that
 *                       are not the namespace's own dropped, then the filtering rules; chain
 *                       input (policy drop): loopback, ND, replies, --inbound ports
 *   forward placement:  sets sbx4 / sbx6 (`interface . source range`); chains forward and
 *                       input (policy accept) send everything that arrives on a sandbox
 *                       interface to chain sandbox (routed) or chain host (to the moat host),
 *                       and everything leaving on one to chain to_sandbox first; each ends in
 *                       a counted drop, so nothing from a sandbox interface falls through;
 *                       every accept there also sets FWNFT_MARK (see the guard below);
 *                       sets hostsrc4 / hostsrc6 (`interface . address`: the host's own
 *                       addresses inside a sandbox range on that range's interface, a
 *                       bridge's gateway) and chain prerouting (only when there are such
 *                       addresses): a packet arriving there with one as source is forged
 *                       (counted drop, before routing, so IPv4 counts it before the kernel's
 *                       martian check drops it silently)
 *   table inet moat_guard (forward placement only; in the same transaction as moat's table,
 *                       and left in place when moat's table is deleted or moat-fw stops):
 *                       at priority 1 of the forward and input hooks it drops whatever
 *                       arrives on or leaves by a sandbox interface without FWNFT_MARK, so a
 *                       sandbox interface stays closed without moat's table; it clears the
 *                       mark on what passes; at priority -1 it drops sandbox-interface
 *                       packets that carry the mark already (set by someone else), so only
 *                       moat's table can set it
 * Rule order for traffic the sandbox sends (chain sandbox / output): source check (counted
 * drop), the sandbox's own flows, IPv6 neighbour discovery (netns), the deny sets (counted
 * drop), DNS to each resolver, ICMP other than echo (counted drop), the allow sets, counted
 * drop. Toward the sandbox only replies and --inbound ports pass. The start-up ruleset goes
 * through libnftables (text); grants go straight to netlink (nft_batch.c). */
#ifndef MOAT_FW_NFT_H
#define MOAT_FW_NFT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FWNFT_TABLE "moat"
#define FWNFT_GUARD "moat_guard"
/* The packet-mark bit moat's forward chains set on what they accept and the guard checks and
 * clears (one bit, held only between priority 0 and 1 of the forward and input hooks). */
#define FWNFT_MARK 0x00000080u
#define FWNFT_MARK_TEXT "0x00000080"
#define FWNFT_UNMARK_TEXT "0xffffff7f" /* ~FWNFT_MARK */

enum fwnft_placement {
	FWNFT_NETNS = 0, /* inside the sandbox's namespace: output hook, no source in elements */
	FWNFT_FORWARD =
	    1, /* on the host: forward + input hooks, elements bind source to destination */
};

#define FWNFT_IFNAMSIZ 16 /* IFNAMSIZ, without pulling in <net/if.h> */
/* Interfaces of runtime sandboxes (SANDBOX_ADD, moat run's veths) are named so: the forward
 * placement sends every one of them through the sandbox chains, known or not. */
#define FWNFT_RUNTIME_IFPREFIX "moat-"

/* An address range; bits counts within the family (<= 32 for IPv4). IPv4 in addr[0..3]. A
 * sandbox range also names the interface its traffic arrives on (forward placement) and
 * whether grants for it may name private and shared ranges. */
struct fwnft_range {
	uint8_t family; /* 4 or 6 */
	uint8_t addr[16];
	uint8_t bits;
	char ifname[FWNFT_IFNAMSIZ]; /* sandbox ranges only; "" elsewhere */
	bool allow_private;          /* sandbox ranges only */
};

/* A resolver the sandbox may send DNS to (UDP and TCP). */
struct fwnft_resolver {
	uint8_t family;
	uint8_t addr[16];
	uint16_t port;
};

/* A port a connection from outside may open toward the sandbox (--inbound tcp/8080). */
struct fwnft_port {
	uint8_t proto; /* 6 (tcp) or 17 (udp) */
	uint16_t port;
};

/* Everything the ruleset text depends on. Arrays are borrowed. */
struct fwnft_setup {
	enum fwnft_placement placement;
	const struct fwnft_range *deny;
	size_t ndeny;
	const struct fwnft_range *sandbox; /* forward placement: the sandboxes' source ranges */
	size_t nsandbox;
	const struct fwnft_resolver *resolver;
	size_t nresolver;
	const struct fwnft_port *inbound; /* --inbound: new connections toward the sandbox */
	size_t ninbound;
	const struct fwnft_range *link6; /* netns: on-link IPv6 prefixes (ND targets) */
	size_t nlink6;
	bool dhcp; /* DHCP (v4 67/68, v6 546/547) between the sandbox and its link */
	/* forward: the host's own addresses (host routes) inside a sandbox range on that range's
	 * interface (ifname set): never a source from there */
	const struct fwnft_range *hostsrc;
	size_t nhostsrc;
	unsigned long pid;  /* moat-fw's pid, named in the table's comment (0: no comment) */
	uint16_t log_group; /* --drop-log: drop and allow rules log to this nflog group (droplog.h);
	                     * 0: no log statements */
};

/* A growable text buffer. Zero-initialise; fwnft_buf_free releases it. The first failure to
 * append (out of memory) sticks in err: later appends do nothing and return it, so a text is
 * built as a plain sequence of appends and checked once at the end. */
struct fwnft_buf {
	char *p;
	size_t len;
	size_t cap;
	int err; /* 0, or the first failure's MOAT_E* */
};
void fwnft_buf_free(struct fwnft_buf *b);

/* Parse "ADDR" or "ADDR/LEN" (host bits must be zero; no LEN means a host route) into r.
 * Returns 0 or MOAT_EINVAL. */
int fwnft_range_parse(const char *text, struct fwnft_range *r);

/* Parse "tcp/8080" or "udp/53" into p. Returns 0 or MOAT_EINVAL. */
int fwnft_port_parse(const char *text, struct fwnft_port *p);

/* True when range a lies inside range b (same family, b's prefix is a prefix of a's). */
bool fwnft_range_within(const struct fwnft_range *a, const struct fwnft_range *b);

/* True when addr (of the given family, IPv4 in the first 4 bytes) lies inside r. */
bool fwnft_range_contains(const struct fwnft_range *r, uint8_t family, const uint8_t *addr);

/* Append the `always` ranges of a ranges file (addrguard file format version 1) to *v (realloc'd,
 * caller frees). Lines of class `private` are skipped: moatd refuses those per agent, and the
 * kernel set holds only what no agent may ever reach. Returns 0, MOAT_EIO, MOAT_EINVAL (err has
 * "path:line: reason") or MOAT_ENOMEM. */
int fwnft_ranges_load(const char *path, struct fwnft_range **v, size_t *n, char *err,
                      size_t errlen);

/* Drop ranges contained in another range of the same family (and duplicates), keeping the order
 * of the rest, so the interval set never gets overlapping elements. Returns the new count. */
size_t fwnft_ranges_reduce(struct fwnft_range *v, size_t n);

/* Append the start-up batch: `add table` + `delete table` (so the table is new whatever was left
 * behind) and the whole table with its sets and chains; in the forward placement table
 * moat_guard the same way, first. Returns 0 or MOAT_ENOMEM/MOAT_EINVAL. */
int fwnft_build_ruleset(const struct fwnft_setup *s, struct fwnft_buf *b);

/* The libnftables context. Create it after entering the target network namespace: libnftables
 * talks netlink in the namespace current at creation. */
struct fwnft;
struct fwnft *fwnft_open(void);
void fwnft_close(struct fwnft *n);

/* Run one batch of commands as one transaction. Returns 0, or MOAT_EIO with nft's error text in
 * err. */
int fwnft_run(struct fwnft *n, const char *cmds, char *err, size_t errlen);

/* Run one command and copy what nft printed into out (cut to cap). Returns as fwnft_run. */
int fwnft_query(struct fwnft *n, const char *cmd, char *out, size_t cap, char *err, size_t errlen);

/* The comment of table inet NAME into out ("" when it has none), read without the set
 * elements. 0, or MOAT_ENOENT when there is no such table. */
int fwnft_table_comment(struct fwnft *n, const char *name, char *out, size_t cap);

/* The text of the table comment for pid, and the pid read back from one (0 when the text is
 * not such a comment). */
#define FWNFT_COMMENT_FMT                                                                          \
	"moat-fw pid %lu keeps this table and undoes changes to it; stop it, then moat-fw "        \
	"--remove"
unsigned long fwnft_comment_pid(const char *comment);

#endif
