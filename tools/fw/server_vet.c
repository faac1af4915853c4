/* server_vet.c owns the checks moat-fw makes of every grant, since it does not trust moatd (the
 * trust model is in server.h): always-denied, private, host-own and resolver addresses (and an
 * IPv6 form embedding one of the resolver's) and IPv4-mapped IPv6 addresses refuse the whole
 * grant; lifetimes are clamped; in the forward placement the client must be a sandbox whose
 * source for each address's family is known. The ledger's restore applies the same address
 * checks, so a grant this run would refuse does not come back from an older run either. */
#include "server_vet.h"

#include "moat/addrguard.h"

#include <stdio.h>
#include <string.h>

uint32_t fwsrv_clamp(uint32_t asked, uint32_t min, uint32_t max)
{
	if (asked < min)
		return min;
	return asked > max ? max : asked;
}

static const char *fwsrv_addr_text(uint8_t family, const uint8_t *addr, char *out, size_t cap)
{
	return addrguard_format(addr, family == 4 ? 4 : 16, out, cap);
}

/* The sandbox source an element for an address of this family binds to: the client itself when
 * it speaks that family; otherwise the one --sandbox host route of that family on the client's
 * interface (a dual-stack sandbox asks for AAAA over IPv4 all the time, and its IPv6 source is
 * only known from the configuration). False when there is no such single address. */
bool fwsrv_source(const struct fwsrv_opts *o, const struct fwproto_addr *client, uint8_t family,
                  uint8_t *src)
{
	if (client->family == family) {
		memcpy(src, client->addr, 16);
		return true;
	}
	/* Only a range on the client's own interface can be the same sandbox: with several
	 * sandboxes (runtime ones, moat run's), another's address must never be taken. */
	const struct fwnft_range *found = NULL, *home = NULL;
	for (size_t i = 0; i < o->nsandbox && !home && client->family; i++)
		if (fwnft_range_contains(&o->sandbox[i], client->family, client->addr))
			home = &o->sandbox[i];
	for (size_t i = 0; i < o->nsandbox; i++) {
		const struct fwnft_range *r = &o->sandbox[i];
		if (r->family != family || (home && strcmp(r->ifname, home->ifname) != 0))
			continue;
		if (found || r->bits != (family == 4 ? 32 : 128))
			return false; /* several or a range: which sandbox asked is unknown */
		found = r;
	}
	if (!found)
		return false;
	memset(src, 0, 16);
	memcpy(src, found->addr, family == 4 ? 4 : 16);
	return true;
}

/* --allow-private for all, or for the sandbox range the client lies in. */
bool fwsrv_private_ok(const struct fwsrv_opts *o, const struct fwproto_addr *client)
{
	if (o->allow_private)
		return true;
	for (size_t i = 0; i < o->nsandbox; i++)
		if (o->sandbox[i].allow_private && client->family &&
		    fwnft_range_contains(&o->sandbox[i], client->family, client->addr))
			return true;
	return false;
}

bool fwsrv_is_own(const struct fwsrv *srv, const struct fwproto_addr *a)
{
	for (size_t i = 0; i < srv->nown; i++)
		if (fwnft_range_contains(&srv->own[i], a->family, a->addr))
			return true;
	return false;
}

/* Whether a is a --resolver address, or an IPv6 address embedding an IPv4 one (NAT64, 6to4,
 * ...): a grant of it would open every port of moatd's host to the sandbox, not only DNS. */
static bool fwsrv_is_resolver(const struct fwsrv_opts *o, const struct fwproto_addr *a)
{
	uint8_t v4[8][4];
	size_t nv4 = a->family == 6 ? addrguard_embedded_v4(a->addr, v4, 8) : 0;
	for (size_t i = 0; i < o->nresolver; i++) {
		const struct fwnft_resolver *r = &o->resolver[i];
		if (r->family == a->family && !memcmp(r->addr, a->addr, r->family == 4 ? 4 : 16))
			return true;
		for (size_t k = 0; r->family == 4 && k < nv4; k++)
			if (!memcmp(r->addr, v4[k], 4))
				return true;
	}
	return false;
}

const char *fwsrv_addr_why(const struct fwsrv *srv, const struct fwproto_addr *client,
                           const struct fwproto_addr *a)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	enum addr_class cls = addrguard_check(srv->guard, a->addr, a->family == 4 ? 4 : 16);
	if (cls == ADDR_ALWAYS)
		return "always-denied";
	if (cls == ADDR_PRIVATE && !fwsrv_private_ok(srv->o, client))
		return "private (no --allow-private)";
	if (fwsrv_is_resolver(srv->o, a))
		return "the resolver's (--resolver)";
	if (fwsrv_is_own(srv, a))
		return "this host's own";
	/* A socket connecting to one sends IPv4: an IPv6 element of it would never match. */
	if (a->family == 6 && !memcmp(a->addr, mapped, sizeof(mapped)))
		return "IPv4-mapped";
	return NULL;
}

/* Check one grant; sets p->status and p->lifetime. */
void fwsrv_vet(struct fwsrv *srv, struct fwsrv_pending *p)
{
	const struct fwsrv_opts *o = srv->o;
	const struct fwproto_grant *g = &p->g;
	char t[64], ct[64];

	p->lifetime = fwsrv_clamp(g->lifetime, o->min_lifetime, o->max_lifetime);
	for (size_t i = 0; i < g->naddr; i++) {
		const struct fwproto_addr *a = &g->addr[i];
		const char *why = fwsrv_addr_why(srv, &g->client, a);
		if (why) {
			fprintf(stderr,
			        "moat-fw: ALERT: grant seq %u for agent %s asks for %s address %s; "
			        "whole grant refused\n",
			        g->seq, g->agent, why,
			        fwsrv_addr_text(a->family, a->addr, t, sizeof(t)));
			p->status = FWPROTO_DENIED;
			p->lifetime = 0;
			return;
		}
	}
	if (o->placement != FWNFT_FORWARD)
		return;
	/* The element binds the client to the address, so the client must be a sandbox and
	 * speak the addresses' family (an IPv4 client's IPv6 source is unknown here). */
	bool inside = false;
	for (size_t i = 0; i < o->nsandbox && !inside; i++)
		inside = g->client.family != 0 &&
		         fwnft_range_contains(&o->sandbox[i], g->client.family, g->client.addr);
	inside = inside && !fwsrv_is_own(srv, &g->client); /* a gateway is the host, no sandbox */
	for (size_t i = 0; i < g->naddr && inside; i++) {
		uint8_t src[16];
		if (!fwsrv_source(o, &g->client, g->addr[i].family, src)) {
			fprintf(
			    stderr,
			    "moat-fw: grant seq %u: address %s is not of client %s's family and "
			    "no single --sandbox address of that family is configured\n",
			    g->seq,
			    fwsrv_addr_text(g->addr[i].family, g->addr[i].addr, t, sizeof(t)),
			    fwsrv_addr_text(g->client.family, g->client.addr, ct, sizeof(ct)));
			p->status = FWPROTO_FAILED;
			return;
		}
	}
	if (!inside) {
		fprintf(stderr, "moat-fw: grant seq %u: client %s is not in a --sandbox range\n",
		        g->seq,
		        g->client.family
		            ? fwsrv_addr_text(g->client.family, g->client.addr, ct, sizeof(ct))
		            : "(unknown)");
		p->status = FWPROTO_FAILED;
	}
}
