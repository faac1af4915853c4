/* Unit tests for the control protocol's grammar (moat/ctlproto.h): every command, explain's
 * options, the errors (unknown command, extra words, bad name, address or type, overlong
 * lines, NUL bytes), request lines round-tripping through format and parse, the error reply. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "moat/ctlproto.h"
#include "moat/err.h"
#include "moat/name.h"

static struct ctl_request r;
static char err[256];

static int parse(const char *s)
{
	return ctlproto_parse(s, strlen(s), &r, err, sizeof(err));
}

Test(ctlproto, commands)
{
	static const struct {
		const char *line;
		enum ctl_cmd cmd;
	} ok[] = {{"status", CTL_STATUS},      {"stats\n", CTL_STATS}, {"reload\r\n", CTL_RELOAD},
	          {"  flush ", CTL_FLUSH},     {"agents", CTL_AGENTS}, {"explain a.b", CTL_EXPLAIN},
	          {"flush Www.Ex.", CTL_FLUSH}};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		cr_expect_eq(parse(ok[i].line), 0, "%s: %s", ok[i].line, err);
		cr_expect_eq(r.cmd, ok[i].cmd, "%s", ok[i].line);
	}
	cr_expect(r.has_name);
	uint8_t want[NAME_MAXWIRE];
	name_from_text("www.ex", 6, want);
	cr_expect(name_equal(r.lname, want));
	cr_expect_eq(r.lname[1], 'w', "lower-cased");
	cr_expect_eq(parse("flush"), 0);
	cr_expect(!r.has_name, "flush without a name flushes all");
}

Test(ctlproto, explain_options)
{
	cr_assert_eq(parse("explain evil.test client=10.0.0.7 type=aaaa"), 0, "%s", err);
	cr_expect(r.has_client);
	cr_expect_eq(r.client.ss_family, AF_INET);
	cr_expect_eq(r.qtype, 28);
	cr_assert_eq(parse("explain evil.test type=TYPE65 client=2001:db8::1"), 0, "%s", err);
	cr_expect_eq(r.qtype, 65);
	cr_expect_eq(r.client.ss_family, AF_INET6);
	cr_assert_eq(parse("explain x"), 0);
	cr_expect_eq(r.qtype, 1, "type defaults to A");
	cr_expect(!r.has_client);
}

Test(ctlproto, errors)
{
	static const struct {
		const char *line, *msg;
	} bad[] = {
	    {"", "empty request"},
	    {"   \n", "empty request"},
	    {"frob", "unknown command: frob"},
	    {"Status", "unknown command"},
	    {"status now", "too many arguments"},
	    {"flush a b", "too many arguments"},
	    {"explain", "explain needs a name"},
	    {"explain a..b", "bad name"},
	    {"explain a client=999.1.1.1", "bad client address"},
	    {"explain a client=10.0.0.1:53", "no port"},
	    {"explain a type=NOPE", "unknown type"},
	    {"explain a port=1", "unknown option"},
	    {"explain a b c d e", "too many words"},
	    {"status\nstatus", "one request per line"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(parse(bad[i].line), MOAT_EINVAL, "%s", bad[i].line);
		cr_expect(strstr(err, bad[i].msg), "%s: %s", bad[i].line, err);
	}
	char nul[] = "status\0x";
	cr_expect_eq(ctlproto_parse(nul, sizeof(nul) - 1, &r, err, sizeof(err)), MOAT_EINVAL);
	static char longl[CTLPROTO_MAXLINE + 10];
	memset(longl, 'a', sizeof(longl) - 1);
	cr_expect_eq(parse(longl), MOAT_EINVAL);
	cr_expect(strstr(err, "too long"));
}

Test(ctlproto, format_round_trip)
{
	const char *lines[] = {"status", "flush", "flush www.example.com",
	                       "explain a.example client=192.0.2.1 type=HTTPS",
	                       "explain x.y client=2001:db8::5 type=TYPE999"};
	for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
		struct ctl_request a, b;
		char out[CTLPROTO_MAXLINE + 2];
		cr_assert_eq(ctlproto_parse(lines[i], strlen(lines[i]), &a, err, sizeof(err)), 0);
		int n = ctlproto_format(&a, out, sizeof(out));
		cr_assert_gt(n, 0);
		cr_expect_eq(out[n - 1], '\n');
		cr_assert_eq(ctlproto_parse(out, (size_t)n, &b, err, sizeof(err)), 0, "%s: %s", out,
		             err);
		cr_expect_eq(a.cmd, b.cmd);
		cr_expect_eq(a.qtype, b.qtype, "%s", out);
		cr_expect_eq(a.has_name, b.has_name);
		if (a.has_name)
			cr_expect(name_equal(a.lname, b.lname));
		cr_expect_eq(a.has_client, b.has_client);
		if (a.has_client)
			cr_expect_eq(memcmp(&a.client, &b.client, sizeof(a.client)), 0, "%s", out);
	}
	char tiny[4];
	cr_expect_eq(ctlproto_format(&r, tiny, sizeof(tiny)), MOAT_ESPACE);
}

Test(ctlproto, types_and_error_reply)
{
	uint16_t t;
	cr_expect_eq(ctlproto_parse_type("a", &t), 0);
	cr_expect_eq(t, 1);
	cr_expect_eq(ctlproto_parse_type("Svcb", &t), 0);
	cr_expect_eq(t, 64);
	cr_expect_eq(ctlproto_parse_type("type65535", &t), 0);
	cr_expect_eq(t, 65535);
	cr_expect_eq(ctlproto_parse_type("TYPE65536", &t), MOAT_EINVAL);
	cr_expect_eq(ctlproto_parse_type("TYPE", &t), MOAT_EINVAL);
	cr_expect_eq(ctlproto_parse_type("", &t), MOAT_EINVAL);
	char out[128];
	int n = ctlproto_error("a \"b\"\n", out, sizeof(out));
	cr_assert_gt(n, 0);
	cr_expect_str_eq(out, "{\"v\":1,\"ok\":false,\"error\":\"a \\\"b\\\"\\u000a\"}\n");
	cr_expect_eq(ctlproto_error("x", out, 10), MOAT_ESPACE);
	cr_expect_str_eq(ctlproto_cmd_str(CTL_EXPLAIN), "explain");
}

Test(ctlproto, agent_commands)
{
	cr_assert_eq(parse("agent add ci-7 client=198.51.100.7 client=2001:db8::/64 deny=refused "
	                   "patterns=3"),
	             0, "%s", err);
	cr_expect_eq(r.cmd, CTL_AGENT_ADD);
	cr_expect_str_eq(r.agent, "ci-7");
	cr_expect_eq(r.nclients, 2);
	cr_expect_eq(r.clients[0].bits, 128, "an address alone is a /32 (mapped: 128)");
	cr_expect_eq(r.clients[1].bits, 64);
	cr_expect_eq(r.deny, DENY_REFUSED);
	cr_expect_eq(r.npatterns, 3);
	/* round trip through the line moatctl sends */
	char line[CTLPROTO_MAXLINE + 2];
	struct ctl_request a = r;
	cr_assert_gt(ctlproto_format(&a, line, sizeof(line)), 0);
	cr_expect_str_eq(line, "agent add ci-7 client=198.51.100.7/32 client=2001:db8::/64 "
	                       "deny=refused patterns=3\n");
	cr_assert_eq(parse(line), 0, "%s", err);
	cr_expect_eq(memcmp(r.clients, a.clients, sizeof(a.clients)), 0);
	cr_assert_eq(parse("agent del ci-7"), 0, "%s", err);
	cr_expect_eq(r.cmd, CTL_AGENT_DEL);
	cr_assert_gt(ctlproto_format(&r, line, sizeof(line)), 0);
	cr_expect_str_eq(line, "agent del ci-7\n");
	cr_assert_eq(parse("agent add x client=10.0.0.1 patterns=0"), 0, "%s", err);
	cr_expect_eq(r.deny, DENY_NXDOMAIN, "deny defaults to nxdomain");
	cr_expect(!r.force, "not forced unless asked");
	/* force: a range may overlap a config agent's; it survives the round trip */
	cr_assert_eq(parse("agent add x client=10.0.0.1 force patterns=0"), 0, "%s", err);
	cr_expect(r.force);
	cr_assert_gt(ctlproto_format(&r, line, sizeof(line)), 0);
	cr_expect_str_eq(line, "agent add x client=10.0.0.1/32 deny=nxdomain force patterns=0\n");
	cr_assert_eq(parse(line), 0, "%s", err);
	cr_expect(r.force);

	static const struct {
		const char *line, *msg;
	} bad[] = {
	    {"agent", "expected agent add"},
	    {"agent list x", "expected agent add"},
	    {"agent add b@d client=10.0.0.1 patterns=1", "bad agent name"},
	    {"agent add x patterns=1", "at least one client"},
	    {"agent add x client=10.0.0.1", "needs patterns=N"},
	    {"agent add x client=10.0.0.300 patterns=1", "bad client range"},
	    {"agent add x client=10.0.0.1/33 patterns=1", "bad client range"},
	    {"agent add x client=10.0.0.1 deny=drop patterns=1", "bad deny form"},
	    {"agent add x client=10.0.0.1 patterns=-1", "bad pattern count"},
	    {"agent add x client=10.0.0.1 patterns=1000001", "bad pattern count"},
	    {"agent add x client=10.0.0.1 colour=red patterns=1", "unknown option"},
	    {"agent del x y", "too many arguments"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(parse(bad[i].line), MOAT_EINVAL, "%s", bad[i].line);
		cr_expect(strstr(err, bad[i].msg), "%s: '%s' not in '%s'", bad[i].line, bad[i].msg,
		          err);
	}
	/* 64 ranges are fine, 65 are not */
	char big[CTLPROTO_MAXLINE + 1];
	size_t n = (size_t)snprintf(big, sizeof(big), "agent add x patterns=1");
	for (int i = 1; i <= 65 && n < sizeof(big) - 20; i++)
		n += (size_t)snprintf(big + n, sizeof(big) - n, " client=::%x", i);
	cr_expect_eq(parse(big), MOAT_EINVAL);
	cr_expect(strstr(err, "too many client ranges"), "%s", err);
	*strrchr(big, ' ') = 0;
	cr_expect_eq(parse(big), 0, "64 ranges: %s", err);
	cr_expect_eq(r.nclients, 64);
}

