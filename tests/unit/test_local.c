/* Unit tests for local answers (local.c): local_data lines of every type (with TTLs, IDN names
 * and errors at file:line), hosts(5) files (aliases, comments, IPv6), the answer packets (parsed
 * back with the upstream parser: records, CNAME chains inside the table, NODATA, names the
 * table does not have), the lint warning for always-denied addresses, and the config keys that
 * feed them through policy_load. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moat/addrguard.h"
#include "moat/config.h"
#include "moat/config_load.h"
#include "moat/err.h"
#include "moat/local.h"
#include "moat/name.h"
#include "moat/policy.h"
#include "moat/policy_lint.h"
#include "moat/wire.h"

static const uint8_t *W(const char *text)
{
	static uint8_t bufs[4][NAME_MAXWIRE];
	static int next;
	uint8_t *b = bufs[next++ & 3];
	cr_assert_gt(name_from_text(text, strlen(text), b), 0, "%s", text);
	return b;
}

static struct local_data *ld;
static void setup(void)
{
	ld = local_data_new();
	cr_assert_not_null(ld);
}
static void teardown(void)
{
	local_data_free(ld);
}
TestSuite(local, .init = setup, .fini = teardown);

static void add_ok(const char *line)
{
	char err[300] = "";
	cr_assert_eq(local_data_add(ld, line, "c.yaml", 7, err, sizeof(err)), 0, "%s: %s", line,
	             err);
}

static void add_bad(const char *line, const char *what)
{
	char err[300] = "";
	cr_expect_eq(local_data_add(ld, line, "c.yaml", 9, err, sizeof(err)), MOAT_EINVAL, "%s",
	             line);
	cr_expect_eq(strncmp(err, "c.yaml:9: local_data: ", 22), 0, "%s", err);
	cr_expect_not_null(strstr(err, what), "'%s' does not say '%s'", err, what);
}

/* Answer (lname, qtype) and parse it back as moatd parses an upstream's. */
static int answer(const char *name, uint16_t qtype, struct wire_resp *r, uint8_t *pkt)
{
	int n = local_data_answer(ld, W(name), qtype, 0x1234, pkt, 4096);
	if (n > 0)
		cr_assert_eq(wire_resp_parse(pkt, (size_t)n, 0x1234, W(name), qtype, 1, r), 0);
	return n;
}

struct addrs {
	char seen[8][64];
	int n;
};
static int on_addr(void *ctx, const uint8_t *addr, size_t len, uint16_t t)
{
	struct addrs *a = ctx;
	(void)t;
	inet_ntop(len == 4 ? AF_INET : AF_INET6, addr, a->seen[a->n++], 64);
	return 0;
}

Test(local, records_of_every_type)
{
	add_ok("db.corp.internal A 10.1.2.3");
	add_ok("db.corp.internal A 10.1.2.4");
	add_ok("DB.Corp.Internal. AAAA 2001:db8::3");
	add_ok("web.corp.internal 60 CNAME db.corp.internal");
	add_ok("txt.corp.internal TXT \"hello world\"");
	add_ok("b\xc3\xbc"
	       "cher.corp.internal A 192.0.2.5");
	cr_assert_eq(local_data_finish(ld, NULL, NULL), 0);
	cr_expect_eq(local_data_count(ld), 6);
	static uint8_t pkt[4096];
	struct wire_resp r;
	struct addrs a = {0};
	cr_assert_gt(answer("db.corp.internal", 1, &r, pkt), 0);
	cr_expect_eq(r.rcode, 0);
	cr_expect_eq(r.counts[0], 2);
	cr_expect_eq(r.min_ttl, LOCAL_TTL);
	int n = local_data_answer(ld, W("db.corp.internal"), 1, 0x1234, pkt, sizeof(pkt));
	wire_resp_each_passed_addr(pkt, (size_t)n, &r, on_addr, &a);
	cr_assert_eq(a.n, 2);
	cr_expect_str_eq(a.seen[0], "10.1.2.3");
	cr_expect_str_eq(a.seen[1], "10.1.2.4");
	cr_assert_gt(answer("db.corp.internal", 28, &r, pkt), 0);
	cr_expect_eq(r.counts[0], 1, "AAAA, the name written in another case");
	cr_assert_gt(answer("web.corp.internal", 1, &r, pkt), 0);
	cr_expect_eq(r.counts[0], 3, "the CNAME and its target's two A records");
	cr_expect_eq(r.nchain, 2);
	cr_expect_eq(r.min_ttl, 60);
	cr_assert_gt(answer("web.corp.internal", 5, &r, pkt), 0);
	cr_expect_eq(r.counts[0], 1, "a CNAME question gets the CNAME only");
	cr_assert_gt(answer("txt.corp.internal", 16, &r, pkt), 0);
	cr_expect_eq(r.counts[0], 1);
	cr_expect_eq(r.rr[0].rdlen, 12);
	cr_expect_eq(memcmp(pkt + r.rr[0].rdata_off, "\x0bhello world", 12), 0);
	cr_assert_gt(answer("xn--bcher-kva.corp.internal", 1, &r, pkt), 0);
	cr_expect_eq(r.counts[0], 1);
	cr_assert_gt(answer("txt.corp.internal", 1, &r, pkt), 0);
	cr_expect_eq(r.counts[0], 0, "NODATA: the name is local, the type is not");
	cr_expect_eq(answer("other.corp.internal", 1, &r, pkt), 0, "not in the table");
	cr_expect_eq(answer("corp.internal", 1, &r, pkt), 0);
}

