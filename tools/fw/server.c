/* server.c owns moat-fw's run: start-up in its required order (ranges, start checks, the grant
 * socket and the metrics socket in moatd's namespace, then the sandbox's namespace, nftables,
 * the watch on its tables, the ledger and the rebuild of table inet moat, then the privilege
 * drop and the system-call filter), the loop's handles (the socket, the table watch, the
 * end-of-turn batch, the timers, the signals) and the stop. What each handle does lives with its
 * part: server_conn.c (connections), server_batch.c (the batch), server_restore.c (rebuild and
 * purge), server_watch.c (changes by others), server_vet.c (the checks).
 *
 * The loop is libuv. Grants read during a turn wait in srv->pending; a uv_check_t (run right
 * after the poll phase) hands them to the batch all at once. */
#include "server.h"

#include "holder.h"
#include "droplog.h"
#include "hostnet.h"
#include "metrics.h"
#include "nft_batch.h"
#include "privs.h"
#include "server_batch.h"
#include "server_conn.h"
#include "server_restore.h"
#include "server_sandbox.h"
#include "server_state.h"
#include "server_watch.h"
#include "startck.h"
#include "moat/addrguard.h"
#include "moat/err.h"
#include "moat/sdnotify.h"
#include "moat/version.h"
#include "moat/zonesdir.h"

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

double fwsrv_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* --- the loop's callbacks ------------------------------------------------------------------ */

static void fwsrv_check_cb(uv_check_t *h)
{
	struct fwsrv *srv = h->data;
	if (srv->npending)
		fwsrv_flush(srv);
}

static void fwsrv_sync_cb(uv_timer_t *h)
{
	struct fwsrv *srv = h->data;
	if (ledger_sync(srv->ledger) < 0)
		fprintf(stderr, "moat-fw: ledger sync failed\n");
	fwmetrics_refresh(srv->nft, srv->ledger);
	if (srv->o->placement == FWNFT_FORWARD) {
		/* The host's addresses may change; a failed read keeps the last list. */
		struct fwnft_range *own = NULL;
		size_t nown = 0;
		if (fwhost_addrs(&own, &nown, NULL, NULL) == 0) {
			free(srv->own);
			srv->own = own;
			srv->nown = nown;
		} else {
			free(own);
		}
	}
}

static void fwsrv_purge_cb(uv_timer_t *h)
{
	fwsrv_purge(h->data);
}

static void fwsrv_signal_cb(uv_signal_t *h, int signum)
{
	struct fwsrv *srv = h->data;
	fprintf(
	    stderr,
	    "moat-fw: signal %d: stopping; table inet moat stays in place (no longer watched)\n",
	    signum);
	sdnotify_send("STOPPING=1");
	uv_stop(&srv->loop);
}

/* --- start-up ------------------------------------------------------------------------------ */

static int fwsrv_load_ranges(struct fwsrv *srv)
{
	char err[512];
	const struct fwsrv_opts *o = srv->o;
	char shipped[PATH_MAX];

	snprintf(shipped, sizeof(shipped), "%s/blocked-ranges.txt", zonesdir_default());

	srv->guard = addrguard_new();
	if (!srv->guard)
		return MOAT_ENOMEM;
	for (size_t i = 0; i <= o->nrange_files; i++) {
		const char *path = i == 0 ? shipped : o->range_files[i - 1];
		int rc = addrguard_load_file(srv->guard, path, err, sizeof(err));
		if (rc == 0)
			rc = fwnft_ranges_load(path, &srv->deny, &srv->ndeny, err, sizeof(err));
		if (rc < 0) {
			fprintf(stderr, "moat-fw: %s\n", err[0] ? err : moat_strerror(rc));
			return rc;
		}
	}
	srv->ndeny = fwnft_ranges_reduce(srv->deny, srv->ndeny);
	return 0;
}

/* The host's own addresses (refused in grants and in --sandbox ranges), then the refusals of
 * startck.c, then (netns placement) the packet-socket warning. */
static int fwsrv_start_checks(struct fwsrv *srv)
{
	const struct fwsrv_opts *o = srv->o;
	char err[512];
	struct fwnft_range *nets = NULL;
	size_t nnets = 0;
	if (fwhost_addrs_nets(&srv->own, &srv->nown, NULL, NULL, &nets, &nnets) < 0) {
		fprintf(stderr, "moat-fw: cannot read this host's addresses\n");
		free(nets);
		return MOAT_EIO;
	}
	int rc =
	    fwstart_check(srv->guard, srv->deny, srv->ndeny, o->resolver, o->nresolver, o->sandbox,
	                  o->nsandbox, srv->own, srv->nown, nets, nnets, err, sizeof(err));
	free(nets);
	if (rc < 0) {
		fprintf(stderr, "moat-fw: refusing to start: %s\n", err);
		return rc;
	}
	if (o->netns) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s%s", strchr(o->netns, '/') ? "" : "/run/netns/",
		         o->netns);
		fwstart_packet_warning(path);
	}
	return 0;
}

