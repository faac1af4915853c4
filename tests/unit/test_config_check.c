/* Unit tests for the config sanity checks (config_check.c, config.c, policy_load.c): each case
 * of a config that parses but cannot work is an error naming the exact file:line and the
 * problem: identical agent ranges, a listen address twice, an upstream that is moatd itself,
 * cache_min_ttl above cache_max_ttl, a sinkhole address in the blocked ranges, a user that does
 * not exist, a log file in a missing directory, a missing allowlist, a duplicate key, port 0. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moat/config.h"
#include "moat/config_load.h"
#include "moat/err.h"
#include "moat/policy.h"

static const char *base = "listen: [\"127.0.0.1:5300\"]\n" /* line 1 */
                          "upstreams: [\"192.0.2.53\"]\n"  /* line 2 */
                          "agents:\n"                      /* line 3 */
                          "  - name: one\n"                /* line 4 */
                          "    clients: [10.0.0.0/24]\n";  /* line 5 */

/* base + more, parsed and validated (and loaded as a policy when load is set): must fail with
 * "t.yaml:LINE: " and what. */
static void expect_error(const char *more, bool load, int line, const char *what)
{
	struct config cfg;
	char text[2048], err[512] = "", want[64];
	snprintf(text, sizeof(text), "%s%s", base, more);
	config_init(&cfg);
	int rc = config_load_string(&cfg, text, strlen(text), "t.yaml", err, sizeof(err));
	if (rc == 0)
		rc = config_validate(&cfg, err, sizeof(err));
	if (rc == 0 && load) {
		struct policy *p = NULL;
		rc = policy_load(&cfg, &p, err, sizeof(err));
		policy_unref(p);
	}
	cr_expect_neq(rc, 0, "accepted:\n%s", text);
	snprintf(want, sizeof(want), "t.yaml:%d: ", line);
	cr_expect_eq(strncmp(err, want, strlen(want)), 0, "error '%s' not at line %d", err, line);
	cr_expect_not_null(strstr(err, what), "error '%s' does not say '%s'", err, what);
	config_free(&cfg);
}

static void expect_ok(const char *more)
{
	struct config cfg;
	char text[2048], err[512] = "";
	snprintf(text, sizeof(text), "%s%s", base, more);
	config_init(&cfg);
	cr_expect_eq(config_load_string(&cfg, text, strlen(text), "t.yaml", err, sizeof(err)), 0,
	             "%s", err);
	cr_expect_eq(config_validate(&cfg, err, sizeof(err)), 0, "%s", err);
	config_free(&cfg);
}

Test(config_check, base_is_fine)
{
	expect_ok("");
	expect_ok("  - name: two\n    clients: [10.0.0.0/16]\n"); /* overlapping, not identical */
}

Test(config_check, identical_agent_ranges)
{
	expect_error("  - name: two\n    clients: [192.0.2.0/24, 10.0.0.0/24]\n", false, 7,
	             "clients: 10.0.0.0/24 of agent 'two' is also the range of agent 'one' "
	             "(t.yaml:5): one of them would never be reached");
}

Test(config_check, listen_twice)
{
	struct config cfg;
	char err[512] = "";
	const char *t = "listen:\n  - 127.0.0.1:5300\n  - \"[::1]:53\"\n  - 127.0.0.1:5300\n"
	                "upstreams: [192.0.2.53]\nagents: [{name: a, clients: [10.0.0.0/8]}]\n";
	config_init(&cfg);
	cr_assert_eq(config_load_string(&cfg, t, strlen(t), "t.yaml", err, sizeof(err)), 0);
	cr_expect_eq(config_validate(&cfg, err, sizeof(err)), MOAT_EINVAL);
	cr_expect_str_eq(err,
	                 "t.yaml:4: listen: 127.0.0.1:5300 is listed twice (first at t.yaml:2)");
	config_free(&cfg);
}

Test(config_check, upstream_is_own_listen_address)
{
	struct config cfg;
	char err[512] = "";
	const char *t = "listen: [127.0.0.1:5300, \"0.0.0.0:5353\"]\n"
	                "upstreams:\n  - 192.0.2.53\n  - 127.0.0.1:5300\n"
	                "agents: [{name: a, clients: [10.0.0.0/8]}]\n";
	config_init(&cfg);
	cr_assert_eq(config_load_string(&cfg, t, strlen(t), "t.yaml", err, sizeof(err)), 0);
	cr_expect_eq(config_validate(&cfg, err, sizeof(err)), MOAT_EINVAL);
	cr_expect_str_eq(err, "t.yaml:4: upstreams: 127.0.0.1:5300 is moatd's own listen address "
	                      "(t.yaml:1): queries would loop back to moatd");
	config_free(&cfg);
	/* a listener on every address reaches loopback on its port too */
	t = "listen: [\"0.0.0.0:5353\"]\nupstreams: [127.0.0.2:5353]\n"
	    "agents: [{name: a, clients: [10.0.0.0/8]}]\n";
	config_init(&cfg);
	cr_assert_eq(config_load_string(&cfg, t, strlen(t), "t.yaml", err, sizeof(err)), 0);
	cr_expect_eq(config_validate(&cfg, err, sizeof(err)), MOAT_EINVAL);
	cr_expect_not_null(strstr(err, "t.yaml:2: upstreams: 127.0.0.2:5353 is moatd's own"));
	config_free(&cfg);
	expect_ok("upstream_timeout_ms: 500\n"); /* 192.0.2.53:53 is not 127.0.0.1:5300 */
	expect_error("forward:\n  - zone: corp.internal\n    upstreams: [127.0.0.1:5300]\n", false,
	             7, "forward: upstream 127.0.0.1:5300 is moatd's own listen address");
	expect_error("    forward: [{zone: a.internal, upstreams: [127.0.0.1:5300]}]\n", false, 6,
	             "forward: upstream 127.0.0.1:5300 is moatd's own");
}

