/* fwchan.c owns moatd's connection to moat-fw: a non-blocking SOCK_SEQPACKET socket watched
 * with uv_poll, a queue of grants waiting to be written, a table of grants waiting for their
 * ACK (each with a deadline), and reconnection when moat-fw restarts. Anything that goes wrong
 * completes the waiting grants with FWPROTO_FAILED: moatd then answers SERVFAIL (fail closed).
 *
 * A channel connects on its first grant, never before: moatd's workers are made as root, and a
 * connection made then would be refused by a moat-fw that admits only moatd's user (or, worse,
 * kept as root's). moat-fw's first message is a HELLO; a connection it closes before that did
 * not admit moatd's user: said once, and not tried again for FWCHAN_REFUSED_MS, so a wrong
 * setup costs one connect a second, not one per query. The last HELLO (its sandbox ranges) is
 * kept for the control socket's agent checks (fwchan_coverage); fwchan_probe is start-up's
 * check that the socket admits the user moatd now runs as. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
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
	const char *last_step;     /* where it failed ("connect"), for fwchan_state */
	bool hello;                /* the connection's HELLO arrived */
	uint64_t refused_until_ms; /* moat-fw closed us before its HELLO: no retry before this */
};

#define FWCHAN_REFUSED_MS 1000
/* A cause of connect_failed that is no errno: moat-fw closed the connection before its HELLO. */
#define FWCHAN_E_NOT_ADMITTED (-1)

/* The last HELLO of any channel (every worker talks to the same moat-fw). */
static pthread_mutex_t cover_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fwproto_hello cover;
static bool cover_known;

static void cover_set(const struct fwproto_hello *h)
{
	pthread_mutex_lock(&cover_lock);
	cover = *h;
	cover_known = true;
	pthread_mutex_unlock(&cover_lock);
}

bool fwchan_coverage(struct fwproto_hello *out)
{
	pthread_mutex_lock(&cover_lock);
	bool known = cover_known;
	if (known)
		*out = cover;
	pthread_mutex_unlock(&cover_lock);
	return known;
}

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

/* What to do about a connection moat-fw did not take, as text for moatd's messages. */
static const char *fix_for(int e)
{
	return e == FWCHAN_E_NOT_ADMITTED
	           ? "moat-fw closed it before its HELLO: its --moatd-user is another user"
	       : e == EACCES || e == EPERM
	           ? "the socket's group must be moatd's (moat-fw --socket-group) and its "
	             "directory searchable by moatd's user"
	       : e == ENOENT || e == ECONNREFUSED ? "moat-fw is not listening there (yet)"
	                                          : NULL;
}

/* A connect that failed with errno e (or FWCHAN_E_NOT_ADMITTED): say so once per cause, with
 * moatd's uid and gid and what would fix it (a permission problem on the socket must not show
 * up only as SERVFAIL), and keep errno for the caller. */
static int connect_failed(struct fwchan *fw, int fd, const char *step, int e)
{
	if (fd >= 0)
		close(fd);
	if (e != fw->last_errno) {
		const char *fix = fix_for(e);
		fprintf(stderr,
		        "moatd: firewall channel %s: %s: %s (moatd runs as uid %u, gid %u)%s%s\n",
		        fw->path, step, e == FWCHAN_E_NOT_ADMITTED ? "not admitted" : strerror(e),
		        (unsigned)getuid(), (unsigned)getgid(), fix ? ": " : "", fix ? fix : "");
	}
	fw->last_errno = e;
	fw->last_step = step;
	errno = e > 0 ? e : EACCES;
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
	if (fw->closing || fw->freeing || now_ms(fw) < fw->refused_until_ms)
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
	fw->hello = false;
	fw->poll.data = fw;
	fw->polling = true;
	uv_poll_start(&fw->poll, UV_READABLE, on_poll);
	return 0;
}

/* Write what waits to be written; ask for POLLOUT when the socket is full. Nothing goes out
 * before moat-fw's HELLO: until then it has not admitted us. */
