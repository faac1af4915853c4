/* nft.c owns everything moat-fw says to nftables: the always-deny ranges read from the ranges
 * files, the text of the start-up ruleset and of each grant batch, and the libnftables context
 * that runs them (layout in nft.h).
 *
 * Commands are text given to nft_run_cmd_from_buffer, which libnftables sends as one netlink
 * batch: the kernel applies all of it or none of it. Building the text is kept apart from running
 * it so the exact rules can be unit-tested without CAP_NET_ADMIN.
 *
 * The deny sets come from the same ranges files (addrguard format version 1) as moatd's answer
 * guard, so there is one source of truth. They are read here rather than through an addrguard
 * iterator because the trie stores IPv4 as IPv4-mapped IPv6 and loses the text's family, and the
 * kernel needs plain prefixes per family; both read a range with netaddr_parse_prefix (moat-fw
 * also refusing prefix lengths with leading zeros), and the server loads the same files into an
 * addrguard too, so a file the two readings disagree on stops moat-fw at start-up. */
#include "nft.h"
#include "droplog.h"
#include "moat/bytes.h"
#include "moat/err.h"
#include "moat/netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <nftables/libnftables.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FWNFT_LINE_MAX 1024

struct fwnft {
	struct nft_ctx *ctx;
};

/* --- text buffer --------------------------------------------------------------------------- */

void fwnft_buf_free(struct fwnft_buf *b)
{
	if (!b)
		return;
	free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
	b->err = 0;
}

static int fwnft_printf(struct fwnft_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int fwnft_printf(struct fwnft_buf *b, const char *fmt, ...)
{
	va_list ap;
	while (b->err == 0) {
		size_t room = b->cap - b->len;
		va_start(ap, fmt);
		int n = vsnprintf(b->p ? b->p + b->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			b->err = MOAT_EINVAL;
		} else if ((size_t)n < room) {
			b->len += (size_t)n;
			return 0;
		}
		while (b->err == 0 && b->cap - b->len <= (size_t)n)
			if (grow_one(&b->p, &b->cap, b->cap, 1, 4096) < 0)
				b->err = MOAT_ENOMEM;
	}
	return b->err;
}

/* --- ranges -------------------------------------------------------------------------------- */

static char *fwnft_token(char **p)
{
	char *s = *p + strspn(*p, " \t\r\n");
	if (*s == '\0')
		return NULL;
	char *e = s + strcspn(s, " \t\r\n");
	if (*e != '\0')
		*e++ = '\0';
	*p = e;
	return s;
}

int fwnft_range_parse(const char *text, struct fwnft_range *r)
{
	struct netaddr_prefix p;

	memset(r, 0, sizeof(*r));
	if (netaddr_parse_prefix(text, NETADDR_CANONICAL, &p, NULL) != 0)
		return MOAT_EINVAL;
	r->family = p.family;
	memcpy(r->addr, p.addr, sizeof(r->addr));
	r->bits = p.bits;
	return 0;
}

int fwnft_port_parse(const char *text, struct fwnft_port *p)
{
	const char *num;
	if (strncmp(text, "tcp/", 4) == 0)
		p->proto = 6;
	else if (strncmp(text, "udp/", 4) == 0)
		p->proto = 17;
	else
		return MOAT_EINVAL;
	num = text + 4;
	size_t nd = strlen(num);
	if (nd == 0 || nd > 5 || strspn(num, "0123456789") != nd || num[0] == '0')
		return MOAT_EINVAL;
	unsigned long v = strtoul(num, NULL, 10);
	if (v > 65535)
		return MOAT_EINVAL;
	p->port = (uint16_t)v;
	return 0;
}

int fwnft_ranges_load(const char *path, struct fwnft_range **v, size_t *n, char *err, size_t errlen)
{
	char line[FWNFT_LINE_MAX];
	unsigned long lineno = 0;
	int rc = 0;

	if (err && errlen)
		err[0] = '\0';
	if (!path || !v || !n)
		return MOAT_EINVAL;
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "%s:0: cannot open: %s", path, strerror(errno));
		return MOAT_EIO;
	}
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		lineno++;
		char *hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		char *p = line;
		char *range = fwnft_token(&p);
		if (!range)
			continue;
		char *cls = fwnft_token(&p);
		struct fwnft_range r;
		if (!cls || fwnft_token(&p) || (strcmp(cls, "always") && strcmp(cls, "private"))) {
			snprintf(err, errlen, "%s:%lu: want '<range> <always|private>'", path,
			         lineno);
			rc = MOAT_EINVAL;
		} else if (fwnft_range_parse(range, &r) != 0) {
			snprintf(err, errlen, "%s:%lu: bad range '%s'", path, lineno, range);
			rc = MOAT_EINVAL;
		} else if (strcmp(cls, "always") == 0) {
			struct fwnft_range *nv = realloc(*v, (*n + 1) * sizeof(*nv));
			if (!nv) {
				rc = MOAT_ENOMEM;
				break;
			}
			nv[(*n)++] = r;
			*v = nv;
		}
	}
	if (rc == 0 && ferror(f)) {
		snprintf(err, errlen, "%s:%lu: read error", path, lineno);
		rc = MOAT_EIO;
	}
	fclose(f);
	return rc;
}

