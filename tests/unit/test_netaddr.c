/* netaddr.c: the one reader of address, address:port and prefix text (moatd and moat-fw). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "moat/config.h"
#include "moat/err.h"
#include "moat/netaddr.h"

Test(netaddr, addrport_forms)
{
	struct sockaddr_storage ss;
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

	cr_assert_eq(netaddr_parse_addrport("192.0.2.1:5353", 53, &ss), 0);
	cr_expect_eq(ss.ss_family, AF_INET);
	cr_expect_eq(ntohs(sin->sin_port), 5353);
	cr_assert_eq(netaddr_parse_addrport("192.0.2.1", 53, &ss), 0);
	cr_expect_eq(ntohs(sin->sin_port), 53);
	cr_assert_eq(netaddr_parse_addrport("[2001:db8::1]:853", 53, &ss), 0);
	cr_expect_eq(ss.ss_family, AF_INET6);
	cr_expect_eq(ntohs(sin6->sin6_port), 853);
	cr_assert_eq(netaddr_parse_addrport("2001:db8::1", 53, &ss), 0);
	cr_expect_eq(ntohs(sin6->sin6_port), 53);
	const char *bad[] = {
	    "",      "192.0.2.1:", "192.0.2.1:0",     "192.0.2.1:65536", "[2001:db8::1]x",
	    "[]:53", "127.1",      "name.example:53", "[192.0.2.1]:53",  "1.2.3.4:+5"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(netaddr_parse_addrport(bad[i], 53, &ss), MOAT_EINVAL, "'%s'", bad[i]);
	cr_expect(netaddr_port_zero("192.0.2.1:0"));
	cr_expect(netaddr_port_zero("[::1]:0"));
	cr_expect(!netaddr_port_zero("::1:0"), "a bare IPv6 address ending in :0 has no port");
}

Test(netaddr, prefix_keeps_family_and_canonical_refuses_leading_zeros)
{
	struct netaddr_prefix p;
	bool host_bits;

	cr_assert_eq(netaddr_parse_prefix("::ffff:0:0/96", 0, &p, NULL), 0);
	cr_expect_eq(p.family, 6);
	cr_expect_eq(p.bits, 96);
	cr_assert_eq(netaddr_parse_prefix("10.0.0.0/08", 0, &p, NULL), 0);
	cr_expect_eq(p.bits, 8);
	cr_expect_eq(netaddr_parse_prefix("10.0.0.0/08", NETADDR_CANONICAL, &p, NULL), MOAT_EINVAL);
	cr_expect_eq(netaddr_parse_prefix("0.0.0.0/0", NETADDR_CANONICAL, &p, NULL), 0);
	cr_expect_eq(netaddr_parse_prefix("10.0.0.1/8", 0, &p, &host_bits), MOAT_EINVAL);
	cr_expect(host_bits, "host bits are told apart from other errors");
	cr_expect_eq(netaddr_parse_prefix("10.0.0.0/33", 0, &p, &host_bits), MOAT_EINVAL);
	cr_expect(!host_bits);
}

Test(netaddr, mapped_form_and_contains)
{
	struct cidr c;
	struct sockaddr_in in = {.sin_family = AF_INET};
	struct sockaddr_in6 in6 = {.sin6_family = AF_INET6};

	cr_assert_eq(netaddr_parse_cidr("192.0.2.0/24", &c), 0);
	cr_expect_eq(c.bits, 96 + 24);
	inet_pton(AF_INET, "192.0.2.77", &in.sin_addr);
	cr_expect(netaddr_cidr_contains(&c, (struct sockaddr *)&in));
	inet_pton(AF_INET6, "::ffff:192.0.2.77", &in6.sin6_addr);
	cr_expect(netaddr_cidr_contains(&c, (struct sockaddr *)&in6), "a dual-stack client");
	inet_pton(AF_INET, "192.0.3.1", &in.sin_addr);
	cr_expect(!netaddr_cidr_contains(&c, (struct sockaddr *)&in));
	char t[64];
	netaddr_cidr_text(&c, t, sizeof(t));
	cr_expect_str_eq(t, "192.0.2.0/24");
}

Test(netaddr, cidr_from_mask)
{
	uint8_t a4[4] = {198, 51, 100, 7}, m4[4] = {255, 255, 255, 0};
	struct cidr c, want;
	char t[64];

	netaddr_cidr_from_mask(a4, m4, 4, &c);
	cr_assert_eq(netaddr_parse_cidr("198.51.100.0/24", &want), 0);
	cr_expect_eq(memcmp(&c, &want, sizeof(c)), 0);
	uint8_t a6[16], m6[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	inet_pton(AF_INET6, "2001:db8:1:2::9", a6);
	netaddr_cidr_from_mask(a6, m6, 16, &c);
	netaddr_cidr_text(&c, t, sizeof(t));
	cr_expect_str_eq(t, "2001:db8:1:2::/64");
}

Test(config_limits, one_table_for_keys_flags_and_validation)
{
	const struct config_limit *k = config_limit_key("upstream_timeout_ms", 19);
	const struct config_limit *f = config_limit_flag("upstream-timeout");
	struct config cfg;
	char err[128];

	cr_assert(k != NULL);
	cr_expect_eq(k, f, "the flag and the key are one setting");
	cr_expect_eq(config_limit_flag("workers")->max, CONFIG_WORKERS_MAX);
	cr_expect_null(config_limit_key("listen", 6));
	config_init(&cfg);
	cr_expect_eq(cfg.upstream_timeout_ms, k->def);
	cr_expect_eq(cfg.cache_bytes, (size_t)32 << 20);
	cr_expect_eq(config_limits_check(&cfg, err, sizeof(err)), 0);
	cfg.workers = CONFIG_WORKERS_MAX + 1;
	cr_expect_eq(config_limits_check(&cfg, err, sizeof(err)), MOAT_EINVAL);
	cr_expect_str_eq(err, "workers must be 1..64");
	config_free(&cfg);
}

static struct cidr cidr_of(const char *s)
{
	struct cidr c;
	cr_assert_eq(netaddr_parse_cidr(s, &c), 0, "%s", s);
	return c;
}

Test(netaddr, overlap_whole_and_covered)
{
	struct cidr a = cidr_of("10.1.0.0/16"), b = cidr_of("10.1.2.0/24"),
	            c = cidr_of("10.2.0.0/16");
	cr_expect(netaddr_cidr_overlap(&a, &b) && netaddr_cidr_overlap(&b, &a),
	          "inside, both ways");
	cr_expect(!netaddr_cidr_overlap(&a, &c), "apart");
	struct cidr v6 = cidr_of("2001:db8::/32"), all6 = cidr_of("::/0");
	cr_expect(!netaddr_cidr_overlap(&a, &v6), "families apart");
	cr_expect(netaddr_cidr_overlap(&a, &all6), "::/0 holds the mapped IPv4 space too");
	struct cidr all4 = cidr_of("0.0.0.0/0"), half4 = cidr_of("0.0.0.0/1");
	cr_expect(netaddr_cidr_whole(&all4) && netaddr_cidr_whole(&all6));
	cr_expect(!netaddr_cidr_whole(&half4) && !netaddr_cidr_whole(&v6));

	/* covered by the ranges together, not only by one */
	struct cidr by[] = {cidr_of("203.0.113.0/28"), cidr_of("203.0.113.16/28"),
	                    cidr_of("10.1.0.0/16")};
	struct cidr pair = cidr_of("203.0.113.0/27"), wider = cidr_of("203.0.113.0/26");
	struct cidr host = cidr_of("203.0.113.20"), out = cidr_of("198.51.100.0/24");
	cr_expect(netaddr_cidr_covered(&pair, by, 3), "two adjacent /28 cover the /27");
	cr_expect(netaddr_cidr_covered(&host, by, 3));
	cr_expect(netaddr_cidr_covered(&b, by, 3), "inside one");
	cr_expect(!netaddr_cidr_covered(&wider, by, 3), "half of the /26 is outside");
	cr_expect(!netaddr_cidr_covered(&out, by, 3));
	cr_expect(!netaddr_cidr_covered(&out, by, 0), "no ranges cover nothing");
	/* 256 host routes cover their /24, and the walk stays bounded */
	static struct cidr hosts[256];
	char t[32];
	for (int i = 0; i < 256; i++) {
		snprintf(t, sizeof(t), "192.0.2.%d", i);
		hosts[i] = cidr_of(t);
	}
	struct cidr net = cidr_of("192.0.2.0/24");
	cr_expect(netaddr_cidr_covered(&net, hosts, 256));
	cr_expect(!netaddr_cidr_covered(&net, hosts, 255), "one host missing");
}
