/* upstream.c talks to the upstream resolvers. Each attempt builds moatd's own query with a fresh
 * random ID and sends it over UDP from a pooled socket (below) connected to the upstream, so the
 * kernel drops datagrams from anyone else and reports ICMP errors at once. An answer is accepted
 * only if its ID and question match (wire_resp_parse); anything else is counted and ignored, and
 * the attempt keeps waiting. TC=1 answers are retried over TCP to the same upstream, on a
 * connection of their own. A timeout or error moves to the next upstream; after the configured
 * number of attempts the caller gets MOAT_EIO.
 *
 * The UDP socket pool. A fresh socket per attempt cost socket+bind+connect+epoll_ctl+close, the
 * largest share of a forwarded query (~40 µs in all, measured). Instead each upstream has a few
 * open sockets, each bound to its own random source port: a socket carries at most SOCK_INFLIGHT
 * queries at once and SOCK_USES in its life (never reusing an ID), and takes no new query after
 * SOCK_MAX_AGE_MS; then it is retired and closed once its last query is done. An off-path
 * spoofer still has to guess the source port (one of ~64k, changing every SOCK_USES queries)
 * and an ID that is outstanding on it (at most SOCK_INFLIGHT of 65536), and the question; the
 * pool also lets one recvmmsg read many answers per wake-up.
 *
 * Each request carries its upstream set (the global upstreams or a forward zone's, chosen in
 * query.c): its addresses are copied into the request, and pooled sockets are matched by the
 * address they are connected to, so a policy reload that drops a zone leaves nothing dangling. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "moat/bytes.h"
#include "moat/err.h"
#include "moat/rng.h"
#include "moat/spare.h"
#include "serve/dnstap_out.h"
#include "moat/metrics.h"
#include "serve/upstream.h"
#include "serve/worker.h"

#define SOCK_USES 128        /* queries one UDP socket carries in its life */
#define SOCK_INFLIGHT 16     /* of them at most this many at once */
#define SOCK_MAX_AGE_MS 2000 /* and it takes no new query after this */
#define ID_TABLE 256         /* slots of a socket's ID table: a power of two, >= 2 x SOCK_USES */
#define RX_BATCH 32          /* datagrams per recvmmsg */
#define RX_SLOT 4096         /* larger than any answer to our EDNS size (1232) */
#define QUERY_MAX (NAME_MAXWIRE + 64)

struct up_sock {
	struct dlist link; /* the pool's open or retired list */
	struct worker *srv;
	uv_poll_t poll;
	int fd;
	struct sockaddr_storage to; /* the upstream it is connected to */
	uint64_t born_ms;
	bool retired, closing;
	uint16_t nused, inflight;
	uint16_t ids[SOCK_USES];
	struct upstream_req *reqs[SOCK_USES]; /* NULL once that query is done */
	/* The IDs used on s by value: slot + 1 at the first free place from id's low bits on (0:
	 * free). IDs are never removed in a socket's life, so it is at most half full and a look-up
	 * reads one or two places, where a scan of ids read nused/2 (~700 instructions a forwarded
	 * query for the freshness check and the answer's match together). */
	uint8_t by_id[ID_TABLE];
	/* Queries built this loop turn, sent together by one sendmmsg (upstream_flush). */
	struct up_sock *dirty_next; /* on the pool's dirty list while nsend > 0 */
	uint16_t nsend;
	uint16_t send_slot[SOCK_INFLIGHT]; /* whose query: an index into reqs */
	uint16_t send_len[SOCK_INFLIGHT];
	uint8_t send_buf[SOCK_INFLIGHT][QUERY_MAX];
};

struct upstream_pool {
	struct dlist open;    /* sockets taking new queries */
	struct dlist retired; /* sockets waiting for their last answers */
	struct up_sock *dirty;
	/* Attempt deadlines: srv->upstream_reqs is kept in deadline order (every attempt gets the
	 * same timeout, so a new one nearly always goes last) and one timer fires for the first.
	 * A libuv timer per request cost a heap insert and removal and a handle close per query,
	 * and every closing handle made the loop poll once more without waiting. */
	uv_timer_t timer;
	bool timer_closed;
	struct upstream_req *dead; /* finished this turn, freed by upstream_flush */
	uint32_t nsocks;           /* open or closing: at most srv->upool_max */
	struct spare reqs;         /* freed requests of REQ_SPARE_ADDRS upstreams, for reuse */
};