bool fwnft_range_within(const struct fwnft_range *a, const struct fwnft_range *b)
{
	if (a->family != b->family || a->bits < b->bits)
		return false;
	for (unsigned i = 0; i < b->bits; i++) {
		uint8_t m = (uint8_t)(0x80 >> (i % 8));
		if ((a->addr[i / 8] & m) != (b->addr[i / 8] & m))
			return false;
	}
	return true;
}

bool fwnft_range_contains(const struct fwnft_range *r, uint8_t family, const uint8_t *addr)
{
	struct fwnft_range a = {.family = family, .bits = family == 4 ? 32 : 128};
	if (family != 4 && family != 6)
		return false;
	memcpy(a.addr, addr, family == 4 ? 4 : 16);
	return fwnft_range_within(&a, r);
}

size_t fwnft_ranges_reduce(struct fwnft_range *v, size_t n)
{
	size_t out = 0;
	for (size_t i = 0; i < n; i++) {
		bool drop = false;
		for (size_t j = 0; j < n && !drop; j++) {
			if (i == j || !fwnft_range_within(&v[i], &v[j]))
				continue;
			/* Equal ranges: keep the first, drop the later copies. */
			bool equal = v[i].bits == v[j].bits;
			drop = !equal || j < i;
		}
		if (!drop)
			v[out++] = v[i];
	}
	return out;
}

/* --- ruleset text -------------------------------------------------------------------------- */

static const char *fwnft_ntop(uint8_t family, const uint8_t *addr, char *out, size_t cap)
{
	if (!inet_ntop(family == 4 ? AF_INET : AF_INET6, addr, out, (socklen_t)cap))
		snprintf(out, cap, "?");
	return out;
}

/* "elements = { a/b, ... }" of one family, or nothing when that family has no range. */
static int fwnft_range_list(struct fwnft_buf *b, const struct fwnft_range *v, size_t n,
                            uint8_t family, const char *prefix, const char *suffix)
{
	char t[INET6_ADDRSTRLEN];
	bool first = true;

	for (size_t i = 0; i < n; i++) {
		if (v[i].family != family)
			continue;
		fwnft_printf(b, "%s%s/%u", first ? prefix : ", ",
		             fwnft_ntop(family, v[i].addr, t, sizeof(t)), v[i].bits);
		first = false;
	}
	return first ? b->err : fwnft_printf(b, "%s", suffix);
}

#define FWNFT_ND                                                                                   \
	"icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit, "               \
	"nd-router-advert } ip6 hoplimit 255"

/* The drop log's statement for a rule of chain (droplog.h): "" without --drop-log. A few
 * rotating buffers: one printf may take several. */
static const char *L(const struct fwnft_setup *s, const char *chain, const char *kind)
{
	static _Thread_local char buf[8][96];
	static _Thread_local unsigned i;
	return fwdroplog_stmt(s->log_group, chain, kind, buf[i++ % 8], sizeof(buf[0]));
}

/* The allow sets (layout in nft_batch.h): allow = any port, port = port-scoped, echo = the
 * addresses of port-scoped grants. In the forward placement each key starts with the sandbox
 * source. */
static int fwnft_allow_sets(const struct fwnft_setup *s, struct fwnft_buf *b)
{
	bool fwd = s->placement == FWNFT_FORWARD;
	static const char *const addr[] = {"ipv4_addr", "ipv6_addr"};
	for (int f = 0; f < 2; f++) {
		const char *src = fwd ? addr[f] : "", *dot = fwd ? " . " : "";
		fwnft_printf(b,
		             "\tset allow%d {\n\t\ttype %s%s%s\n\t\tflags timeout\n\t}\n"
		             "\tset port%d {\n\t\ttype %s%s%s . inet_proto . inet_service\n"
		             "\t\tflags timeout\n\t}\n"
		             "\tset echo%d {\n\t\ttype %s%s%s\n\t\tflags timeout\n\t}\n",
		             f ? 6 : 4, src, dot, addr[f], f ? 6 : 4, src, dot, addr[f], f ? 6 : 4,
		             src, dot, addr[f]);
	}
	return b->err;
}

