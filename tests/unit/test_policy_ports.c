/* Unit tests for port-scoped allowlist lines (resolver/policy_ports.c and the port table of
 * resolver/policy.c): the port syntax and its errors, union and formatting, files with ports
 * (file:line errors, the union of a pattern listed twice, any port winning), the rule a match
 * reports carrying its ports, the verdict of policy_decide carrying them, and the high-risk list
 * refusing ports. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moat/addrguard.h"
#include "moat/err.h"
#include "moat/name.h"
#include "moat/policy.h"

static int parse(const char *text, struct policy_ports *out, char *why)
{
	return policy_ports_parse(text, strlen(text), out, why, 128);
}

static const char *fmt(const struct policy_ports *l)
{
	static char buf[256];
	cr_assert_geq(policy_ports_format(l, buf, sizeof(buf)), 0);
	return buf;
}

Test(ports, parse_good)
{
	struct policy_ports l;
	char why[128];
	cr_assert_eq(parse("tcp/443", &l, why), 0, "%s", why);
	cr_assert_eq(l.n, 1);
	cr_assert_eq(l.p[0].proto, POLICY_PROTO_TCP);
	cr_assert_eq(l.p[0].port, 443);
	cr_assert_eq(parse("  tcp/443,80\tudp/123 tcp/80 ", &l, why), 0, "%s", why);
	cr_assert_str_eq(fmt(&l), "tcp/80,443 udp/123", "sorted, duplicates merged");
	cr_assert_eq(parse("udp/1,65535", &l, why), 0);
	cr_assert_str_eq(fmt(&l), "udp/1,65535");
	cr_assert_str_eq(fmt(NULL), "any");
}

Test(ports, parse_bad)
{
	static const char *const bad[] = {
	    "",       "   ",        "tcp",      "tcp/",    "tcp/0",     "tcp/65536",      "tcp/080",
	    "tcp/1,", "tcp/,1",     "tcp/1,,2", "sctp/80", "TCP/80",    "tcp/80x",        "tcp:80",
	    "tcp/-1", "tcp/999999", "icmp/8",   "80",      "tcp/1 udp", "www.example.com"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct policy_ports l;
		char why[128] = "";
		cr_expect_lt(parse(bad[i], &l, why), 0, "'%s' accepted", bad[i]);
		cr_expect_neq(why[0], 0, "'%s': no reason", bad[i]);
	}
}

Test(ports, parse_limit_and_union)
{
	struct policy_ports l, m;
	char why[128], text[256] = "tcp/1";
	for (int i = 2; i <= POLICY_PORTS_MAX; i++)
		snprintf(text + strlen(text), sizeof(text) - strlen(text), ",%d", i);
	cr_assert_eq(parse(text, &l, why), 0, "%s", why);
	cr_assert_eq(l.n, POLICY_PORTS_MAX);
	strcat(text, ",17");
	cr_assert_eq(parse(text, &l, why), MOAT_ELIMIT);
	cr_assert(strstr(why, "more than 16 ports") != NULL, "%s", why);
	cr_assert_eq(parse("tcp/443", &l, why), 0);
	cr_assert_eq(parse("udp/53 tcp/80,443", &m, why), 0);
	cr_assert_eq(policy_ports_union(&l, &m), 0);
	cr_assert_str_eq(fmt(&l), "tcp/80,443 udp/53");
	char small[8];
	cr_assert_eq(policy_ports_format(&l, small, sizeof(small)), MOAT_ESPACE);
}

/* ---- files ---- */

static struct policy_set *set;
static char *path;

static void load(const char *content, int want_rc, char *err)
{
	path = strdup("/tmp/moat-test-ports-XXXXXX");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	close(fd);
	set = policy_set_new();
	cr_assert_not_null(set);
	int rc = policy_set_load_file(set, path, err, 512);
	cr_assert_eq(rc, want_rc, "rc %d: %s", rc, err);
}

static void done(void)
{
	policy_set_free(set);
	unlink(path);
	free(path);
}

static const struct policy_ports *ports_of(const char *name, bool *matched)
{
	uint8_t w[NAME_MAXWIRE];
	cr_assert_gt(name_from_text(name, strlen(name), w), 0);
	struct policy_rule r;
	*matched = policy_set_match(set, w, &r);
	return r.ports;
}

