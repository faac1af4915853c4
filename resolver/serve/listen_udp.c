/* listen_udp.c owns the client-facing UDP sockets: receive datagrams in batches of up to 64 with
 * recvmmsg, hand each to query_handle, and send the answers in batches with sendmmsg.
 *
 * The socket is watched with a libuv poll handle and read here rather than through uv_udp_t:
 * libuv reads 20 datagrams per recvmmsg into 64 KiB slots and always calls recvmmsg once more
 * until it fails with EAGAIN. Under load most wake-ups bring a few datagrams, so that extra call
 * was one system call in four (epoll_wait, recvmmsg, recvmmsg, sendmmsg); here a batch that
 * comes back short ends the read (level-triggered epoll reports anything that arrives later).
 *
 * Answers wait in a per-socket queue that is flushed when a receive batch ends, when it is full,
 * and once per loop turn (for answers that came back from upstream), so no answer waits longer
 * than one loop turn. An answer the kernel cannot take now (EAGAIN) waits in a bounded overflow
 * list until the socket is writable. */
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "moat/err.h"
#include "moat/wire.h"
#include "serve/listen.h"
#include "serve/query.h"
#include "serve/reply.h"

#define UDP_BATCH 64
#define UDP_SLOT WIRE_EDNS_SIZE /* the largest UDP answer moatd sends */
#define UDP_RX_SLOT 4096        /* a larger query is answered FORMERR (never a real one) */
#define UDP_RX_ROUNDS 4         /* batches per wake-up, so TCP and upstream get their turn */
#define UDP_OVERFLOW_MAX 4096   /* answers waiting for a writable socket, at most */

struct udp_pending {
	struct udp_pending *next;
	struct sockaddr_storage to;
	socklen_t alen;
	size_t len;
	uint8_t data[];
};

struct udp_queue {
	unsigned n;
	struct mmsghdr msgs[UDP_BATCH];
	struct iovec iov[UDP_BATCH];
	struct sockaddr_storage to[UDP_BATCH];
	uint8_t data[UDP_BATCH][UDP_SLOT];
	struct udp_pending *head, **tail; /* the overflow list */
	unsigned npending;
};

/* One receive area per worker (srv->udp_rx): a batch is handled before the next one is read. */
struct udp_rx {
	struct mmsghdr msgs[UDP_BATCH];
	struct iovec iov[UDP_BATCH];
	struct sockaddr_storage from[UDP_BATCH];
	uint8_t data[UDP_BATCH][UDP_RX_SLOT];
};

static socklen_t addr_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static void on_poll(uv_poll_t *h, int status, int events);

/* The receive area with its headers set once: a batch needs only each used name length reset
 * (setting all 64 headers again before every recvmmsg cost more than a small batch's queries). */
static struct udp_rx *udp_rx_new(void)
{
	struct udp_rx *rx = malloc(sizeof(*rx));
	for (int i = 0; rx && i < UDP_BATCH; i++) {
		rx->iov[i] = (struct iovec){rx->data[i], UDP_RX_SLOT};
		rx->msgs[i].msg_hdr = (struct msghdr){
		    .msg_name = &rx->from[i],
		    .msg_namelen = sizeof(rx->from[i]),
		    .msg_iov = &rx->iov[i],
		    .msg_iovlen = 1,
		};
	}
	return rx;
}

/* Readable always; writable only while answers wait in the overflow list. */
static void watch(struct listener *l)
{
	uv_poll_start(&l->h.poll, UV_READABLE | (l->udpq->head ? UV_WRITABLE : 0), on_poll);
}

/* Keep a copy for when the socket is writable again; beyond the bound it is dropped (the
 * client asks again, as it would for any lost datagram). */
static void overflow_add(struct listener *l, const struct sockaddr *to, const uint8_t *msg,
                         size_t len)
{
	struct udp_queue *q = l->udpq;
	struct udp_pending *p = q->npending < UDP_OVERFLOW_MAX ? malloc(sizeof(*p) + len) : NULL;
	if (!p) {
		l->srv->stats.dropped++;
		return;
	}
	p->next = NULL;
	p->alen = addr_len(to);
	memcpy(&p->to, to, p->alen);
	p->len = len;
	memcpy(p->data, msg, len);
	bool was_empty = !q->head;
	*q->tail = p;
	q->tail = &p->next;
	q->npending++;
	if (was_empty)
		watch(l);
}

static void overflow_send(struct listener *l)
{
	struct udp_queue *q = l->udpq;
	while (q->head) {
		struct udp_pending *p = q->head;
		if (sendto(l->fd, p->data, p->len, MSG_DONTWAIT, (const struct sockaddr *)&p->to,
		           p->alen) < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return; /* still full: wait for the next writable event */
			l->srv->stats.dropped++;
		}
		q->head = p->next;
		q->npending--;
		free(p);
	}
	q->tail = &q->head;
	watch(l);
}

static void queue_flush(struct listener *l)
{
	struct udp_queue *q = l->udpq;
	unsigned sent = 0;
	while (sent < q->n) {
		if (q->head) { /* keep the order: behind what already waits */
			for (; sent < q->n; sent++)
				overflow_add(l, (const struct sockaddr *)&q->to[sent],
				             q->data[sent], q->iov[sent].iov_len);
			break;
		}
		int r = sendmmsg(l->fd, q->msgs + sent, q->n - sent, MSG_DONTWAIT);
		if (r > 0) {
			sent += (unsigned)r;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			overflow_add(l, (const struct sockaddr *)&q->to[sent], q->data[sent],
			             q->iov[sent].iov_len);
			sent++;
		} else if (errno != EINTR) {
			l->srv->stats.dropped++; /* that one client's address cannot be sent to */
			sent++;
		}
	}
	q->n = 0;
}

