/* server_state.h: moat-fw's running state, shared by the parts of the daemon: server.c (start-up,
 * the loop's handles, stop), server_conn.c (the socket, its connections and their ACKs),
 * server_vet.c (the checks a grant must pass), server_batch.c (the end-of-turn batch),
 * server_restore.c (the ledger's rebuild at start-up and its purge), server_watch.c (changes
 * to the tables by others: ALERT and restore) and server_sandbox.c (runtime sandboxes).
 * Internal to moat-fw: only
 * those files include it; everyone else knows server.h. */
#ifndef MOAT_FW_SERVER_STATE_H
#define MOAT_FW_SERVER_STATE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "ledger.h"
#include "moat/dlist.h"
#include "moat/fwproto.h"
#include "nft.h"
#include "server.h"
#include "watch.h"

struct fwsrv;
struct fwdroplog;

struct fwsrv_conn {
	uv_poll_t poll;
	int fd;
	uid_t uid; /* the peer's, from SO_PEERCRED */
	struct fwsrv *srv;
	uint8_t *outq;     /* ACKs the socket could not take yet, FWPROTO_ACKLEN each */
	size_t outn;       /* bytes queued */
	struct dlist link; /* on srv->conns */
};

/* A grant waiting for the end of the turn. conn is NULL once its connection closed. */
struct fwsrv_pending {
	struct fwsrv_conn *conn;
	struct fwproto_grant g;
	uint16_t status;
	uint32_t lifetime;
};

/* One allow-set element of a batch, with what the ledger needs. */
struct fwsrv_elem {
	struct ledger_key key;
	uint64_t expiry;
	const char *agent;
};

struct fwsrv {
	const struct fwsrv_opts *o;
	uv_loop_t loop;
	uv_poll_t listen_poll;
	int listen_fd;
	uv_check_t check;
	uv_timer_t purge;
	uv_timer_t sync; /* makes the ledger durable once a second */
	uv_signal_t sigterm, sigint;
	struct addrguard *guard;
	struct fwnft_range *deny;
	size_t ndeny;
	struct fwnft_setup setup;
	struct fwnft *nft;   /* start-up ruleset (text) */
	struct fwnft_nl *nl; /* grants (netlink batches) */
	struct ledger *ledger;
	struct dlist conns; /* struct fwsrv_conn, by link */
	size_t nconns;
	size_t pending_elems; /* elements the pending grants will write, at most */
	struct fwsrv_pending *pending;
	size_t npending;
	struct fwsrv_elem *elems; /* scratch, FWSRV_ELEMS_MAX */
	struct fwnft_elem *nelems;
	struct fwnft_range *own; /* the host's own addresses (refused in grants) */
	size_t nown;
	struct fwnft_range *link6; /* netns: on-link IPv6 prefixes of the sandbox */
	size_t nlink6;
	struct fwnft_range *hostsrc; /* forward: the host's addresses inside sandbox ranges */
	size_t nhostsrc;
	struct fwwatch *watch; /* changes to our tables by others (server_watch.c) */
	uv_poll_t watch_poll;
	uv_timer_t watch_retry; /* a restore that failed is tried again */
	double alert_window;    /* when the current second of ALERT lines began (ms) */
	unsigned alerts;        /* ALERT lines in it */
	unsigned suppressed;    /* changes not given a line since the last one */
	/* Runtime sandboxes (server_sandbox.c): o points at opts, a copy of the options whose
	 * sandbox array is sbx, the --sandbox ranges (nsbx_start) followed by those added at
	 * runtime; allocated once for FWSRV_RUNTIME_MAX more, so it never moves. */
	struct fwsrv_opts opts;
	struct fwnft_range *sbx;
	size_t nsbx_start;
	struct fwdroplog *droplog; /* --drop-log (droplog.h); NULL: none */
};

/* Milliseconds on the monotonic clock, for the timings moat-fw logs. */
double fwsrv_ms(void);

#endif