/* A TCP try at one upstream: its own handle, freed in its close callback, so a new attempt never
 * reuses memory libuv may still touch. a->req is NULL once the attempt is abandoned. */
struct attempt {
	struct upstream_req *req;
	uv_tcp_t tcp;
	uv_connect_t connect;
	uv_write_t write;
	uint8_t wlen[2], rlen[2];
	uint8_t *tcpbuf; /* owned: the TCP answer being read */
	size_t tcplen, tcpwant;
	size_t query_len;
	uint8_t query[QUERY_MAX];
};

struct upstream_req {
	struct worker *srv;
	struct dlist link;
	uint8_t lname[NAME_MAXWIRE];
	uint16_t qtype, qclass;
	bool dnssec_ok, done, tcp_next;
	struct wire_resp *resp;
	upstream_cb cb;
	void *ctx;
	unsigned attempt, upstream;
	uint16_t id;
	uint64_t start_us;
	uint64_t deadline_ms; /* of the current attempt (loop time) */
	struct upstream_req *dead_next;
	int last_err;                    /* MOAT_EFORMAT once an upstream answered with nonsense */
	struct attempt *tcp;             /* the current TCP attempt */
	struct up_sock *sock;            /* or the socket of the current UDP attempt */
	uint16_t slot;                   /* our index in sock->reqs */
	uint32_t timeout_ms, attempts;   /* of the upstream set */
	size_t naddrs, cap;              /* cap: room in addrs */
	struct sockaddr_storage addrs[]; /* the set's upstreams, copied */
};

/* Requests are kept for reuse with room for this many upstreams (most sets have one to three);
 * a larger set's requests are allocated and freed each time. */
#define REQ_SPARE_ADDRS 4

uint32_t upstream_pool_max(uint32_t inflight_share, size_t nupstreams)
{
	/* Full sockets carry SOCK_INFLIGHT each; retired ones linger with fewer until their
	 * last attempt ends: four times the tight count, and a few per upstream. */
	return inflight_share / SOCK_INFLIGHT * 4 + 4 * (uint32_t)nupstreams + 4;
}

static void req_try(struct upstream_req *r);
static void on_sock_readable(uv_poll_t *p, int status, int events);

/* ------------------------------------------------------------------ the socket pool -- */

static void on_deadline(uv_timer_t *t);

static struct upstream_pool *pool_of(struct worker *srv)
{
	if (!srv->upool) {
		struct upstream_pool *p = calloc(1, sizeof(*p));
		if (!p)
			return NULL;
		dlist_init(&p->open);
		dlist_init(&p->retired);
		uv_timer_init(srv->loop, &p->timer);
		p->timer.data = srv;
		srv->upool = p;
	}
	return srv->upool;
}

static struct up_sock *sock_of(struct dlist *d)
{
	return container_of(d, struct up_sock, link);
}

static void on_sock_closed(uv_handle_t *h)
{
	struct up_sock *s = h->data;
	s->srv->upool->nsocks--;
	close(s->fd);
	free(s);
}

static void sock_close(struct up_sock *s)
{
	if (s->closing)
		return;
	s->closing = true;
	for (struct up_sock **d = &s->srv->upool->dirty; *d; d = &(*d)->dirty_next)
		if (*d == s) { /* its queued queries are not sent */
			*d = s->dirty_next;
			break;
		}
	s->nsend = 0;
	dlist_del(&s->link);
	uv_poll_stop(&s->poll);
	uv_close((uv_handle_t *)&s->poll, on_sock_closed);
}

/* No new queries on s; it closes when its last one is done. */
static void sock_retire(struct worker *srv, struct up_sock *s)
{
	if (s->retired)
		return;
	s->retired = true;
	dlist_del(&s->link);
	dlist_add(&srv->upool->retired, &s->link);
	if (s->inflight == 0)
		sock_close(s);
}

