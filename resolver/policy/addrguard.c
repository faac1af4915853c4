/* addrguard.c owns the address guard: the blocked-range trie, the ranges file loader and the
 * decoding of IPv4 addresses embedded in IPv6 ones (range text is read by netaddr.c).
 *
 * The trie is a plain binary trie over 128-bit keys (IPv4 keyed as ::ffff:a.b.c.d). Nodes live in
 * one growable array and refer to each other by index, so building is a few reallocs, the whole
 * guard is one block to free, and lookup is a loop of at most 128 steps with no recursion. Each
 * node records the most severe class of the ranges that end exactly there; a lookup takes the
 * maximum over every node on the path, so overlapping ranges report their most severe class
 * rather than only the longest prefix's. Once built, nothing is written: lookups are thread-safe
 * and allocate nothing. */
#include "moat/addrguard.h"
#include "moat/err.h"
#include "moat/netaddr.h"
#include "moat/pathfd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A labelled host address, keyed like the trie (IPv4 mapped). */
struct ag_host {
	uint8_t key[16];
	char label[48];
};

/* Child index 0 means "no child": index 0 is the root, which is never anyone's child. */
struct ag_node {
	uint32_t child[2];
	uint8_t cls; /* enum addr_class of the ranges ending here, ADDR_OK if none */
};

struct addrguard {
	struct ag_node *nodes;
	uint32_t nnodes;
	uint32_t cap;
	size_t nranges;
	/* Every IPv4 key starts with the same 96 bits (::ffff:0:0/96): where that path ends and the
	 * worst class on it, kept after each insert, so an IPv4 lookup walks 32 levels, not 128
	 * (it was ~5% of a cache hit). v4_node 0: the path is not in the trie. */
	uint32_t v4_node;
	uint8_t v4_worst;
	/* The IPv4 space flattened: sorted starts of the intervals in which the class does not
	 * change, and each one's class. A hit asks 2-3 addresses and the walk was ~300
	 * instructions each; a binary search over a few dozen starts is ~60. Rebuilt after each
	 * insert (after the whole file while one loads); NULL (no memory): the trie is walked. */
	uint32_t *iv_start;
	uint8_t *iv_cls;
	uint32_t niv;
	bool loading;
	/* Host addresses added with a label (addrguard_add_host), apart from the trie: only
	 * addrguard_label asks them. A handful (moatd's own addresses). */
	struct ag_host *hosts;
	size_t nhosts;
};

/* Longest line the ranges file may have: a range, a class and a comment fit easily. */
#define AG_LINE_MAX 1024
/* IPv4 addresses one IPv6 address can embed: one per form addrguard_embedded_v4 decodes. */
#define AG_EMBEDDED_MAX 6

struct addrguard *addrguard_new(void)
{
	struct addrguard *g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	g->cap = 64;
	g->nodes = calloc(g->cap, sizeof(*g->nodes));
	if (!g->nodes) {
		free(g);
		return NULL;
	}
	g->nnodes = 1; /* the root, covering ::/0 */
	return g;
}

void addrguard_free(struct addrguard *g)
{
	if (!g)
		return;
	free(g->iv_start);
	free(g->iv_cls);
	free(g->nodes);
	free(g->hosts);
	free(g);
}

size_t addrguard_count(const struct addrguard *g)
{
	return g ? g->nranges : 0;
}

static int ag_bit(const uint8_t key[16], unsigned i)
{
	return (key[i / 8] >> (7 - i % 8)) & 1;
}

/* Index of a new zeroed node, or 0 when memory ran out (0 is never a valid new node). */
static uint32_t ag_node_new(struct addrguard *g)
{
	if (g->nnodes == g->cap) {
		if (g->cap > UINT32_MAX / 2)
			return 0;
		uint32_t ncap = g->cap * 2;
		struct ag_node *n = realloc(g->nodes, (size_t)ncap * sizeof(*n));
		if (!n)
			return 0;
		g->nodes = n;
		g->cap = ncap;
	}
	memset(&g->nodes[g->nnodes], 0, sizeof(g->nodes[0]));
	return g->nnodes++;
}

