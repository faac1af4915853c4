/* netaddr.c owns the text forms of addresses (see moat/netaddr.h): numeric addresses, address
 * and port, and prefixes, as written and in the IPv4-mapped form. moatd's config and flags,
 * the address guard and moat-fw all read addresses here, so a range one accepts the others
 * accept too. inet_pton is used rather than getaddrinfo because it never resolves names and
 * refuses the inet_aton shorthands ("127.1", "0x7f.1"). */
#include "moat/netaddr.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "moat/err.h"

static const uint8_t netaddr_v4mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

bool netaddr_uint(const char *s, size_t len, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (len == 0 || len > 20)
		return false;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
		if (v > max)
			return false;
	}
	*out = v;
	return true;
}

static int netaddr_set(const char *host, int family, uint16_t port, struct sockaddr_storage *out)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)out;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)out;
	void *dst = family == AF_INET ? (void *)&sin->sin_addr : (void *)&sin6->sin6_addr;

	memset(out, 0, sizeof(*out));
	if (inet_pton(family, host, dst) != 1) {
		memset(out, 0, sizeof(*out));
		return MOAT_EINVAL;
	}
	out->ss_family = (sa_family_t)family;
	if (family == AF_INET)
		sin->sin_port = htons(port);
	else
		sin6->sin6_port = htons(port);
	return 0;
}

int netaddr_parse_addr(const char *s, uint16_t port, struct sockaddr_storage *out)
{
	if (netaddr_set(s, AF_INET, port, out) == 0)
		return 0;
	return netaddr_set(s, AF_INET6, port, out);
}

/* host (len bytes) and an optional written port, into out. */
static int netaddr_host_port(const char *s, size_t hostlen, const char *port_text, uint16_t port,
                             int family, struct sockaddr_storage *out)
{
	char host[INET6_ADDRSTRLEN];
	uint64_t p = port;

	if (hostlen == 0 || hostlen >= sizeof(host))
		return MOAT_EINVAL;
	memcpy(host, s, hostlen);
	host[hostlen] = '\0';
	if (port_text != NULL && (!netaddr_uint(port_text, strlen(port_text), 65535, &p) || p == 0))
		return MOAT_EINVAL;
	return netaddr_set(host, family, (uint16_t)p, out);
}

int netaddr_parse_addrport(const char *s, uint16_t default_port, struct sockaddr_storage *out)
{
	const char *colon;

	if (s == NULL || out == NULL)
		return MOAT_EINVAL;
	if (s[0] == '[') {
		/* "[v6]" or "[v6]:port": the brackets are what lets a port follow an IPv6 address.
		 */
		const char *close = strchr(s, ']');

		if (close == NULL || (close[1] != ':' && close[1] != '\0'))
			return MOAT_EINVAL;
		return netaddr_host_port(s + 1, (size_t)(close - s - 1),
		                         close[1] == ':' ? close + 2 : NULL, default_port, AF_INET6,
		                         out);
	}
	colon = strchr(s, ':');
	if (colon != NULL && strchr(colon + 1, ':') != NULL) /* bare IPv6, default port */
		return netaddr_host_port(s, strlen(s), NULL, default_port, AF_INET6, out);
	/* IPv4, with or without ":port". */
	return netaddr_host_port(s, colon != NULL ? (size_t)(colon - s) : strlen(s),
	                         colon != NULL ? colon + 1 : NULL, default_port, AF_INET, out);
}

bool netaddr_port_zero(const char *s)
{
	size_t n = strlen(s);

	if (n < 3 || strcmp(s + n - 2, ":0") != 0)
		return false;
	return s[n - 3] == ']' || memchr(s, ':', n - 2) == NULL;
}

/* The prefix length after the slash: strict decimal up to max (no leading zeros if asked). */
static bool netaddr_prefix_len(const char *s, unsigned max, unsigned flags, unsigned *out)
{
	uint64_t v;

	if ((flags & NETADDR_CANONICAL) && s[0] == '0' && s[1] != '\0')
		return false;
	if (!netaddr_uint(s, strlen(s), max, &v))
		return false;
	*out = (unsigned)v;
	return true;
}

static bool netaddr_zero_from(const uint8_t *addr, unsigned bits, unsigned max)
{
	for (unsigned i = bits; i < max; i++)
		if (addr[i / 8] & (0x80u >> (i % 8)))
			return false;
	return true;
}

int netaddr_parse_prefix(const char *s, unsigned flags, struct netaddr_prefix *out, bool *host_bits)
{
	char buf[INET6_ADDRSTRLEN];
	const char *slash;
	size_t alen;
	unsigned max, bits;

	if (host_bits != NULL)
		*host_bits = false;
	if (s == NULL || out == NULL)
		return MOAT_EINVAL;
	slash = strchr(s, '/');
	alen = slash != NULL ? (size_t)(slash - s) : strlen(s);
	if (alen == 0 || alen >= sizeof(buf))
		return MOAT_EINVAL;
	memcpy(buf, s, alen);
	buf[alen] = '\0';
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, buf, out->addr) == 1) {
		out->family = 4;
		max = 32;
	} else if (inet_pton(AF_INET6, buf, out->addr) == 1) {
		out->family = 6;
		max = 128;
	} else {
		return MOAT_EINVAL;
	}
	bits = max;
	if (slash != NULL && !netaddr_prefix_len(slash + 1, max, flags, &bits))
		return MOAT_EINVAL;
	if (!netaddr_zero_from(out->addr, bits, max)) {
		if (host_bits != NULL)
			*host_bits = true;
		return MOAT_EINVAL;
	}
	out->bits = (uint8_t)bits;
	return 0;
}

