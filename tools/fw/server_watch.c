/* server_watch.c owns what moat-fw does when someone else changes its tables (watch.h says how
 * it sees that): one ALERT line naming the process and the weightiest change, the metrics, and
 * the rebuild (server_restore.c) of both tables from the current state and the ledger, at once.
 * A rebuild that fails is tried again every FWSRV_RETRY_MS. Rebuilding is what makes "never
 * fails open" hold while moat-fw runs: a deleted table, chain, rule or flushed set comes back
 * within one loop turn; in between the forward placement's guard keeps the sandbox interfaces
 * closed. */
#include "server_watch.h"

#include "metrics.h"
#include "server_restore.h"
#include "watch.h"
#include "moat/err.h"

#include <stdio.h>

#define FWSRV_RETRY_MS 200
#define FWSRV_ALERTS_PER_S 5

static void fwsrv_watch_cb(uv_poll_t *h, int status, int events);

int fwsrv_watch_open(struct fwsrv *srv)
{
	char err[256];
	if (!(srv->watch = fwwatch_open(err, sizeof(err)))) {
		fprintf(stderr, "moat-fw: cannot watch table inet moat: %s\n", err);
		return MOAT_EIO;
	}
	return 0;
}

void fwsrv_watch_start(struct fwsrv *srv)
{
	uv_poll_init(&srv->loop, &srv->watch_poll, fwwatch_fd(srv->watch));
	srv->watch_poll.data = srv;
	uv_poll_start(&srv->watch_poll, UV_READABLE, fwsrv_watch_cb);
	uv_timer_init(&srv->loop, &srv->watch_retry);
	srv->watch_retry.data = srv;
}

/* The ALERT line, unless FWSRV_ALERTS_PER_S were written this second already. */
static void fwsrv_alert(struct fwsrv *srv, const struct fwwatch_change *ch)
{
	double now = fwsrv_ms();
	if (now - srv->alert_window >= 1000) {
		srv->alert_window = now;
		srv->alerts = 0;
	}
	if (srv->alerts >= FWSRV_ALERTS_PER_S) {
		srv->suppressed++;
		return;
	}
	srv->alerts++;
	char more[96] = "";
	if (srv->suppressed)
		snprintf(more, sizeof(more), " (and %u more changes since the last line)",
		         srv->suppressed);
	srv->suppressed = 0;
	if (ch->n)
		fprintf(stderr,
		        "moat-fw: ALERT: table inet moat changed by another process (pid %u %s, "
		        "netlink port %u): %s (%u events)%s%s; restoring the tables from the "
		        "ledger\n",
		        (unsigned)ch->pid, ch->pid ? ch->comm : "unknown", (unsigned)ch->portid,
		        ch->what, ch->n, ch->lost ? "; events were lost too" : "", more);
	else
		fprintf(stderr,
		        "moat-fw: ALERT: nftables events were lost (socket buffer full)%s; "
		        "restoring the tables from the ledger to be sure\n",
		        more);
}

static void fwsrv_retry_cb(uv_timer_t *h)
{
	struct fwsrv *srv = h->data;
	bool ok = fwsrv_rebuild(srv, true) == 0;
	fwmetrics_table_restore(ok);
	if (!ok)
		uv_timer_start(&srv->watch_retry, fwsrv_retry_cb, FWSRV_RETRY_MS, 0);
}

bool fwsrv_watch_check(struct fwsrv *srv)
{
	struct fwwatch_change ch;
	int rc = fwwatch_read(srv->watch, &ch);
	if (rc < 0) {
		fprintf(stderr, "moat-fw: the table watch failed; restoring the tables\n");
		ch.lost = true;
	} else if (rc == 0) {
		return false;
	}
	fwmetrics_table_change();
	fwsrv_alert(srv, &ch);
	bool ok = fwsrv_rebuild(srv, true) == 0;
	fwmetrics_table_restore(ok);
	if (!ok)
		uv_timer_start(&srv->watch_retry, fwsrv_retry_cb, FWSRV_RETRY_MS, 0);
	return ok;
}

static void fwsrv_watch_cb(uv_poll_t *h, int status, int events)
{
	(void)status;
	(void)events;
	fwsrv_watch_check(h->data);
}
