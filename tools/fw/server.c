/* server.c owns moat-fw's running state: the listening SOCK_SEQPACKET socket and its connections,
 * entering the sandbox's network namespace, the start-up rebuild of table inet moat from the
 * ledger, the per-turn grant batch, the periodic ledger purge and the signal-driven stop.
 *
 * The loop is libuv, but the sockets are plain fds watched with uv_poll_t: uv_pipe_t has no
 * SOCK_SEQPACKET, and message boundaries are the protocol's framing. Grants read during a turn
 * wait in srv->pending; a uv_check_t (run right after the poll phase) handles them all at once:
 * one LMDB write transaction and one nft transaction, whatever the number of grants, then one ACK
 * each. The ledger transaction commits only after nft succeeded, so the ledger never records a
 * grant the kernel refused. Each granted address becomes its allow-set elements (nft_batch.h):
 * one "every port" element, or one per (protocol, port) of the grant and one echo element. */
#include "server.h"

#include "hostnet.h"
#include "ledger.h"
#include "nft_batch.h"
#include "privs.h"
#include "startck.h"
#include "moat/addrguard.h"
#include "moat/err.h"
#include "moat/sdnotify.h"
#include "moat/zonesdir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#define FWSRV_READS_PER_EVENT 256 /* messages read per readiness event, for fairness */
#define FWSRV_OUTQ_MAX 4096       /* queued ACKs per connection before it is dropped */

struct fwsrv;

struct fwsrv_conn {
	uv_poll_t poll;
	int fd;
	uid_t uid; /* the peer's, from SO_PEERCRED */
	struct fwsrv *srv;
	uint8_t *outq; /* ACKs the socket could not take yet, FWPROTO_ACKLEN each */
	size_t outn;   /* bytes queued */
	struct fwsrv_conn *next;
	struct fwsrv_conn **pprev;
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
	struct fwsrv_conn *conns;
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
};

uint32_t fwsrv_clamp(uint32_t asked, uint32_t min, uint32_t max)
{
	if (asked < min)
		return min;
	return asked > max ? max : asked;
}

static double fwsrv_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static const char *fwsrv_addr_text(uint8_t family, const uint8_t *addr, char *out, size_t cap)
{
	return addrguard_format(addr, family == 4 ? 4 : 16, out, cap);
}

#define FWSRV_PURGE_GRACE 10 /* seconds a record outlives its expiry in the ledger */

/* Elements one grant writes: per address one "every port", or its ports and its echo. */
#define FWSRV_GRANT_ELEMS_MAX (FWPROTO_MAXADDR * (FWPROTO_MAXPORT + 1))
static size_t fwsrv_grant_elems(const struct fwproto_grant *g)
{
	return (size_t)g->naddr * (g->nport ? g->nport + 1u : 1u);
}

/* --- connections --------------------------------------------------------------------------- */

static void fwsrv_conn_closed(uv_handle_t *h)
{
	struct fwsrv_conn *c = h->data;
	free(c->outq);
	free(c);
}

static void fwsrv_conn_close(struct fwsrv_conn *c)
{
	struct fwsrv *srv = c->srv;
	/* Grants still waiting in this turn are handled, but nobody is left to hear the ACK. */
	for (size_t i = 0; i < srv->npending; i++)
		if (srv->pending[i].conn == c)
			srv->pending[i].conn = NULL;
	*c->pprev = c->next;
	if (c->next)
		c->next->pprev = c->pprev;
	srv->nconns--;
	uv_poll_stop(&c->poll);
	close(c->fd);
	uv_close((uv_handle_t *)&c->poll, fwsrv_conn_closed);
}

static void fwsrv_conn_cb(uv_poll_t *h, int status, int events);

static void fwsrv_conn_watch(struct fwsrv_conn *c)
{
	int ev = c->outn ? UV_READABLE | UV_WRITABLE : UV_READABLE;
	uv_poll_start(&c->poll, ev, fwsrv_conn_cb);
}

