/* server_vet.c owns the checks moat-fw makes of every grant, since it does not trust moatd (the
 * trust model is in server.h): always-denied, private and host-own addresses refuse the whole
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

/* Check one grant; sets p->status and p->lifetime. */
void fwsrv_vet(struct fwsrv *srv, struct fwsrv_pending *p)
{
	const struct fwsrv_opts *o = srv->o;
	const struct fwproto_grant *g = &p->g;
	char t[64], ct[64];

	p->lifetime = fwsrv_clamp(g->lifetime, o->min_lifetime, o->max_lifetime);
	bool priv_ok = fwsrv_private_ok(o, &g->client);
	for (size_t i = 0; i < g->naddr; i++) {
		const struct fwproto_addr *a = &g->addr[i];
		enum addr_class cls = addrguard_check(srv->guard, a->addr, a->family == 4 ? 4 : 16);
		const char *why = cls == ADDR_ALWAYS                ? "always-denied"
		                  : cls == ADDR_PRIVATE && !priv_ok ? "private (no --allow-private)"
		                  : fwsrv_is_own(srv, a)            ? "this host's own"
		                                                    : NULL;
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
