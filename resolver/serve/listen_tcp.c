/* listen_tcp.c owns client TCP connections: accept (up to tcp_max_clients; when full, the
 * connection quiet longest with no query in flight makes room), read length-prefixed messages
 * (several per connection, pipelined), answer each on the same connection in the order answers
 * are ready, and close connections that stay idle for tcp_idle_ms. Only a whole message
 * received counts as activity: a message trickled in slowly is cut off, and so is a client
 * that sends queries but never reads the answers (sends do not count).
 *
 * Backpressure: a connection with tcp_max_queued bytes of answers queued (not yet taken by the
 * kernel) or tcp_max_inflight queries in flight is not read any more (uv_read_stop); messages
 * already read wait in its buffer. Once it has drained to half the byte cap and below the
 * query cap it is read again, from the worker's flush step (never from inside a query's
 * callback). A client that pipelines and never reads so stops being read, sends nothing more
 * that counts, and is closed after tcp_idle_ms: its memory is bounded by the caps.
 *
 * A connection is reference-counted: forwarded queries keep it alive (but closed) until their
 * answer arrives and is dropped. */
#include <stdlib.h>
#include <string.h>

#include "moat/bytes.h"
#include "moat/err.h"
#include "serve/listen.h"
#include "serve/query.h"
#include "serve/reply.h"

struct tcp_conn {
	struct dlist link;
	struct worker *srv;
	uv_tcp_t tcp;
	uv_timer_t idle;
	struct sockaddr_storage peer;
	uint8_t *buf; /* owned: bytes read and not yet consumed */
	size_t len, cap;
	size_t queued;    /* answer bytes handed to uv_write and not yet written */
	unsigned queries; /* forwarded queries holding a reference */
	int refs;
	int handles; /* open libuv handles */
	bool closed;
	bool paused;        /* not read: over a cap */
	bool resume_queued; /* on srv->tcp_resume (holds a reference) */
	struct tcp_conn *resume_next;
};

struct tcp_send {
	uv_write_t req;
	struct tcp_conn *conn;
	size_t bytes;
	uint8_t data[];
};

static void conn_put(struct tcp_conn *c)
{
	if (--c->refs == 0) {
		free(c->buf);
		free(c);
	}
}

static bool conn_full(const struct tcp_conn *c)
{
	const struct config *cfg = c->srv->cfg;
	return c->queued >= cfg->tcp_max_queued || c->queries >= cfg->tcp_max_inflight;
}

static void conn_pause(struct tcp_conn *c)
{
	if (c->paused || c->closed)
		return;
	c->paused = true;
	uv_read_stop((uv_stream_t *)&c->tcp);
}

/* A paused connection that has drained enough is queued to be read again at the next flush. */
static void conn_wake(struct tcp_conn *c)
{
	const struct config *cfg = c->srv->cfg;
	if (!c->paused || c->closed || c->resume_queued || c->queued > cfg->tcp_max_queued / 2 ||
	    c->queries >= cfg->tcp_max_inflight)
		return;
	c->resume_queued = true;
	c->refs++;
	c->resume_next = c->srv->tcp_resume;
	c->srv->tcp_resume = c;
}

static void tcp_conn_ref(struct tcp_conn *c)
{
	c->refs++;
	c->queries++;
}

static void tcp_conn_unref(struct tcp_conn *c)
{
	c->queries--;
	conn_wake(c);
	conn_put(c);
}

static bool tcp_conn_closed(const struct tcp_conn *c)
{
	return c->closed;
}

static void on_handle_closed(uv_handle_t *h)
{
	struct tcp_conn *c = h->data;
	if (--c->handles == 0)
		conn_put(c); /* the connection's own reference */
}

static void conn_close(struct tcp_conn *c)
{
	if (c->closed)
		return;
	c->closed = true;
	c->srv->ntcp--;
	dlist_del(&c->link);
	uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
	uv_close((uv_handle_t *)&c->idle, on_handle_closed);
}

static void on_idle(uv_timer_t *t)
{
	conn_close(t->data);
}

/* Activity: restart the idle timer and move the connection to the head of the worker's list,
 * so the tail is the connection that has been quiet longest. */