/* Ask mode's commands: watch, allow with ports and a lifetime, deny; refusals; the line moatctl
 * sends reads back the same. */
Test(ctlproto, ask_commands)
{
	struct ctl_request r, r2;
	char err[256] = "", line[CTLPROTO_MAXLINE + 2];
	const char *t = "allow *.pypi.example agent=ci-1 ports=tcp/443,8443 ports=udp/53 for=600";
	cr_assert_eq(ctlproto_parse(t, strlen(t), &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.cmd, CTL_ALLOW);
	cr_assert_str_eq(r.pattern, "*.pypi.example");
	cr_assert_str_eq(r.agent, "ci-1");
	cr_assert_str_eq(r.ports, "tcp/443,8443 udp/53");
	cr_assert_eq(r.for_s, 600);
	int n = ctlproto_format(&r, line, sizeof(line));
	cr_assert_gt(n, 0);
	cr_assert_eq(ctlproto_parse(line, (size_t)n, &r2, err, sizeof(err)), 0, "%s", err);
	cr_assert_str_eq(r2.ports, r.ports);
	cr_assert_eq(r2.for_s, 600);
	cr_assert_str_eq(ctlproto_cmd_str(r.cmd), "allow");
	t = "deny evil.example agent=ci-1";
	cr_assert_eq(ctlproto_parse(t, strlen(t), &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.cmd, CTL_DENY);
	cr_assert_eq(ctlproto_parse("watch", 5, &r, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(r.cmd, CTL_WATCH);
	static const char *const bad[] = {
	    "allow x.example",                      /* no agent */
	    "allow x.example agent=b@d",            /* bad agent */
	    "allow x.example agent=a ports=tcp/0",  /* bad port */
	    "allow x.example agent=a for=0",        /* no lifetime */
	    "deny x.example agent=a ports=tcp/443", /* ports on a deny */
	    "deny x.example agent=a for=60",        /* a lifetime on a deny */
	    "watch now",                            /* extra word */
	    "allow",                                /* no name */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(ctlproto_parse(bad[i], strlen(bad[i]), &r, err, sizeof(err)),
		             MOAT_EINVAL, "%s accepted", bad[i]);
}