/* Netns placement: enter the sandbox's namespace and learn its on-link IPv6 prefixes (the only
 * unicast targets neighbour discovery may have). */
static int fwsrv_enter_sandbox(struct fwsrv *srv)
{
	int rc = fwhost_enter_netns(srv->o->netns);
	if (rc == 0 && fwhost_addrs(NULL, NULL, &srv->link6, &srv->nlink6) < 0) {
		fprintf(stderr, "moat-fw: cannot read the sandbox's addresses\n");
		rc = MOAT_EIO;
	}
	srv->setup.link6 = srv->link6;
	srv->setup.nlink6 = srv->nlink6;
	return rc;
}

/* The libnftables context (start-up ruleset) and the netlink socket (grants), both talking to
 * the namespace current now; a start refused when another moat-fw holds the table; then the
 * watch on the tables (it must know those two sockets as moat-fw's own). */
static int fwsrv_open_nft(struct fwsrv *srv)
{
	if (!(srv->nft = fwnft_open())) {
		fprintf(stderr, "moat-fw: cannot create the libnftables context\n");
		return MOAT_EIO;
	}
	if (!(srv->nl = fwnft_nl_open())) {
		fprintf(stderr, "moat-fw: cannot open a netlink socket to nf_tables\n");
		return MOAT_EIO;
	}
	/* Another moat-fw on the same table: each would undo the other's changes. */
	unsigned long pid;
	char comm[64];
	if (fwhold_check(srv->nft, &pid, comm, sizeof(comm)) == FWHOLD_HELD &&
	    pid != (unsigned long)getpid()) {
		fprintf(stderr,
		        "moat-fw: refusing to start: moat-fw pid %lu already holds table inet moat "
		        "in this network namespace; stop it first\n",
		        pid);
		return MOAT_EINVAL;
	}
	return fwsrv_watch_open(srv);
}