static void conn_touch(struct tcp_conn *c)
{
	uv_timer_again(&c->idle);
	dlist_del(&c->link);
	dlist_add(&c->srv->tcp_conns, &c->link);
}

/* At tcp_max_clients, make room for a new client by closing the connection that has been quiet
 * longest and has no query in flight, so a client holding
 * many idle connections cannot lock everyone else out of TCP. Looks at a bounded number from
 * the tail. Returns false when there is none to close. */
static bool conn_evict_idle(struct worker *srv, const struct tcp_conn *keep)
{
	int n = 0;
	for (struct dlist *d = srv->tcp_conns.prev; d != &srv->tcp_conns && n < 64;
	     d = d->prev, n++) {
		struct tcp_conn *v = container_of(d, struct tcp_conn, link);
		if (v != keep && v->queries == 0) {
			conn_close(v);
			return true;
		}
	}
	return false;
}

static void on_written(uv_write_t *req, int status)
{
	struct tcp_send *s = (struct tcp_send *)req;
	struct tcp_conn *c = s->conn;
	(void)status;
	c->queued -= s->bytes;
	free(s);
	conn_wake(c);
	conn_put(c);
}

/* Queue one answer. Sends are not activity: a client that never reads must not keep its
 * connection open by making us write. */
static void tcp_conn_send(struct tcp_conn *c, const uint8_t *msg, size_t len)
{
	if (c->closed)
		return;
	struct tcp_send *s = malloc(sizeof(*s) + 2 + len);
	if (!s) {
		conn_close(c); /* a lost answer on TCP would leave the client waiting */
		return;
	}
	s->conn = c;
	s->bytes = 2 + len;
	s->data[0] = (uint8_t)(len >> 8);
	s->data[1] = (uint8_t)len;
	memcpy(s->data + 2, msg, len);
	uv_buf_t b = uv_buf_init((char *)s->data, (unsigned)(2 + len));
	if (uv_write(&s->req, (uv_stream_t *)&c->tcp, &b, 1, on_written) < 0) {
		free(s);
		conn_close(c);
		return;
	}
	c->refs++; /* until on_written */
	c->queued += s->bytes;
	if (conn_full(c))
		conn_pause(c);
}

/* The reply seam (serve/reply.h) over a connection: a waiting query holds a reference. */
static void tcp_reply_send(struct reply_to *to, const uint8_t *msg, size_t len)
{
	tcp_conn_send(to->via, msg, len);
}

static bool tcp_reply_gone(const struct reply_to *to)
{
	return tcp_conn_closed(to->via);
}

static void tcp_reply_hold(struct reply_to *to)
{
	tcp_conn_ref(to->via);
}

static void tcp_reply_release(struct reply_to *to)
{
	tcp_conn_unref(to->via);
}

static const struct reply_ops tcp_reply = {
    .send = tcp_reply_send,
    .gone = tcp_reply_gone,
    .hold = tcp_reply_hold,
    .release = tcp_reply_release,
    .tcp = true,
};

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	struct tcp_conn *c = h->data;
	(void)hint;
	size_t want = 4096;
	if (c->len >= 2) {
		size_t mlen = (size_t)be16_get(c->buf) + 2;
		if (mlen > c->len)
			want = mlen - c->len;
	}
	if (c->cap - c->len < want) {
		size_t ncap = c->len + want;
		uint8_t *nb = realloc(c->buf, ncap);
		if (!nb) {
			*buf = uv_buf_init(NULL, 0); /* libuv reports UV_ENOBUFS, we close */
			return;
		}
		c->buf = nb;
		c->cap = ncap;
	}
	*buf = uv_buf_init((char *)c->buf + c->len, (unsigned)(c->cap - c->len));
}