/* Send queued ACKs; 0, or -1 when the connection failed and was closed. */
static int fwsrv_conn_drain(struct fwsrv_conn *c)
{
	size_t off = 0;
	while (off < c->outn) {
		ssize_t n = send(c->fd, c->outq + off, FWPROTO_ACKLEN, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n != FWPROTO_ACKLEN) {
			fwsrv_conn_close(c);
			return -1;
		}
		off += FWPROTO_ACKLEN;
	}
	memmove(c->outq, c->outq + off, c->outn - off);
	c->outn -= off;
	fwsrv_conn_watch(c);
	return 0;
}

static void fwsrv_send_ack(struct fwsrv_conn *c, uint16_t status, uint32_t seq, uint32_t lifetime)
{
	struct fwproto_ack a = {.status = status, .seq = seq, .lifetime = lifetime};
	uint8_t buf[FWPROTO_ACKLEN];

	if (!c || fwproto_ack_encode(&a, buf, sizeof(buf)) != FWPROTO_ACKLEN)
		return;
	if (c->outn == 0) {
		ssize_t n = send(c->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n == FWPROTO_ACKLEN)
			return;
		if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
			fwsrv_conn_close(c);
			return;
		}
	}
	if (c->outn >= FWSRV_OUTQ_MAX * FWPROTO_ACKLEN) {
		fprintf(stderr, "moat-fw: peer does not read its ACKs; closing the connection\n");
		fwsrv_conn_close(c);
		return;
	}
	if (!c->outq) {
		c->outq = malloc(FWSRV_OUTQ_MAX * FWPROTO_ACKLEN);
		if (!c->outq) {
			fwsrv_conn_close(c);
			return;
		}
	}
	memcpy(c->outq + c->outn, buf, sizeof(buf));
	c->outn += sizeof(buf);
	fwsrv_conn_watch(c);
}

static void fwsrv_conn_read(struct fwsrv_conn *c)
{
	struct fwsrv *srv = c->srv;
	uint8_t buf[FWPROTO_MAXMSG + 1];

	/* A turn stops reading while one more grant of the largest kind might not fit. */
	for (int i = 0; i < FWSRV_READS_PER_EVENT && srv->npending < FWSRV_BATCH_MAX &&
	                srv->pending_elems + FWSRV_GRANT_ELEMS_MAX <= FWSRV_ELEMS_MAX;
	     i++) {
		/* MSG_TRUNC: the real length of an oversized message, so it is refused, not cut. */
		ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return;
		if (n <= 0) {
			fwsrv_conn_close(c);
			return;
		}
		struct fwsrv_pending *p = &srv->pending[srv->npending];
		if ((size_t)n > FWPROTO_MAXMSG ||
		    fwproto_grant_decode(buf, (size_t)n, &p->g) != 0) {
			uint32_t seq = n >= 8 ? ((uint32_t)buf[4] << 24 | (uint32_t)buf[5] << 16 |
			                         (uint32_t)buf[6] << 8 | buf[7])
			                      : 0;
			fprintf(stderr, "moat-fw: unreadable message (%zd bytes, seq %u) refused\n",
			        n, seq);
			fwsrv_send_ack(c, FWPROTO_BADMSG, seq, 0);
			if (uv_is_closing((uv_handle_t *)&c->poll))
				return;
			continue;
		}
		p->conn = c;
		p->status = FWPROTO_OK;
		p->lifetime = 0;
		srv->npending++;
		srv->pending_elems += fwsrv_grant_elems(&p->g);
	}
}

static void fwsrv_conn_cb(uv_poll_t *h, int status, int events)
{
	struct fwsrv_conn *c = h->data;
	if (status < 0) {
		fwsrv_conn_close(c);
		return;
	}
	if ((events & UV_WRITABLE) && c->outn && fwsrv_conn_drain(c) < 0)
		return;
	if (events & (UV_READABLE | UV_DISCONNECT))
		fwsrv_conn_read(c);
}

/* Only the --moatd-user uid may connect, and no uid may hold more than its share of the slots:
 * idle connections of anyone else cannot lock moatd out. */