Test(ports, file_with_ports)
{
	char err[512] = "";
	load("api.example.com tcp/443\n"
	     "*.pypi.org tcp/80,443   # mirrors\n"
	     "ntp.example.net\tudp/123\n"
	     "plain.example\n"
	     "api.example.com tcp/80 udp/53\n" /* listed again: union */
	     "open.example tcp/22\n"
	     "open.example\n", /* listed again without ports: any port */
	     0, err);
	bool m;
	cr_assert_str_eq(fmt(ports_of("api.example.com", &m)), "tcp/80,443 udp/53");
	cr_assert(m);
	cr_assert_str_eq(fmt(ports_of("files.pypi.org", &m)), "tcp/80,443");
	cr_assert_str_eq(fmt(ports_of("a.b.pypi.org", &m)), "tcp/80,443");
	cr_assert_str_eq(fmt(ports_of("ntp.example.net", &m)), "udp/123");
	cr_assert_null(ports_of("plain.example", &m), "no ports: any port");
	cr_assert(m);
	cr_assert_null(ports_of("open.example", &m), "a later line without ports widens to any");
	cr_assert_null(ports_of("pypi.org", &m));
	cr_assert_not(m, "the apex is not under the wildcard");
	cr_assert_eq(policy_set_count(set), 5);
	done();
}

Test(ports, file_errors_name_file_and_line)
{
	static const struct {
		const char *text;
		int rc;
		unsigned line;
		const char *why;
	} cases[] = {
	    {"a.com\nb.com tcp/0\n", MOAT_EINVAL, 2, "bad port"},
	    {"a.com tcp/80\n\nb.com sctp/9\n", MOAT_EINVAL, 3, "bad port spec 'sctp/9'"},
	    {"a.com tcp/80 www.example.com\n", MOAT_EINVAL, 1, "bad port spec"},
	    {"a.com tcp/1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17\n", MOAT_ELIMIT, 1, "16"},
	    {"a..com tcp/80\n", MOAT_EINVAL, 1, "bad pattern 'a..com'"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[512] = "", want[600];
		load(cases[i].text, cases[i].rc, err);
		snprintf(want, sizeof(want), "%s:%u: ", path, cases[i].line);
		cr_expect_eq(strncmp(err, want, strlen(want)), 0, "case %zu: '%s'", i, err);
		cr_expect(strstr(err, cases[i].why) != NULL, "case %zu: '%s'", i, err);
		done();
	}
}

Test(ports, forbidden_in_highrisk)
{
	char err[512] = "";
	path = strdup("/tmp/moat-test-ports-XXXXXX");
	int fd = mkstemp(path);
	const char *text = "evil.example\nworse.example tcp/80\n";
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	set = policy_set_new();
	policy_set_forbid_ports(set);
	cr_assert_eq(policy_set_load_file(set, path, err, sizeof(err)), MOAT_EINVAL);
	cr_assert(strstr(err, ":2: ports have no meaning here") != NULL, "%s", err);
	done();
}

Test(ports, verdict_carries_ports)
{
	char err[512] = "";
	load("www.demo.test tcp/80\nany.demo.test\n", 0, err);
	struct policy p = {.refs = 1, .guard = addrguard_new()};
	struct policy_agent agent = {.allow = set};
	snprintf(agent.cfg.name, sizeof(agent.cfg.name), "ci");
	cr_assert_not_null(p.guard);
	uint8_t w[NAME_MAXWIRE];
	struct policy_decision d;
	cr_assert_gt(name_from_text("www.demo.test", 13, w), 0);
	policy_decide(&p, &agent, w, 1, &d);
	cr_assert_eq(d.verdict, POLICY_ALLOW);
	cr_assert_str_eq(fmt(d.rule.ports), "tcp/80");
	cr_assert_gt(name_from_text("any.demo.test", 13, w), 0);
	policy_decide(&p, &agent, w, 1, &d);
	cr_assert_eq(d.verdict, POLICY_ALLOW);
	cr_assert_null(d.rule.ports);
	cr_assert_gt(name_from_text("no.demo.test", 12, w), 0);
	policy_decide(&p, &agent, w, 1, &d);
	cr_assert_eq(d.verdict, POLICY_DENY_NOT_ALLOWED);
	cr_assert_null(d.rule.ports);
	addrguard_free(p.guard);
	done();
}