Test(config_check, cache_ttls)
{
	expect_error("cache_max_ttl: 60\ncache_min_ttl: 300\n", false, 7,
	             "cache_min_ttl (300) is above cache_max_ttl (60)");
	expect_ok("cache_min_ttl: 60\ncache_max_ttl: 60\n");
}

Test(config_check, sinkhole_in_blocked_ranges)
{
	expect_error("    deny: sinkhole\n    sinkhole: [169.254.169.254]\n", true, 7,
	             "sinkhole: 169.254.169.254 (agent one) is inside the blocked ranges (always "
	             "denied)");
	expect_error("    deny: sinkhole\n    sinkhole: [192.0.2.1, \"::1\"]\n", true, 7,
	             "sinkhole: ::1 (agent one) is inside the blocked ranges");
	expect_error("    sinkhole: [10.1.2.3]\n", true, 6, "(private)");
}

Test(config_check, sinkhole_fine)
{
	struct config cfg;
	char err[512] = "";
	char t[1024];
	snprintf(t, sizeof(t), "%s    deny: sinkhole\n    sinkhole: [0.0.0.0, \"2001:db8::1\"]\n",
	         base);
	config_init(&cfg);
	cr_assert_eq(config_load_string(&cfg, t, strlen(t), "t.yaml", err, sizeof(err)), 0);
	struct policy *p = NULL;
	cr_expect_eq(policy_load(&cfg, &p, err, sizeof(err)), 0, "%s", err);
	policy_unref(p);
	config_free(&cfg);
}

Test(config_check, user_must_exist)
{
	expect_error("user: no-such-user-moat-test\n", false, 6,
	             "user: no such user 'no-such-user-moat-test'");
	expect_ok("user: root\n");
}

Test(config_check, log_directory_must_exist)
{
	expect_error("log:\n  file: /nonexistent/moat/q.jsonl\n", false, 7,
	             "log: directory '/nonexistent/moat' of /nonexistent/moat/q.jsonl does not "
	             "exist");
	expect_ok("log: {file: /tmp/moat-q.jsonl}\n");
}

Test(config_check, missing_allowlist_names_config_line)
{
	expect_error("    allow:\n      - /nonexistent/allow-a.txt\n", true, 7,
	             "allow: /nonexistent/allow-a.txt: cannot open");
}

Test(config_check, duplicate_keys_named)
{
	expect_error("upstreams: [192.0.2.54]\n", false, 6,
	             "duplicate key 'upstreams' (first at line 2)");
	expect_error("    clients: [10.0.1.0/24]\n", false, 6,
	             "duplicate key 'clients' (first at line 5)");
	expect_error("log: {file: /tmp/a, file: /tmp/b}\n", false, 6, "duplicate key 'file'");
}

Test(config_check, port_zero)
{
	struct config cfg;
	char err[512] = "";
	const char *t = "listen: [\"127.0.0.1:0\"]\n";
	config_init(&cfg);
	cr_expect_eq(config_load_string(&cfg, t, strlen(t), "t.yaml", err, sizeof(err)),
	             MOAT_EINVAL);
	cr_expect_str_eq(err, "t.yaml:1: listen: '127.0.0.1:0': port 0 is not a port (1 to 65535)");
	config_free(&cfg);
}

Test(config_check, flags_have_no_line)
{
	struct config cfg;
	char err[512] = "";
	config_init(&cfg);
	cfg.listen = calloc(2, sizeof(*cfg.listen));
	cfg.nlisten = 2;
	cr_assert_eq(netaddr_parse_addrport("127.0.0.1:5300", 53, &cfg.listen[0]), 0);
	cr_assert_eq(netaddr_parse_addrport("127.0.0.1:5300", 53, &cfg.listen[1]), 0);
	cr_expect_eq(config_check_sanity(&cfg, err, sizeof(err)), MOAT_EINVAL);
	cr_expect_str_eq(err,
	                 "--listen: listen: 127.0.0.1:5300 is listed twice (first at --listen)");
	config_free(&cfg);
}