static int ag_insert(struct addrguard *g, const uint8_t key[16], unsigned bits, enum addr_class cls)
{
	uint32_t cur = 0;
	for (unsigned i = 0; i < bits; i++) {
		int b = ag_bit(key, i);
		if (!g->nodes[cur].child[b]) {
			/* ag_node_new may move the array: take the index first, then store it. */
			uint32_t n = ag_node_new(g);
			if (!n)
				return MOAT_ENOMEM;
			g->nodes[cur].child[b] = n;
		}
		cur = g->nodes[cur].child[b];
	}
	if ((uint8_t)cls > g->nodes[cur].cls)
		g->nodes[cur].cls = (uint8_t)cls;
	g->nranges++;

	static const uint8_t mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	cur = 0;
	g->v4_worst = g->nodes[0].cls;
	for (unsigned i = 0; i < 96 && (cur = g->nodes[cur].child[ag_bit(mapped, i)]); i++)
		if (g->nodes[cur].cls > g->v4_worst)
			g->v4_worst = g->nodes[cur].cls;
	g->v4_node = cur;
	return 0;
}

/* Most severe class over every range containing the 128-bit key. */
static enum addr_class ag_lookup(const struct addrguard *g, const uint8_t key[16])
{
	uint32_t cur = 0;
	uint8_t worst = g->nodes[0].cls;
	for (unsigned i = 0; i < 128; i++) {
		cur = g->nodes[cur].child[ag_bit(key, i)];
		if (!cur)
			break;
		if (g->nodes[cur].cls > worst)
			worst = g->nodes[cur].cls;
	}
	return (enum addr_class)worst;
}

/* The same as ag_lookup of the mapped key, from the end of the shared 96-bit path. */
static enum addr_class ag_lookup_v4(const struct addrguard *g, const uint8_t v4[4])
{
	if (g->iv_start) { /* the last interval starting at or below the address */
		uint32_t a =
		    (uint32_t)v4[0] << 24 | (uint32_t)v4[1] << 16 | (uint32_t)v4[2] << 8 | v4[3];
		uint32_t lo = 0, hi = g->niv; /* iv_start[0] is 0 */
		while (hi - lo > 1) {
			uint32_t mid = lo + (hi - lo) / 2;
			if (g->iv_start[mid] <= a)
				lo = mid;
			else
				hi = mid;
		}
		return (enum addr_class)g->iv_cls[lo];
	}
	uint32_t cur = g->v4_node;
	uint8_t worst = g->v4_worst;
	for (unsigned i = 0; i < 32 && cur; i++) {
		cur = g->nodes[cur].child[(v4[i / 8] >> (7 - i % 8)) & 1];
		if (cur && g->nodes[cur].cls > worst)
			worst = g->nodes[cur].cls;
	}
	return (enum addr_class)worst;
}

/* ---- the flattened IPv4 space ---- */

struct ag_ivb {
	uint32_t *start;
	uint8_t *cls;
	uint32_t n, cap;
	bool failed;
};

static void ag_iv_emit(struct ag_ivb *b, uint32_t start, uint8_t cls)
{
	if (b->failed || (b->n && b->cls[b->n - 1] == cls))
		return; /* the same class goes on */
	if (b->n == b->cap) {
		uint32_t ncap = b->cap ? b->cap * 2 : 64;
		uint32_t *ns = realloc(b->start, ncap * sizeof(*ns));
		if (ns)
			b->start = ns;
		uint8_t *nc = ns ? realloc(b->cls, ncap) : NULL;
		if (nc)
			b->cls = nc;
		if (!ns || !nc) {
			b->failed = true;
			return;
		}
		b->cap = ncap;
	}
	b->start[b->n] = start;
	b->cls[b->n++] = cls;
}

