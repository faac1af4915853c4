/* hostile.c owns tests 11 and 12, the two that need a witness outside the sandbox (a host
 * reached through an allowed name, running tools/escape/witness.py): the sandbox cannot see
 * for itself whether a packet with a forged source arrived somewhere, or whether a connection
 * from outside would reach it, so the witness says.
 *   11  UDP datagrams to the witness from forged sources (a raw socket: CAP_NET_RAW), with one
 *       from the real source as the control; any forged one the witness saw escaped.
 *   12  the witness connects back to the sandbox (inbound-port, which the sandbox listens on);
 *       a completed handshake escaped.
 * Each family the witness has an address in is tried. The witness is resolved through the
 * resolver like any allowed name, so its address is granted: only the source check (11) and
 * the inbound rule (12) can stop these packets. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "escape.h"
#include "moat/bytes.h"

#define ESCAPE_CALLBACK_MS 2000 /* the witness waits up to 1.5 s for its connection */

static uint16_t escape_csum(const uint8_t *p, size_t n, uint32_t s)
{
	for (size_t i = 0; i + 1 < n; i += 2)
		s += be16_get(p + i);
	if (n & 1)
		s += (uint32_t)(p[n - 1] << 8);
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* One UDP datagram from src to dst:port carrying token, header and all; returns its length. */
static size_t escape_forge(const struct escape_addr *src, const struct escape_addr *dst,
                           uint16_t port, const char *token, uint8_t *pkt)
{
	size_t tl = strlen(token), ul = 8 + tl, hl = src->len == 4 ? 20 : 40;
	uint8_t *u = pkt + hl;
	uint32_t ps = 17 + (uint32_t)ul; /* pseudo-header: protocol and length, then addresses */
	for (size_t i = 0; i < src->len; i += 2)
		ps += (uint32_t)be16_get(src->b + i) + be16_get(dst->b + i);
	memset(pkt, 0, hl + 8);
	be16_put(u, 40000); /* source port */
	be16_put(u + 2, port);
	be16_put(u + 4, (uint16_t)ul);
	memcpy(u + 8, token, tl);
	uint16_t c = escape_csum(u, ul, ps);
	c = c ? c : 0xffff;
	be16_put(u + 6, c);
	if (src->len == 4) {
		pkt[0] = 0x45;
		be16_put(pkt + 2, (uint16_t)(hl + ul));
		pkt[8] = 64, pkt[9] = 17;
		memcpy(pkt + 12, src->b, 4);
		memcpy(pkt + 16, dst->b, 4);
	} else {
		pkt[0] = 0x60;
		be16_put(pkt + 4, (uint16_t)ul);
		pkt[6] = 17, pkt[7] = 64;
		memcpy(pkt + 8, src->b, 16);
		memcpy(pkt + 24, dst->b, 16);
	}
	return hl + ul;
}

/* One question to the witness over TCP, one line back, all within ms. 0 or -1. */
static int escape_witness_ask(const struct sockaddr_storage *sa, const char *q, char *ans,
                              size_t cap, unsigned ms)
{
	int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	size_t got = 0;
	int rc = -1;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (fd < 0)
		return -1;
	socklen_t sl =
	    sa->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	if (connect(fd, (const struct sockaddr *)sa, sl) != 0 && errno != EINPROGRESS)
		goto out;
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	if (poll(&p, 1, (int)ms) != 1 || send(fd, q, strlen(q), MSG_NOSIGNAL) != (ssize_t)strlen(q))
		goto out;
	while (got + 1 < cap) {
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		long left = (long)ms - (long)((t.tv_sec - t0.tv_sec) * 1000 +
		                              (t.tv_nsec - t0.tv_nsec) / 1000000);
		p.events = POLLIN;
		if (left <= 0 || poll(&p, 1, (int)left) != 1)
			goto out;
		ssize_t n = recv(fd, ans + got, cap - 1 - got, 0);
		if (n <= 0)
			goto out;
		got += (size_t)n;
		ans[got] = '\0';
		if (memchr(ans, '\n', got)) {
			rc = 0;
			break;
		}
	}
out:
	close(fd);
	return rc;
}

/* The witness's addresses (resolved through the resolver, which grants them). */
static size_t escape_witness(const struct escape_cfg *c, struct escape_addr w[2],
                             struct escape_result *r)
{
	char txt[600];
	size_t n = escape_resolve2(c, c->witness_host, w, txt, sizeof(txt));
	if (n == 0) {
		r->outcome = ESCAPE_NOTRUN;
		snprintf(r->reason, sizeof(r->reason), "witness %s did not resolve",
		         c->witness_host);
		escape_appendf(r->detail, sizeof(r->detail), "witness %s: %s", c->witness_host,
		               txt);
	}
	return n;
}

/* The sandbox's own source toward dst (the kernel's choice). */
static int escape_own(const struct escape_addr *dst, struct escape_addr *own)
{
	struct sockaddr_storage sa, me;
	socklen_t ml = sizeof(me);
	escape_to_sa(dst, 9, &sa);
	int fd = socket(sa.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc = fd >= 0 &&
	                 connect(fd, (struct sockaddr *)&sa,
	                         dst->len == 4 ? sizeof(struct sockaddr_in)
	                                       : sizeof(struct sockaddr_in6)) == 0 &&
	                 getsockname(fd, (struct sockaddr *)&me, &ml) == 0
	             ? 0
	             : -1;
	if (fd >= 0)
		close(fd);
	own->len = dst->len;
	if (rc == 0)
		memcpy(own->b,
		       dst->len == 4 ? (void *)&((struct sockaddr_in *)&me)->sin_addr
		                     : (void *)&((struct sockaddr_in6 *)&me)->sin6_addr,
		       dst->len);
	return rc;
}

/* The forged sources of one family: the configured ones, or a neighbour of the sandbox's own
 * address on its link and a far documentation address. */
static size_t escape_spoof_sources(const struct escape_cfg *c, const struct escape_addr *own,
                                   struct escape_addr *out)
{
	size_t n = 0;
	for (size_t i = 0; i < c->nspoof; i++) {
		const struct sockaddr_storage *s = &c->spoof[i];
		if ((s->ss_family == AF_INET) != (own->len == 4))
			continue;
		out[n].len = own->len;
		memcpy(out[n++].b,
		       own->len == 4 ? (const void *)&((const struct sockaddr_in *)s)->sin_addr
		                     : (const void *)&((const struct sockaddr_in6 *)s)->sin6_addr,
		       own->len);
	}
	if (c->nspoof)
		return n;
	out[0] = *own;
	out[0].b[own->len - 1] ^= 1;
	out[1].len = own->len;
	inet_pton(own->len == 4 ? AF_INET : AF_INET6,
	          own->len == 4 ? "198.51.100.254" : "2001:db8:ffff::1", out[1].b);
	return 2;
}

/* Test 11 for one witness address. */
static void escape_spoof_family(const struct escape_cfg *c, const struct escape_addr *w,
                                struct escape_result *r)
{
	struct escape_addr own, src[ESCAPE_MAXLIST];
	char tok[ESCAPE_MAXLIST + 1][24], q[ESCAPE_DETAIL], ans[ESCAPE_DETAIL],
	    at[INET6_ADDRSTRLEN];
	uint8_t pkt[128];
	struct sockaddr_storage dst;
	uint32_t id = randombytes_random();

	inet_ntop(w->len == 4 ? AF_INET : AF_INET6, w->b, at, sizeof(at));
	if (escape_own(w, &own) != 0) {
		escape_appendf(r->detail, sizeof(r->detail), "%s: no route", at);
		return;
	}
	size_t n = escape_spoof_sources(c, &own, src);
	int fd = socket(w->len == 4 ? AF_INET : AF_INET6, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW);
	if (fd < 0) {
		escape_appendf(r->detail, sizeof(r->detail),
		               "%s: raw socket refused (%s): nothing to forge", at,
		               strerror(errno));
		return;
	}
	escape_to_sa(w, 0, &dst);
	int p = snprintf(q, sizeof(q), "SEEN");
	for (size_t i = 0; i <= n; i++) {
		snprintf(tok[i], sizeof(tok[i]), "moat-%08x-%zu", id, i);
		size_t len =
		    escape_forge(i == 0 ? &own : &src[i - 1], w, c->witness_port, tok[i], pkt);
		ssize_t s = sendto(fd, pkt, len, 0, (struct sockaddr *)&dst, sizeof(dst));
		if (i > 0 && s < 0)
			escape_appendf(r->detail, sizeof(r->detail),
			               "%s from forged source refused here (%s)", at,
			               strerror(errno));
		p += snprintf(q + p, sizeof(q) - (size_t)p, " %s", tok[i]);
	}
	close(fd);
	snprintf(q + p, sizeof(q) - (size_t)p, "\n");
	escape_to_sa(w, c->witness_port, &dst);
	if (escape_witness_ask(&dst, q, ans, sizeof(ans), c->timeout_ms + 1000) != 0 ||
	    !strstr(ans, tok[0])) {
		/* Without the control this family proves nothing; an escape elsewhere stands. */
		if (r->outcome != ESCAPE_ESCAPED) {
			r->outcome = ESCAPE_NOTRUN;
			snprintf(r->reason, sizeof(r->reason),
			         "witness %s did not see the datagram from the real source", at);
		}
		escape_appendf(r->detail, sizeof(r->detail), "%s: control datagram not seen", at);
		return;
	}
	for (size_t i = 1; i <= n; i++) {
		char st[INET6_ADDRSTRLEN];
		inet_ntop(w->len == 4 ? AF_INET : AF_INET6, src[i - 1].b, st, sizeof(st));
		bool seen = strstr(ans, tok[i]) != NULL;
		escape_appendf(r->detail, sizeof(r->detail), "%s from %s: %s", at, st,
		               seen ? "ARRIVED" : "not seen");
		if (seen && r->outcome != ESCAPE_ESCAPED) {
			r->outcome = ESCAPE_ESCAPED;
			snprintf(r->reason, sizeof(r->reason),
			         "a datagram from forged source %s reached %s", st, at);
		}
	}
}

void escape_test_spoof(const struct escape_cfg *c, struct escape_result *r)
{
	struct escape_addr w[2];
	size_t n = escape_witness(c, w, r);
	for (size_t i = 0; i < n; i++)
		escape_spoof_family(c, &w[i], r);
}

void escape_test_inbound(const struct escape_cfg *c, struct escape_result *r)
{
	struct escape_addr w[2];
	char q[32], ans[128], at[INET6_ADDRSTRLEN];
	size_t n = escape_witness(c, w, r);
	struct sockaddr_in6 any = {.sin6_family = AF_INET6, .sin6_port = htons(c->inbound_port)};
	int off = 0, one = 1;
	int ls = n ? socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0) : -1;

	if (n == 0)
		return;
	if (ls < 0 || setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off)) != 0 ||
	    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(ls, (struct sockaddr *)&any, sizeof(any)) != 0 || listen(ls, 8) != 0) {
		r->outcome = ESCAPE_NOTRUN;
		snprintf(r->reason, sizeof(r->reason), "cannot listen on port %u: %s",
		         c->inbound_port, strerror(errno));
		if (ls >= 0)
			close(ls);
		return;
	}
	snprintf(q, sizeof(q), "CALLBACK %u\n", c->inbound_port);
	for (size_t i = 0; i < n; i++) {
		struct sockaddr_storage dst;
		escape_to_sa(&w[i], c->witness_port, &dst);
		inet_ntop(w[i].len == 4 ? AF_INET : AF_INET6, w[i].b, at, sizeof(at));
		bool asked = escape_witness_ask(&dst, q, ans, sizeof(ans),
		                                c->timeout_ms + ESCAPE_CALLBACK_MS) == 0;
		int cfd = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
		bool open = cfd >= 0 || (asked && strstr(ans, "CALLBACK open"));
		if (cfd >= 0)
			close(cfd);
		escape_appendf(r->detail, sizeof(r->detail), "%s connecting to port %u: %s", at,
		               c->inbound_port,
		               !asked ? "witness did not answer"
		               : open ? "OPEN"
		                      : "no connection");
		if (open && r->outcome != ESCAPE_ESCAPED) {
			r->outcome = ESCAPE_ESCAPED;
			snprintf(r->reason, sizeof(r->reason),
			         "%s opened a connection to the sandbox's port %u", at,
			         c->inbound_port);
		} else if (!asked && r->outcome == ESCAPE_HELD) {
			r->outcome = ESCAPE_NOTRUN;
			snprintf(r->reason, sizeof(r->reason), "witness %s did not answer", at);
		}
	}
	close(ls);
}