/* What an accepting rule ends with: in the forward placement it also sets FWNFT_MARK, which
 * table moat_guard wants on everything of a sandbox interface (nft.h). */
static const char *fwnft_acc(const struct fwnft_setup *s)
{
	return s->placement == FWNFT_FORWARD ? "meta mark set meta mark | " FWNFT_MARK_TEXT
	                                       " accept"
	                                     : "accept";
}

/* The lookups in the allow sets: a grant without ports opens the address, one with ports opens
 * those (protocol, port) pairs, and ICMP echo follows any grant of the address: the echo lines
 * look at both address-only views (the first two lines already accept echo today; the echo
 * lines keep it so wherever ICMP rules end up before them). */
static int fwnft_allow_rules(const struct fwnft_setup *s, struct fwnft_buf *b, const char *chain)
{
	const char *s4 = s->placement == FWNFT_FORWARD ? "ip saddr . " : "";
	const char *s6 = s->placement == FWNFT_FORWARD ? "ip6 saddr . " : "";
	const char *a = fwnft_acc(s);
	/* A flow's first packet reaches these (established ones were accepted before): with the
	 * drop log each new connection is logged, for the ports `moatctl report` recommends. */
	const char *c = L(s, chain, "connect");
	return fwnft_printf(b,
	                    "\t\t%sip daddr @allow4%s %s\n"
	                    "\t\t%sip6 daddr @allow6%s %s\n"
	                    "\t\t%sip daddr . meta l4proto . th dport @port4%s %s\n"
	                    "\t\t%sip6 daddr . meta l4proto . th dport @port6%s %s\n"
	                    "\t\ticmp type echo-request %sip daddr @allow4 %s\n"
	                    "\t\ticmp type echo-request %sip daddr @echo4 %s\n"
	                    "\t\ticmpv6 type echo-request %sip6 daddr @allow6 %s\n"
	                    "\t\ticmpv6 type echo-request %sip6 daddr @echo6 %s\n",
	                    s4, c, a, s6, c, a, s4, c, a, s6, c, a, s4, a, s4, a, s6, a, s6, a);
}

/* DNS to each --resolver (UDP and TCP), from chain sandbox/output and chain host. */
static int fwnft_resolver_rules(const struct fwnft_setup *s, struct fwnft_buf *b)
{
	char t[INET6_ADDRSTRLEN];
	for (size_t i = 0; i < s->nresolver; i++) {
		const struct fwnft_resolver *r = &s->resolver[i];
		const char *fam = r->family == 4 ? "ip" : "ip6";
		fwnft_ntop(r->family, r->addr, t, sizeof(t));
		fwnft_printf(b,
		             "\t\t%s daddr %s udp dport %u %s\n"
		             "\t\t%s daddr %s tcp dport %u %s\n",
		             fam, t, r->port, fwnft_acc(s), fam, t, r->port, fwnft_acc(s));
	}
	return b->err;
}

/* DHCP between the sandbox and its link (client ports 68/546 to server ports 67/547), when
 * --dhcp asks for it; out is the sandbox's sending direction. */
static int fwnft_dhcp_rules(const struct fwnft_setup *s, struct fwnft_buf *b, bool out)
{
	if (!s->dhcp)
		return 0;
	/* From the netns the client may only broadcast (or multicast, v6): a unicast port 67 or
	 * 547 to anywhere would be a way out. In the input hook the destination is the host. */
	if (out && s->placement == FWNFT_NETNS)
		return fwnft_printf(
		    b, "\t\tip daddr 255.255.255.255 udp sport 68 udp dport 67 accept\n"
		       "\t\tip6 saddr fe80::/10 ip6 daddr ff02::1:2 udp sport 546 "
		       "udp dport 547 accept\n");
	if (out)
		return fwnft_printf(b,
		                    "\t\tudp sport 68 udp dport 67 %s\n"
		                    "\t\tip6 saddr fe80::/10 udp sport 546 udp dport 547 %s\n",
		                    fwnft_acc(s), fwnft_acc(s));
	return fwnft_printf(
	    b, "\t\tudp sport 67 udp dport 68 %s\n\t\tudp sport 547 udp dport 546 %s\n",
	    s->placement == FWNFT_NETNS ? "accept" : "return",
	    s->placement == FWNFT_NETNS ? "accept" : "return");
}

