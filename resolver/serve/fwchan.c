/* fwchan.c owns moatd's connection to moat-fw: a non-blocking SOCK_SEQPACKET socket watched
 * with uv_poll, a queue of grants waiting to be written, a table of grants waiting for their
 * ACK (each with a deadline), and reconnection when moat-fw restarts. Anything that goes wrong
 * completes the waiting grants with FWPROTO_FAILED: moatd then answers SERVFAIL (fail closed). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "serve/fwchan.h"
#include "moat/dlist.h"
#include "moat/err.h"

struct pending {
	struct dlist link;
	uint32_t seq;
	uint64_t deadline_ms;
	fwchan_cb cb;
	void *ctx;
	bool sent;
	size_t len;
	uint8_t msg[FWPROTO_MAXMSG];
};

struct fwchan {
	uv_loop_t *loop;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	uint32_t timeout_ms;
	int fd;
	bool polling; /* connected and watched */
	bool closing; /* the poll handle is closing; no reconnect until it has */
	bool freeing; /* fwchan_close was called */
	uv_poll_t poll;
	uv_timer_t timer;     /* deadlines and reconnects */
	struct dlist pending; /* oldest first */
	uint32_t next_seq;
	int last_errno; /* the cause of the last failed connect (reported); 0 once connected */
	const char *last_step; /* where it failed ("connect"), for fwchan_state */
};

static uint64_t now_ms(const struct fwchan *fw)
{
	return uv_now(fw->loop);
}

static struct pending *pending_of(struct dlist *l)
{
	return container_of(l, struct pending, link);
}

static void complete(struct pending *p, uint16_t status, uint32_t lifetime)
{
	dlist_del(&p->link);
	fwchan_cb cb = p->cb;
	void *ctx = p->ctx;
	free(p);
	if (cb)
		cb(ctx, status, lifetime);
}

static void fail_all(struct fwchan *fw)
{
	while (!dlist_empty(&fw->pending))
		complete(pending_of(fw->pending.next), FWPROTO_FAILED, 0);
}

static void on_poll_closed(uv_handle_t *h)
{
	struct fwchan *fw = h->data;
	close(fw->fd);
	fw->fd = -1;
	fw->closing = false;
	if (fw->freeing)
		free(fw);
}

/* The channel is gone: fail what waits; the next grant reconnects. */
static void drop(struct fwchan *fw)
{
	if (fw->polling) {
		fw->polling = false;
		fw->closing = true; /* the fd is closed with the poll handle */
		uv_poll_stop(&fw->poll);
		uv_close((uv_handle_t *)&fw->poll, on_poll_closed);
	}
	fail_all(fw);
}

static void on_poll(uv_poll_t *h, int status, int events);

/* A connect that failed with errno e: say so once per cause (a permission problem on the
 * socket must not show up only as SERVFAIL), and keep errno for the caller. */
static int connect_failed(struct fwchan *fw, int fd, const char *step, int e)
{
	if (fd >= 0)
		close(fd);
	if (e != fw->last_errno)
		fprintf(stderr, "moatd: firewall channel %s: %s: %s\n", fw->path, step,
		        strerror(e));
	fw->last_errno = e;
	fw->last_step = step;
	errno = e;
	return MOAT_EIO;
}

bool fwchan_state(const struct fwchan *fw, char *why, size_t cap)
{
	if (cap)
		snprintf(why, cap, "%s%s%s", fw->last_errno ? fw->last_step : "",
		         fw->last_errno ? ": " : "",
		         fw->last_errno ? strerror(fw->last_errno) : "");
	return fw->polling;
}

static int try_connect(struct fwchan *fw)
{
	if (fw->polling)
		return 0;
	if (fw->closing || fw->freeing)
		return MOAT_EIO;
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return connect_failed(fw, -1, "socket", errno);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, fw->path, sizeof(sa.sun_path));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return connect_failed(fw, fd, "connect", errno);
	int rc = uv_poll_init(fw->loop, &fw->poll, fd);
	if (rc < 0)
		return connect_failed(fw, fd, "watch", -rc);
	fw->fd = fd;
	fw->last_errno = 0;
	fw->poll.data = fw;
	fw->polling = true;
	uv_poll_start(&fw->poll, UV_READABLE, on_poll);
	return 0;
}