static bool fwsrv_peer_ok(struct fwsrv *srv, int fd, uid_t *uid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || len != sizeof(cr)) {
		fprintf(stderr, "moat-fw: SO_PEERCRED failed: %s; connection refused\n",
		        strerror(errno));
		return false;
	}
	*uid = cr.uid;
	if (cr.uid != srv->o->moatd_uid) {
		fprintf(stderr,
		        "moat-fw: connection from uid %u (pid %d) refused: only uid %u "
		        "(--moatd-user) may grant\n",
		        (unsigned)cr.uid, (int)cr.pid, (unsigned)srv->o->moatd_uid);
		return false;
	}
	size_t same = 0;
	for (struct fwsrv_conn *c = srv->conns; c; c = c->next)
		same += c->uid == cr.uid;
	if (srv->nconns >= FWSRV_MAX_CONNS || same >= FWSRV_MAX_PER_UID) {
		fprintf(stderr,
		        "moat-fw: uid %u already has %zu of %d connections; refusing another\n",
		        (unsigned)cr.uid, same, FWSRV_MAX_PER_UID);
		return false;
	}
	return true;
}

static void fwsrv_accept_cb(uv_poll_t *h, int status, int events)
{
	struct fwsrv *srv = h->data;
	(void)events;
	if (status < 0)
		return;
	for (;;) {
		int fd = accept4(srv->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return; /* EAGAIN, or a transient error: the next readiness event retries */
		uid_t uid;
		if (!fwsrv_peer_ok(srv, fd, &uid)) {
			close(fd);
			continue;
		}
		struct fwsrv_conn *c = calloc(1, sizeof(*c));
		if (!c || uv_poll_init(&srv->loop, &c->poll, fd) != 0) {
			free(c);
			close(fd);
			continue;
		}
		c->fd = fd;
		c->uid = uid;
		c->srv = srv;
		c->poll.data = c;
		c->next = srv->conns;
		if (c->next)
			c->next->pprev = &c->next;
		c->pprev = &srv->conns;
		srv->conns = c;
		srv->nconns++;
		fwsrv_conn_watch(c);
	}
}

/* --- the batch ----------------------------------------------------------------------------- */

static int fwsrv_key_cmp(const void *a, const void *b)
{
	const struct fwsrv_elem *x = a, *y = b;
	return memcmp(&x->key, &y->key, sizeof(x->key));
}

/* The sandbox source an element for an address of this family binds to: the client itself when
 * it speaks that family; otherwise the one --sandbox host route of that family (a dual-stack
 * sandbox asks for AAAA over IPv4 all the time, and its IPv6 source is only known from the
 * configuration). False when there is no such single address. */
static bool fwsrv_source(const struct fwsrv_opts *o, const struct fwproto_addr *client,
                         uint8_t family, uint8_t *src)
{
	if (client->family == family) {
		memcpy(src, client->addr, 16);
		return true;
	}
	const struct fwnft_range *found = NULL;
	for (size_t i = 0; i < o->nsandbox; i++) {
		const struct fwnft_range *r = &o->sandbox[i];
		if (r->family != family)
			continue;
		if (found || r->bits != (family == 4 ? 32 : 128))
			return false; /* several or a range: which sandbox asked is unknown */
		found = r;
	}
	if (!found)
		return false;
	memset(src, 0, 16);
	memcpy(src, found->addr, family == 4 ? 4 : 16);
	return true;
}

/* --allow-private for all, or for the sandbox range the client lies in. */
static bool fwsrv_private_ok(const struct fwsrv_opts *o, const struct fwproto_addr *client)
{
	if (o->allow_private)
		return true;
	for (size_t i = 0; i < o->nsandbox; i++)
		if (o->sandbox[i].allow_private && client->family &&
		    fwnft_range_contains(&o->sandbox[i], client->family, client->addr))
			return true;
	return false;
}

static bool fwsrv_is_own(const struct fwsrv *srv, const struct fwproto_addr *a)
{
	for (size_t i = 0; i < srv->nown; i++)
		if (fwnft_range_contains(&srv->own[i], a->family, a->addr))
			return true;
	return false;
}

/* Check one grant; sets p->status and p->lifetime. */
static void fwsrv_vet(struct fwsrv *srv, struct fwsrv_pending *p)
{
	const struct fwsrv_opts *o = srv->o;
	const struct fwproto_grant *g = &p->g;
	char t[64], ct[64];

	p->lifetime = fwsrv_clamp(g->lifetime, o->min_lifetime, o->max_lifetime);
	bool priv_ok = fwsrv_private_ok(o, &g->client);
	for (size_t i = 0; i < g->naddr; i++) {
		const struct fwproto_addr *a = &g->addr[i];
		enum addr_class cls = addrguard_check(srv->guard, a->addr, a->family == 4 ? 4 : 16);
		const char *why = cls == ADDR_ALWAYS                ? "always-denied"
		                  : cls == ADDR_PRIVATE && !priv_ok ? "private (no --allow-private)"
		                  : fwsrv_is_own(srv, a)            ? "this host's own"
		                                                    : NULL;
		if (why) {
			fprintf(stderr,
			        "moat-fw: ALERT: grant seq %u for agent %s asks for %s address %s; "
			        "whole grant refused\n",
			        g->seq, g->agent, why,
			        fwsrv_addr_text(a->family, a->addr, t, sizeof(t)));
			p->status = FWPROTO_DENIED;
			p->lifetime = 0;
			return;
		}
	}
	if (o->placement != FWNFT_FORWARD)
		return;
	/* The element binds the client to the address, so the client must be a sandbox and
	 * speak the addresses' family (an IPv4 client's IPv6 source is unknown here). */
	bool inside = false;
	for (size_t i = 0; i < o->nsandbox && !inside; i++)
		inside = g->client.family != 0 &&
		         fwnft_range_contains(&o->sandbox[i], g->client.family, g->client.addr);
	for (size_t i = 0; i < g->naddr && inside; i++) {
		uint8_t src[16];
		if (!fwsrv_source(o, &g->client, g->addr[i].family, src)) {
			fprintf(
			    stderr,
			    "moat-fw: grant seq %u: address %s is not of client %s's family and "
			    "no single --sandbox address of that family is configured\n",
			    g->seq,
			    fwsrv_addr_text(g->addr[i].family, g->addr[i].addr, t, sizeof(t)),
			    fwsrv_addr_text(g->client.family, g->client.addr, ct, sizeof(ct)));
			p->status = FWPROTO_FAILED;
			return;
		}
	}
	if (!inside) {
		fprintf(stderr, "moat-fw: grant seq %u: client %s is not in a --sandbox range\n",
		        g->seq,
		        g->client.family
		            ? fwsrv_addr_text(g->client.family, g->client.addr, ct, sizeof(ct))
		            : "(unknown)");
		p->status = FWPROTO_FAILED;
	}
}

/* Write the batch's unique elements to the ledger and the kernel. 0, or a negative code with a
 * line on stderr (the ledger transaction is then dropped). */
static int fwsrv_commit(struct fwsrv *srv, size_t ne, uint64_t now, double *nft_ms,
                        double *ledger_ms)
{
	char err[512];
	struct fwnft_batch b = {0};
	double t0 = fwsrv_ms();
	int rc = ledger_batch_begin(srv->ledger);

	for (size_t i = 0; i < ne && rc == 0; i++) {
		struct fwsrv_elem *e = &srv->elems[i];
		struct fwnft_elem *n = &srv->nelems[i];
		uint64_t prev = 0;
		rc = ledger_batch_put(srv->ledger, &e->key, e->expiry, e->agent, &prev);
		n->family = e->key.family;
		n->proto = e->key.proto;
		n->port = e->key.port;
		memcpy(n->src, e->key.src, 16);
		memcpy(n->dst, e->key.dst, 16);
		/* Refresh only when the ledger knew the element and the new expiry is later;
		 * otherwise a plain add: with the ledger's remaining time it is a no-op if the
		 * element is there and a repair if it is not. An element the ledger never held is
		 * not in the set either (the kernel's copy never outlives the ledger's): a fresh
		 * grant is one add, not add + delete + add. */
		n->refresh = prev != 0 && e->expiry > prev;
		n->timeout = (e->expiry > prev ? e->expiry : prev) - now;
	}
	if (rc < 0) {
		fprintf(stderr, "moat-fw: ledger write failed: %s\n", moat_strerror(rc));
		ledger_batch_abort(srv->ledger);
		return rc;
	}
	*ledger_ms = fwsrv_ms() - t0;
	double t1 = fwsrv_ms();
	rc = fwnft_batch_elems(&srv->setup, srv->nelems, ne, &b);
	if (rc == 0)
		rc = fwnft_nl_send(srv->nl, &b, err, sizeof(err));
	*nft_ms = fwsrv_ms() - t1;
	fwnft_batch_free(&b);
	if (rc < 0) {
		fprintf(stderr, "moat-fw: nft refused the batch: %s\n",
		        rc == MOAT_EIO ? err : moat_strerror(rc));
		ledger_batch_abort(srv->ledger);
		return rc;
	}
	t1 = fwsrv_ms();
	rc = ledger_batch_commit(srv->ledger);
	*ledger_ms += fwsrv_ms() - t1;
	if (rc < 0)
		fprintf(stderr, "moat-fw: ledger commit failed; the grants are refused\n");
	return rc;
}

/* The elements of one granted address into out[] (fwsrv_grant_elems bounds their number):
 * "every port", or its ports then its echo. Returns how many. */
static size_t fwsrv_addr_elems(struct fwsrv *srv, const struct fwsrv_pending *p,
                               const struct fwproto_addr *a, uint64_t now, struct fwsrv_elem *out)
{
	size_t n = 0, nport = p->g.nport;
	for (size_t k = 0; k < (nport ? nport + 1 : 1); k++) {
		struct fwsrv_elem *e = &out[n++];
		memset(&e->key, 0, sizeof(e->key));
		e->key.family = a->family;
		memcpy(e->key.dst, a->addr, 16);
		if (srv->o->placement == FWNFT_FORWARD)
			fwsrv_source(srv->o, &p->g.client, a->family, e->key.src);
		bool echo = nport && k == nport;
		e->key.proto = echo    ? FWNFT_PROTO_ECHO
		               : nport ? p->g.port[k].proto
		                       : FWNFT_PROTO_ANY;
		e->key.port = echo || !nport ? 0 : p->g.port[k].port;
		e->expiry = now + p->lifetime + FWSRV_SLACK;
		e->agent = p->g.agent;
	}
	return n;
}

static void fwsrv_flush(struct fwsrv *srv)
{
	size_t n = srv->npending, ne = 0, ok = 0, denied = 0, failed = 0;
	double t0 = fwsrv_ms(), nft_ms = 0, ledger_ms = 0;
	uint64_t now = (uint64_t)time(NULL);

	for (size_t i = 0; i < n; i++) {
		struct fwsrv_pending *p = &srv->pending[i];
		fwsrv_vet(srv, p);
		if (p->status != FWPROTO_OK)
			continue;
		for (size_t j = 0; j < p->g.naddr; j++)
			ne += fwsrv_addr_elems(srv, p, &p->g.addr[j], now, &srv->elems[ne]);
	}
	srv->pending_elems = 0;
	/* One element per key: the set command must not name an element twice. */
	qsort(srv->elems, ne, sizeof(*srv->elems), fwsrv_key_cmp);
	size_t u = 0;
	for (size_t i = 0; i < ne; i++) {
		if (u && fwsrv_key_cmp(&srv->elems[u - 1], &srv->elems[i]) == 0) {
			if (srv->elems[i].expiry > srv->elems[u - 1].expiry)
				srv->elems[u - 1] = srv->elems[i];
			continue;
		}
		srv->elems[u++] = srv->elems[i];
	}
	int rc = u ? fwsrv_commit(srv, u, now, &nft_ms, &ledger_ms) : 0;

	for (size_t i = 0; i < n; i++) {
		struct fwsrv_pending *p = &srv->pending[i];
		if (p->status == FWPROTO_OK && rc < 0) {
			p->status = FWPROTO_FAILED;
			p->lifetime = 0;
		}
		if (p->status == FWPROTO_OK)
			ok++;
		else if (p->status == FWPROTO_DENIED)
			denied++;
		else
			failed++;
		/* fwsrv_send_ack may close the connection, which clears later entries' conn. */
		fwsrv_send_ack(p->conn, p->status, p->g.seq,
		               p->status == FWPROTO_OK ? p->lifetime : 0);
	}
	srv->npending = 0;
	fprintf(stderr,
	        "moat-fw: batch grants=%zu ok=%zu denied=%zu failed=%zu addresses=%zu "
	        "nft_ms=%.3f ledger_ms=%.3f total_ms=%.3f\n",
	        n, ok, denied, failed, u, nft_ms, ledger_ms, fwsrv_ms() - t0);
}

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
	struct fwsrv *srv = h->data;
	/* Records stay a little past their expiry: a grant that comes back to such an address
	 * refreshes the element (delete + add) instead of a plain add, in case the kernel has not
	 * collected the expired element yet (a plain add would then leave it expired). */
	int rc = ledger_purge(srv->ledger, (uint64_t)time(NULL) - FWSRV_PURGE_GRACE);
	if (rc < 0)
		fprintf(stderr, "moat-fw: ledger purge failed: %s\n", moat_strerror(rc));
	else if (rc > 0)
		fprintf(stderr, "moat-fw: purged %d expired grants from the ledger\n", rc);
}

