/* moat-fw's daemon (server.c and its parts server_conn.c, server_vet.c, server_batch.c,
 * server_restore.c): the grant socket, the event loop, and the batch step that turns the grants
 * of one loop turn into one ledger transaction, one nft transaction and one ACK per grant.
 *
 * Trust: moat-fw does not trust moatd. Every granted address is re-checked against the
 * always-deny ranges (a grant naming one is refused whole, FWPROTO_DENIED, with an alert on
 * stderr), as is one naming an address of the host itself or, unless --allow-private (for all
 * or for the client's sandbox), a private or shared range; lifetimes are clamped to [min, max];
 * in the forward placement the client must lie in a --sandbox range of the same family as every
 * address. Only peers of the --moatd-user uid (SO_PEERCRED) may connect, at most
 * FWSRV_MAX_PER_UID of them per uid; each admitted peer gets a HELLO first. */
#ifndef MOAT_FW_SERVER_H
#define MOAT_FW_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "moat/fwproto.h"
#include "nft.h"

#define FWSRV_DEFAULT_STATE "/var/lib/moat-fw"
#define FWSRV_DEFAULT_MIN 30
#define FWSRV_DEFAULT_MAX 3600
#define FWSRV_LIFETIME_CAP 604800 /* a week: --max-lifetime may not exceed it */
/* Seconds added to every expiry beyond the granted lifetime: the client's TTL starts when moatd
 * sends the answer, a little after the element was written. Expiries are whole seconds counted
 * from the start of the current second, so the real margin is between 1 and 2 seconds. */
#define FWSRV_SLACK 2
#define FWSRV_PURGE_MS 60000
#define FWSRV_MAX_CONNS 64
#define FWSRV_MAX_PER_UID 32  /* one uid can never take every slot */
#define FWSRV_BATCH_MAX 1024  /* grants per loop turn; more wait for the next turn */
#define FWSRV_ELEMS_MAX 65536 /* allow-set elements per loop turn (a grant writes up to 1088) */

/* Options, as parsed by main.c. Arrays and strings are borrowed for the run's duration. */
struct fwsrv_opts {
	const char *socket_path;
	const char *netns; /* netns placement: a name under /run/netns, or a path */
	enum fwnft_placement placement;
	const struct fwnft_range *sandbox; /* forward placement */
	size_t nsandbox;
	const struct fwnft_resolver *resolver;
	size_t nresolver;
	const char *state_dir;
	const char *metrics;            /* --metrics ADDR:PORT, or NULL */
	const char *const *range_files; /* extra ranges files; the shipped one is always loaded */
	size_t nrange_files;
	uint32_t min_lifetime;
	uint32_t max_lifetime;
	const struct fwnft_port *inbound; /* --inbound */
	size_t ninbound;
	bool dhcp;
	bool allow_private;   /* --allow-private: private and shared ranges for every sandbox */
	uid_t moatd_uid;      /* the only uid that may connect */
	gid_t moatd_gid;      /* its primary group: the socket's unless --socket-group */
	gid_t socket_group;   /* (gid_t)-1: the socket keeps moat-fw's group */
	const char *drop_log; /* --drop-log FILE: drops and new connections as JSON (droplog.h) */
	uint16_t log_group;   /* --log-group: the rules' nfnetlink_log group */
	uid_t run_uid;        /* after set-up moat-fw runs as this user ... */
	gid_t run_gid;        /* ... and group (0/0: stays root, with only CAP_NET_ADMIN) */
};

/* Run until SIGTERM/SIGINT. Returns the process exit status: 0 after a signal, 1 when start-up
 * failed (the reason is on stderr). The nft table is left in place on exit. */
int fwsrv_run(const struct fwsrv_opts *o);

/* The lifetime a grant gets: asked clamped to [min, max]. */
uint32_t fwsrv_clamp(uint32_t asked, uint32_t min, uint32_t max);

#endif
