/* hostnet.c owns what moat-fw reads from the network stack it runs in (see hostnet.h): the
 * interface a sandbox range is routed to, the host's own addresses and on-link IPv6 prefixes,
 * and entering the sandbox's network namespace.
 *
 * Routes come from /proc/net/route and /proc/net/ipv6_route rather than rtnetlink: the text is
 * a stable kernel interface, the parser is a pure function, and start-up is not a hot path. */
#include "hostnet.h"
#include "moat/bytes.h"
#include "moat/err.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FWHOST_RTF_GATEWAY 0x0002u
#define FWHOST_RTF_REJECT 0x0200u
#define FWHOST_RTF_LOCAL 0x80000000u /* IPv6: a route to one of our own addresses */

static int fwhost_hex(const char *s, size_t n, uint8_t *out)
{
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return MOAT_EINVAL;
		out[i] = (uint8_t)v;
	}
	return 0;
}

/* One route line parsed into (prefix, flags, interface). 0, or MOAT_EINVAL for the header or a
 * line of another shape. */
static int fwhost_route_line(uint8_t family, char *line, struct fwnft_range *dst,
                             unsigned long *flags, char *ifname)
{
	char ifn[64], d[40], m[40], fl[16];
	memset(dst, 0, sizeof(*dst));
	dst->family = family;
	if (family == 4) {
		unsigned long mask;
		if (sscanf(line, "%63s %39s %*s %15s %*s %*s %*s %39s", ifn, d, fl, m) != 4 ||
		    strlen(d) != 8 || strlen(m) != 8)
			return MOAT_EINVAL;
		/* The kernel prints the network-order word as a host-order number. */
		uint32_t a = (uint32_t)strtoul(d, NULL, 16);
		mask = strtoul(m, NULL, 16);
		uint32_t mk = (uint32_t)mask;
		memcpy(dst->addr, &a, 4);
		uint8_t mb[4];
		memcpy(mb, &mk, 4);
		unsigned bits = 0;
		for (int i = 0; i < 32 && (mb[i / 8] & (0x80 >> (i % 8))); i++)
			bits++;
		dst->bits = (uint8_t)bits;
		*flags = strtoul(fl, NULL, 16);
	} else {
		unsigned plen;
		if (sscanf(line, "%32s %2x %*s %*s %*s %*s %*s %*s %15s %63s", d, &plen, fl, ifn) !=
		        4 ||
		    strlen(d) != 32 || plen > 128 || fwhost_hex(d, 16, dst->addr) != 0)
			return MOAT_EINVAL;
		dst->bits = (uint8_t)plen;
		*flags = strtoul(fl, NULL, 16);
	}
	if (strlen(ifn) >= FWNFT_IFNAMSIZ)
		return MOAT_EINVAL;
	memcpy(ifname, ifn, strlen(ifn) + 1);
	return 0;
}

int fwhost_route_pick(const struct fwnft_range *r, const char *text, char *ifname)
{
	char line[512];
	int best = -1;
	const char *p = text;

	while (p && *p) {
		const char *e = strchr(p, '\n');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		if (n >= sizeof(line))
			n = sizeof(line) - 1;
		memcpy(line, p, n);
		line[n] = '\0';
		p = e ? e + 1 : NULL;
		struct fwnft_range dst;
		unsigned long flags;
		char ifn[FWNFT_IFNAMSIZ];
		if (fwhost_route_line(r->family, line, &dst, &flags, ifn) != 0)
			continue;
		if (dst.bits == 0 || strcmp(ifn, "lo") == 0 ||
		    (flags & (FWHOST_RTF_REJECT | FWHOST_RTF_LOCAL)) || !(flags & 1u /* RTF_UP */))
			continue;
		if (!fwnft_range_within(r, &dst) || (int)dst.bits <= best)
			continue;
		best = dst.bits;
		memcpy(ifname, ifn, sizeof(ifn));
	}
	return best < 0 ? MOAT_ENOENT : 0;
}