/* Depth first, child 0 before child 1: the intervals come out in address order. A missing
 * child is the whole half below the node, with the worst class seen on the way. */
static void ag_iv_walk(const struct addrguard *g, struct ag_ivb *b, uint32_t node, unsigned depth,
                       uint32_t prefix, uint8_t worst)
{
	if (g->nodes[node].cls > worst)
		worst = g->nodes[node].cls;
	if (depth == 32) {
		ag_iv_emit(b, prefix, worst);
		return;
	}
	for (uint32_t side = 0; side < 2; side++) {
		uint32_t child = g->nodes[node].child[side];
		uint32_t start = prefix | side << (31 - depth);
		if (child)
			ag_iv_walk(g, b, child, depth + 1, start, worst);
		else
			ag_iv_emit(b, start, worst);
	}
}

static void ag_iv_build(struct addrguard *g)
{
	struct ag_ivb b = {0};
	if (g->v4_node)
		ag_iv_walk(g, &b, g->v4_node, 0, 0, g->v4_worst);
	else
		ag_iv_emit(&b, 0, g->v4_worst);
	free(g->iv_start);
	free(g->iv_cls);
	g->iv_start = b.failed ? NULL : b.start;
	g->iv_cls = b.failed ? NULL : b.cls;
	g->niv = b.failed ? 0 : b.n;
	if (b.failed) {
		free(b.start);
		free(b.cls);
	}
}

int addrguard_add(struct addrguard *g, const char *cidr, enum addr_class cls)
{
	struct cidr c;

	if (!g || !cidr || cls < ADDR_OK || cls > ADDR_ALWAYS)
		return MOAT_EINVAL;
	/* Host bits set beyond the prefix usually mean a typo ("169.254.169.254/16"): the parser
	 * refuses them rather than guess which range was meant. */
	if (netaddr_parse_cidr(cidr, &c) != 0)
		return MOAT_EINVAL;
	int rc = ag_insert(g, c.addr, c.bits, cls);
	if (!g->loading)
		ag_iv_build(g); /* also after a failed insert: the trie may have grown */
	return rc;
}

static bool ag_is_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static enum addr_class ag_max(enum addr_class a, enum addr_class b)
{
	return a > b ? a : b;
}

size_t addrguard_embedded_v4(const uint8_t a[16], uint8_t out[][4], size_t max)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	static const uint8_t nat64_wkp[12] = {0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
	static const uint8_t nat64_local[6] = {0x00, 0x64, 0xff, 0x9b, 0x00, 0x01};
	uint8_t v4[AG_EMBEDDED_MAX][4];
	size_t n = 0;

	/* IPv4-mapped ::ffff:a.b.c.d: the trie's own key for IPv4. */
	if (memcmp(a, mapped, sizeof(mapped)) == 0)
		memcpy(v4[n++], a + 12, 4);
	/* IPv4-compatible ::a.b.c.d (deprecated, RFC 4291), but "::" and "::1" are the unspecified
	 * and loopback addresses, not 0.0.0.0 and 0.0.0.1: their own ranges decide. */
	if (ag_is_zero(a, 12) && !(ag_is_zero(a + 12, 3) && a[15] <= 1))
		memcpy(v4[n++], a + 12, 4);
	/* NAT64 well-known prefix 64:ff9b::/96 (RFC 6052): the last 32 bits. */
	if (memcmp(a, nat64_wkp, sizeof(nat64_wkp)) == 0)
		memcpy(v4[n++], a + 12, 4);
	/* NAT64 local-use prefix 64:ff9b:1::/48 (RFC 8215) in the RFC 6052 /48 layout: bits 48..63
	 * and 72..87, skipping the u-octet (bits 64..71). A network may instead use a longer prefix
	 * inside the /48 (/56, /64, /96); those layouts put zero bits where the /48 layout reads
	 * the first octet, so they decode here as 0.x.x.x, which the shipped ranges refuse anyway.
	 */
	if (memcmp(a, nat64_local, sizeof(nat64_local)) == 0) {
		uint8_t *d = v4[n++];
		d[0] = a[6];
		d[1] = a[7];
		d[2] = a[9];
		d[3] = a[10];
	}
	/* 6to4 2002::/16 (RFC 3056): the relay forwards to the IPv4 address in bits 16..47. */
	if (a[0] == 0x20 && a[1] == 0x02)
		memcpy(v4[n++], a + 2, 4);
	/* Teredo 2001::/32 (RFC 4380): the client's IPv4 address is the last 32 bits, inverted. */
	if (a[0] == 0x20 && a[1] == 0x01 && a[2] == 0 && a[3] == 0) {
		uint8_t *d = v4[n++];
		for (int i = 0; i < 4; i++)
			d[i] = (uint8_t)(a[12 + i] ^ 0xff);
	}
	for (size_t i = 0; i < n && i < max; i++)
		memcpy(out[i], v4[i], 4);
	return n < max ? n : max;
}