static void udp_reply(struct listener *l, const struct sockaddr *client, const uint8_t *msg,
                      size_t len)
{
	struct udp_queue *q = l->udpq;
	socklen_t alen = addr_len(client);
	if (len > UDP_SLOT) { /* never: answers over UDP are cut to the EDNS size first */
		if (sendto(l->fd, msg, len, MSG_DONTWAIT, client, alen) < 0 &&
		    (errno == EAGAIN || errno == EWOULDBLOCK))
			overflow_add(l, client, msg, len);
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

/* The reply seam (serve/reply.h) over a listener's socket. */
static void udp_reply_send(struct reply_to *to, const uint8_t *msg, size_t len)
{
	udp_reply(to->via, (const struct sockaddr *)&to->client, msg, len);
}

static const struct reply_ops udp_reply_ops = {.send = udp_reply_send};

static void on_poll(uv_poll_t *h, int status, int events)
{
	struct listener *l = h->data;
	if (status < 0)
		return; /* EBADF and the like: the listener closes with its worker */
	if ((events & UV_WRITABLE) && l->udpq->head)
		overflow_send(l);
	if (!(events & UV_READABLE))
		return;
	struct udp_rx *rx = l->srv->udp_rx;
	if (!rx && !(rx = l->srv->udp_rx = udp_rx_new()))
		return;
	for (int round = 0; round < UDP_RX_ROUNDS && !l->srv->stopping; round++) {
		int n = recvmmsg(l->fd, rx->msgs, UDP_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0)
			return; /* EAGAIN, or an error queued for an earlier send: nothing to read
			         */
		for (int i = 0; i < n; i++) {
			const struct sockaddr *from = (const struct sockaddr *)&rx->from[i];
			if (from->sa_family != AF_INET && from->sa_family != AF_INET6)
				continue;
			struct reply_to to = {.ops = &udp_reply_ops, .via = l};
			memcpy(&to.client, from, addr_len(from));
			query_handle(l->srv, &to, rx->data[i], rx->msgs[i].msg_len,
			             (rx->msgs[i].msg_hdr.msg_flags & MSG_TRUNC) != 0);
		}
		for (int i = 0; i < n; i++) /* what the kernel wrote back, for the next batch */
			rx->msgs[i].msg_hdr.msg_namelen = sizeof(rx->from[i]);
		queue_flush(l); /* the end of a receive batch */
		if (n < UDP_BATCH)
			return;
	}
}

void listen_udp_free(struct listener *l)
{
	while (l->udpq->head) {
		struct udp_pending *p = l->udpq->head;
		l->udpq->head = p->next;
		free(p);
	}
	close(l->fd);
	free(l->udpq);
	l->udpq = NULL;
}

int listen_udp_start(struct worker *srv, const struct sockaddr *addr)
{
	int on = 1, size = 4 << 20;
	int fd = socket(addr->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return MOAT_EIO; /* errno says why */
	struct listener *l = calloc(1, sizeof(*l));
	if (!l || !(l->udpq = calloc(1, sizeof(*l->udpq)))) {
		free(l);
		close(fd);
		return MOAT_ENOMEM;
	}
	l->srv = srv;
	l->fd = fd;
	l->udpq->tail = &l->udpq->head;
	/* A burst must wait in the kernel, not be dropped there: 4 MiB of receive buffer (FORCE
	 * while moatd is still root, past net.core.rmem_max; the plain option otherwise). */
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	/* IPv4 answers are never fragmented (RFC 9715): DF always, the path MTU ignored. The
	 * default (IP_PMTUDISC_WANT) drops DF and fragments where a route's locked MTU or a forged
	 * ICMP "fragmentation needed" says the path is smaller; UDP answers are at most
	 * WIRE_EDNS_SIZE, under any link's MTU. It also spares the kernel the IP ID hash of every
	 * datagram the default lets be fragmented (__ip_select_ident, ~2 % of a denied query's
	 * samples). Best effort: without it the kernel's default applies. */
	if (addr->sa_family == AF_INET) {
		int pmtu = IP_PMTUDISC_PROBE;
		(void)setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof(pmtu));
	}
	int rc = 0;
	if ((addr->sa_family == AF_INET6 &&
	     setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on)) < 0) ||
	    (srv->reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &on, sizeof(on)) < 0) ||
	    bind(fd, addr, addr_len(addr)) < 0)
		rc = -errno;
	if (rc == 0)
		rc = uv_poll_init_socket(srv->loop, &l->h.poll, fd);
	if (rc < 0) {
		free(l->udpq);
		free(l);
		close(fd);
		return worker_eio(rc); /* errno again: the cleanup may have changed it */
	}
	l->h.handle.data = l;
	dlist_add(&srv->listeners, &l->link);
	rc = uv_poll_start(&l->h.poll, UV_READABLE, on_poll);
	return rc < 0 ? worker_eio(rc) : 0;
}

void listen_flush_all(struct worker *srv)
{
	for (struct dlist *d = srv->listeners.next; d != &srv->listeners; d = d->next) {
		struct listener *l = container_of(d, struct listener, link);
		if (l->udpq)
			queue_flush(l);
	}
}
