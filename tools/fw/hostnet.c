/* hostnet.c owns what moat-fw reads from the network stack it runs in (see hostnet.h): the
 * interface a sandbox range is routed to, the host's own addresses and on-link IPv6 prefixes,
 * the interfaces (which are bridges, which are whose ports), and entering the sandbox's network
 * namespace.
 *
 * Routes come from /proc/net/route and /proc/net/ipv6_route rather than rtnetlink: the text is
 * a stable kernel interface, the parser is a pure function, and start-up is not a hot path.
 * Interfaces come from rtnetlink, not /sys/class/net: sysfs shows the namespace it was mounted
 * in, which need not be the one moat-fw runs in. */
#include "hostnet.h"
#include "moat/bytes.h"
#include "moat/err.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <libmnl/libmnl.h>
#include <limits.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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

/* --- links -------------------------------------------------------------------------------- */

struct fwhost_dump {
	struct fwhost_link *v;
	size_t n, cap;
	int err;
};

/* Whether a IFLA_LINKINFO nest names the kind "bridge". */
static bool fwhost_kind_bridge(const struct nlattr *info)
{
	const struct nlattr *a;
	mnl_attr_for_each_nested(a, info)
	{
		if (mnl_attr_get_type(a) == IFLA_INFO_KIND &&
		    mnl_attr_validate(a, MNL_TYPE_NUL_STRING) >= 0)
			return strcmp(mnl_attr_get_str(a), "bridge") == 0;
	}
	return false;
}

static int fwhost_link_cb(const struct nlmsghdr *h, void *data)
{
	struct fwhost_dump *d = data;
	const struct ifinfomsg *ifm = mnl_nlmsg_get_payload(h);
	struct fwhost_link l = {.index = (uint32_t)ifm->ifi_index};
	const struct nlattr *a;
	if (h->nlmsg_type != RTM_NEWLINK || h->nlmsg_len < NLMSG_LENGTH(sizeof(*ifm)))
		return MNL_CB_OK;
	mnl_attr_for_each(a, h, sizeof(*ifm))
	{
		uint16_t t = mnl_attr_get_type(a);
		if (t == IFLA_IFNAME && mnl_attr_validate(a, MNL_TYPE_NUL_STRING) >= 0)
			snprintf(l.name, sizeof(l.name), "%s", mnl_attr_get_str(a));
		else if (t == IFLA_MASTER && mnl_attr_validate(a, MNL_TYPE_U32) >= 0)
			l.master = mnl_attr_get_u32(a);
		else if (t == IFLA_LINKINFO && mnl_attr_validate(a, MNL_TYPE_NESTED) >= 0)
			l.bridge = fwhost_kind_bridge(a);
	}
	if (grow_one(&d->v, &d->cap, d->n, sizeof(*d->v), 32) < 0) {
		d->err = MOAT_ENOMEM;
		return MNL_CB_ERROR;
	}
	d->v[d->n++] = l;
	return MNL_CB_OK;
}

/* One dump into d. 0, 1 (interrupted by a change: try again), MOAT_EIO or MOAT_ENOMEM. */
static int fwhost_dump_once(struct mnl_socket *nl, struct fwhost_dump *d)
{
	static uint8_t buf[1 << 15];
	uint32_t seq = (uint32_t)time(NULL), port = mnl_socket_get_portid(nl);
	struct nlmsghdr *h = mnl_nlmsg_put_header(buf);
	h->nlmsg_type = RTM_GETLINK;
	h->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
	h->nlmsg_seq = seq;
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(h, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	if (mnl_socket_sendto(nl, h, h->nlmsg_len) < 0)
		return MOAT_EIO;
	int rc;
	do {
		ssize_t got = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		if (got <= 0)
			return MOAT_EIO;
		rc = mnl_cb_run(buf, (size_t)got, seq, port, fwhost_link_cb, d);
	} while (rc > MNL_CB_STOP);
	if (rc < 0)
		return d->err ? d->err : errno == EINTR ? 1 : MOAT_EIO;
	return 0;
}

int fwhost_links(struct fwhost_link **v, size_t *n)
{
	struct fwhost_dump d = {0};
	int rc = 1;
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
	if (!nl || mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		if (nl)
			mnl_socket_close(nl);
		return MOAT_EIO;
	}
	for (int tries = 0; tries < 5 && rc == 1; tries++) {
		d.n = 0;
		d.err = 0;
		rc = fwhost_dump_once(nl, &d);
	}
	mnl_socket_close(nl);
	if (rc != 0) {
		free(d.v);
		return rc > 0 ? MOAT_EIO : rc;
	}
	*v = d.v;
	*n = d.n;
	return 0;
}

static const struct fwhost_link *fwhost_find(const struct fwhost_link *l, size_t nl,
                                             const char *name, uint32_t index)
{
	for (size_t i = 0; i < nl; i++)
		if (name ? strcmp(l[i].name, name) == 0 : l[i].index == index)
			return &l[i];
	return NULL;
}

static bool fwhost_named(const struct fwnft_ifname *br, size_t nbr, const char *name)
{
	for (size_t i = 0; i < nbr; i++)
		if (strcmp(br[i].name, name) == 0)
			return true;
	return false;
}

int fwhost_bridges(const struct fwhost_link *l, size_t nl, const struct fwnft_range *sb, size_t nsb,
                   struct fwnft_ifname **br, size_t *nbr, uint32_t **ports, size_t *nports)
{
	size_t cb = 0, cp = 0;
	*br = NULL;
	*ports = NULL;
	*nbr = *nports = 0;
	for (size_t i = 0; i < nsb; i++) {
		const struct fwhost_link *k = fwhost_find(l, nl, sb[i].ifname, 0);
		/* A runtime sandbox's link is a veth moat run makes (and may have deleted). */
		bool runtime = strncmp(sb[i].ifname, FWNFT_RUNTIME_IFPREFIX,
		                       strlen(FWNFT_RUNTIME_IFPREFIX)) == 0;
		if ((k && !k->bridge) || (!k && runtime) || fwhost_named(*br, *nbr, sb[i].ifname))
			continue;
		if (grow_one(br, &cb, *nbr, sizeof(**br), 4) < 0)
			goto oom;
		snprintf((*br)[(*nbr)++].name, FWNFT_IFNAMSIZ, "%s", sb[i].ifname);
	}
	/* Ascending by index, whatever order the dump had: a change is a different list. */
	for (uint32_t last = 0;;) {
		const struct fwhost_link *next = NULL;
		for (size_t i = 0; i < nl; i++) {
			const struct fwhost_link *m =
			    l[i].master ? fwhost_find(l, nl, NULL, l[i].master) : NULL;
			if (m && m->bridge && !fwhost_named(*br, *nbr, m->name) &&
			    l[i].index > last && (!next || l[i].index < next->index))
				next = &l[i];
		}
		if (!next)
			break;
		if (grow_one(ports, &cp, *nports, sizeof(**ports), 16) < 0)
			goto oom;
		(*ports)[(*nports)++] = last = next->index;
	}
	return 0;
oom:
	free(*br);
	free(*ports);
	*br = NULL;
	*ports = NULL;
	*nbr = *nports = 0;
	return MOAT_ENOMEM;
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
