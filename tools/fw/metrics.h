/* moat-fw's Prometheus endpoint (--metrics ADDR:PORT, off by default): grants by outcome, the
 * elements of each set in table inet moat, the packets and bytes of every `counter drop` rule
 * (labelled by chain and by the rule's match, its reason), the ledger's size and build info.
 *
 * Order: the TCP socket is bound before the namespace change, so it lives in the namespace
 * moat-fw starts in. libmicrohttpd's internal thread is started after the privileges are
 * dropped and before the system-call filter (loaded for every thread), so it holds no
 * capability and runs under the same filter: it then needs only accept4, recv, send, epoll and
 * close. The loop thread, in the sandbox's namespace, reads the table and the ledger once a
 * second (fwmetrics_refresh); a scrape serves that snapshot and the grant counters (atomics). */
#ifndef MOAT_FW_METRICS_H
#define MOAT_FW_METRICS_H

#include <stddef.h>

struct fwnft;
struct ledger;

/* Bind and listen on addrport (ADDR:PORT, IPv4 or [IPv6]:PORT). 0, MOAT_EINVAL or MOAT_EIO
 * (err says why). */
int fwmetrics_bind(const char *addrport, char *err, size_t errlen);
/* Start serving the bound socket (no-op without one). 0 or MOAT_EIO. */
int fwmetrics_serve(const char *version, char *err, size_t errlen);
/* Stop serving and close the socket. */
void fwmetrics_stop(void);

/* Count one batch's grants by outcome (no-op when the endpoint is off). */
void fwmetrics_grants(size_t received, size_t ok, size_t denied, size_t failed);

/* Count a change of the tables by someone else, and a restore of them (ok or failed). */
void fwmetrics_table_change(void);
void fwmetrics_table_restore(int ok);

/* More metrics text for every scrape (the drop log's counters, droplog.c), replacing the last
 * (copied; no-op when off). Loop thread. */
void fwmetrics_extra(const char *text);

/* Re-read the table and the ledger into the snapshot a scrape serves (no-op when off). */
void fwmetrics_refresh(struct fwnft *nft, struct ledger *l);

/* Pure, for tests: render `nft list table inet moat` text as set-element and drop-counter
 * metrics into out. Returns the length or MOAT_ESPACE. */
int fwmetrics_render_table(const char *table, char *out, size_t cap);

#endif
