/* watch.h: moat-fw's view of changes to its tables (table inet moat and table inet moat_guard)
 * made by anyone else, from the kernel's nftables events (NFNLGRP_NFTABLES).
 *
 * Every event names the netlink port id of the socket whose transaction made it. moat-fw's own
 * writes go through its other NETLINK_NETFILTER sockets (the libnftables context and the grant
 * socket); a socket filter on the watch socket drops their events in the kernel, so a stream of
 * grants costs nothing here, and what arrives is someone else's. A port id cannot be forged: the
 * kernel sets it from the sending socket. Each transaction ends with a NEWGEN event that names
 * the process (pid, command), which the ALERT line repeats. Events lost to a full socket buffer
 * count as a change (what was lost is unknown).
 *
 * Parsing is a pure function over the messages (fwwatch_parse), unit-tested without a kernel. */
#ifndef MOAT_FW_WATCH_H
#define MOAT_FW_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FWWATCH_OWN_MAX 16 /* port ids of this process's own sockets */

/* What one read saw of the changes to our tables by others. Zero-initialise. */
struct fwwatch_change {
	unsigned n;      /* events about our tables from other sockets */
	char what[160];  /* the weightiest of them ("table inet moat deleted", ...) */
	int rank;        /* how weighty `what` is (table > chain > set > rule > elements) */
	bool want_gen;   /* a change was seen and its NEWGEN not yet */
	uint32_t pid;    /* from that NEWGEN: the process (0: unknown) */
	char comm[32];   /* and its command name */
	uint32_t portid; /* the socket of the first change */
	bool lost;       /* the kernel dropped events (socket buffer full) */
};

/* Fold the netlink messages in buf[0..len) into ch. Events from a port id for which own(ctx,
 * portid) is true, and from the kernel (port id 0), are not changes; nor are events about other
 * tables. Pure but for what own does. */
void fwwatch_parse(const void *buf, size_t len, bool (*own)(void *ctx, uint32_t portid), void *ctx,
                   struct fwwatch_change *ch);

struct fwwatch;

/* Subscribe to nftables events in the network namespace current now, non-blocking, and filter
 * out this process's other NETLINK_NETFILTER sockets (open those first). NULL with err set. */
struct fwwatch *fwwatch_open(char *err, size_t errlen);
void fwwatch_close(struct fwwatch *w);
int fwwatch_fd(const struct fwwatch *w);

/* Read every queued event into ch (zeroed first). When a change was seen without its NEWGEN
 * yet, waits up to 20 ms for it (the kernel queues it right after). A change from a port id
 * that turns out to be one of this process's sockets (libnftables may have reopened its
 * socket) is not one: the own list and the filter are renewed. Returns 1 when ch holds a change
 * (or lost events), 0 when not, MOAT_EIO when the socket failed. */
int fwwatch_read(struct fwwatch *w, struct fwwatch_change *ch);

#endif