/* Toward the sandbox (forward: chain to_sandbox; netns: chain input, after loopback and ND):
 * replies to what the sandbox started, new connections and the rest of them to the --inbound
 * ports, nothing else. In the forward placement what passes returns to chain forward, so a
 * packet that also comes from a sandbox is judged by chain sandbox as well: one sandbox's grant
 * never opens another sandbox's ports. */
static int fwnft_toward_rules(const struct fwnft_setup *s, struct fwnft_buf *b, const char *chain)
{
	const char *v = s->placement == FWNFT_NETNS ? "accept" : "return";
	fwnft_printf(b, "\t\tct state established,related ct direction reply %s\n", v);
	for (size_t i = 0; i < s->ninbound; i++)
		fwnft_printf(b, "\t\tct direction original %s dport %u %s\n",
		             s->inbound[i].proto == 6 ? "tcp" : "udp", s->inbound[i].port, v);
	fwnft_dhcp_rules(s, b, false);
	return fwnft_printf(b, "\t\tcounter%s drop\n", L(s, chain, "inbound"));
}

/* What the sandbox sends once its source is known good, in their required order. */
static int fwnft_filter_rules(const struct fwnft_setup *s, struct fwnft_buf *b, const char *chain)
{
	/* Flows the sandbox started carry on; answers on an --inbound flow (which only the
	 * toward-the-sandbox rules can admit) too. */
	fwnft_printf(b,
	             "\t\tct state established,related ct direction original %s\n"
	             "\t\tct state established ct direction reply %s\n",
	             fwnft_acc(s), fwnft_acc(s));
	if (s->placement == FWNFT_NETNS)
		/* Without neighbour discovery IPv6 cannot reach even the resolver. Hop limit 255
		 * keeps it to the link (RFC 4861) and link6 (link-local, ff02::/16 and the on-link
		 * prefixes) to neighbours: an ND packet to a remote address would be routed. */
		fwnft_printf(b, "\t\t" FWNFT_ND " ip6 daddr @link6 accept\n");
	const char *deny = L(s, chain, "always-deny"), *icmp = L(s, chain, "icmp");
	fwnft_printf(b,
	             "\t\tip daddr @deny4 counter%s drop\n"
	             "\t\tip6 daddr @deny6 counter%s drop\n",
	             deny, deny);
	fwnft_resolver_rules(s, b);
	/* ICMP errors pass only as related to a flow (above); echo follows the allow sets. */
	fwnft_printf(b,
	             "\t\ticmp type != echo-request counter%s drop\n"
	             "\t\ticmpv6 type != echo-request counter%s drop\n",
	             icmp, icmp);
	fwnft_allow_rules(s, b, chain);
	/* Never granted, expired, or another port: the drop log tells them apart (ledger). */
	return fwnft_printf(b, "\t\tcounter%s drop\n", L(s, chain, "unresolved"));
}

static bool fwnft_ifname_ok(const char *n)
{
	size_t len = strlen(n);
	if (len == 0 || len >= FWNFT_IFNAMSIZ)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((n[i] >= 'a' && n[i] <= 'z') || (n[i] >= 'A' && n[i] <= 'Z') ||
		      (n[i] >= '0' && n[i] <= '9') || n[i] == '-' || n[i] == '_' || n[i] == '.' ||
		      n[i] == '@' || n[i] == ':'))
			return false;
	return true;
}

static int fwnft_check_setup(const struct fwnft_setup *s)
{
	if (!s || (s->placement != FWNFT_NETNS && s->placement != FWNFT_FORWARD))
		return MOAT_EINVAL;
	for (size_t i = 0; i < s->ndeny; i++)
		if (s->deny[i].family != 4 && s->deny[i].family != 6)
			return MOAT_EINVAL;
	for (size_t i = 0; i < s->nresolver; i++)
		if (s->resolver[i].family != 4 && s->resolver[i].family != 6)
			return MOAT_EINVAL;
	for (size_t i = 0; i < s->ninbound; i++)
		if ((s->inbound[i].proto != 6 && s->inbound[i].proto != 17) || !s->inbound[i].port)
			return MOAT_EINVAL;
	for (size_t i = 0; i < s->nlink6; i++)
		if (s->link6[i].family != 6)
			return MOAT_EINVAL;
	if (s->placement == FWNFT_FORWARD) {
		if (s->nsandbox == 0)
			return MOAT_EINVAL;
		for (size_t i = 0; i < s->nsandbox; i++)
			if ((s->sandbox[i].family != 4 && s->sandbox[i].family != 6) ||
			    !fwnft_ifname_ok(s->sandbox[i].ifname))
				return MOAT_EINVAL;
	}
	for (size_t i = 0; i < s->nhostsrc; i++)
		if (s->placement != FWNFT_FORWARD ||
		    (s->hostsrc[i].family != 4 && s->hostsrc[i].family != 6) ||
		    !fwnft_ifname_ok(s->hostsrc[i].ifname))
			return MOAT_EINVAL;
	return 0;
}