/* Write what waits to be written; ask for POLLOUT when the socket is full. */
static void flush(struct fwchan *fw)
{
	bool blocked = false;
	for (struct dlist *l = fw->pending.next; l != &fw->pending; l = l->next) {
		struct pending *p = pending_of(l);
		if (p->sent)
			continue;
		ssize_t n = send(fw->fd, p->msg, p->len, MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			blocked = true;
			break;
		}
		if (n != (ssize_t)p->len) {
			drop(fw);
			return;
		}
		p->sent = true;
	}
	uv_poll_start(&fw->poll, UV_READABLE | (blocked ? UV_WRITABLE : 0), on_poll);
}

static void on_poll(uv_poll_t *h, int status, int events)
{
	struct fwchan *fw = h->data;
	if (status < 0 || (events & UV_DISCONNECT)) {
		drop(fw);
		return;
	}
	if (events & UV_WRITABLE)
		flush(fw);
	if (!(events & UV_READABLE) || !fw->polling)
		return;
	for (int i = 0; i < 256; i++) {
		uint8_t buf[64];
		ssize_t n = recv(fw->fd, buf, sizeof(buf), 0);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			drop(fw); /* moat-fw went away */
			return;
		}
		struct fwproto_ack a;
		if (fwproto_ack_decode(buf, (size_t)n, &a) < 0) {
			drop(fw); /* a peer that speaks nonsense is not trusted further */
			return;
		}
		for (struct dlist *l = fw->pending.next; l != &fw->pending; l = l->next) {
			struct pending *p = pending_of(l);
			if (p->seq == a.seq) {
				complete(p, a.status, a.lifetime);
				break;
			}
		}
	}
}

static void on_timer(uv_timer_t *t)
{
	struct fwchan *fw = t->data;
	uint64_t now = now_ms(fw);
	while (!dlist_empty(&fw->pending)) {
		struct pending *p = pending_of(fw->pending.next);
		if (p->deadline_ms > now)
			break;
		complete(p, FWPROTO_FAILED, 0); /* no ack in time */
	}
}

int fwchan_new(uv_loop_t *loop, const char *path, uint32_t timeout_ms, struct fwchan **out)
{
	struct fwchan *fw = calloc(1, sizeof(*fw));
	if (!fw)
		return MOAT_ENOMEM;
	if (strlen(path) >= sizeof(fw->path)) {
		free(fw);
		return MOAT_EINVAL;
	}
	fw->loop = loop;
	strcpy(fw->path, path);
	fw->timeout_ms = timeout_ms;
	fw->fd = -1;
	fw->next_seq = 1;
	dlist_init(&fw->pending);
	uv_timer_init(loop, &fw->timer);
	fw->timer.data = fw;
	/* Deadlines are checked often enough that a grant never waits much past its own. */
	uint64_t tick = timeout_ms / 4 ? timeout_ms / 4 : 1;
	uv_timer_start(&fw->timer, on_timer, tick, tick);
	try_connect(fw);
	*out = fw;
	return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
	struct fwchan *fw = h->data;
	if (!fw->closing)
		free(fw);
	else
		fw->freeing = true; /* on_poll_closed frees */
}

void fwchan_close(struct fwchan *fw)
{
	if (!fw)
		return;
	drop(fw);
	uv_close((uv_handle_t *)&fw->timer, on_timer_closed);
}

uint32_t fwchan_grant(struct fwchan *fw, struct fwproto_grant *g, fwchan_cb cb, void *ctx)
{
	struct pending *p = malloc(sizeof(*p));
	if (!p) {
		cb(ctx, FWPROTO_FAILED, 0);
		return 0;
	}
	g->seq = fw->next_seq++;
	if (fw->next_seq == 0)
		fw->next_seq = 1;
	int len = fwproto_grant_encode(g, p->msg, sizeof(p->msg));
	if (len < 0 || try_connect(fw) < 0) {
		free(p);
		cb(ctx, FWPROTO_FAILED, 0);
		return 0;
	}
	p->len = (size_t)len;
	p->seq = g->seq;
	p->cb = cb;
	p->ctx = ctx;
	p->sent = false;
	p->deadline_ms = now_ms(fw) + fw->timeout_ms;
	/* Appended at the tail: deadlines stay in order, so the timer looks at the head only. */
	dlist_add(fw->pending.prev, &p->link);
	/* Written from the poll callback, never from here: the callback must not run before the
	 * caller has its token. */
	uv_poll_start(&fw->poll, UV_READABLE | UV_WRITABLE, on_poll);
	return g->seq;
}

void fwchan_cancel(struct fwchan *fw, uint32_t token)
{
	for (struct dlist *l = fw->pending.next; l != &fw->pending; l = l->next) {
		struct pending *p = pending_of(l);
		if (p->seq == token) {
			p->cb = NULL;
			return;
		}
	}
}
