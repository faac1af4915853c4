/* upstream.c talks to the upstream resolvers. Each attempt builds moatd's own query with a fresh
 * random ID (libsodium) and sends it from a fresh UDP socket on a random source port, connected
 * to the upstream so the kernel drops datagrams from anyone else and reports ICMP errors at once.
 * An answer is accepted only if its ID and question match (wire_resp_parse); anything else is
 * counted and ignored, and the attempt keeps waiting. TC=1 answers are retried over TCP to the
 * same upstream. A timeout or error moves to the next upstream; after the configured number of
 * attempts the caller gets MOAT_EIO. */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "moat/err.h"
#include "server.h"

/* One try at one upstream: its own handle, freed in its close callback, so a new attempt never
 * reuses memory libuv may still touch. a->req is NULL once the attempt is abandoned. */
struct attempt {
	struct upstream_req *req;
	bool tcp;
	union {
		uv_handle_t handle;
		uv_udp_t udp;
		uv_tcp_t tcp;
	} h;
	uv_connect_t connect;
	uv_write_t write;
	uint8_t wlen[2], rlen[2];
	uint8_t *tcpbuf; /* owned: the TCP answer being read */
	size_t tcplen, tcpwant;
	size_t query_len;
	uint8_t query[NAME_MAXWIRE + 64];
};

struct upstream_req {
	struct server *srv;
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
	uv_timer_t timer; /* the request is freed in this handle's close callback */
	int last_err;     /* MOAT_EFORMAT once an upstream answered with nonsense */
	struct attempt *cur;
};

/* Datagrams are read into one buffer per loop thread and parsed before the callback returns. */
static _Thread_local uint8_t udp_rx[WIRE_MAXMSG];

uint64_t server_now_us(void)
{
	return uv_hrtime() / 1000;
}

static void req_try(struct upstream_req *r);

static void on_attempt_closed(uv_handle_t *h)
{
	struct attempt *a = h->data;
	free(a->tcpbuf);
	free(a);
}

static void abandon(struct upstream_req *r)
{
	struct attempt *a = r->cur;
	if (!a)
		return;
	r->cur = NULL;
	a->req = NULL;
	if (!a->tcp)
		uv_udp_recv_stop(&a->h.udp);
	uv_close(&a->h.handle, on_attempt_closed);
}

static void on_timer_closed(uv_handle_t *h)
{
	free(h->data);
}

static void finish(struct upstream_req *r, int status, const uint8_t *pkt, size_t len)
{
	if (r->done)
		return;
	const struct sockaddr *from = (const struct sockaddr *)&r->srv->cfg->upstreams[r->upstream];
	int64_t elapsed = (int64_t)(server_now_us() - r->start_us);
	r->done = true;
	dlist_del(&r->link);
	uv_timer_stop(&r->timer);
	if (r->cb)
		r->cb(r->ctx, status, pkt, len, from, elapsed);
	abandon(r); /* after the callback: pkt may live in the attempt's buffer */
	uv_close((uv_handle_t *)&r->timer, on_timer_closed);
}

static void next_attempt(struct upstream_req *r)
{
	abandon(r);
	if (++r->attempt >= r->srv->cfg->upstream_attempts) {
		finish(r, r->last_err ? r->last_err : MOAT_EIO, NULL, 0);
		return;
	}
	r->upstream = (r->upstream + 1) % (unsigned)r->srv->cfg->nupstreams;
	r->tcp_next = false;
	req_try(r);
}

static void on_timeout(uv_timer_t *t)
{
	struct upstream_req *r = t->data;
	r->srv->stats.upstream_timeouts++;
	next_attempt(r);
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
	if ((r->resp->flags & 0x0200) && !r->cur->tcp) {
		/* Truncated: the same upstream over TCP, within this attempt's time. */
		abandon(r);
		r->tcp_next = true;
		req_try(r);
		return;
	}
	finish(r, 0, pkt, len);
}

static void on_udp_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	(void)h;
	(void)hint;
	*buf = uv_buf_init((char *)udp_rx, sizeof(udp_rx));
}

static void on_udp_recv(uv_udp_t *h, ssize_t n, const uv_buf_t *buf, const struct sockaddr *addr,
                        unsigned flags)
{
	struct attempt *a = h->data;
	(void)flags;
	if (!a->req)
		return;
	if (n < 0) {
		next_attempt(a->req); /* ECONNREFUSED and friends: this upstream is down */
		return;
	}
	if (n == 0 && !addr)
		return;
	on_answer(a->req, (const uint8_t *)buf->base, (size_t)n);
}

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

static void on_tcp_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct attempt *a = s->data;
	(void)buf;
	if (!a->req || n == 0)
		return;
	if (n < 0) {
		next_attempt(a->req);
		return;
	}
	a->tcplen += (size_t)n;
	if (a->tcplen == 2) {
		a->tcpwant = (size_t)(a->rlen[0] << 8 | a->rlen[1]);
		if (a->tcpwant < WIRE_HDR || !(a->tcpbuf = malloc(a->tcpwant)))
			next_attempt(a->req);
		return;
	}
	if (a->tcplen - 2 == a->tcpwant) {
		struct upstream_req *r = a->req;
		uv_read_stop(s);
		on_answer(r, a->tcpbuf, a->tcpwant);
		if (r->cur == a && !r->done)
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
	a->wlen[0] = (uint8_t)(a->query_len >> 8);
	a->wlen[1] = (uint8_t)a->query_len;
	uv_buf_t bufs[2] = {uv_buf_init((char *)a->wlen, 2),
	                    uv_buf_init((char *)a->query, (unsigned)a->query_len)};
	a->write.data = a;
	if (uv_write(&a->write, (uv_stream_t *)&a->h.tcp, bufs, 2, on_tcp_write) < 0 ||
	    uv_read_start((uv_stream_t *)&a->h.tcp, on_tcp_alloc, on_tcp_read) < 0)
		next_attempt(a->req);
}

