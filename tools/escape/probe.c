/* probe.c owns what moat-escape sends and how it reads what comes back: one TCP connect, one DNS
 * query over UDP or TCP (our own sockets, so the tool needs no dig and no libc resolver that
 * might consult something other than the resolver under test), the classification of a DNS reply
 * into deny / no data / failure / data, and the tunnelling names. Every wait is a poll() against
 * one deadline, so no probe outlives its timeout. */
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
#include "moat/addrguard.h"
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

/* The RFC 8914 info code of the first EDE option in the OPT record, or -1. The message has
 * already passed wire_resp_parse, so the walk only needs to skip, not to distrust. */
static int escape_find_ede(const uint8_t *pkt, size_t len)
{
	uint8_t name[NAME_MAXWIRE];
	size_t off = WIRE_HDR;
	unsigned qd = (unsigned)(pkt[4] << 8 | pkt[5]);
	unsigned rrs = (unsigned)(pkt[6] << 8 | pkt[7]) + (unsigned)(pkt[8] << 8 | pkt[9]) +
	               (unsigned)(pkt[10] << 8 | pkt[11]);

	for (unsigned i = 0; i < qd; i++) {
		if (name_unpack(pkt, len, &off, name) < 0 || off + 4 > len)
			return -1;
		off += 4;
	}
	for (unsigned i = 0; i < rrs; i++) {
		if (name_unpack(pkt, len, &off, name) < 0 || off + 10 > len)
			return -1;
		uint16_t type = (uint16_t)(pkt[off] << 8 | pkt[off + 1]);
		size_t rdlen = (size_t)(pkt[off + 8] << 8 | pkt[off + 9]);
		off += 10;
		if (off + rdlen > len)
			return -1;
		if (type == WIRE_OPT) {
			for (size_t o = off; o + 4 <= off + rdlen;) {
				uint16_t code = (uint16_t)(pkt[o] << 8 | pkt[o + 1]);
				size_t olen = (size_t)(pkt[o + 2] << 8 | pkt[o + 3]);
				if (o + 4 + olen > off + rdlen)
					break;
				if (code == WIRE_EDE_OPTION && olen >= 2)
					return pkt[o + 4] << 8 | pkt[o + 5];
				o += 4 + olen;
			}
		}
		off += rdlen;
	}
	return -1;
}

static bool escape_is_sink(const uint8_t *b, size_t n, const struct escape_addr *sinks,
                           size_t nsinks)
{
	for (size_t i = 0; i < nsinks; i++)
		if (sinks[i].len == n && memcmp(sinks[i].b, b, n) == 0)
			return true;
	return false;
}

void escape_classify(const uint8_t *pkt, size_t len, uint16_t id, const uint8_t *lname,
                     uint16_t qtype, const struct escape_addr *sinks, size_t nsinks,
                     struct escape_answer *a)
{
	/* ~17 KB: too much for every caller's stack frame to carry twice, fine once here. */
	static struct wire_resp r;

	memset(a, 0, sizeof(*a));
	a->ede = -1;
	a->addr_ttl = UINT32_MAX;
	a->verdict = ESCAPE_V_MALFORMED;
	if (wire_resp_parse(pkt, len, id, lname, qtype, WIRE_CLASS_IN, &r) != 0)
		return;
	a->rcode = r.rcode;
	a->ede = escape_find_ede(pkt, len);
	for (unsigned i = 0; i < r.nrr; i++) {
		const struct wire_rr *rr = &r.rr[i];
		if (rr->section != WIRE_SEC_AN)
			continue;
		bool is_addr = (rr->type == WIRE_A && rr->rdlen == 4) ||
		               (rr->type == WIRE_AAAA && rr->rdlen == 16);
		if (!is_addr) {
			a->nother++;
		} else if (escape_is_sink(pkt + rr->rdata_off, rr->rdlen, sinks, nsinks)) {
			a->nsink++;
		} else {
			if (a->naddr < ESCAPE_MAXADDR) {
				a->addr[a->naddr].len = (uint8_t)rr->rdlen;
				memcpy(a->addr[a->naddr].b, pkt + rr->rdata_off, rr->rdlen);
			}
			a->naddr++;
			if (rr->ttl < a->addr_ttl)
				a->addr_ttl = rr->ttl;
		}
	}
	if (r.ext_rcode != 0) {
		a->verdict = ESCAPE_V_FAIL; /* BADVERS and friends: an error, not a deny */
	} else if (a->rcode == WIRE_NXDOMAIN || a->rcode == WIRE_REFUSED) {
		a->verdict = ESCAPE_V_DENY;
	} else if (a->rcode != WIRE_NOERROR) {
		a->verdict = ESCAPE_V_FAIL;
	} else if (a->naddr > 0 || a->nother > 0) {
		a->verdict = ESCAPE_V_DATA;
	} else if (a->nsink > 0) {
		a->verdict = ESCAPE_V_DENY;
	} else {
		a->verdict = ESCAPE_V_NODATA;
	}
}

/* Broad versions of zones/blocked-ranges.txt, compiled in because the sandbox the tool runs in
 * need not have moat's data files. The address guard adds the embedded-IPv4 forms. */
static const char *const escape_internal_ranges[] = {
    "0.0.0.0/8",     "127.0.0.0/8",   "169.254.0.0/16", "224.0.0.0/4",   "240.0.0.0/4",
    "10.0.0.0/8",    "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "192.0.0.0/24",
    "198.18.0.0/15", "168.63.129.16", "::/128",         "::1/128",       "fe80::/10",
    "fec0::/10",     "ff00::/8",      "100::/64",       "fc00::/7",
};

bool escape_addr_internal(const struct escape_addr *a)
{
	static struct addrguard *g;

	if (g == NULL) {
		g = addrguard_new();
		for (size_t i = 0; g != NULL && i < sizeof(escape_internal_ranges) /
		                                        sizeof(escape_internal_ranges[0]);
		     i++)
			addrguard_add(g, escape_internal_ranges[i], ADDR_ALWAYS);
		if (g == NULL)
			return true; /* out of memory: fail towards "escaped", never towards "held"
			              */
	}
	return addrguard_check(g, a->b, a->len) != ADDR_OK;
}

const char *escape_answer_str(const struct escape_answer *a, char *buf, size_t cap)
{
	char t[INET6_ADDRSTRLEN];
	size_t n;

	if (a->verdict == ESCAPE_V_MALFORMED) {
		snprintf(buf, cap, "malformed reply");
		return buf;
	}
	n = (size_t)snprintf(buf, cap, "%s", wire_rcode_str(a->rcode));
	for (size_t i = 0; i < a->naddr && i < ESCAPE_MAXADDR && n < cap; i++) {
		inet_ntop(a->addr[i].len == 4 ? AF_INET : AF_INET6, a->addr[i].b, t, sizeof(t));
		n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? "," : " ", t);
	}
	if (a->nsink > 0 && n < cap)
		n += (size_t)snprintf(buf + n, cap - n, " sinkhole");
	if (a->nother > 0 && n < cap)
		n += (size_t)snprintf(buf + n, cap - n, " +%zu record%s", a->nother,
		                      a->nother == 1 ? "" : "s");
	if (a->verdict == ESCAPE_V_NODATA && n < cap)
		n += (size_t)snprintf(buf + n, cap - n, " (no data)");
	if (a->ede >= 0 && n < cap)
		snprintf(buf + n, cap - n, " (EDE %d)", a->ede);
	return buf;
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