/* `{ "a", "b" }`: each sandbox interface once, in the order first given. */
static int fwnft_ifname_list(const struct fwnft_setup *s, struct fwnft_buf *b)
{
	fwnft_printf(b, "{ ");
	for (size_t i = 0; i < s->nsandbox; i++) {
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++)
			seen = strcmp(s->sandbox[i].ifname, s->sandbox[j].ifname) == 0;
		if (!seen)
			fwnft_printf(b, "%s\"%s\"", i ? ", " : "", s->sandbox[i].ifname);
	}
	return fwnft_printf(b, " }");
}

/* sbx4 / sbx6: which source ranges belong to which interface (anti-spoofing). */
static int fwnft_sbx_set(const struct fwnft_setup *s, struct fwnft_buf *b, uint8_t family)
{
	char t[INET6_ADDRSTRLEN];
	bool first = true;
	fwnft_printf(b, "\tset sbx%c {\n\t\ttype ifname . %s\n\t\tflags interval\n",
	             family == 4 ? '4' : '6', family == 4 ? "ipv4_addr" : "ipv6_addr");
	for (size_t i = 0; i < s->nsandbox; i++) {
		const struct fwnft_range *r = &s->sandbox[i];
		if (r->family != family)
			continue;
		fwnft_printf(b, "%s\"%s\" . %s/%u", first ? "\t\telements = { " : ", ", r->ifname,
		             fwnft_ntop(family, r->addr, t, sizeof(t)), r->bits);
		first = false;
	}
	if (!first)
		fwnft_printf(b, " }\n");
	return fwnft_printf(b, "\t}\n");
}

/* hostsrc4 / hostsrc6 and chain prerouting (only when there are such addresses): the host's
 * own addresses inside a sandbox range, as sources arriving on that range's interface, are
 * forged. Before routing, so IPv4 is counted too (the kernel drops it as a martian source
 * before the forward and input hooks, without a trace). */
static int fwnft_hostsrc_sets(const struct fwnft_setup *s, struct fwnft_buf *b)
{
	char t[INET6_ADDRSTRLEN];
	if (s->nhostsrc == 0)
		return 0;
	for (uint8_t f = 4; f <= 6; f += 2) {
		bool first = true;
		fwnft_printf(b, "\tset hostsrc%u {\n\t\ttype ifname . ipv%u_addr\n", f, f);
		for (size_t i = 0; i < s->nhostsrc; i++) {
			const struct fwnft_range *r = &s->hostsrc[i];
			if (r->family != f)
				continue;
			fwnft_printf(b, "%s\"%s\" . %s", first ? "\t\telements = { " : ", ",
			             r->ifname, fwnft_ntop(f, r->addr, t, sizeof(t)));
			first = false;
		}
		fwnft_printf(b, "%s\t}\n", first ? "" : " }\n");
	}
	return b->err;
}

static int fwnft_hostsrc_chain(const struct fwnft_setup *s, struct fwnft_buf *b)
{
	if (s->nhostsrc == 0)
		return 0;
	const char *l = L(s, "prerouting", "spoofed");
	return fwnft_printf(b,
	                    "\tchain prerouting {\n"
	                    "\t\ttype filter hook prerouting priority -300; policy accept;\n"
	                    "\t\tiifname . ip saddr @hostsrc4 counter%s drop\n"
	                    "\t\tiifname . ip6 saddr @hostsrc6 counter%s drop\n"
	                    "\t}\n",
	                    l, l);
}

#define FWNFT_RUNTIME_IFS "\"" FWNFT_RUNTIME_IFPREFIX "*\""

/* Forward placement: the base chains. What passes to_sandbox and is not from a sandbox leaves
 * chain forward at its end, marked there. Runtime sandboxes' interfaces (FWNFT_RUNTIME_IFPREFIX*)
 * always go through the chains: one whose range is unknown has no valid source, so all it sends
 * is dropped. */