/* Bind a fresh UDP socket to a random source port (libsodium), so that an off-path attacker
 * must guess 16 bits of port beside 16 bits of ID. */
static int bind_random_port(const struct config *cfg, uv_udp_t *udp, const struct sockaddr *to)
{
	struct sockaddr_storage src;
	memset(&src, 0, sizeof(src));
	if (cfg->has_upstream_source && cfg->upstream_source.ss_family == to->sa_family)
		src = cfg->upstream_source;
	else
		src.ss_family = to->sa_family;
	for (int i = 0; i < 16; i++) {
		uint16_t port = (uint16_t)(1024 + randombytes_uniform(65536 - 1024));
		if (src.ss_family == AF_INET)
			((struct sockaddr_in *)&src)->sin_port = htons(port);
		else
			((struct sockaddr_in6 *)&src)->sin6_port = htons(port);
		int rc = uv_udp_bind(udp, (const struct sockaddr *)&src, 0);
		if (rc != UV_EADDRINUSE)
			return rc;
	}
	return UV_EADDRINUSE;
}

static void req_try(struct upstream_req *r)
{
	struct server *srv = r->srv;
	const struct config *cfg = srv->cfg;
	const struct sockaddr *to = (const struct sockaddr *)&cfg->upstreams[r->upstream];
	struct attempt *a = calloc(1, sizeof(*a));
	int rc;

	uv_timer_start(&r->timer, on_timeout, cfg->upstream_timeout_ms, 0);
	if (!a)
		goto fail;
	/* A fresh ID for every attempt: an answer to an earlier one is not accepted later. */
	r->id = (uint16_t)randombytes_uniform(65536);
	a->query_len = (size_t)wire_build_query(r->id, r->lname, r->qtype, r->qclass, r->dnssec_ok,
	                                        a->query, sizeof(a->query));
	a->tcp = r->tcp_next;
	if (a->tcp ? (rc = uv_tcp_init(srv->loop, &a->h.tcp)) < 0
	           : (rc = uv_udp_init(srv->loop, &a->h.udp)) < 0) {
		free(a);
		goto fail;
	}
	a->h.handle.data = a;
	a->req = r;
	r->cur = a;
	if (a->tcp) {
		if (cfg->has_upstream_source && cfg->upstream_source.ss_family == to->sa_family &&
		    (rc = uv_tcp_bind(&a->h.tcp, (const struct sockaddr *)&cfg->upstream_source,
		                      0)) < 0)
			goto fail;
		a->connect.data = a;
		if ((rc = uv_tcp_connect(&a->connect, &a->h.tcp, to, on_tcp_connect)) < 0)
			goto fail;
		return;
	}
	if ((rc = bind_random_port(cfg, &a->h.udp, to)) < 0 ||
	    (rc = uv_udp_connect(&a->h.udp, to)) < 0)
		goto fail;
	uv_buf_t b = uv_buf_init((char *)a->query, (unsigned)a->query_len);
	if ((rc = uv_udp_try_send(&a->h.udp, &b, 1, NULL)) < 0 ||
	    (rc = uv_udp_recv_start(&a->h.udp, on_udp_alloc, on_udp_recv)) < 0)
		goto fail;
	return;
fail:
	/* This upstream cannot be tried now; the timer moves on at once. Calling next_attempt
	 * here would recurse through every attempt in one stack. */
	abandon(r);
	uv_timer_start(&r->timer, on_timeout, 0, 0);
}

int upstream_query(struct server *srv, const uint8_t *lname, uint16_t qtype, uint16_t qclass,
                   bool dnssec_ok, struct wire_resp *resp, upstream_cb cb, void *ctx,
                   struct upstream_req **out)
{
	if (srv->cfg->nupstreams == 0)
		return MOAT_ENOENT;
	struct upstream_req *r = calloc(1, sizeof(*r));
	if (!r)
		return MOAT_ENOMEM;
	r->srv = srv;
	memcpy(r->lname, lname, (size_t)name_wire_len(lname, NAME_MAXWIRE));
	r->qtype = qtype;
	r->qclass = qclass;
	r->dnssec_ok = dnssec_ok;
	r->resp = resp;
	r->cb = cb;
	r->ctx = ctx;
	r->start_us = server_now_us();
	r->upstream = srv->next_upstream++ % (unsigned)srv->cfg->nupstreams;
	uv_timer_init(srv->loop, &r->timer);
	r->timer.data = r;
	dlist_add(&srv->upstream_reqs, &r->link);
	*out = r;
	req_try(r);
	return 0;
}

void upstream_cancel(struct upstream_req *r)
{
	r->cb = NULL;
	finish(r, MOAT_EIO, NULL, 0);
}

void upstream_cancel_all(struct server *srv)
{
	while (srv->upstream_reqs.next != &srv->upstream_reqs) {
		struct upstream_req *r =
		    (struct upstream_req *)((char *)srv->upstream_reqs.next -
		                            offsetof(struct upstream_req, link));
		upstream_cancel(r);
	}
}