static void fwsrv_signal_cb(uv_signal_t *h, int signum)
{
	struct fwsrv *srv = h->data;
	fprintf(stderr, "moat-fw: signal %d: stopping; table inet moat stays in place\n", signum);
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
	if (fwhost_addrs(&srv->own, &srv->nown, NULL, NULL) < 0) {
		fprintf(stderr, "moat-fw: cannot read this host's addresses\n");
		return MOAT_EIO;
	}
	int rc = fwstart_check(srv->guard, srv->deny, srv->ndeny, o->resolver, o->nresolver,
	                       o->sandbox, o->nsandbox, srv->own, srv->nown, err, sizeof(err));
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

/* Create, bind and listen on the socket, replacing a stale socket file (never another kind). */
static int fwsrv_listen(struct fwsrv *srv)
{
	const char *path = srv->o->socket_path;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "moat-fw: socket path too long: %s\n", path);
		return MOAT_EINVAL;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode)) {
			fprintf(stderr, "moat-fw: %s exists and is not a socket\n", path);
			return MOAT_EIO;
		}
		unlink(path);
	}
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fprintf(stderr, "moat-fw: socket: %s\n", strerror(errno));
		return MOAT_EIO;
	}
	/* Created without group/other access, then opened to the group: no window where a
	 * stranger could connect. */
	mode_t old = umask(0177);
	int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	/* The unit's Group= may have made it so already (and forbid chown). */
	if (rc == 0 && srv->o->socket_group != (gid_t)-1 &&
	    (lstat(path, &st) != 0 || st.st_gid != srv->o->socket_group))
		rc = chown(path, (uid_t)-1, srv->o->socket_group);
	if (rc != 0 || chmod(path, 0660) != 0 || listen(fd, 64) != 0) {
		fprintf(stderr, "moat-fw: %s: %s\n", path, strerror(errno));
		close(fd);
		return MOAT_EIO;
	}
	srv->listen_fd = fd;
	return 0;
}