static int fwnft_forward_hooks(const struct fwnft_setup *s, struct fwnft_buf *b)
{
	fwnft_printf(b, "\tchain forward {\n"
	                "\t\ttype filter hook forward priority 0; policy accept;\n"
	                "\t\toifname ");
	fwnft_ifname_list(s, b);
	fwnft_printf(b, " jump to_sandbox\n\t\toifname " FWNFT_RUNTIME_IFS " jump to_sandbox\n"
	                "\t\tiifname ");
	fwnft_ifname_list(s, b);
	fwnft_printf(b,
	             " jump sandbox\n\t\tiifname " FWNFT_RUNTIME_IFS " jump sandbox\n\t\toifname ");
	fwnft_ifname_list(s, b);
	fwnft_printf(b, " meta mark set meta mark | " FWNFT_MARK_TEXT "\n"
	                "\t\toifname " FWNFT_RUNTIME_IFS
	                " meta mark set meta mark | " FWNFT_MARK_TEXT "\n"
	                "\t}\n"
	                "\tchain input {\n"
	                "\t\ttype filter hook input priority 0; policy accept;\n"
	                "\t\tiifname ");
	fwnft_ifname_list(s, b);
	return fwnft_printf(b, " jump host\n\t\tiifname " FWNFT_RUNTIME_IFS " jump host\n\t}\n");
}

/* Forward placement: the hooks, and the chains for routed traffic, traffic to the moat host
 * and traffic toward the sandbox. */
static int fwnft_forward_chains(const struct fwnft_setup *s, struct fwnft_buf *b)
{
	char spoof[2][400]; /* in chain sandbox and in chain host */
	for (int i = 0; i < 2; i++) {
		const char *l = L(s, i ? "host" : "sandbox", "spoofed");
		snprintf(spoof[i], sizeof(spoof[i]),
		         "\t\tiifname . ip saddr != @sbx4 counter%s drop\n"
		         "\t\tiifname . ip6 saddr != @sbx6 counter%s drop\n",
		         l, l);
	}
	const char *a = fwnft_acc(s);
	fwnft_sbx_set(s, b, 4);
	fwnft_sbx_set(s, b, 6);
	fwnft_hostsrc_sets(s, b);
	fwnft_forward_hooks(s, b);
	fwnft_printf(b, "\tchain sandbox {\n%s", spoof[0]);
	fwnft_filter_rules(s, b, "sandbox");
	/* To the moat host itself: link-local ND (before the source check: its sources are
	 * fe80:: and ::), then only DNS to the resolvers (and DHCP when asked). Multicast,
	 * link-local and every other service of the host are dropped. */
	fwnft_printf(b, "\t}\n\tchain host {\n");
	fwnft_dhcp_rules(s, b, true);
	fwnft_printf(b,
	             "\t\t" FWNFT_ND " ip6 saddr { fe80::/10, :: } ip6 daddr { "
	             "fe80::/10, ff02::/16 } %s\n"
	             "\t\t" FWNFT_ND " ip6 saddr fe80::/10 fib daddr type local %s\n"
	             "%s"
	             "\t\t" FWNFT_ND " ip6 daddr ff02::/16 %s\n"
	             "\t\t" FWNFT_ND " fib daddr type local %s\n"
	             "\t\tct state established,related %s\n",
	             a, a, spoof[1], a, a, a);
	fwnft_resolver_rules(s, b);
	fwnft_printf(b, "\t\tcounter%s drop\n\t}\n\tchain to_sandbox {\n", L(s, "host", "host"));
	fwnft_toward_rules(s, b, "to_sandbox");
	fwnft_printf(b, "\t}\n");
	return fwnft_hostsrc_chain(s, b);
}

/* Table moat_guard (nft.h): for each hook, a chain before moat's that drops sandbox-interface
 * packets already carrying the mark, and one after it that passes (and unmarks) what moat's
 * table accepted and drops the rest of the sandbox interfaces' traffic; runtime sandboxes'
 * interfaces (FWNFT_RUNTIME_IFPREFIX*) count as sandbox interfaces whatever ranges are known. */
