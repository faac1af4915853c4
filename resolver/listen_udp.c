/* listen_udp.c owns the client-facing UDP sockets: receive datagrams in batches (recvmmsg,
 * through libuv's UV_UDP_RECVMMSG), hand each to query_handle, and send the answers in batches
 * (sendmmsg on the socket itself: libuv 1.44 has no batched send). Answers wait in a per-socket
 * queue that is flushed when a receive batch ends, when it is full, and once per loop turn (for
 * answers that came back from upstream), so no answer waits longer than one loop turn. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "moat/err.h"
#include "server.h"

#define UDP_BATCH 64
#define UDP_SLOT WIRE_EDNS_SIZE /* the largest UDP answer moatd sends */
#define UDP_RECV_CHUNKS 20      /* libuv reads at most 20 datagrams per recvmmsg */
#define UDP_CHUNK (64 * 1024)   /* libuv needs 64 KiB per datagram slot */

struct udp_queue {
	unsigned n;
	struct mmsghdr msgs[UDP_BATCH];
	struct iovec iov[UDP_BATCH];
	struct sockaddr_storage to[UDP_BATCH];
	uint8_t data[UDP_BATCH][UDP_SLOT];
};

struct udp_send {
	uv_udp_send_t req;
	uint8_t data[];
};

/* One receive buffer per loop thread: a batch is handled before the next one is read. */
static _Thread_local uint8_t *udp_in;

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
	(void)h;
	(void)hint;
	if (!udp_in)
		udp_in = malloc(UDP_RECV_CHUNKS * UDP_CHUNK);
	*buf = uv_buf_init((char *)udp_in, udp_in ? UDP_RECV_CHUNKS * UDP_CHUNK : 0);
}

static void on_sent(uv_udp_send_t *req, int status)
{
	(void)status;
	free(req);
}

/* The slow way, for what sendmmsg could not take: libuv queues a copy until it can. */
static void send_copy(uv_udp_t *udp, const struct sockaddr *client, const uint8_t *msg, size_t len)
{
	struct udp_send *s = malloc(sizeof(*s) + len);
	if (!s)
		return;
	memcpy(s->data, msg, len);
	uv_buf_t b = uv_buf_init((char *)s->data, (unsigned)len);
	if (uv_udp_send(&s->req, udp, &b, 1, client, on_sent) < 0)
		free(s);
}

static void queue_flush(struct listener *l)
{
	struct udp_queue *q = l->udpq;
	if (!q || q->n == 0)
		return;
	uv_os_fd_t fd;
	unsigned sent = 0;
	if (uv_fileno((uv_handle_t *)&l->h.udp, &fd) == 0) {
		while (sent < q->n) {
			int r = sendmmsg(fd, q->msgs + sent, q->n - sent, MSG_DONTWAIT);
			if (r <= 0)
				break; /* EAGAIN or an error of the first message */
			sent += (unsigned)r;
		}
	}
	for (; sent < q->n; sent++) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			send_copy(&l->h.udp, (const struct sockaddr *)&q->to[sent], q->data[sent],
			          q->iov[sent].iov_len);
		else
			l->srv->stats.dropped++; /* that client's address cannot be sent to */
	}
	q->n = 0;
}

void udp_reply(uv_udp_t *udp, const struct sockaddr *client, const uint8_t *msg, size_t len)
{
	struct listener *l = udp->data;
	struct udp_queue *q = l->udpq;
	socklen_t alen = client->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
	                                               : sizeof(struct sockaddr_in);
	if (!q || len > UDP_SLOT) {
		uv_buf_t b = uv_buf_init((char *)msg, (unsigned)len);
		if (uv_udp_try_send(udp, &b, 1, client) < 0)
			send_copy(udp, client, msg, len);
		return;
	}
	if (q->n == UDP_BATCH)
		queue_flush(l);
	unsigned i = q->n++;
	memcpy(q->data[i], msg, len);
	memcpy(&q->to[i], client, alen);
	q->iov[i] = (struct iovec){q->data[i], len};
	q->msgs[i].msg_hdr = (struct msghdr){
	    .msg_name = &q->to[i],
	    .msg_namelen = alen,
	    .msg_iov = &q->iov[i],
	    .msg_iovlen = 1,
	};
}

static void on_recv(uv_udp_t *h, ssize_t n, const uv_buf_t *buf, const struct sockaddr *addr,
                    unsigned flags)
{
	struct listener *l = h->data;
	if (flags & UV_UDP_MMSG_FREE) {
		queue_flush(l); /* the end of a receive batch */
		return;
	}
	if (n <= 0 || !addr)
		return;
	if (flags & UV_UDP_PARTIAL) {
		l->srv->stats.dropped++; /* larger than any DNS message */
		return;
	}
	struct reply_to to = {.kind = REPLY_UDP, .udp = h};
	memcpy(&to.client, addr,
	       addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
	                                   : sizeof(struct sockaddr_in));
	query_handle(l->srv, &to, (const uint8_t *)buf->base, (size_t)n);
}

int listen_udp_start(struct server *srv, const struct sockaddr *addr)
{
	struct listener *l = calloc(1, sizeof(*l));
	if (!l)
		return MOAT_ENOMEM;
	l->srv = srv;
	l->udpq = calloc(1, sizeof(*l->udpq)); /* without it, answers go one by one */
	int rc = uv_udp_init_ex(srv->loop, &l->h.udp, addr->sa_family | UV_UDP_RECVMMSG);
	if (rc < 0) {
		free(l->udpq);
		free(l);
		return rc;
	}
	l->h.handle.data = l;
	dlist_add(&srv->listeners, &l->link);
	if ((srv->reuseport && (rc = listen_share_port(&l->h.handle)) < 0) ||
	    (rc = uv_udp_bind(&l->h.udp, addr, addr->sa_family == AF_INET6 ? UV_UDP_IPV6ONLY : 0)) <
	        0 ||
	    (rc = uv_udp_recv_start(&l->h.udp, on_alloc, on_recv)) < 0)
		return rc;
	/* A burst must wait in the kernel, not be dropped there: 4 MiB of receive buffer (FORCE
	 * while moatd is still root, past net.core.rmem_max; the plain option otherwise). */
	uv_os_fd_t fd;
	int size = 4 << 20;
	if (uv_fileno((uv_handle_t *)&l->h.udp, &fd) == 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	return 0;
}

int listen_share_port(uv_handle_t *h)
{
	uv_os_fd_t fd;
	int on = 1;
	int rc = uv_fileno(h, &fd);
	if (rc < 0)
		return rc;
	return setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) < 0
	           ? uv_translate_sys_error(errno)
	           : 0;
}

void listen_flush_all(struct server *srv)
{
	for (struct dlist *d = srv->listeners.next; d != &srv->listeners; d = d->next) {
		struct listener *l =
		    (struct listener *)((char *)d - offsetof(struct listener, link));
		if (l->udpq)
			queue_flush(l);
	}
}

static void on_listener_closed(uv_handle_t *h)
{
	struct listener *l = h->data;
	free(l->udpq);
	free(l);
}

/* Both kinds of listener: a closed socket takes no new queries, live ones finish. */
void listen_close_all(struct server *srv)
{
	listen_flush_all(srv);
	while (srv->listeners.next != &srv->listeners) {
		struct listener *l = (struct listener *)((char *)srv->listeners.next -
		                                         offsetof(struct listener, link));
		dlist_del(&l->link);
		uv_close(&l->h.handle, on_listener_closed);
	}
}