struct fwsrv_restore {
	struct fwsrv *srv;
	struct fwnft_elem *v;
	size_t n, cap;
	size_t skipped;
};

static int fwsrv_restore_cb(const struct ledger_entry *e, void *ctx)
{
	struct fwsrv_restore *r = ctx;
	const struct fwsrv_opts *o = r->srv->o;
	static const uint8_t zero[16];
	struct fwproto_addr src = {.family = e->key.family}, dst = {.family = e->key.family};
	memcpy(src.addr, e->key.src, 16);
	memcpy(dst.addr, e->key.dst, 16);
	enum addr_class cls =
	    addrguard_check(r->srv->guard, e->key.dst, e->key.family == 4 ? 4 : 16);
	/* A grant the options of this run would refuse stays out too (a private address after
	 * --allow-private was dropped, an address the host has taken since). */
	bool ok = cls != ADDR_ALWAYS && (cls != ADDR_PRIVATE || fwsrv_private_ok(o, &src)) &&
	          !fwsrv_is_own(r->srv, &dst);

	/* Records written under another placement or before a ranges file grew stay out. */
	if (o->placement == FWNFT_NETNS) {
		ok = ok && memcmp(e->key.src, zero, 16) == 0;
	} else {
		bool inside = false;
		for (size_t i = 0; i < o->nsandbox && !inside; i++)
			inside = fwnft_range_contains(&o->sandbox[i], e->key.family, e->key.src);
		ok = ok && inside;
	}
	if (!ok) {
		r->skipped++;
		return 0;
	}
	if (r->n == r->cap) {
		size_t ncap = r->cap ? r->cap * 2 : 256;
		struct fwnft_elem *nv = realloc(r->v, ncap * sizeof(*nv));
		if (!nv)
			return MOAT_ENOMEM;
		r->v = nv;
		r->cap = ncap;
	}
	struct fwnft_elem *n = &r->v[r->n++];
	n->family = e->key.family;
	n->proto = e->key.proto;
	n->port = e->key.port;
	memcpy(n->src, e->key.src, 16);
	memcpy(n->dst, e->key.dst, 16);
	n->timeout = e->remaining;
	n->refresh = false; /* the table is new: a plain add */
	return 0;
}