void netaddr_v4_mapped(const uint8_t v4[4], uint8_t out[16])
{
	memcpy(out, netaddr_v4mapped_prefix, sizeof(netaddr_v4mapped_prefix));
	memcpy(out + 12, v4, 4);
}

void netaddr_prefix_to_cidr(const struct netaddr_prefix *p, struct cidr *out)
{
	memset(out, 0, sizeof(*out));
	if (p->family == 4) {
		netaddr_v4_mapped(p->addr, out->addr);
		out->bits = (uint8_t)(96 + p->bits);
	} else {
		memcpy(out->addr, p->addr, 16);
		out->bits = p->bits;
	}
}

int netaddr_parse_cidr(const char *s, struct cidr *out)
{
	struct netaddr_prefix p;
	int rc = netaddr_parse_prefix(s, 0, &p, NULL);

	if (out == NULL)
		return MOAT_EINVAL;
	memset(out, 0, sizeof(*out));
	if (rc == 0)
		netaddr_prefix_to_cidr(&p, out);
	return rc;
}

void netaddr_cidr_from_mask(const uint8_t *addr, const uint8_t *mask, size_t len, struct cidr *out)
{
	uint8_t net[16] = {0};
	unsigned bits = 0;

	for (size_t b = 0; b < len && b < 16; b++) {
		net[b] = addr[b] & mask[b];
		bits += (unsigned)__builtin_popcount(mask[b]);
	}
	memset(out, 0, sizeof(*out));
	if (len == 4) {
		netaddr_v4_mapped(net, out->addr);
		bits += 96;
	} else {
		memcpy(out->addr, net, 16);
	}
	out->bits = (uint8_t)bits;
}

void netaddr_cidr_text(const struct cidr *c, char *out, size_t cap)
{
	char a[INET6_ADDRSTRLEN];

	if (c->bits >= 96 && memcmp(c->addr, netaddr_v4mapped_prefix, 12) == 0) {
		inet_ntop(AF_INET, c->addr + 12, a, sizeof(a));
		snprintf(out, cap, "%s/%u", a, c->bits - 96u);
	} else {
		inet_ntop(AF_INET6, c->addr, a, sizeof(a));
		snprintf(out, cap, "%s/%u", a, (unsigned)c->bits);
	}
}

bool netaddr_cidr_contains(const struct cidr *c, const struct sockaddr *sa)
{
	uint8_t a[16];
	unsigned full, rest;

	if (c == NULL || sa == NULL || c->bits > 128)
		return false;
	if (sa->sa_family == AF_INET) {
		/* Compare in the mapped form the ranges are stored in. */
		netaddr_v4_mapped((const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr, a);
	} else if (sa->sa_family == AF_INET6) {
		/* A v4 client on a dual-stack socket arrives as ::ffff:a.b.c.d, which is exactly
		 * the stored form of IPv4 ranges, so it needs no special case. */
		memcpy(a, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	} else {
		return false;
	}
	full = c->bits / 8;
	rest = c->bits % 8;
	if (memcmp(a, c->addr, full) != 0)
		return false;
	if (rest != 0) {
		uint8_t mask = (uint8_t)(0xffu << (8 - rest));

		if ((a[full] & mask) != (c->addr[full] & mask))
			return false;
	}
	return true;
}

/* Whether the first bits of a and b agree. */
static bool netaddr_same_prefix(const uint8_t *a, const uint8_t *b, unsigned bits)
{
	unsigned full = bits / 8, rest = bits % 8;
	if (memcmp(a, b, full) != 0)
		return false;
	return rest == 0 || !((a[full] ^ b[full]) & (uint8_t)(0xffu << (8 - rest)));
}

bool netaddr_cidr_overlap(const struct cidr *a, const struct cidr *b)
{
	return netaddr_same_prefix(a->addr, b->addr, a->bits < b->bits ? a->bits : b->bits);
}

bool netaddr_cidr_whole(const struct cidr *c)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	return c->bits == 0 || (c->bits == 96 && !memcmp(c->addr, mapped, sizeof(mapped)));
}

/* One half of c: the range one bit longer, with that bit set to half. */
static struct cidr netaddr_half(const struct cidr *c, int half)
{
	struct cidr h = *c;
	if (half)
		h.addr[c->bits / 8] |= (uint8_t)(0x80u >> (c->bits % 8));
	h.bits++;
	return h;
}

bool netaddr_cidr_covered(const struct cidr *c, const struct cidr *by, size_t n)
{
	bool inside = false;
	for (size_t i = 0; i < n; i++) {
		if (by[i].bits <= c->bits && netaddr_same_prefix(c->addr, by[i].addr, by[i].bits))
			return true; /* one range holds all of c */
		inside |= by[i].bits > c->bits && netaddr_same_prefix(c->addr, by[i].addr, c->bits);
	}
	/* Only ranges inside c can cover it together: then both halves must be covered. The
	 * recursion goes one bit deeper each time and only where such a range lies, so it ends
	 * after at most n * 128 steps. */
	if (!inside || c->bits >= 128)
		return false;
	struct cidr lo = netaddr_half(c, 0), hi = netaddr_half(c, 1);
	return netaddr_cidr_covered(&lo, by, n) && netaddr_cidr_covered(&hi, by, n);
}