static void fwsrv_close_walk(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

/* The listening socket, the end-of-turn batch, the timers and the signals. */
static void fwsrv_handles_start(struct fwsrv *srv)
{
	fwsrv_accept_start(srv);
	fwsrv_watch_start(srv);
	uv_check_init(&srv->loop, &srv->check);
	srv->check.data = srv;
	uv_check_start(&srv->check, fwsrv_check_cb);
	uv_timer_init(&srv->loop, &srv->purge);
	srv->purge.data = srv;
	uv_timer_start(&srv->purge, fwsrv_purge_cb, FWSRV_PURGE_MS, FWSRV_PURGE_MS);
	uv_timer_init(&srv->loop, &srv->sync);
	srv->sync.data = srv;
	uv_timer_start(&srv->sync, fwsrv_sync_cb, 1000, 1000);
	uv_signal_init(&srv->loop, &srv->sigterm);
	srv->sigterm.data = srv;
	uv_signal_start(&srv->sigterm, fwsrv_signal_cb, SIGTERM);
	uv_signal_init(&srv->loop, &srv->sigint);
	srv->sigint.data = srv;
	uv_signal_start(&srv->sigint, fwsrv_signal_cb, SIGINT);
}

/* Everything up to the loop, in its required order. 0, or a negative code with the reason on
 * stderr. */
static int fwsrv_start(struct fwsrv *srv)
{
	const struct fwsrv_opts *o = srv->o;
	char err[512];
	int rc = fwsrv_load_ranges(srv);
	if (rc < 0 || (rc = fwsrv_start_checks(srv)) < 0)
		return rc;
	/* Before setns: an abstract notification socket belongs to this network namespace. */
	if (sdnotify_open() < 0)
		fprintf(stderr, "moat-fw: NOTIFY_SOCKET: cannot reach the service manager\n");
	srv->setup = (struct fwnft_setup){
	    .placement = o->placement,
	    .deny = srv->deny,
	    .ndeny = srv->ndeny,
	    .sandbox = o->sandbox,
	    .nsandbox = o->nsandbox,
	    .resolver = o->resolver,
	    .nresolver = o->nresolver,
	    .inbound = o->inbound,
	    .ninbound = o->ninbound,
	    .dhcp = o->dhcp,
	    .pid = (unsigned long)getpid(),
	    .log_group = o->drop_log ? o->log_group : 0,
	};
	/* The socket first, in the namespace moatd lives in; then the sandbox's namespace, where
	 * every netlink socket libnftables opens from now on will talk. */
	if ((rc = fwsrv_listen(srv)) < 0)
		return rc;
	if (o->metrics && (rc = fwmetrics_bind(o->metrics, err, sizeof(err))) < 0) {
		fprintf(stderr, "moat-fw: %s\n", err);
		return rc;
	}
	if ((o->netns && (rc = fwsrv_enter_sandbox(srv)) < 0) || (rc = fwsrv_open_nft(srv)) < 0)
		return rc;
	if ((rc = ledger_open(o->state_dir, &srv->ledger, err, sizeof(err))) < 0) {
		fprintf(stderr, "moat-fw: ledger: %s\n", err);
		return rc;
	}
	if ((rc = fwsrv_rebuild(srv, false)) < 0)
		return rc;
	/* The rules log to the group in this namespace; bound as root, before the drop. */
	if (o->drop_log &&
	    (rc = fwdroplog_start(&srv->loop, o->log_group, o->drop_log, &srv->ledger, &srv->setup,
	                          o->netns, &srv->droplog, err, sizeof(err))) < 0) {
		fprintf(stderr, "moat-fw: %s\n", err);
		return rc;
	}
	fwsrv_handles_start(srv);
	/* Set up: from here on only CAP_NET_ADMIN, and no network sockets. */
	if ((rc = fwprivs_drop_caps(o->run_uid, o->run_gid, err, sizeof(err))) < 0 ||
	    (rc = fwmetrics_serve(MOAT_VERSION_FULL, err, sizeof(err))) < 0 ||
	    (rc = fwprivs_filter(err, sizeof(err))) < 0) {
		fprintf(stderr, "moat-fw: %s\n", err);
		return rc;
	}
	fwmetrics_refresh(srv->nft, srv->ledger);
	return 0;
}

/* Close the handles and the connections, and free everything srv holds (and srv). */
static void fwsrv_free(struct fwsrv *srv, bool loop)
{
	if (loop) {
		fwsrv_conns_close(srv);
		uv_walk(&srv->loop, fwsrv_close_walk, NULL);
		uv_run(&srv->loop, UV_RUN_DEFAULT);
		uv_loop_close(&srv->loop);
	}
	if (srv->listen_fd >= 0) {
		close(srv->listen_fd);
		/* Only the path is removed; the rules stay (closed stays closed). */
		unlink(srv->o->socket_path);
	}
	fwmetrics_stop();
	fwdroplog_close(srv->droplog);
	sdnotify_close();
	ledger_close(srv->ledger);
	fwnft_close(srv->nft);
	fwnft_nl_close(srv->nl);
	fwwatch_close(srv->watch);
	addrguard_free(srv->guard);
	free(srv->deny);
	free(srv->own);
	free(srv->link6);
	free(srv->hostsrc);
	free(srv->pending);
	free(srv->elems);
	free(srv->nelems);
	fwsrv_sandbox_free(srv);
	free(srv);
}

int fwsrv_run(const struct fwsrv_opts *o)
{
	struct fwsrv *srv = calloc(1, sizeof(*srv));
	if (!srv)
		return 1;
	srv->o = o;
	srv->listen_fd = -1;
	if (fwsrv_sandbox_init(srv, o) < 0) {
		free(srv);
		return 1;
	}
	dlist_init(&srv->conns);
	signal(SIGPIPE, SIG_IGN);
	srv->pending = calloc(FWSRV_BATCH_MAX, sizeof(*srv->pending));
	srv->elems = calloc(FWSRV_ELEMS_MAX, sizeof(*srv->elems));
	srv->nelems = calloc(FWSRV_ELEMS_MAX, sizeof(*srv->nelems));
	if (!srv->pending || !srv->elems || !srv->nelems || uv_loop_init(&srv->loop) != 0) {
		fwsrv_free(srv, false);
		return 1;
	}
	if (fwsrv_start(srv) < 0) {
		fwsrv_free(srv, true);
		return 1;
	}
	fprintf(stderr, "moat-fw: listening on %s (lifetimes %u..%u s)\n", o->socket_path,
	        o->min_lifetime, o->max_lifetime);
	sdnotify_send("READY=1\nSTATUS=table inet moat in place; listening");

	uv_run(&srv->loop, UV_RUN_DEFAULT);
	/* Grants read in the last turn are answered before stopping: they were asked for. */
	if (srv->npending)
		fwsrv_flush(srv);
	fwsrv_free(srv, true);
	return 0;
}