/* The IPv4 addresses an IPv6 address may deliver packets to, besides itself. IPv4-mapped
 * addresses need no decoding: they are the trie's own key for IPv4 (ag_lookup saw them). Each
 * form is checked on its own, so an address matching two forms gets the worse verdict. */
static enum addr_class ag_check_embedded(const struct addrguard *g, const uint8_t a[16])
{
	uint8_t v4[AG_EMBEDDED_MAX][4];
	enum addr_class worst = ADDR_OK;
	size_t n = addrguard_embedded_v4(a, v4, AG_EMBEDDED_MAX);
	for (size_t i = 0; i < n; i++)
		worst = ag_max(worst, ag_lookup_v4(g, v4[i]));
	return worst;
}

int addrguard_add_host(struct addrguard *g, const uint8_t *addr, size_t len, const char *label)
{
	if (!g || !addr || (len != 4 && len != 16) || !label)
		return MOAT_EINVAL;
	struct ag_host *nh = realloc(g->hosts, (g->nhosts + 1) * sizeof(*nh));
	if (!nh)
		return MOAT_ENOMEM;
	g->hosts = nh;
	struct ag_host *h = &g->hosts[g->nhosts];
	if (len == 4)
		netaddr_v4_mapped(addr, h->key);
	else
		memcpy(h->key, addr, 16);
	snprintf(h->label, sizeof(h->label), "%s", label);
	g->nhosts++;
	return 0;
}

/* The label of the host entry whose key is k, or NULL. */
static const char *ag_host_label(const struct addrguard *g, const uint8_t k[16])
{
	for (size_t i = 0; i < g->nhosts; i++)
		if (!memcmp(g->hosts[i].key, k, 16))
			return g->hosts[i].label;
	return NULL;
}

const char *addrguard_label(const struct addrguard *g, const uint8_t *addr, size_t len)
{
	uint8_t k[16], v4[AG_EMBEDDED_MAX][4];
	const char *l = NULL;
	if (!g || !g->nhosts || !addr || (len != 4 && len != 16))
		return NULL;
	if (len == 4)
		netaddr_v4_mapped(addr, k);
	else
		memcpy(k, addr, 16);
	if ((l = ag_host_label(g, k)) || len == 4)
		return l;
	size_t n = addrguard_embedded_v4(addr, v4, AG_EMBEDDED_MAX);
	for (size_t i = 0; i < n && !l; i++) {
		netaddr_v4_mapped(v4[i], k);
		l = ag_host_label(g, k);
	}
	return l;
}

enum addr_class addrguard_check(const struct addrguard *g, const uint8_t *addr, size_t len)
{
	/* Fail closed: a caller passing something that is not an address gets a refusal. */
	if (!g || !addr)
		return ADDR_ALWAYS;
	if (len == 4)
		return ag_lookup_v4(g, addr);
	if (len != 16)
		return ADDR_ALWAYS;
	enum addr_class c = ag_lookup(g, addr);
	if (c == ADDR_ALWAYS)
		return c;
	return ag_max(c, ag_check_embedded(g, addr));
}