Test(local, bad_lines)
{
	add_bad("db.corp.internal", "expected 'NAME [TTL] TYPE DATA'");
	add_bad("db.corp.internal MX 10 mail", "type must be A, AAAA, CNAME or TXT");
	add_bad("db.corp.internal A 10.1.2", "expected an IPv4 address");
	add_bad("db.corp.internal AAAA 10.1.2.3", "expected an IPv6 address");
	add_bad("https://db.corp.internal/ A 10.1.2.3",
	        "write the host name only: db.corp.internal");
	add_bad("*.corp.internal A 10.1.2.3", "is not a host name");
	add_bad("db.corp.internal 99999999 A 10.1.2.3", "bad TTL");
	add_bad("x.internal CNAME xn--zz.example", "invalid international name");
	cr_expect_eq(local_data_count(ld), 0);
}

static char *write_tmp(const char *content)
{
	char *path = strdup("/tmp/moat-test-local-XXXXXX");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	close(fd);
	return path;
}

Test(local, hosts_file)
{
	char *p = write_tmp("# comment\n\n192.0.2.7  build.corp.internal build # alias\n"
	                    "2001:db8::7\tbuild.corp.internal\n");
	char err[300] = "";
	cr_assert_eq(local_data_load_hosts(ld, p, err, sizeof(err)), 0, "%s", err);
	local_data_finish(ld, NULL, NULL);
	cr_expect_eq(local_data_count(ld), 3);
	static uint8_t pkt[4096];
	struct wire_resp r;
	cr_assert_gt(answer("build.corp.internal", 1, &r, pkt), 0);
	cr_expect_eq(r.counts[0], 1);
	cr_assert_gt(answer("build", 1, &r, pkt), 0);
	cr_assert_gt(answer("build.corp.internal", 28, &r, pkt), 0);
	cr_expect_eq(r.counts[0], 1);
	unlink(p);
	free(p);
	p = write_tmp("192.0.2.7 ok.internal\n300.1.1.1 bad.internal\n");
	cr_expect_eq(local_data_load_hosts(ld, p, err, sizeof(err)), MOAT_EINVAL);
	char want[200];
	snprintf(want, sizeof(want), "%s:2: hosts: bad address '300.1.1.1'", p);
	cr_expect_str_eq(err, want);
	unlink(p);
	free(p);
	p = write_tmp("192.0.2.8\n");
	cr_expect_eq(local_data_load_hosts(ld, p, err, sizeof(err)), MOAT_EINVAL);
	cr_expect_not_null(strstr(err, ":1: hosts: an address without a name"), "%s", err);
	unlink(p);
	free(p);
}

Test(local, always_denied_addresses_warned)
{
	struct addrguard *g = addrguard_new();
	char err[300];
	cr_assert_eq(
	    addrguard_load_file(g, MOAT_SOURCE_DIR "/zones/blocked-ranges.txt", err, sizeof(err)),
	    0, "%s", err);
	struct policy_lint *l = policy_lint_new();
	add_ok("meta.corp.internal A 169.254.169.254");
	add_ok("priv.corp.internal A 10.1.2.3");
	cr_assert_eq(local_data_finish(ld, g, l), 0);
	cr_assert_eq(policy_lint_count(l), 1);
	cr_expect_str_eq(policy_lint_get(l, 0),
	                 "c.yaml:7: warning: local address 169.254.169.254 is in the always-denied "
	                 "ranges: it is never answered");
	policy_lint_free(l);
	addrguard_free(g);
}

Test(local_config, keys_feed_the_policy)
{
	char *hosts = write_tmp("192.0.2.9 h.corp.internal\n");
	char text[1024], err[512] = "";
	snprintf(text, sizeof(text),
	         "listen: [\"127.0.0.1:5300\"]\nupstreams: [192.0.2.53]\n"
	         "local_data:\n  - db.corp.internal A 10.1.2.3\n  - db.corp.internal TXT x\n"
	         "hosts: [%s]\nagents: [{name: a, clients: [10.0.0.0/8]}]\n",
	         hosts);
	struct config cfg;
	config_init(&cfg);
	cr_assert_eq(config_load_string(&cfg, text, strlen(text), "t.yaml", err, sizeof(err)), 0,
	             "%s", err);
	cr_expect_eq(cfg.nlocal, 2);
	cr_expect_eq(cfg.local_lines[1], 5);
	struct policy *p = NULL;
	cr_assert_eq(policy_load(&cfg, &p, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(local_data_count(p->local), 3);
	policy_unref(p);
	config_free(&cfg);
	unlink(hosts);
	free(hosts);

	const char *bad = "local_data:\n  - db.corp.internal A 10.1.2.3\n  - db.corp.internal A x\n"
	                  "agents: [{name: a, clients: [10.0.0.0/8]}]\n";
	config_init(&cfg);
	cr_assert_eq(config_load_string(&cfg, bad, strlen(bad), "t.yaml", err, sizeof(err)), 0);
	cr_expect_eq(policy_load(&cfg, &p, err, sizeof(err)), MOAT_EINVAL);
	cr_expect_str_eq(err, "t.yaml:3: local_data: 'db.corp.internal A x': expected an IPv4 "
	                      "address");
	config_free(&cfg);

	const char *missing = "hosts:\n  - /nonexistent/moat-hosts\n"
	                      "agents: [{name: a, clients: [10.0.0.0/8]}]\n";
	config_init(&cfg);
	cr_assert_eq(config_load_string(&cfg, missing, strlen(missing), "t.yaml", err, sizeof(err)),
	             0);
	cr_expect_eq(policy_load(&cfg, &p, err, sizeof(err)), MOAT_EIO);
	cr_expect_not_null(strstr(err, "t.yaml:2: hosts: /nonexistent/moat-hosts: cannot open"),
	                   "%s", err);
	config_free(&cfg);
}
