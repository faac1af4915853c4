/* policy_clients.c owns the index that picks a query's agent by its client address
 * (moat/policy_clients.h). Ranges are stored as (prefix length, address masked to it) in an
 * open-addressing table; the distinct lengths in use are kept longest first. A lookup masks
 * the client's address to each length in turn and probes once: the first hit is the most
 * specific range, as the old linear scan found it. Addresses are in the 16-byte form ranges
 * are kept in (IPv4 as ::ffff:a.b.c.d), so a v4 client on a dual-stack socket needs nothing
 * special. The keys are the operator's ranges, never the sandbox's, so a plain mixing hash is
 * enough: a client cannot add colliding keys. */
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "moat/err.h"
#include "moat/policy.h"
#include "moat/policy_clients.h"

struct pc_slot {
	uint8_t addr[16];
	uint8_t bits;
	uint32_t agent; /* index plus one; 0: empty */
};

struct policy_clients {
	struct pc_slot *slots; /* owned; cap a power of two, at most half full */
	size_t cap;
	uint8_t lens[129]; /* distinct prefix lengths, longest first */
	unsigned nlens;
};

static void mask_to(const uint8_t *in, unsigned bits, uint8_t *out)
{
	unsigned full = bits / 8, rest = bits % 8;
	memcpy(out, in, full);
	if (full < 16) {
		out[full] = rest ? (uint8_t)(in[full] & (0xffu << (8 - rest))) : 0;
		memset(out + full + 1, 0, 16 - full - 1);
	}
}

/* MurmurHash3's finalizer: every input bit reaches the low bits the table index uses (IPv4
 * ranges differ only in the last four bytes). */
static uint64_t fmix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 33);
}

static size_t pc_hash(const uint8_t *a, uint8_t bits)
{
	uint64_t x, y;
	memcpy(&x, a, 8);
	memcpy(&y, a + 8, 8);
	return (size_t)fmix64(x ^ fmix64(y ^ bits));
}

static struct pc_slot *pc_find(const struct policy_clients *c, const uint8_t *a, uint8_t bits)
{
	size_t mask = c->cap - 1;
	for (size_t i = pc_hash(a, bits) & mask;; i = (i + 1) & mask) {
		struct pc_slot *s = &c->slots[i];
		if (!s->agent || (s->bits == bits && !memcmp(s->addr, a, 16)))
			return s;
	}
}

int policy_clients_build(struct policy *p)
{
	size_t n = 0;
	for (size_t i = 0; i < p->nagents; i++)
		n += p->agents[i].nclients;
	struct policy_clients *c = calloc(1, sizeof(*c));
	if (!c)
		return MOAT_ENOMEM;
	c->cap = 16;
	while (c->cap < 2 * n)
		c->cap *= 2;
	if (!(c->slots = calloc(c->cap, sizeof(*c->slots)))) {
		free(c);
		return MOAT_ENOMEM;
	}
	bool used[129] = {0};
	for (size_t i = 0; i < p->nagents; i++)
		for (size_t k = 0; k < p->agents[i].nclients; k++) {
			const struct cidr *r = &p->agents[i].clients[k];
			uint8_t a[16];
			if (r->bits > 128)
				continue;
			mask_to(r->addr, r->bits, a);
			struct pc_slot *s = pc_find(c, a, r->bits);
			if (s->agent)
				continue; /* the first agent keeps an identical range */
			memcpy(s->addr, a, 16);
			s->bits = r->bits;
			s->agent = (uint32_t)i + 1;
			used[r->bits] = true;
		}
	for (int b = 128; b >= 0; b--)
		if (used[b])
			c->lens[c->nlens++] = (uint8_t)b;
	policy_clients_free(p->byclient);
	p->byclient = c;
	return 0;
}

const struct policy_agent *policy_clients_find(const struct policy *p,
                                               const struct sockaddr *client)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	const struct policy_clients *c = p->byclient;
	uint8_t a[16], m[16];
	if (!c || !client)
		return NULL;
	if (client->sa_family == AF_INET) {
		memcpy(a, mapped, 12);
		memcpy(a + 12, &((const struct sockaddr_in *)client)->sin_addr, 4);
	} else if (client->sa_family == AF_INET6) {
		memcpy(a, &((const struct sockaddr_in6 *)client)->sin6_addr, 16);
	} else {
		return NULL;
	}
	for (unsigned i = 0; i < c->nlens; i++) {
		mask_to(a, c->lens[i], m);
		const struct pc_slot *s = pc_find(c, m, c->lens[i]);
		if (s->agent)
			return &p->agents[s->agent - 1];
	}
	return NULL;
}

const struct policy_agent *policy_clients_exact(const struct policy *p, const struct cidr *r)
{
	uint8_t m[16];
	if (!p->byclient || r->bits > 128)
		return NULL;
	mask_to(r->addr, r->bits, m);
	const struct pc_slot *s = pc_find(p->byclient, m, r->bits);
	return s->agent ? &p->agents[s->agent - 1] : NULL;
}

void policy_clients_free(struct policy_clients *c)
{
	if (!c)
		return;
	free(c->slots);
	free(c);
}
