/* probe.c owns what moat-escape sends and how it receives: one TCP connect, one DNS query over
 * UDP or TCP (our own sockets, so the tool needs no dig and no libc resolver that might consult
 * something other than the resolver under test), and the tunnelling names. What a reply means is
 * judge.c's. Every wait is a poll() against one deadline, so no probe outlives its timeout. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "escape.h"
#include "moat/err.h"
#include "moat/wire.h"

static int64_t escape_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static socklen_t escape_salen(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* poll one fd until events or the deadline. Returns 1 ready, 0 timed out, -1 error (errno). */
static int escape_wait(int fd, short events, int64_t deadline)
{
	for (;;) {
		int64_t left = deadline - escape_now_ms();
		if (left <= 0)
			return 0;
		struct pollfd p = {.fd = fd, .events = events};
		int n = poll(&p, 1, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (n == 0)
			return 0;
		return 1;
	}
}

/* Start a non-blocking connect and wait for it. Returns the fd, or -1 with *st and *err set. */
static int escape_tcp_open(const struct sockaddr *sa, int64_t deadline, enum escape_conn *st,
                           int *err)
{
	int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int e = 0;
	socklen_t el = sizeof(e);

	*err = 0;
	if (fd < 0) {
		*st = ESCAPE_CONN_UNREACH;
		*err = errno;
		return -1;
	}
	if (sa->sa_family == AF_INET6) {
		/* ::ffff:a.b.c.d must really go out as IPv4: that is the form being tested. */
		int off = 0;
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
	}
	if (connect(fd, sa, escape_salen(sa)) == 0)
		goto open;
	if (errno != EINPROGRESS) {
		e = errno;
		goto fail;
	}
	int w = escape_wait(fd, POLLOUT, deadline);
	if (w == 0) {
		*st = ESCAPE_CONN_TIMEOUT;
		close(fd);
		return -1;
	}
	if (w < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) != 0)
		e = errno;
	if (e == 0)
		goto open;
fail:
	*err = e;
	if (e == ECONNREFUSED)
		*st = ESCAPE_CONN_REFUSED;
	else if (e == ETIMEDOUT)
		*st = ESCAPE_CONN_TIMEOUT;
	else
		*st = ESCAPE_CONN_UNREACH;
	close(fd);
	return -1;
open:
	*st = ESCAPE_CONN_OPEN;
	return fd;
}

enum escape_conn escape_connect(const struct sockaddr *sa, unsigned timeout_ms, int *err)
{
	enum escape_conn st;
	int fd = escape_tcp_open(sa, escape_now_ms() + timeout_ms, &st, err);

	if (fd >= 0)
		close(fd);
	return st;
}

const char *escape_conn_str(enum escape_conn st, int err, char *buf, size_t cap)
{
	switch (st) {
	case ESCAPE_CONN_OPEN:
		snprintf(buf, cap, "open");
		break;
	case ESCAPE_CONN_REFUSED:
		snprintf(buf, cap, "refused");
		break;
	case ESCAPE_CONN_TIMEOUT:
		snprintf(buf, cap, "timeout");
		break;
	default:
		snprintf(buf, cap, "%s", err ? strerror(err) : "unreachable");
		break;
	}
	return buf;
}

/* Our reply: at least a header, our ID, QR set. Stray packets are skipped, not fatal. */
static bool escape_is_reply(const uint8_t *p, size_t n, uint16_t id)
{
	return n >= WIRE_HDR && (uint16_t)(p[0] << 8 | p[1]) == id && (p[2] & 0x80);
}

static void escape_dns_udp(const struct sockaddr *server, const uint8_t *q, size_t qlen,
                           int64_t deadline, struct escape_dns *out)
{
	int fd = socket(server->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	/* connect(): the kernel then drops datagrams from anyone else and reports ICMP errors. */
	if (fd < 0 || connect(fd, server, escape_salen(server)) != 0 ||
	    send(fd, q, qlen, 0) != (ssize_t)qlen) {
		out->status = ESCAPE_DNS_NETERR;
		out->err = errno;
		goto done;
	}
	for (;;) {
		int w = escape_wait(fd, POLLIN, deadline);
		if (w == 0) {
			out->status = ESCAPE_DNS_TIMEOUT;
			break;
		}
		ssize_t n = w < 0 ? -1 : recv(fd, out->pkt, sizeof(out->pkt), 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0) {
			out->status = ESCAPE_DNS_NETERR;
			out->err = errno;
			break;
		}
		if (escape_is_reply(out->pkt, (size_t)n, out->id)) {
			out->status = ESCAPE_DNS_REPLY;
			out->len = (size_t)n;
			out->tcp = false;
			break;
		}
	}
done:
	if (fd >= 0)
		close(fd);
}

/* Read exactly n bytes before the deadline. Returns 0, 1 on timeout, -1 on error/EOF. */
static int escape_read_full(int fd, uint8_t *buf, size_t n, int64_t deadline)
{
	size_t got = 0;

	while (got < n) {
		int w = escape_wait(fd, POLLIN, deadline);
		if (w == 0)
			return 1;
		ssize_t r = w < 0 ? -1 : read(fd, buf + got, n - got);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = ECONNRESET;
			return -1;
		}
		got += (size_t)r;
	}
	return 0;
}