static socklen_t sa_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* A fresh UDP socket on a random source port, connected to upstream u. */
static struct up_sock *sock_open(struct worker *srv, const struct sockaddr_storage *u)
{
	const struct config *cfg = srv->cfg;
	const struct sockaddr *to = (const struct sockaddr *)u;
	socklen_t alen =
	    to->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	struct sockaddr_storage src;
	memset(&src, 0, sizeof(src));
	if (cfg->has_upstream_source && cfg->upstream_source.ss_family == to->sa_family)
		src = cfg->upstream_source;
	else
		src.ss_family = to->sa_family;

	/* The pool is bounded: at the cap an attempt fails over at once (and the caps on
	 * questions in flight keep it from getting there in normal use). */
	if (srv->upool->nsocks >= srv->upool_max)
		return NULL;
	int fd = socket(to->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	int rc = -1;
	for (int i = 0; i < 16 && rc < 0; i++) {
		uint16_t port = (uint16_t)(1024 + rng_uniform(65536 - 1024));
		if (src.ss_family == AF_INET)
			((struct sockaddr_in *)&src)->sin_port = htons(port);
		else
			((struct sockaddr_in6 *)&src)->sin6_port = htons(port);
		rc = bind(fd, (const struct sockaddr *)&src, alen);
		if (rc < 0 && errno != EADDRINUSE)
			break;
	}
	struct up_sock *s = rc == 0 && connect(fd, to, alen) == 0 ? calloc(1, sizeof(*s)) : NULL;
	if (!s || uv_poll_init_socket(srv->loop, &s->poll, fd) < 0) {
		free(s);
		close(fd);
		return NULL;
	}
	s->srv = srv;
	s->fd = fd;
	srv->upool->nsocks++;
	memcpy(&s->to, u, sa_len(to));
	s->born_ms = uv_now(srv->loop);
	s->poll.data = s;
	dlist_add(&srv->upool->open, &s->link);
	if (uv_poll_start(&s->poll, UV_READABLE, on_sock_readable) < 0) {
		sock_close(s);
		return NULL;
	}
	return s;
}

/* A socket to upstream u with room for one more query: the newest open one that has room (so
 * answers bunch up on few sockets and are read in batches), or a new one. */
static struct up_sock *sock_pick(struct worker *srv, const struct sockaddr_storage *u)
{
	struct upstream_pool *p = pool_of(srv);
	if (!p)
		return NULL;
	uint64_t now = uv_now(srv->loop);
	for (struct dlist *d = p->open.next; d != &p->open;) {
		struct up_sock *s = sock_of(d);
		d = d->next;
		if (s->nused >= SOCK_USES || now - s->born_ms > SOCK_MAX_AGE_MS) {
			sock_retire(srv, s);
			continue;
		}
		if (s->inflight < SOCK_INFLIGHT &&
		    !memcmp(&s->to, u, sa_len((const struct sockaddr *)u)))
			return s;
	}
	return sock_open(srv, u);
}

/* Where id is in s->by_id, or the free place where it would go. The IDs are random, so their
 * low bits spread them; a spoofer's IDs can only make a miss read up to the run it lands in. */
static unsigned id_place(const struct up_sock *s, uint16_t id)
{
	unsigned i = id & (ID_TABLE - 1);
	while (s->by_id[i] && s->ids[s->by_id[i] - 1] != id)
		i = (i + 1) & (ID_TABLE - 1);
	return i;
}

/* Take a slot on s for r with an ID never used on s before. */
static void sock_attach(struct up_sock *s, struct upstream_req *r)
{
	_Static_assert(ID_TABLE >= 2 * SOCK_USES && SOCK_USES < 256, "by_id holds slot + 1");
	uint16_t id;
	unsigned at;
	do
		id = (uint16_t)rng_uniform(65536);
	while (s->by_id[at = id_place(s, id)]);
	r->id = id;
	r->sock = s;
	r->slot = s->nused++;
	s->ids[r->slot] = id;
	s->by_id[at] = (uint8_t)(r->slot + 1);
	s->reqs[r->slot] = r;
	s->inflight++;
	if (s->nused == SOCK_USES)
		sock_retire(s->srv, s); /* its last query: later ones go elsewhere */
}

/* r's UDP attempt is over: free its slot (a late answer to it is then a mismatch). */
static void sock_detach(struct upstream_req *r)
{
	struct up_sock *s = r->sock;
	if (!s)
		return;
	r->sock = NULL;
	s->reqs[r->slot] = NULL;
	for (unsigned i = 0; i < s->nsend; i++)
		if (s->send_slot[i] == r->slot) { /* queued, not sent yet: it never will be */
			s->nsend--;
			s->send_slot[i] = s->send_slot[s->nsend];
			s->send_len[i] = s->send_len[s->nsend];
			memcpy(s->send_buf[i], s->send_buf[s->nsend], s->send_len[i]);
			break;
		}
	if (--s->inflight == 0 && s->retired)
		sock_close(s);
}

/* --------------------------------------------------------------- attempts and answers -- */

static void on_attempt_closed(uv_handle_t *h)
{
	struct attempt *a = h->data;
	free(a->tcpbuf);
	free(a);
}

static void abandon(struct upstream_req *r)
{
	sock_detach(r);
	struct attempt *a = r->tcp;
	if (!a)
		return;
	r->tcp = NULL;
	a->req = NULL;
	uv_close((uv_handle_t *)&a->tcp, on_attempt_closed);
}

static struct upstream_req *req_of(struct dlist *d)
{
	return container_of(d, struct upstream_req, link);
}

/* Arm the pool's timer for the earliest deadline (or stop it when nothing waits). */
static void deadline_arm(struct worker *srv)
{
	struct upstream_pool *p = srv->upool;
	if (p->timer_closed)
		return;
	if (srv->upstream_reqs.next == &srv->upstream_reqs) {
		uv_timer_stop(&p->timer);
		return;
	}
	uint64_t due = req_of(srv->upstream_reqs.next)->deadline_ms, now = uv_now(srv->loop);
	uv_timer_start(&p->timer, on_deadline, due > now ? due - now : 0, 0);
}

/* The current attempt of r ends ms from now: place r in deadline order. */
static void deadline_set(struct upstream_req *r, uint64_t ms)
{
	struct worker *srv = r->srv;
	struct dlist *head = &srv->upstream_reqs;
	bool was_first = head->next == &r->link;
	dlist_del(&r->link);
	r->deadline_ms = uv_now(srv->loop) + ms;
	struct dlist *after = head->prev;
	while (after != head && req_of(after)->deadline_ms > r->deadline_ms)
		after = after->prev;
	dlist_add(after, &r->link);
	if (was_first || head->next == &r->link)
		deadline_arm(srv);
}

static void on_timeout(struct upstream_req *r);

static void on_deadline(uv_timer_t *t)
{
	struct worker *srv = t->data;
	uint64_t now = uv_now(srv->loop);
	/* Bounded by the requests present now: a timed-out one moves behind them or ends. */
	for (struct dlist *d = srv->upstream_reqs.next;
	     d != &srv->upstream_reqs && req_of(d)->deadline_ms <= now; d = srv->upstream_reqs.next)
		on_timeout(req_of(d));
	deadline_arm(srv);
}

static void finish(struct upstream_req *r, int status, const uint8_t *pkt, size_t len)
{
	if (r->done)
		return;
	struct worker *srv = r->srv;
	const struct sockaddr *from = (const struct sockaddr *)&r->addrs[r->upstream];
	int64_t elapsed = (int64_t)(worker_now_us() - r->start_us);
	r->done = true;
	dlist_del(&r->link);
	metrics_set(&srv->metrics->inflight, metrics_get(&srv->metrics->inflight) - 1);
	if (status == 0) {
		metrics_observe(&srv->metrics->upstream, (uint64_t)elapsed);
		if (srv->dnstap)
			dnstap_forwarder(srv, from, pkt, len, r->tcp != NULL, true);
	}
	if (r->cb)
		r->cb(r->ctx, status, pkt, len, from, elapsed);
	abandon(r); /* after the callback: pkt may live in the attempt's buffer */
	/* Freed at the end of the turn: callers up the stack may still look at r->done. */
	r->dead_next = srv->upool->dead;
	srv->upool->dead = r;
}

static void next_attempt(struct upstream_req *r)
{
	if (r->done)
		return; /* ended by another request's callbacks earlier in this turn */
	abandon(r);
	if (++r->attempt >= r->attempts) {
		finish(r, r->last_err ? r->last_err : MOAT_EIO, NULL, 0);
		return;
	}
	r->upstream = (r->upstream + 1) % (unsigned)r->naddrs;
	r->tcp_next = false;
	req_try(r);
}

static void on_timeout(struct upstream_req *r)
{
	r->srv->stats.upstream_timeouts++;
	next_attempt(r);
}

static void retry_over_tcp(struct upstream_req *r)
{
	abandon(r);
	r->tcp_next = true;
	/* The attempt's timer keeps running: TCP gets what is left of it, but at least half a
	 * timeout, so one attempt takes at most 1.5 timeouts. */
	uint64_t half = r->timeout_ms / 2;
	if (r->deadline_ms < uv_now(r->srv->loop) + half)
		deadline_set(r, half);
	req_try(r);
}

/* Check a candidate answer from the current attempt. */
static void on_answer(struct upstream_req *r, const uint8_t *pkt, size_t len)
{
	int rc = wire_resp_parse(pkt, len, r->id, r->lname, r->qtype, r->qclass, r->resp);
	if (rc == MOAT_EMISMATCH) {
		r->srv->stats.upstream_mismatch++; /* a spoofing attempt or a late answer */
		return;
	}
	if (rc < 0) {
		r->last_err = rc; /* the log then says "malformed", not "no answer" */
		next_attempt(r);
		return;
	}
	if ((r->resp->flags & WIRE_FLAG_TC) && !r->tcp) {
		retry_over_tcp(
		    r); /* truncated: the same upstream over TCP, in this attempt's time */
		return;
	}
	finish(r, 0, pkt, len);
}

/* A datagram larger than RX_SLOT: more than we asked for. If its header and question are those
 * of a query outstanding on s, ask that upstream again over TCP; otherwise it is a mismatch. */
static void on_oversized(struct up_sock *s, struct upstream_req *r, const uint8_t *pkt)
{
	uint8_t q[NAME_MAXWIRE + 64];
	int n = wire_build_query(r->id, r->lname, r->qtype, r->qclass, r->dnssec_ok, q, sizeof(q));
	/* Our question (name, type, class) sits at the same offset in the answer; compare it
	 * without case, which upstreams may change. */
	int nl = name_wire_len(r->lname, NAME_MAXWIRE);
	if (n > 0 && (be16_get(pkt + 2) & WIRE_FLAG_QR) && be16_get(pkt + 4) == 1 &&
	    WIRE_HDR + (size_t)nl + 4 <= RX_SLOT) {
		bool same = true;
		for (size_t i = 0; i < (size_t)nl + 4; i++) {
			uint8_t c = pkt[WIRE_HDR + i];
			same &= (c >= 'A' && c <= 'Z' ? c + 32 : c) == q[WIRE_HDR + i];
		}
		if (same) {
			retry_over_tcp(r);
			return;
		}
	}
	s->srv->stats.upstream_mismatch++;
}

/* One receive area per worker (srv->up_rx), its headers set once: recvmmsg writes back only
 * msg_len and msg_flags (no address, no control data is asked for), and setting all 32 again
 * before each call cost more than a small batch's answers. */
struct up_rx {
	struct mmsghdr msgs[RX_BATCH];
	struct iovec iov[RX_BATCH];
	uint8_t data[RX_BATCH][RX_SLOT];
};

static struct up_rx *up_rx_new(void)
{
	struct up_rx *rx = malloc(sizeof(*rx));
	for (int i = 0; rx && i < RX_BATCH; i++) {
		rx->iov[i] = (struct iovec){rx->data[i], RX_SLOT};
		rx->msgs[i].msg_hdr = (struct msghdr){.msg_iov = &rx->iov[i], .msg_iovlen = 1};
	}
	return rx;
}

/* Answers on a pooled socket: read them in batches and hand each to the query with its ID. */
static void on_sock_readable(uv_poll_t *p, int status, int events)
{
	struct up_sock *s = p->data;
	(void)events;
	/* Datagrams are read into the worker's area and parsed before the callback returns. */
	struct up_rx *rx = s->srv->up_rx;
	if (!rx && !(rx = s->srv->up_rx = up_rx_new()))
		return;
	struct mmsghdr *msgs = rx->msgs;
	for (int round = 0; round < 8 && !s->closing; round++) {
		int n = status < 0 ? -1 : recvmmsg(s->fd, msgs, RX_BATCH, MSG_DONTWAIT, NULL);
		if (n < 0) {
			if (status == 0 &&
			    (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
				return;
			/* ECONNREFUSED and friends: this upstream is down for every query on s. */
			sock_retire(s->srv, s);
			for (unsigned i = 0; i < s->nused && !s->closing; i++)
				if (s->reqs[i])
					next_attempt(s->reqs[i]);
			return;
		}
		for (int i = 0; i < n && !s->closing; i++) {
			const uint8_t *pkt = rx->data[i];
			size_t len = msgs[i].msg_len;
			struct upstream_req *r = NULL;
			if (len >= WIRE_HDR) {
				unsigned at = id_place(s, be16_get(pkt));
				if (s->by_id[at])
					r = s->reqs[s->by_id[at] - 1];
			}
			if (!r)
				s->srv->stats.upstream_mismatch++; /* late, spoofed or junk */
			else if (msgs[i].msg_hdr.msg_flags & MSG_TRUNC)
				on_oversized(s, r, pkt);
			else
				on_answer(r, pkt, len);
		}
		if (n < RX_BATCH)
			return;
	}
}

/* ------------------------------------------------------------------------------ TCP -- */

static void on_tcp_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct attempt *a = h->data;
	(void)hint;
	if (a->tcplen < 2)
		*buf = uv_buf_init((char *)a->rlen + a->tcplen, (unsigned)(2 - a->tcplen));
	else
		*buf = uv_buf_init((char *)a->tcpbuf + (a->tcplen - 2),
		                   (unsigned)(a->tcpwant - (a->tcplen - 2)));
}

static void on_tcp_read(uv_stream_t *st, ssize_t n, const uv_buf_t *buf)
{
	struct attempt *a = st->data;
	(void)buf;
	if (!a->req || n == 0)
		return;
	if (n < 0) {
		next_attempt(a->req);
		return;
	}
	a->tcplen += (size_t)n;
	if (a->tcplen == 2) {
		a->tcpwant = be16_get(a->rlen);
		if (a->tcpwant < WIRE_HDR || !(a->tcpbuf = malloc(a->tcpwant)))
			next_attempt(a->req);
		return;
	}
	if (a->tcplen - 2 == a->tcpwant) {
		struct upstream_req *r = a->req;
		uv_read_stop(st);
		on_answer(r, a->tcpbuf, a->tcpwant);
		if (r->tcp == a && !r->done)
			next_attempt(r); /* one answer per connection, and it was not ours */
	}
}

static void on_tcp_write(uv_write_t *w, int status)
{
	struct attempt *a = w->data;
	if (status < 0 && a->req)
		next_attempt(a->req);
}

static void on_tcp_connect(uv_connect_t *c, int status)
{
	struct attempt *a = c->data;
	if (!a->req)
		return;
	if (status < 0) {
		next_attempt(a->req);
		return;
	}
	be16_put(a->wlen, (uint16_t)a->query_len);
	uv_buf_t bufs[2] = {uv_buf_init((char *)a->wlen, 2),
	                    uv_buf_init((char *)a->query, (unsigned)a->query_len)};
	a->write.data = a;
	if (uv_write(&a->write, (uv_stream_t *)&a->tcp, bufs, 2, on_tcp_write) < 0 ||
	    uv_read_start((uv_stream_t *)&a->tcp, on_tcp_alloc, on_tcp_read) < 0)
		next_attempt(a->req);
}

/* Start a TCP attempt at to. Returns 0, MOAT_ENOMEM or MOAT_EIO (errno says why). */
static int try_tcp(struct upstream_req *r, const struct sockaddr *to)
{
	struct worker *srv = r->srv;
	const struct config *cfg = srv->cfg;
	struct attempt *a = calloc(1, sizeof(*a));
	int rc;
	if (!a)
		return MOAT_ENOMEM;
	/* A fresh ID for every attempt: an answer to an earlier one is not accepted later. */
	r->id = (uint16_t)rng_uniform(65536);
	a->query_len = (size_t)wire_build_query(r->id, r->lname, r->qtype, r->qclass, r->dnssec_ok,
	                                        a->query, sizeof(a->query));
	if (srv->dnstap)
		dnstap_forwarder(srv, to, a->query, a->query_len, true, false);
	if ((rc = uv_tcp_init(srv->loop, &a->tcp)) < 0) {
		free(a);
		return worker_eio(rc);
	}
	a->tcp.data = a;
	a->req = r;
	r->tcp = a;
	if (cfg->has_upstream_source && cfg->upstream_source.ss_family == to->sa_family &&
	    (rc = uv_tcp_bind(&a->tcp, (const struct sockaddr *)&cfg->upstream_source, 0)) < 0)
		return worker_eio(rc);
	a->connect.data = a;
	rc = uv_tcp_connect(&a->connect, &a->tcp, to, on_tcp_connect);
	return rc < 0 ? worker_eio(rc) : 0;
}

/* Queue r's query on a pooled socket; upstream_flush sends it before the loop waits again. A
 * socket never has more queued than in flight, so the queue cannot overflow. */
static int try_udp(struct upstream_req *r)
{
	struct up_sock *s = sock_pick(r->srv, &r->addrs[r->upstream]);
	if (!s)
		return MOAT_EIO;
	sock_attach(s, r);
	int n = wire_build_query(r->id, r->lname, r->qtype, r->qclass, r->dnssec_ok,
	                         s->send_buf[s->nsend], QUERY_MAX);
	if (n < 0)
		return n;
	if (r->srv->dnstap)
		dnstap_forwarder(r->srv, (const struct sockaddr *)&r->addrs[r->upstream],
		                 s->send_buf[s->nsend], (size_t)n, false, false);
	s->send_len[s->nsend] = (uint16_t)n;
	s->send_slot[s->nsend] = r->slot;
	if (s->nsend++ == 0) {
		s->dirty_next = r->srv->upool->dirty;
		r->srv->upool->dirty = s;
	}
	return 0;
}

/* Send what each socket queued this turn, one sendmmsg per socket. When a send fails
 * (ECONNREFUSED from an ICMP error, a full buffer) the socket is retired and the queries not
 * sent move to their next attempt at once. */
static void upstream_send_queued(struct worker *srv, struct upstream_pool *p)
{
	while (p->dirty) {
		struct up_sock *s = p->dirty;
		p->dirty = s->dirty_next;
		struct mmsghdr m[SOCK_INFLIGHT];
		struct iovec iov[SOCK_INFLIGHT];
		for (unsigned i = 0; i < s->nsend; i++) {
			iov[i] = (struct iovec){s->send_buf[i], s->send_len[i]};
			m[i].msg_hdr = (struct msghdr){.msg_iov = &iov[i], .msg_iovlen = 1};
		}
		unsigned sent = 0;
		while (sent < s->nsend) {
			int r = sendmmsg(s->fd, m + sent, s->nsend - sent, MSG_DONTWAIT);
			if (r <= 0)
				break;
			sent += (unsigned)r;
		}
		struct upstream_req *failed[SOCK_INFLIGHT];
		unsigned nfailed = 0, queued = s->nsend;
		for (unsigned i = sent; i < queued; i++)
			if (s->reqs[s->send_slot[i]])
				failed[nfailed++] = s->reqs[s->send_slot[i]];
		s->nsend = 0;
		if (sent < queued) {
			/* ECONNREFUSED from an earlier ICMP error, a full buffer: not this socket
			 * again, and those queries move on now rather than at their timeout. */
			sock_retire(srv, s);
			for (unsigned i = 0; i < nfailed; i++)
				next_attempt(failed[i]);
		}
	}
}

/* Once per loop turn: the queued sends, then free the requests that ended. */
void upstream_flush(struct worker *srv)
{
	struct upstream_pool *p = srv->upool;
	if (!p)
		return;
	upstream_send_queued(srv, p);
	while (p->dead) { /* after the sends: a failed send may end requests too */
		struct upstream_req *r = p->dead;
		p->dead = r->dead_next;
		if (r->cap == REQ_SPARE_ADDRS)
			spare_give(&p->reqs, r);
		else
			free(r);
	}
}

static void req_try(struct upstream_req *r)
{
	const struct sockaddr *to = (const struct sockaddr *)&r->addrs[r->upstream];
	if (!r->tcp_next) /* a new attempt; a TCP retry of a truncated answer is not one */
		deadline_set(r, r->timeout_ms);
	if ((r->tcp_next ? try_tcp(r, to) : try_udp(r)) == 0)
		return;
	/* This upstream cannot be tried now; the timer moves on at once. Calling next_attempt
	 * here would recurse through every attempt in one stack. */
	abandon(r);
	deadline_set(r, 0);
}

int upstream_query(struct worker *srv, const struct upstream_set *set, const uint8_t *lname,
                   uint16_t qtype, uint16_t qclass, bool dnssec_ok, struct wire_resp *resp,
                   upstream_cb cb, void *ctx, struct upstream_req **out)
{
	const struct config *cfg = srv->cfg;
	const struct sockaddr_storage *addrs = set ? set->addrs : cfg->upstreams;
	size_t naddrs = set ? set->naddrs : cfg->nupstreams;
	if (naddrs == 0)
		return MOAT_ENOENT;
	struct upstream_pool *p = pool_of(srv);
	size_t cap = naddrs > REQ_SPARE_ADDRS ? naddrs : REQ_SPARE_ADDRS;
	size_t size = sizeof(struct upstream_req) + cap * sizeof(struct sockaddr_storage);
	struct upstream_req *r = NULL;
	if (p)
		r = cap == REQ_SPARE_ADDRS ? spare_take(&p->reqs, size) : malloc(size);
	if (!r)
		return MOAT_ENOMEM;
	memset(r, 0, sizeof(*r)); /* addrs: only the first naddrs are read, copied below */
	r->cap = cap;
	r->srv = srv;
	memcpy(r->addrs, addrs, naddrs * sizeof(r->addrs[0]));
	r->naddrs = naddrs;
	r->timeout_ms = set ? set->timeout_ms : cfg->upstream_timeout_ms;
	r->attempts = set ? set->attempts : cfg->upstream_attempts;
	memcpy(r->lname, lname, (size_t)name_wire_len(lname, NAME_MAXWIRE));
	r->qtype = qtype;
	r->qclass = qclass;
	r->dnssec_ok = dnssec_ok;
	r->resp = resp;
	r->cb = cb;
	r->ctx = ctx;
	r->start_us = worker_now_us();
	r->upstream = srv->next_upstream++ % (unsigned)naddrs;
	dlist_init(&r->link);
	metrics_inc(&srv->metrics->inflight);
	*out = r;
	req_try(r);
	return 0;
}

void upstream_cancel(struct upstream_req *r)
{
	r->cb = NULL;
	finish(r, MOAT_EIO, NULL, 0);
}

/* Shutdown: every request ends, every pooled socket closes. */
void upstream_cancel_all(struct worker *srv)
{
	while (!dlist_empty(&srv->upstream_reqs)) {
		struct upstream_req *r =
		    container_of(srv->upstream_reqs.next, struct upstream_req, link);
		upstream_cancel(r);
	}
	struct upstream_pool *p = srv->upool;
	if (!p)
		return;
	while (!dlist_empty(&p->open))
		sock_close(sock_of(p->open.next));
	while (!dlist_empty(&p->retired))
		sock_close(sock_of(p->retired.next));
	p->timer_closed = true;
	uv_close((uv_handle_t *)&p->timer, NULL);
}

void upstream_deinit(struct worker *srv)
{
	upstream_flush(srv); /* frees the requests that ended last */
	if (srv->upool)
		spare_drop(&srv->upool->reqs);
	free(srv->upool);
	srv->upool = NULL;
}
