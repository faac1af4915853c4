/* Unit tests for per-domain upstreams: forward: entries in the config (global and per agent,
 * IDN zones, defaults, errors at file:line), the longest-zone choice on wire names (label by
 * label: neither "xcorp.internal" nor the one label "corp\.internal" is below "corp.internal"),
 * agent zones before global ones, unique set ids, and cache entries kept apart per upstream set. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "moat/cache.h"
#include "moat/config.h"
#include "moat/config_load.h"
#include "moat/err.h"
#include "moat/forward.h"
#include "moat/name.h"
#include "moat/policy.h"

static const uint8_t *W(const char *text)
{
	static uint8_t bufs[4][NAME_MAXWIRE];
	static int next;
	uint8_t *b = bufs[next++ & 3];
	cr_assert_gt(name_from_text(text, strlen(text), b), 0, "%s", text);
	return b;
}

static const char *conf = "listen: [\"127.0.0.1:5300\"]\n"
                          "upstreams: [192.0.2.53]\n"
                          "upstream_timeout_ms: 700\n"
                          "forward:\n"
                          "  - zone: corp.internal\n"
                          "    upstreams: [\"198.51.100.1\", \"198.51.100.2:5353\"]\n"
                          "  - zone: lab.corp.internal\n"
                          "    upstreams: [198.51.100.3]\n"
                          "    timeout_ms: 250\n"
                          "    attempts: 5\n"
                          "    allow_private: true\n"
                          "  - zone: b\xc3\xbc"
                          "cher.example\n"
                          "    upstreams: [198.51.100.4]\n"
                          "agents:\n"
                          "  - name: a\n"
                          "    clients: [10.0.0.0/24]\n"
                          "    forward:\n"
                          "      - {zone: corp.internal, upstreams: [198.51.100.9]}\n"
                          "  - name: b\n"
                          "    clients: [10.0.1.0/24]\n";

static struct config cfg;
static struct policy *pol;

static void setup(void)
{
	char err[512] = "";
	config_init(&cfg);
	cr_assert_eq(config_load_string(&cfg, conf, strlen(conf), "t.yaml", err, sizeof(err)), 0,
	             "%s", err);
	cr_assert_eq(config_validate(&cfg, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(policy_load(&cfg, &pol, err, sizeof(err)), 0, "%s", err);
}

static void teardown(void)
{
	policy_unref(pol);
	config_free(&cfg);
}

TestSuite(forward, .init = setup, .fini = teardown);

static uint16_t port_of(const struct sockaddr_storage *ss)
{
	return ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

Test(forward, parsed_with_defaults)
{
	cr_assert_eq(cfg.nforwards, 3);
	cr_expect(name_equal(cfg.forwards[0].zone, W("corp.internal")));
	cr_expect_eq(cfg.forwards[0].nupstreams, 2);
	cr_expect_eq(port_of(&cfg.forwards[0].upstreams[1]), 5353);
	cr_expect_eq(cfg.forwards[0].line, 5);
	cr_expect(name_equal(cfg.forwards[2].zone, W("xn--bcher-kva.example")));
	cr_assert_eq(pol->fwd.n, 3);
	cr_expect_eq(pol->fwd.sets[0].timeout_ms, 700, "the global timeout by default");
	cr_expect_eq(pol->fwd.sets[0].attempts, 3);
	cr_expect_not(pol->fwd.sets[0].allow_private);
	cr_expect_eq(pol->fwd.sets[1].timeout_ms, 250);
	cr_expect_eq(pol->fwd.sets[1].attempts, 5);
	cr_expect(pol->fwd.sets[1].allow_private);
	cr_assert_eq(cfg.agents[0].nforwards, 1);
	cr_expect_eq(pol->agents[0].fwd.n, 1);
	cr_expect_eq(pol->agents[1].fwd.n, 0);
}

Test(forward, longest_zone_wins)
{
	const struct forward_table *g = &pol->fwd, *b = &pol->agents[1].fwd;
	cr_expect_eq(forward_pick(b, g, W("corp.internal")), &g->sets[0]);
	cr_expect_eq(forward_pick(b, g, W("DB.Corp.Internal")), &g->sets[0]);
	cr_expect_eq(forward_pick(b, g, W("lab.corp.internal")), &g->sets[1]);
	cr_expect_eq(forward_pick(b, g, W("x.y.lab.corp.internal")), &g->sets[1]);
	cr_expect_eq(forward_pick(b, g, W("www.xn--bcher-kva.example")), &g->sets[2]);
	cr_expect_null(forward_pick(b, g, W("example.com")));
	cr_expect_null(forward_pick(b, g, W("internal")));
	cr_expect_null(forward_pick(NULL, NULL, W("corp.internal")));
}

Test(forward, label_by_label)
{
	const struct forward_table *g = &pol->fwd;
	cr_expect_null(forward_pick(NULL, g, W("xcorp.internal")));
	cr_expect_eq(forward_pick(NULL, g, W("a\\.b.corp.internal")), &g->sets[0]);
	cr_expect_null(forward_pick(NULL, g, W("corp\\.internal")), "one label, not two");
	cr_expect_null(forward_pick(NULL, g, W("corp.internal.evil")));
}

Test(forward, agent_zone_before_global_of_same_length)
{
	const struct forward_table *g = &pol->fwd, *a = &pol->agents[0].fwd;
	cr_expect_eq(forward_pick(a, g, W("db.corp.internal")), &a->sets[0]);
	cr_expect_eq(forward_pick(a, g, W("db.lab.corp.internal")), &g->sets[1],
	             "a longer global zone still wins");
}

Test(forward, set_ids_unique_and_not_zero)
{
	uint32_t ids[4] = {pol->fwd.sets[0].id, pol->fwd.sets[1].id, pol->fwd.sets[2].id,
	                   pol->agents[0].fwd.sets[0].id};
	for (int i = 0; i < 4; i++) {
		cr_expect_neq(ids[i], 0);
		for (int j = 0; j < i; j++)
			cr_expect_neq(ids[i], ids[j]);
	}
	struct policy *again = NULL;
	char err[256];
	cr_assert_eq(policy_load(&cfg, &again, err, sizeof(err)), 0, "%s", err);
	cr_expect_neq(again->fwd.sets[0].id, pol->fwd.sets[0].id, "a reload gets new ids");
	policy_unref(again);
}

Test(forward, cache_entries_per_upstream_set)
{
	struct cache *c = cache_new(1 << 20, 0, 3600);
	const uint8_t pkt[] = {0, 1, 0x81, 0x80, 0, 0, 0, 0, 0, 0, 0, 0};
	uint32_t zone = pol->fwd.sets[0].id << 1;
	cr_assert_eq(cache_put(c, W("db.corp.internal"), 1, 1, zone, pkt, sizeof(pkt), 60, 0), 0);
	size_t len;
	cr_expect_not_null(cache_get(c, W("db.corp.internal"), 1, 1, zone, 1, &len, NULL));
	cr_expect_null(cache_get(c, W("db.corp.internal"), 1, 1, 0, 1, &len, NULL),
	               "the global upstreams' question is another entry");
	cr_expect_null(cache_get(c, W("db.corp.internal"), 1, 1, zone | 1, 1, &len, NULL),
	               "and so is the DO bit");
	cache_free(c);
}

static void expect_error(const char *text, int line, const char *what)
{
	struct config c;
	char err[512] = "", want[32];
	config_init(&c);
	cr_expect_eq(config_load_string(&c, text, strlen(text), "t.yaml", err, sizeof(err)),
	             MOAT_EINVAL, "accepted: %s", text);
	snprintf(want, sizeof(want), "t.yaml:%d: ", line);
	cr_expect_eq(strncmp(err, want, strlen(want)), 0, "'%s' not at line %d", err, line);
	cr_expect_not_null(strstr(err, what), "'%s' does not say '%s'", err, what);
	config_free(&c);
}

Test(forward_config, errors)
{
	expect_error("forward:\n  - upstreams: [192.0.2.1]\n", 2, "forward: entry without a zone");
	expect_error("forward:\n  - zone: a.example\n", 2, "forward: zone without upstreams");
	expect_error("forward:\n  - zone: https://a.example/\n    upstreams: [192.0.2.1]\n", 2,
	             "write the host name only: a.example");
	expect_error("forward:\n  - zone: xn--zz.example\n    upstreams: [192.0.2.1]\n", 2,
	             "invalid international name");
	expect_error("forward:\n  - zone: .\n    upstreams: [192.0.2.1]\n", 2,
	             "not a domain name below the root");
	expect_error("forward:\n  - zone: a.example\n    upstreams: [nowhere]\n", 3,
	             "forward.upstreams: bad address 'nowhere'");
	expect_error("forward:\n  - zone: a.example\n    upstreams: [192.0.2.1]\n    port: 5\n", 4,
	             "unknown key 'port'");
	expect_error("forward:\n  - {zone: a.example, upstreams: [192.0.2.1]}\n"
	             "  - {zone: A.example., upstreams: [192.0.2.2]}\n",
	             3, "forward: zone listed twice (first at line 2)");
	expect_error("forward:\n  - {zone: a.example, upstreams: [192.0.2.1], timeout_ms: 0}\n", 2,
	             "timeout_ms: 0 is out of range");
}
