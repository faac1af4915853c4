/* Unit tests for moat-fw's grant checks (tools/fw/server_vet.c), which hold however moatd behaves:
 * lifetimes are clamped to [min, max]; an always-denied address, a private one without
 * --allow-private (global or per sandbox) and one of the host's own refuse the whole grant
 * (FWPROTO_DENIED, lifetime 0); in the forward placement a client outside every --sandbox range
 * fails, and an address of the other family binds to the one --sandbox host route of that family
 * or, when there are several or a range, fails. */
#include <criterion/criterion.h>

#include <string.h>

#include "moat/addrguard.h"
#include "server_vet.h"

static struct fwnft_range sandbox[2];
static struct fwsrv_opts opts;
static struct fwsrv srv;
static struct fwnft_range own;

static void setup(void)
{
	memset(&opts, 0, sizeof(opts));
	memset(&srv, 0, sizeof(srv));
	memset(sandbox, 0, sizeof(sandbox));
	cr_assert_eq(fwnft_range_parse("192.0.2.0/24", &sandbox[0]), 0);
	cr_assert_eq(fwnft_range_parse("2001:db8::5", &sandbox[1]), 0);
	cr_assert_eq(fwnft_range_parse("203.0.113.9", &own), 0);
	opts.placement = FWNFT_FORWARD;
	opts.sandbox = sandbox;
	opts.nsandbox = 2;
	opts.min_lifetime = 30;
	opts.max_lifetime = 3600;
	srv.o = &opts;
	srv.own = &own;
	srv.nown = 1;
	srv.guard = addrguard_new();
	cr_assert_not_null(srv.guard);
	cr_assert_eq(addrguard_add(srv.guard, "169.254.0.0/16", ADDR_ALWAYS), 0);
	cr_assert_eq(addrguard_add(srv.guard, "10.0.0.0/8", ADDR_PRIVATE), 0);
}

static void teardown(void)
{
	addrguard_free(srv.guard);
}

static void v4(struct fwproto_addr *a, uint8_t x, uint8_t y, uint8_t z, uint8_t w)
{
	memset(a, 0, sizeof(*a));
	a->family = 4;
	a->addr[0] = x, a->addr[1] = y, a->addr[2] = z, a->addr[3] = w;
}

/* A grant from client 192.0.2.7 for one address. */
static struct fwsrv_pending grant(uint8_t x, uint8_t y, uint8_t z, uint8_t w, uint32_t lifetime)
{
	struct fwsrv_pending p = {0};
	p.g.seq = 1;
	p.g.lifetime = lifetime;
	strcpy(p.g.agent, "a");
	v4(&p.g.client, 192, 0, 2, 7);
	p.g.naddr = 1;
	v4(&p.g.addr[0], x, y, z, w);
	p.status = FWPROTO_OK;
	return p;
}

TestSuite(fwvet, .init = setup, .fini = teardown);

Test(fwvet, clamp)
{
	cr_expect_eq(fwsrv_clamp(5, 30, 3600), 30);
	cr_expect_eq(fwsrv_clamp(300, 30, 3600), 300);
	cr_expect_eq(fwsrv_clamp(99999, 30, 3600), 3600);
	struct fwsrv_pending p = grant(198, 51, 100, 1, 5);
	fwsrv_vet(&srv, &p);
	cr_expect_eq(p.status, FWPROTO_OK);
	cr_expect_eq(p.lifetime, 30);
}

Test(fwvet, refused_addresses)
{
	struct fwsrv_pending p = grant(169, 254, 169, 254, 300);
	fwsrv_vet(&srv, &p);
	cr_expect_eq(p.status, FWPROTO_DENIED, "always-denied");
	cr_expect_eq(p.lifetime, 0);
	p = grant(10, 1, 2, 3, 300);
	fwsrv_vet(&srv, &p);
	cr_expect_eq(p.status, FWPROTO_DENIED, "private without --allow-private");
	p = grant(203, 0, 113, 9, 300);
	fwsrv_vet(&srv, &p);
	cr_expect_eq(p.status, FWPROTO_DENIED, "the host's own address");
	sandbox[0].allow_private = true;
	p = grant(10, 1, 2, 3, 300);
	fwsrv_vet(&srv, &p);
	cr_expect_eq(p.status, FWPROTO_OK, "private, the client's sandbox allows it");
	sandbox[0].allow_private = false;
	opts.allow_private = true;
	p = grant(10, 1, 2, 3, 300);
	fwsrv_vet(&srv, &p);
	cr_expect_eq(p.status, FWPROTO_OK, "private, --allow-private");
}