static int fwnft_guard(const struct fwnft_setup *s, struct fwnft_buf *b)
{
	static const char *const hooks[] = {"forward", "input"};
	static const char marked[] = "meta mark & " FWNFT_MARK_TEXT " != 0";
	fwnft_printf(b, "add table inet " FWNFT_GUARD "\n"
	                "delete table inet " FWNFT_GUARD "\n"
	                "table inet " FWNFT_GUARD " {\n"
	                "\tcomment \"moat-fw: a sandbox interface passes only what table inet "
	                "moat accepted; moat-fw --remove deletes this\"\n");
	for (int h = 0; h < 2; h++) {
		const char *dirs[2] = {"iifname", "oifname"};
		int ndirs = h == 0 ? 2 : 1; /* input: only what arrives */
		fwnft_printf(b,
		             "\tchain guard_pre_%s {\n"
		             "\t\ttype filter hook %s priority -1; policy accept;\n",
		             hooks[h], hooks[h]);
		char pre[40], post[40];
		snprintf(pre, sizeof(pre), "guard_pre_%s", hooks[h]);
		snprintf(post, sizeof(post), "guard_%s", hooks[h]);
		const char *lp = L(s, pre, "spoofed"), *lg = L(s, post, "guard");
		for (int d = 0; d < ndirs; d++) {
			fwnft_printf(b, "\t\t%s %s ", marked, dirs[d]);
			fwnft_ifname_list(s, b);
			fwnft_printf(
			    b, " counter%s drop\n\t\t%s %s " FWNFT_RUNTIME_IFS " counter%s drop\n",
			    lp, marked, dirs[d], lp);
		}
		fwnft_printf(b,
		             "\t}\n\tchain guard_%s {\n"
		             "\t\ttype filter hook %s priority 1; policy accept;\n"
		             "\t\t%s meta mark set meta mark & " FWNFT_UNMARK_TEXT " accept\n",
		             hooks[h], hooks[h], marked);
		for (int d = 0; d < ndirs; d++) {
			fwnft_printf(b, "\t\t%s ", dirs[d]);
			fwnft_ifname_list(s, b);
			fwnft_printf(
			    b, " counter%s drop\n\t\t%s " FWNFT_RUNTIME_IFS " counter%s drop\n", lg,
			    dirs[d], lg);
		}
		fwnft_printf(b, "\t}\n");
	}
	return fwnft_printf(b, "}\n");
}

/* Netns placement: output (what the sandbox sends) and input (what reaches it). */
static int fwnft_netns_chains(const struct fwnft_setup *s, struct fwnft_buf *b)
{
	static const struct fwnft_range fixed[] = {
	    {.family = 6, .addr = {0xfe, 0x80}, .bits = 10},
	    {.family = 6, .addr = {0xff, 0x02}, .bits = 16},
	};
	fwnft_printf(b, "\tset link6 {\n\t\ttype ipv6_addr\n\t\tflags interval\n");
	fwnft_range_list(b, fixed, 2, 6, "\t\telements = { ", "");
	fwnft_range_list(b, s->link6, s->nlink6, 6, ", ", "");
	/* 0.0.0.0 and :: first: the kernel turns a connect to them into loopback, and nothing
	 * addressed to them may pass the loopback rule. */
	const char *deny = L(s, "output", "always-deny"), *spoof = L(s, "output", "spoofed");
	fwnft_printf(b,
	             " }\n\t}\n"
	             "\tchain output {\n"
	             "\t\ttype filter hook output priority 0; policy drop;\n"
	             "\t\tip daddr 0.0.0.0/8 counter%s drop\n"
	             "\t\tip6 daddr :: counter%s drop\n"
	             "\t\toif \"lo\" accept\n",
	             deny, deny);
	fwnft_dhcp_rules(s, b, true);
	/* Only the namespace's own addresses as source, and never loopback off lo. */
	fwnft_printf(b,
	             "\t\tfib saddr type != local counter%s drop\n"
	             "\t\tip saddr 127.0.0.0/8 counter%s drop\n"
	             "\t\tip6 saddr ::1 counter%s drop\n",
	             spoof, spoof, spoof);
	fwnft_filter_rules(s, b, "output");
	fwnft_printf(b, "\t}\n\tchain input {\n"
	                "\t\ttype filter hook input priority 0; policy drop;\n"
	                "\t\tiif \"lo\" accept\n"
	                "\t\t" FWNFT_ND " accept\n");
	fwnft_toward_rules(s, b, "input");
	return fwnft_printf(b, "\t}\n");
}