/* Answer the whole messages in the buffer, until the connection is over a cap. */
static void conn_process(struct tcp_conn *c)
{
	size_t off = 0;
	while (c->len - off >= 2 && !c->closed && !c->paused) {
		size_t mlen = be16_get(c->buf + off);
		if (c->len - off < 2 + mlen)
			break;
		struct reply_to to = {.ops = &tcp_reply, .via = c, .client = c->peer};
		query_handle(c->srv, &to, c->buf + off + 2, mlen, false);
		off += 2 + mlen;
		if (conn_full(c))
			conn_pause(c);
	}
	if (off) {
		/* Only whole messages count as activity: a message trickled in a byte at a time
		 * must still arrive within tcp_idle_ms, or one slow client holds a slot for ever
		 * (slow loris). */
		if (!c->closed)
			conn_touch(c);
		memmove(c->buf, c->buf + off, c->len - off);
		c->len -= off;
	}
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
	struct tcp_conn *c = s->data;
	(void)buf;
	if (n < 0) {
		conn_close(c);
		return;
	}
	c->len += (size_t)n;
	c->refs++; /* a query's answer may close c while we look at it */
	conn_process(c);
	conn_put(c);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf);

void tcp_resume_all(struct worker *srv)
{
	while (srv->tcp_resume) {
		struct tcp_conn *c = srv->tcp_resume;
		srv->tcp_resume = c->resume_next;
		c->resume_queued = false;
		if (!c->closed && c->paused) {
			c->paused = false;
			conn_process(c);
			if (!c->paused && !c->closed &&
			    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
				conn_close(c);
		}
		conn_put(c);
	}
}

static void on_connection(uv_stream_t *server, int status)
{
	struct listener *l = server->data;
	struct worker *srv = l->srv;
	if (status < 0)
		return;
	struct tcp_conn *c = calloc(1, sizeof(*c));
	if (!c || uv_tcp_init(srv->loop, &c->tcp) < 0) {
		free(c);
		return;
	}
	c->srv = srv;
	c->refs = 1;
	c->handles = 2;
	c->tcp.data = c;
	uv_timer_init(srv->loop, &c->idle);
	c->idle.data = c;
	dlist_add(&srv->tcp_conns, &c->link);
	srv->ntcp++;
	if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
		conn_close(c);
		return;
	}
	if (srv->ntcp > srv->tcp_max) {
		srv->stats.tcp_rejected++;
		if (!conn_evict_idle(srv, c)) {
			conn_close(c);
			return;
		}
	}
	int alen = sizeof(c->peer);
	uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&c->peer, &alen);
	uv_timer_start(&c->idle, on_idle, srv->cfg->tcp_idle_ms, srv->cfg->tcp_idle_ms);
	if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) < 0)
		conn_close(c);
}

/* SO_REUSEPORT on a listener's socket before it binds: workers then share the port and the
 * kernel spreads clients over them by address and port. */
static int share_port(uv_handle_t *h)
{
	uv_os_fd_t fd;
	int on = 1;
	int rc = uv_fileno(h, &fd);
	if (rc < 0)
		return rc;
	return setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) < 0 ? -errno : 0;
}

int listen_tcp_start(struct worker *srv, const struct sockaddr *addr)
{
	struct listener *l = calloc(1, sizeof(*l));
	if (!l)
		return MOAT_ENOMEM;
	l->srv = srv;
	int rc = uv_tcp_init_ex(srv->loop, &l->h.tcp, addr->sa_family);
	if (rc < 0) {
		free(l);
		return worker_eio(rc);
	}
	l->h.handle.data = l;
	dlist_add(&srv->listeners, &l->link);
	if ((srv->reuseport && (rc = share_port(&l->h.handle)) < 0) ||
	    (rc = uv_tcp_bind(&l->h.tcp, addr, addr->sa_family == AF_INET6 ? UV_TCP_IPV6ONLY : 0)) <
	        0 ||
	    (rc = uv_listen((uv_stream_t *)&l->h.tcp, 256, on_connection)) < 0)
		return worker_eio(rc); /* the listener is on the list: listen_close_all frees it */
	return 0;
}

void tcp_close_all(struct worker *srv)
{
	while (srv->tcp_resume) {
		struct tcp_conn *c = srv->tcp_resume;
		srv->tcp_resume = c->resume_next;
		c->resume_queued = false;
		conn_put(c);
	}
	while (!dlist_empty(&srv->tcp_conns))
		conn_close(container_of(srv->tcp_conns.next, struct tcp_conn, link));
}