static void flush(struct fwchan *fw)
{
	bool blocked = false;
	for (struct dlist *l = fw->hello ? fw->pending.next : &fw->pending; l != &fw->pending;
	     l = l->next) {
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

/* Read what moat-fw sent: its HELLO first, then ACKs. True when the HELLO came in this read
 * (the grants waiting for it can go). A closed or unreadable channel is dropped. */
static bool read_all(struct fwchan *fw)
{
	bool greeted = false;
	for (int i = 0; i < 256; i++) {
		uint8_t buf[FWPROTO_HELLO_MAXLEN + 1];
		ssize_t n = recv(fw->fd, buf, sizeof(buf), 0);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return greeted;
		if (n <= 0) {
			if (!fw->hello) { /* closed before its HELLO: moat-fw did not admit us */
				fw->refused_until_ms = now_ms(fw) + FWCHAN_REFUSED_MS;
				connect_failed(fw, -1, "connect", FWCHAN_E_NOT_ADMITTED);
			}
			drop(fw); /* moat-fw went away */
			return false;
		}
		if (!fw->hello) {
			struct fwproto_hello h;
			if (fwproto_hello_decode(buf, (size_t)n, &h) < 0) {
				connect_failed(fw, -1, "HELLO", EPROTO);
				drop(fw); /* another channel format: nothing it says can be read */
				return false;
			}
			fw->hello = greeted = true;
			fw->last_errno = 0;
			cover_set(&h);
			continue;
		}
		struct fwproto_ack a;
		if (fwproto_ack_decode(buf, (size_t)n, &a) < 0) {
			drop(fw); /* a peer that speaks nonsense is not trusted further */
			return false;
		}
		for (struct dlist *l = fw->pending.next; l != &fw->pending; l = l->next) {
			struct pending *p = pending_of(l);
			if (p->seq == a.seq) {
				complete(p, a.status, a.lifetime);
				break;
			}
		}
	}
	return greeted;
}

static void on_poll(uv_poll_t *h, int status, int events)
{
	struct fwchan *fw = h->data;
	if (status < 0) {
		drop(fw);
		return;
	}
	/* A hang-up is read to its end first: a HELLO may precede it, or nothing (not admitted). */
	bool greeted = (events & (UV_READABLE | UV_DISCONNECT)) && read_all(fw);
	if (fw->polling && (greeted || (events & UV_WRITABLE)))
		flush(fw);
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
	*out = fw; /* connected by the first grant (see the file comment) */
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

int fwchan_probe(const char *path, uint32_t timeout_ms, char *why, size_t cap)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path)) {
		snprintf(why, cap, "path too long for a unix socket");
		return FWCHAN_REFUSED;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		snprintf(why, cap, "socket: %s", strerror(errno));
		return FWCHAN_REFUSED;
	}
	int rc = FWCHAN_ADMITTED, e = 0;
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	uint8_t buf[FWPROTO_HELLO_MAXLEN + 1];
	struct fwproto_hello h;
	ssize_t n = 0;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		e = errno;
		rc = e == ENOENT || e == ECONNREFUSED ? FWCHAN_ABSENT : FWCHAN_REFUSED;
	} else if (poll(&pfd, 1, (int)timeout_ms) <= 0) {
		rc = FWCHAN_SILENT;
	} else if ((n = recv(fd, buf, sizeof(buf), 0)) <= 0) {
		e = FWCHAN_E_NOT_ADMITTED;
		rc = FWCHAN_REFUSED;
	} else if (fwproto_hello_decode(buf, (size_t)n, &h) < 0) {
		e = EPROTO;
		rc = FWCHAN_REFUSED;
	} else {
		cover_set(&h);
	}
	close(fd);
	const char *fix = fix_for(e);
	if (rc == FWCHAN_SILENT)
		snprintf(why, cap, "no HELLO within %u ms (a moat-fw of an older channel format?)",
		         (unsigned)timeout_ms);
	else if (e == EPROTO)
		snprintf(why, cap,
		         "its first message is no HELLO of format %d: moat-fw and moatd "
		         "must be of the same version",
		         FWPROTO_VERSION);
	else if (rc != FWCHAN_ADMITTED)
		snprintf(why, cap, "%s%s%s",
		         e == FWCHAN_E_NOT_ADMITTED ? "not admitted" : strerror(e), fix ? ": " : "",
		         fix ? fix : "");
	return rc;
}