int fwnft_build_ruleset(const struct fwnft_setup *s, struct fwnft_buf *b)
{
	if (fwnft_check_setup(s) < 0 || !b)
		return MOAT_EINVAL;

	/* The guard first: in the one transaction, so the interfaces are never without both. */
	if (s->placement == FWNFT_FORWARD)
		fwnft_guard(s, b);
	/* add + delete: the table is gone whatever an earlier run left, and nothing else is named.
	 * (flush would keep stale sets and chains of an older layout.) */
	fwnft_printf(b, "add table inet " FWNFT_TABLE "\n"
	                "delete table inet " FWNFT_TABLE "\n"
	                "table inet " FWNFT_TABLE " {\n");
	if (s->pid)
		fwnft_printf(b, "\tcomment \"" FWNFT_COMMENT_FMT "\"\n", s->pid);
	for (uint8_t f = 4; f <= 6; f += 2) {
		fwnft_printf(b, "\tset deny%u {\n\t\ttype ipv%u_addr\n\t\tflags interval\n", f, f);
		fwnft_range_list(b, s->deny, s->ndeny, f, "\t\telements = { ", " }\n");
		fwnft_printf(b, "\t}\n");
	}
	fwnft_allow_sets(s, b);
	if (s->placement == FWNFT_FORWARD)
		fwnft_forward_chains(s, b);
	else
		fwnft_netns_chains(s, b);
	return fwnft_printf(b, "}\n");
}

unsigned long fwnft_comment_pid(const char *comment)
{
	static const char head[] = "moat-fw pid ";
	char *end;
	if (!comment || strncmp(comment, head, sizeof(head) - 1) != 0)
		return 0;
	const char *num = comment + sizeof(head) - 1;
	if (*num < '1' || *num > '9')
		return 0;
	unsigned long v = strtoul(num, &end, 10);
	return *end == ' ' ? v : 0;
}

/* --- libnftables --------------------------------------------------------------------------- */

struct fwnft *fwnft_open(void)
{
	struct fwnft *n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	n->ctx = nft_ctx_new(NFT_CTX_DEFAULT);
	if (!n->ctx || nft_ctx_buffer_output(n->ctx) != 0 || nft_ctx_buffer_error(n->ctx) != 0) {
		if (n->ctx)
			nft_ctx_free(n->ctx);
		free(n);
		return NULL;
	}
	return n;
}

void fwnft_close(struct fwnft *n)
{
	if (n)
		nft_ctx_free(n->ctx);
	free(n);
}

/* Run cmd; what nft printed into out (when given, cut to cap), its complaint into err (one line
 * when one_line: nft's multi-line caret diagnostics would split a log line). */
static int fwnft_exec(struct fwnft *n, const char *cmd, char *out, size_t cap, char *err,
                      size_t errlen, bool one_line)
{
	if (out && cap)
		out[0] = '\0';
	if (err && errlen)
		err[0] = '\0';
	if (!n || !cmd)
		return MOAT_EINVAL;
	int rc = nft_run_cmd_from_buffer(n->ctx, cmd);
	/* Reading the buffers also resets them for the next command. */
	const char *e = nft_ctx_get_error_buffer(n->ctx);
	const char *o = nft_ctx_get_output_buffer(n->ctx);
	if (out && cap)
		snprintf(out, cap, "%s", o ? o : "");
	if (rc == 0)
		return 0;
	if (err && errlen) {
		snprintf(err, errlen, "%s", e && *e ? e : "nft command failed");
		for (char *p = err; one_line && *p; p++)
			if (*p == '\n')
				*p = ' ';
	}
	return MOAT_EIO;
}

int fwnft_run(struct fwnft *n, const char *cmds, char *err, size_t errlen)
{
	return fwnft_exec(n, cmds, NULL, 0, err, errlen, true);
}

int fwnft_query(struct fwnft *n, const char *cmd, char *out, size_t cap, char *err, size_t errlen)
{
	return fwnft_exec(n, cmd, out, cap, err, errlen, false);
}

int fwnft_table_comment(struct fwnft *n, const char *name, char *out, size_t cap)
{
	char cmd[96], err[256];
	size_t big = 1 << 16;
	char *list = malloc(big);
	if (!list)
		return MOAT_ENOMEM;
	out[0] = '\0';
	/* Terse: without the set elements, so a table of a million grants lists in no time. */
	unsigned int flags = nft_ctx_output_get_flags(n->ctx);
	nft_ctx_output_set_flags(n->ctx, flags | NFT_CTX_OUTPUT_TERSE);
	snprintf(cmd, sizeof(cmd), "list table inet %s\n", name);
	int rc = fwnft_query(n, cmd, list, big, err, sizeof(err));
	nft_ctx_output_set_flags(n->ctx, flags);
	if (rc == 0) {
		const char *c = strstr(list, "\n\tcomment \"");
		if (c) {
			c += strlen("\n\tcomment \"");
			size_t len = strcspn(c, "\"\n");
			snprintf(out, cap, "%.*s", (int)len, c);
		}
	}
	free(list);
	return rc == 0 ? 0 : MOAT_ENOENT;
}