/* Put the restored elements back, a slice of transactions at a time. */
static int fwsrv_restore_elems(struct fwsrv *srv, const struct fwnft_elem *v, size_t n)
{
	char err[512];
	int rc = 0;
	for (size_t lo = 0; lo < n && rc == 0; lo += 32 * FWNFT_TXN_ELEMS) {
		struct fwnft_batch b = {0};
		size_t k = n - lo < 32 * FWNFT_TXN_ELEMS ? n - lo : 32 * FWNFT_TXN_ELEMS;
		rc = fwnft_batch_elems(&srv->setup, v + lo, k, &b);
		if (rc == 0 && (rc = fwnft_nl_send(srv->nl, &b, err, sizeof(err))) < 0)
			fprintf(stderr, "moat-fw: restoring grants: %s\n", err);
		fwnft_batch_free(&b);
	}
	return rc;
}

/* Replace table inet moat (one nft transaction), then put back every live ledger grant. Until
 * the grants are back the sets are empty: closed, never open. */
static int fwsrv_rebuild(struct fwsrv *srv)
{
	char err[1024];
	struct fwsrv_restore r = {.srv = srv};
	struct fwnft_buf b = {0};
	double t0 = fwsrv_ms();
	int purged = ledger_purge(srv->ledger, (uint64_t)time(NULL));
	int rc = ledger_iterate(srv->ledger, (uint64_t)time(NULL), fwsrv_restore_cb, &r);

	if (rc >= 0)
		rc = fwnft_build_ruleset(&srv->setup, &b);
	if (rc >= 0) {
		rc = fwnft_run(srv->nft, b.p, err, sizeof(err));
		if (rc < 0)
			fprintf(stderr, "moat-fw: nft: %s\n", err);
		if (rc >= 0)
			rc = fwsrv_restore_elems(srv, r.v, r.n);
	} else {
		fprintf(stderr, "moat-fw: reading the ledger failed: %s\n", moat_strerror(rc));
	}
	if (rc >= 0)
		fprintf(stderr,
		        "moat-fw: table inet moat created (%s placement, %zu deny ranges); "
		        "%zu grants restored, %zu skipped, %d expired purged; %.3f ms\n",
		        srv->o->placement == FWNFT_NETNS ? "netns" : "forward", srv->ndeny, r.n,
		        r.skipped, purged > 0 ? purged : 0, fwsrv_ms() - t0);
	free(r.v);
	fwnft_buf_free(&b);
	return rc < 0 ? rc : 0;
}

