/* listen_udp.c owns the client-facing UDP sockets: receive a datagram, hand it to query_handle,
 * send the answer. Answers are sent at once when the socket can take them (the common case)
 * and copied into a queued send only when it cannot. */
#include <stdlib.h>
#include <string.h>

#include "moat/err.h"
#include "server.h"

struct udp_send {
	uv_udp_send_t req;
	size_t len;
	uint8_t data[];
};

static _Thread_local uint8_t udp_in[WIRE_MAXMSG];

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	(void)h;
	(void)hint;
	*buf = uv_buf_init((char *)udp_in, sizeof(udp_in));
}

static void on_recv(uv_udp_t *h, ssize_t n, const uv_buf_t *buf, const struct sockaddr *addr,
		    unsigned flags)
{
	struct listener *l = h->data;
	if (n <= 0 || !addr)
		return;
	if (flags & UV_UDP_PARTIAL) {
		l->srv->stats.dropped++; /* larger than any DNS message */
		return;
	}
	struct reply_to to = {.kind = REPLY_UDP, .udp = h};
	memcpy(&to.client, addr,
	       addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
	query_handle(l->srv, &to, (const uint8_t *)buf->base, (size_t)n);
}

static void on_sent(uv_udp_send_t *req, int status)
{
	(void)status;
	free(req);
}

void udp_reply(uv_udp_t *udp, const struct sockaddr *client, const uint8_t *msg, size_t len)
{
	uv_buf_t b = uv_buf_init((char *)msg, (unsigned)len);
	int rc = uv_udp_try_send(udp, &b, 1, client);
	if (rc >= 0 || (rc != UV_EAGAIN && rc != UV_ENOSYS))
		return;
	struct udp_send *s = malloc(sizeof(*s) + len);
	if (!s)
		return;
	memcpy(s->data, msg, len);
	b = uv_buf_init((char *)s->data, (unsigned)len);
	if (uv_udp_send(&s->req, udp, &b, 1, client, on_sent) < 0)
		free(s);
}

int listen_udp_start(struct server *srv, const struct sockaddr *addr)
{
	struct listener *l = calloc(1, sizeof(*l));
	if (!l)
		return MOAT_ENOMEM;
	l->srv = srv;
	int rc = uv_udp_init_ex(srv->loop, &l->h.udp, addr->sa_family);
	if (rc < 0) {
		free(l);
		return rc;
	}
	l->h.handle.data = l;
	dlist_add(&srv->listeners, &l->link);
	if ((rc = uv_udp_bind(&l->h.udp, addr, addr->sa_family == AF_INET6 ? UV_UDP_IPV6ONLY : 0)) <
		    0 ||
	    (rc = uv_udp_recv_start(&l->h.udp, on_alloc, on_recv)) < 0)
		return rc;
	return 0;
}

static void on_listener_closed(uv_handle_t *h)
{
	free(h->data);
}

/* Both kinds of listener: a closed socket takes no new queries, live ones finish. */
void listen_close_all(struct server *srv)
{
	while (srv->listeners.next != &srv->listeners) {
		struct listener *l =
			(struct listener *)((char *)srv->listeners.next - offsetof(struct listener, link));
		dlist_del(&l->link);
		uv_close(&l->h.handle, on_listener_closed);
	}
}
