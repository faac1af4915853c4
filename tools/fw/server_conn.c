/* server_conn.c owns moat-fw's grant socket: creating and binding the SOCK_SEQPACKET socket,
 * accepting only the --moatd-user uid (SO_PEERCRED) and root (whose only requests are runtime
 * sandboxes, handed to server_sandbox.c) within their share of the slots (a refused peer is
 * closed before any message, and the lines saying so are rate-limited: whoever can open the
 * socket must not drive moat-fw's log), greeting each admitted peer with a HELLO (the
 * placement and the --sandbox ranges, so moatd can tell which clients are covered), reading
 * each connection's grant messages into the turn's pending list (srv->pending, decoded, not yet
 * checked) and sending the ACKs, queued per connection when the socket cannot take them yet.
 *
 * The sockets are plain fds watched with uv_poll_t: uv_pipe_t has no SOCK_SEQPACKET, and message
 * boundaries are the protocol's framing. */
#include "server_conn.h"

#include "server_batch.h"
#include "server_sandbox.h"
#include "moat/bytes.h"
#include "moat/err.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define FWSRV_READS_PER_EVENT 256  /* messages read per readiness event, for fairness */
#define FWSRV_OUTQ_MAX 4096        /* queued ACKs per connection before it is dropped */
#define FWSRV_REFUSED_LOG_MS 10000 /* at most one "refused" line this often */

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
	dlist_del(&c->link);
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

void fwsrv_send_ack(struct fwsrv_conn *c, uint16_t status, uint32_t seq, uint32_t lifetime)
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
		/* Runtime sandboxes (root peers only) are answered at once. */
		if ((size_t)n <= FWPROTO_MAXMSG && fwsrv_sandbox_msg(c, buf, (size_t)n))
			continue;
		struct fwsrv_pending *p = &srv->pending[srv->npending];
		/* A root peer that is not --moatd-user may only add and remove sandboxes: its
		 * grant closes the connection, as a refusal at accept did (a moatd that connected
		 * as root before dropping to its user reconnects as that user). */
		if (c->uid != srv->o->moatd_uid) {
			fprintf(stderr,
			        "moat-fw: grant from uid %u refused: only uid %u "
			        "(--moatd-user) may grant; connection closed\n",
			        (unsigned)c->uid, (unsigned)srv->o->moatd_uid);
			fwsrv_conn_close(c);
			return;
		}
		if ((size_t)n > FWPROTO_MAXMSG ||
		    fwproto_grant_decode(buf, (size_t)n, &p->g) != 0) {
			uint32_t seq = n >= 8 ? be32_get(buf + 4) : 0;
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

/* A refusal worth a line: the first one, then at most one every FWSRV_REFUSED_LOG_MS with the
 * number left unsaid since the last line. Anyone in the socket's group can connect at will (and
 * a misconfigured moatd reconnects for every query): without this they would drive the log. */
static bool fwsrv_refusal_logged(unsigned long *quiet)
{
	static double last = -1e18;
	static unsigned long unsaid;
	double now = fwsrv_ms();
	if (now - last < FWSRV_REFUSED_LOG_MS) {
		unsaid++;
		return false;
	}
	last = now;
	*quiet = unsaid;
	unsaid = 0;
	return true;
}

/* Only the --moatd-user uid may connect, and no uid may hold more than its share of the slots:
 * idle connections of anyone else cannot lock moatd out. */
static bool fwsrv_peer_ok(struct fwsrv *srv, int fd, uid_t *uid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	unsigned long quiet = 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || len != sizeof(cr)) {
		if (fwsrv_refusal_logged(&quiet))
			fprintf(stderr, "moat-fw: SO_PEERCRED failed: %s; connection refused\n",
			        strerror(errno));
		return false;
	}
	*uid = cr.uid;
	/* root too, for runtime sandboxes (server_sandbox.c); its grants are refused */
	if (cr.uid != srv->o->moatd_uid && cr.uid != 0) {
		if (fwsrv_refusal_logged(&quiet))
			fprintf(
			    stderr,
			    "moat-fw: connection from uid %u (pid %d) refused: only uid %u "
			    "(--moatd-user) may grant (%lu more refusals unlogged since the last "
			    "line; at most one line every %d s)\n",
			    (unsigned)cr.uid, (int)cr.pid, (unsigned)srv->o->moatd_uid, quiet,
			    FWSRV_REFUSED_LOG_MS / 1000);
		return false;
	}
	size_t same = 0;
	for (struct dlist *l = srv->conns.next; l != &srv->conns; l = l->next)
		same += container_of(l, struct fwsrv_conn, link)->uid == cr.uid;
	if (srv->nconns >= FWSRV_MAX_CONNS || same >= FWSRV_MAX_PER_UID) {
		if (fwsrv_refusal_logged(&quiet))
			fprintf(
			    stderr,
			    "moat-fw: uid %u already has %zu of %d connections; refusing another "
			    "(%lu more refusals unlogged)\n",
			    (unsigned)cr.uid, same, FWSRV_MAX_PER_UID, quiet);
		return false;
	}
	return true;
}

/* The HELLO every admitted peer gets first: the placement and, on the host, the --sandbox
 * ranges. 0, or -1 when it could not be sent (the peer is then closed). */
static int fwsrv_hello(const struct fwsrv *srv, int fd)
{
	const struct fwsrv_opts *o = srv->o;
	struct fwproto_hello h = {.placement = o->placement == FWNFT_FORWARD ? FWPROTO_FORWARD
	                                                                     : FWPROTO_NETNS};
	uint8_t buf[FWPROTO_HELLO_MAXLEN];
	for (size_t i = 0;
	     h.placement == FWPROTO_FORWARD && i < o->nsandbox && i < FWPROTO_MAXRANGE; i++) {
		struct fwproto_range *r = &h.range[h.nrange++];
		r->family = o->sandbox[i].family;
		r->bits = o->sandbox[i].bits;
		memcpy(r->addr, o->sandbox[i].addr, r->family == 4 ? 4 : 16);
	}
	int n = fwproto_hello_encode(&h, buf, sizeof(buf));
	return n > 0 && send(fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) == n ? 0 : -1;
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
		if (!fwsrv_peer_ok(srv, fd, &uid) || fwsrv_hello(srv, fd) < 0) {
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
		dlist_add(&srv->conns, &c->link);
		srv->nconns++;
		fwsrv_conn_watch(c);
	}
}

/* Create, bind and listen on the socket, replacing a stale socket file (never another kind). */
int fwsrv_listen(struct fwsrv *srv)
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

void fwsrv_accept_start(struct fwsrv *srv)
{
	uv_poll_init(&srv->loop, &srv->listen_poll, srv->listen_fd);
	srv->listen_poll.data = srv;
	uv_poll_start(&srv->listen_poll, UV_READABLE, fwsrv_accept_cb);
}

void fwsrv_conns_close(struct fwsrv *srv)
{
	while (!dlist_empty(&srv->conns))
		fwsrv_conn_close(container_of(srv->conns.next, struct fwsrv_conn, link));
}