/* The libnftables context (start-up ruleset) and the netlink socket (grants), both talking to
 * the namespace current now. */
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
	return 0;
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
	uv_poll_init(&srv->loop, &srv->listen_poll, srv->listen_fd);
	srv->listen_poll.data = srv;
	uv_poll_start(&srv->listen_poll, UV_READABLE, fwsrv_accept_cb);
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

int fwsrv_run(const struct fwsrv_opts *o)
{
	struct fwsrv *srv = calloc(1, sizeof(*srv));
	char err[512];
	int status = 1;

	if (!srv)
		return 1;
	srv->o = o;
	srv->listen_fd = -1;
	signal(SIGPIPE, SIG_IGN);
	srv->pending = calloc(FWSRV_BATCH_MAX, sizeof(*srv->pending));
	srv->elems = calloc(FWSRV_ELEMS_MAX, sizeof(*srv->elems));
	srv->nelems = calloc(FWSRV_ELEMS_MAX, sizeof(*srv->nelems));
	if (!srv->pending || !srv->elems || !srv->nelems || uv_loop_init(&srv->loop) != 0)
		goto out_free;
	if (fwsrv_load_ranges(srv) < 0 || fwsrv_start_checks(srv) < 0)
		goto out;
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
	};
	/* The socket first, in the namespace moatd lives in; then the sandbox's namespace, where
	 * every netlink socket libnftables opens from now on will talk. */
	if (fwsrv_listen(srv) < 0)
		goto out;
	if (o->netns && fwsrv_enter_sandbox(srv) < 0)
		goto out;
	if (fwsrv_open_nft(srv) < 0)
		goto out;
	if (ledger_open(o->state_dir, &srv->ledger, err, sizeof(err)) < 0) {
		fprintf(stderr, "moat-fw: ledger: %s\n", err);
		goto out;
	}
	if (fwsrv_rebuild(srv) < 0)
		goto out;
	fwsrv_handles_start(srv);
	{
		/* Set up: from here on only CAP_NET_ADMIN, and no network sockets. */
		char perr[256];
		if (fwprivs_drop(o->run_uid, o->run_gid, perr, sizeof(perr)) < 0) {
			fprintf(stderr, "moat-fw: %s\n", perr);
			goto out;
		}
	}
	fprintf(stderr, "moat-fw: listening on %s (lifetimes %u..%u s)\n", o->socket_path,
	        o->min_lifetime, o->max_lifetime);
	sdnotify_send("READY=1\nSTATUS=table inet moat in place; listening");

	uv_run(&srv->loop, UV_RUN_DEFAULT);
	/* Grants read in the last turn are answered before stopping: they were asked for. */
	if (srv->npending)
		fwsrv_flush(srv);
	status = 0;
out:
	while (srv->conns)
		fwsrv_conn_close(srv->conns);
	uv_walk(&srv->loop, fwsrv_close_walk, NULL);
	uv_run(&srv->loop, UV_RUN_DEFAULT);
	uv_loop_close(&srv->loop);
	if (srv->listen_fd >= 0) {
		close(srv->listen_fd);
		/* Only the path is removed; the rules stay (closed stays closed). */
		unlink(o->socket_path);
	}
	sdnotify_close();
	ledger_close(srv->ledger);
	fwnft_close(srv->nft);
	fwnft_nl_close(srv->nl);
	addrguard_free(srv->guard);
	free(srv->deny);
	free(srv->own);
	free(srv->link6);
out_free:
	free(srv->pending);
	free(srv->elems);
	free(srv->nelems);
	free(srv);
	return status;
}