const char *addrguard_format(const uint8_t *addr, size_t len, char *out, size_t cap)
{
	if (!out || cap == 0)
		return out;
	int af = len == 4 ? AF_INET : len == 16 ? AF_INET6 : 0;
	if (!addr || !af || !inet_ntop(af, addr, out, (socklen_t)cap))
		snprintf(out, cap, "?");
	return out;
}

static bool ag_is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* Split off the next whitespace-separated token of *s, NUL-terminating it; NULL at the end. */
static char *ag_token(char **s)
{
	char *p = *s;
	while (ag_is_space(*p))
		p++;
	if (!*p) {
		*s = p;
		return NULL;
	}
	char *tok = p;
	while (*p && !ag_is_space(*p))
		p++;
	if (*p)
		*p++ = '\0';
	*s = p;
	return tok;
}

/* One line of the ranges file; on error writes the reason (without path:line) to why. */
static int ag_load_line(struct addrguard *g, char *line, char *why, size_t whylen)
{
	char *hash = strchr(line, '#');
	if (hash)
		*hash = '\0';
	char *p = line;
	char *range = ag_token(&p);
	if (!range)
		return 0;
	char *cls_text = ag_token(&p);
	if (!cls_text) {
		snprintf(why, whylen, "missing class after '%s' (want always or private)", range);
		return MOAT_EINVAL;
	}
	char *extra = ag_token(&p);
	if (extra) {
		snprintf(why, whylen, "unexpected '%s' after the class", extra);
		return MOAT_EINVAL;
	}
	enum addr_class cls;
	if (strcmp(cls_text, "always") == 0) {
		cls = ADDR_ALWAYS;
	} else if (strcmp(cls_text, "private") == 0) {
		cls = ADDR_PRIVATE;
	} else {
		snprintf(why, whylen, "unknown class '%s' (want always or private)", cls_text);
		return MOAT_EINVAL;
	}
	int rc = addrguard_add(g, range, cls);
	if (rc == MOAT_EINVAL)
		snprintf(why, whylen, "bad range '%s' (want ADDR or ADDR/LEN, host bits zero)",
		         range);
	else if (rc < 0)
		snprintf(why, whylen, "%s", moat_strerror(rc));
	return rc;
}

int addrguard_load_file(struct addrguard *g, const char *path, char *err, size_t errlen)
{
	char line[AG_LINE_MAX];
	char why[256];
	unsigned long lineno = 0;
	int rc = 0;

	if (err && errlen)
		err[0] = '\0';
	if (!g || !path)
		return MOAT_EINVAL;
	FILE *f = pathfd_fopen(path); /* also after the privilege drop */
	if (!f) {
		if (err && errlen)
			snprintf(err, errlen, "%s:0: cannot open: %s", path, strerror(errno));
		return MOAT_EIO;
	}
	g->loading = true; /* flattened once, at the end */
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		size_t n = strlen(line);
		if (n == sizeof(line) - 1 && line[n - 1] != '\n') {
			/* A full buffer is fine only if the file ends right there. */
			int c = getc(f);
			if (c != EOF) {
				snprintf(why, sizeof(why), "line longer than %d bytes",
				         AG_LINE_MAX - 2);
				rc = MOAT_EINVAL;
				break;
			}
		}
		rc = ag_load_line(g, line, why, sizeof(why));
		if (rc < 0)
			break;
	}
	if (rc == 0 && ferror(f)) {
		snprintf(why, sizeof(why), "read error: %s", strerror(errno));
		rc = MOAT_EIO;
		lineno++;
	}
	fclose(f);
	g->loading = false;
	ag_iv_build(g);
	if (rc < 0 && err && errlen)
		snprintf(err, errlen, "%s:%lu: %s", path, lineno, why);
	return rc;
}