int fwhost_route_iface(const struct fwnft_range *r, char *ifname)
{
	/* Through self: a unit's ProcSubset=pid hides /proc/net. */
	const char *path = r->family == 4 ? "/proc/self/net/route" : "/proc/self/net/ipv6_route";
	FILE *f = fopen(path, "r");
	if (!f)
		return MOAT_EIO;
	size_t cap = 1 << 16, len = 0;
	char *text = malloc(cap);
	int rc = text ? 0 : MOAT_ENOMEM;
	while (rc == 0) {
		/* Room for a 4 KiB read. */
		if (grow_one(&text, &cap, len + 4095, 1, cap) < 0) {
			rc = MOAT_ENOMEM;
			break;
		}
		size_t got = fread(text + len, 1, cap - len - 1, f);
		len += got;
		if (got == 0)
			break;
	}
	fclose(f);
	if (rc == 0) {
		text[len] = '\0';
		rc = fwhost_route_pick(r, text, ifname);
	}
	free(text);
	return rc;
}

static int fwhost_push(struct fwnft_range **v, size_t *n, const struct fwnft_range *r)
{
	struct fwnft_range *nv = realloc(*v, (*n + 1) * sizeof(*nv));
	if (!nv)
		return MOAT_ENOMEM;
	nv[(*n)++] = *r;
	*v = nv;
	return 0;
}

/* The prefix of i's address and netmask (host bits zeroed) into r; false when it has none worth
 * naming (no mask, a host route, the whole space). */
static bool fwhost_prefix(const struct ifaddrs *i, const struct fwnft_range *addr,
                          struct fwnft_range *r)
{
	if (!i->ifa_netmask)
		return false;
	bool v4 = addr->family == 4;
	const uint8_t *m = v4 ? (const uint8_t *)&((struct sockaddr_in *)i->ifa_netmask)->sin_addr
	                      : ((struct sockaddr_in6 *)i->ifa_netmask)->sin6_addr.s6_addr;
	unsigned bits = 0, max = v4 ? 32 : 128;
	while (bits < max && (m[bits / 8] & (0x80 >> (bits % 8))))
		bits++;
	if (bits == 0 || bits == max)
		return false;
	*r = *addr;
	r->bits = (uint8_t)bits;
	for (unsigned b = bits; b < max; b++)
		r->addr[b / 8] &= (uint8_t) ~(0x80 >> (b % 8));
	return true;
}

int fwhost_addrs(struct fwnft_range **own, size_t *nown, struct fwnft_range **link6, size_t *nlink6)
{
	return fwhost_addrs_nets(own, nown, link6, nlink6, NULL, NULL);
}

int fwhost_addrs_nets(struct fwnft_range **own, size_t *nown, struct fwnft_range **link6,
                      size_t *nlink6, struct fwnft_range **nets, size_t *nnets)
{
	struct ifaddrs *ifa, *i;
	int rc = 0;

	if (getifaddrs(&ifa) != 0)
		return MOAT_EIO;
	for (i = ifa; i && rc == 0; i = i->ifa_next) {
		if (!i->ifa_addr ||
		    (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6))
			continue;
		struct fwnft_range r = {0}, p;
		bool v4 = i->ifa_addr->sa_family == AF_INET;
		r.family = v4 ? 4 : 6;
		r.bits = v4 ? 32 : 128;
		if (v4)
			memcpy(r.addr, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, 4);
		else
			memcpy(r.addr, &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16);
		snprintf(r.ifname, sizeof(r.ifname), "%s", i->ifa_name);
		if (own)
			rc = fwhost_push(own, nown, &r);
		bool ll = !v4 && r.addr[0] == 0xfe && (r.addr[1] & 0xc0) == 0x80;
		if (rc || ll || strcmp(i->ifa_name, "lo") == 0 || !fwhost_prefix(i, &r, &p))
			continue;
		if (nets)
			rc = fwhost_push(nets, nnets, &p);
		if (rc == 0 && !v4 && link6)
			rc = fwhost_push(link6, nlink6, &p);
	}
	freeifaddrs(ifa);
	return rc;
}

int fwhost_enter_netns(const char *spec)
{
	char path[PATH_MAX];
	if (!*spec || strcmp(spec, ".") == 0 || strcmp(spec, "..") == 0) {
		fprintf(stderr, "moat-fw: bad namespace name '%s'\n", spec);
		return MOAT_EINVAL;
	}
	if (strchr(spec, '/'))
		snprintf(path, sizeof(path), "%s", spec);
	else
		snprintf(path, sizeof(path), "/run/netns/%s", spec);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET) != 0) {
		fprintf(stderr, "moat-fw: cannot enter network namespace %s: %s\n", path,
		        strerror(errno));
		if (fd >= 0)
			close(fd);
		return MOAT_EIO;
	}
	close(fd);
	return 0;
}