static void escape_dns_tcp(const struct sockaddr *server, const uint8_t *q, size_t qlen,
                           int64_t deadline, struct escape_dns *out)
{
	enum escape_conn st;
	uint8_t msg[2 + 512];
	uint8_t lenb[2];
	size_t sent = 0;
	int fd = escape_tcp_open(server, deadline, &st, &out->err);

	if (fd < 0) {
		out->status = st == ESCAPE_CONN_TIMEOUT ? ESCAPE_DNS_TIMEOUT : ESCAPE_DNS_NETERR;
		return;
	}
	msg[0] = (uint8_t)(qlen >> 8);
	msg[1] = (uint8_t)qlen;
	memcpy(msg + 2, q, qlen);
	while (sent < qlen + 2) {
		int w = escape_wait(fd, POLLOUT, deadline);
		if (w == 0)
			goto timeout;
		ssize_t n = w < 0 ? -1 : send(fd, msg + sent, qlen + 2 - sent, MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0)
			goto neterr;
		sent += (size_t)n;
	}
	/* One connection, one query: the first complete message that is ours is the reply. */
	for (;;) {
		int r = escape_read_full(fd, lenb, 2, deadline);
		size_t n = (size_t)lenb[0] << 8 | lenb[1];
		if (r == 0)
			r = escape_read_full(fd, out->pkt, n, deadline);
		if (r == 1)
			goto timeout;
		if (r < 0)
			goto neterr;
		if (escape_is_reply(out->pkt, n, out->id)) {
			out->status = ESCAPE_DNS_REPLY;
			out->len = n;
			out->tcp = true;
			break;
		}
	}
	close(fd);
	return;
timeout:
	out->status = ESCAPE_DNS_TIMEOUT;
	close(fd);
	return;
neterr:
	out->status = ESCAPE_DNS_NETERR;
	out->err = errno;
	close(fd);
}

void escape_dns_query(const struct sockaddr *server, const char *name, uint16_t qtype,
                      enum escape_transport tr, unsigned timeout_ms, struct escape_dns *out)
{
	uint8_t q[512];
	int64_t deadline = escape_now_ms() + timeout_ms;
	int ql;

	out->status = ESCAPE_DNS_TIMEOUT;
	out->err = 0;
	out->tcp = false;
	out->len = 0;
	out->qtype = qtype;
	out->id = (uint16_t)randombytes_uniform(65536);
	if (name_from_text(name, strlen(name), out->lname) < 0 ||
	    (ql = wire_build_query(out->id, out->lname, qtype, WIRE_CLASS_IN, false, q,
	                           sizeof(q))) < 0) {
		out->status = ESCAPE_DNS_BADNAME;
		return;
	}
	if (tr != ESCAPE_TR_TCP) {
		escape_dns_udp(server, q, (size_t)ql, deadline, out);
		/* TC=1: the real answer is only over TCP. */
		if (tr == ESCAPE_TR_UDP || out->status != ESCAPE_DNS_REPLY || !(out->pkt[2] & 0x02))
			return;
	}
	escape_dns_tcp(server, q, (size_t)ql, deadline, out);
}

void escape_base32(const uint8_t *in, size_t n, char *out)
{
	static const char abc[] = "abcdefghijklmnopqrstuvwxyz234567";
	uint32_t acc = 0;
	int bits = 0;
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		acc = (acc << 8) | in[i];
		bits += 8;
		while (bits >= 5) {
			out[o++] = abc[(acc >> (bits - 5)) & 31];
			bits -= 5;
		}
	}
	if (bits > 0)
		out[o++] = abc[(acc << (5 - bits)) & 31];
	out[o] = '\0';
}

int escape_tunnel_name(const char *domain, char *out, size_t cap)
{
	uint8_t wire[NAME_MAXWIRE];
	uint8_t raw[40];
	char label[72];
	int dl = name_from_text(domain, strlen(domain), wire);
	size_t n = 0;

	if (dl <= 1)
		return MOAT_EINVAL;
	/* Wire bytes left for our labels: 255 minus the domain; each label costs 1 + its length. */
	int room = NAME_MAXWIRE - dl;
	if (room < 3 * 64)
		return MOAT_EINVAL;
	for (int i = 0; i < 4 && room >= 2; i++) {
		int ll = room >= 64 ? 63 : room - 1;
		/* 40 random bytes give 64 base32 characters; keep the first ll. */
		randombytes_buf(raw, sizeof(raw));
		escape_base32(raw, sizeof(raw), label);
		label[ll] = '\0';
		int w = snprintf(out + n, cap - n, "%s.", label);
		if (w < 0 || (size_t)w >= cap - n)
			return MOAT_ESPACE;
		n += (size_t)w;
		room -= ll + 1;
	}
	int w = snprintf(out + n, cap - n, "%s", domain);
	if (w < 0 || (size_t)w >= cap - n)
		return MOAT_ESPACE;
	return (int)(n + (size_t)w);
}