Test(fwvet, forward_client_and_source)
{
	struct fwsrv_pending p = grant(198, 51, 100, 1, 300);
	v4(&p.g.client, 198, 51, 100, 77);
	fwsrv_vet(&srv, &p);
	cr_expect_eq(p.status, FWPROTO_FAILED, "client outside every --sandbox");

	/* An IPv6 address for an IPv4 client binds to the one IPv6 --sandbox host route. */
	uint8_t src[16];
	struct fwproto_addr client;
	v4(&client, 192, 0, 2, 7);
	cr_assert(fwsrv_source(&opts, &client, 6, src));
	cr_expect_eq(memcmp(src, sandbox[1].addr, 16), 0);
	cr_assert(fwsrv_source(&opts, &client, 4, src));
	cr_expect_eq(memcmp(src, client.addr, 16), 0);
	p = grant(198, 51, 100, 1, 300);
	p.g.addr[0].family = 6;
	p.g.addr[0].addr[0] = 0x20, p.g.addr[0].addr[1] = 0x01, p.g.addr[0].addr[2] = 0x0d;
	p.g.addr[0].addr[3] = 0xb8, p.g.addr[0].addr[15] = 0x99;
	fwsrv_vet(&srv, &p);
	cr_expect_eq(p.status, FWPROTO_OK);
	/* A range of that family: which sandbox asked is unknown. */
	cr_assert_eq(fwnft_range_parse("2001:db8::/64", &sandbox[1]), 0);
	cr_expect_not(fwsrv_source(&opts, &client, 6, src));
	fwsrv_vet(&srv, &p);
	cr_expect_eq(p.status, FWPROTO_FAILED);
}

/* The resolver's own address, any IPv6 form embedding it, and an IPv4-mapped address are
 * refused whole; the reason names which (fwsrv_addr_why, shared with the ledger's restore). */
Test(fwvet, resolver_and_mapped)
{
	struct fwnft_resolver res = {.family = 4, .addr = {192, 0, 2, 53}, .port = 53};
	opts.resolver = &res;
	opts.nresolver = 1;
	struct fwsrv_pending p = grant(192, 0, 2, 53, 300);
	fwsrv_vet(&srv, &p);
	cr_expect_eq(p.status, FWPROTO_DENIED, "the resolver's address");
	cr_expect_str_eq(fwsrv_addr_why(&srv, &p.g.client, &p.g.addr[0]),
	                 "the resolver's (--resolver)");
	static const uint8_t nat64[16] = {0, 0x64, 0xff, 0x9b, 0,   0, 0, 0,
	                                  0, 0,    0,    0,    192, 0, 2, 53};
	static const uint8_t sixtofour[16] = {0x20, 0x02, 192, 0, 2, 53};
	static const uint8_t mapped[16] = {0, 0, 0,    0,    0,   0,  0,   0,
	                                   0, 0, 0xff, 0xff, 198, 51, 100, 1};
	const uint8_t *forms[] = {nat64, sixtofour, mapped};
	const char *why[] = {"the resolver's (--resolver)", "the resolver's (--resolver)",
	                     "IPv4-mapped"};
	for (int i = 0; i < 3; i++) {
		p = grant(0, 0, 0, 0, 300);
		p.g.addr[0].family = 6;
		memcpy(p.g.addr[0].addr, forms[i], 16);
		cr_expect_str_eq(fwsrv_addr_why(&srv, &p.g.client, &p.g.addr[0]), why[i], "form %d",
		                 i);
	}
	p = grant(198, 51, 100, 1, 300);
	cr_expect_null(fwsrv_addr_why(&srv, &p.g.client, &p.g.addr[0]), "a good address");
	opts.nresolver = 0;
}
