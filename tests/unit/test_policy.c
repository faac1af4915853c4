/* Unit tests for the name policy: pattern parsing, exact and wildcard matching (depth, apex,
 * case, escaped dots, the root), the rule reported, allowlist files and their errors, agent
 * selection by client address, decisions and chain checks on a snapshot built from a config
 * with the shipped zone files, and a 100k-pattern set. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moat/config.h"
#include "moat/err.h"
#include "moat/name.h"
#include "moat/policy.h"
#include "moat/policy_lint.h"

/* ---- helpers ---- */

/* Lower-cased wire form of a name; one of 4 rotating buffers so a few can be used at once. */
static const uint8_t *W(const char *text)
{
	static uint8_t bufs[4][NAME_MAXWIRE];
	static int next;
	uint8_t *b = bufs[next++ & 3];
	int n = name_from_text(text, strlen(text), b);
	cr_assert_gt(n, 0, "bad test name %s", text);
	return b;
}

/* Write content to a new temp file; returns its malloc'ed path. */
static char *write_tmp(const char *content)
{
	char *path = strdup("/tmp/moat-test-policy-XXXXXX");
	cr_assert_not_null(path);
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	size_t len = strlen(content);
	cr_assert_eq(write(fd, content, len), (ssize_t)len);
	close(fd);
	return path;
}

static void drop_tmp(char *path)
{
	unlink(path);
	free(path);
}

static struct policy_set *set;

static void set_setup(void)
{
	set = policy_set_new();
	cr_assert_not_null(set);
}

static void set_teardown(void)
{
	policy_set_free(set);
	set = NULL;
}

static int add(const char *pattern, uint32_t line)
{
	return policy_set_add(set, pattern, strlen(pattern), "allow.txt", line);
}

static bool match(const char *name, struct policy_rule *rule)
{
	return policy_set_match(set, W(name), rule);
}

TestSuite(pattern, .init = set_setup, .fini = set_teardown);
TestSuite(match, .init = set_setup, .fini = set_teardown);
TestSuite(loadfile, .init = set_setup, .fini = set_teardown);

/* ---- pattern parsing ---- */

Test(pattern, good_patterns)
{
	cr_expect_eq(add("example.com", 1), 0);
	cr_expect_eq(add("*.example.com", 2), 0);
	cr_expect_eq(add("example.org.", 3), 0);
	cr_expect_eq(add("*.x", 4), 0);
	cr_expect_eq(add(".", 5), 0);
	cr_expect_eq(add("a\\.b.example", 6), 0);
	cr_expect_eq(policy_set_count(set), 6);
}

Test(pattern, bad_patterns)
{
	const char *bad[] = {"*",    "*.",     "*..",  "a.*.b", "*a.b", "a*.b",
	                     "a..b", "*.a..b", "**.b", "*.*.b", "*.*",  "",
	                     ".a",   "a.b*",   "*x",   "x.*",   "\\",   "a\\25"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(add(bad[i], 1), MOAT_EINVAL, "\"%s\" accepted", bad[i]);
	char lab[80];
	memset(lab, 'a', 64);
	strcpy(lab + 64, ".com");
	cr_expect_eq(add(lab, 1), MOAT_EINVAL, "label of 64");
	cr_expect_eq(policy_set_add(set, "*.", 2, "f", 1), MOAT_EINVAL);
	char wild[90] = "*.";
	strcat(wild, lab);
	cr_expect_eq(add(wild, 1), MOAT_EINVAL, "wildcard over a label of 64");
	cr_expect_eq(policy_set_count(set), 0);
}

Test(pattern, label_63_ok)
{
	char lab[80];
	memset(lab, 'a', 63);
	strcpy(lab + 63, ".com");
	cr_expect_eq(add(lab, 1), 0);
	char wild[90] = "*.";
	strcat(wild, lab);
	cr_expect_eq(add(wild, 2), 0);
	cr_expect_eq(policy_set_count(set), 2);
}

Test(pattern, duplicates_count_once_first_explains)
{
	cr_expect_eq(add("example.com", 1), 0);
	cr_expect_eq(add("EXAMPLE.com.", 7), 0);
	cr_expect_eq(policy_set_count(set), 1);
	struct policy_rule r;
	cr_assert(match("example.com", &r));
	cr_expect_eq(r.line, 1);
	cr_expect_eq(add("*.example.com", 9), 0);
	cr_expect_eq(policy_set_count(set), 2);
}

/* ---- matching ---- */

Test(match, empty_set)
{
	struct policy_rule r = {.file = "x", .line = 3};
	cr_expect_not(match("example.com", &r));
	cr_expect_null(r.file);
	cr_expect_eq(r.line, 0);
	cr_expect_not(match(".", NULL));
}

Test(match, exact_only)
{
	add("example.com", 1);
	cr_expect(match("example.com", NULL));
	cr_expect_not(match("www.example.com", NULL));
	cr_expect_not(match("com", NULL));
	cr_expect_not(match("xexample.com", NULL));
	cr_expect_not(match("example.com.au", NULL));
}

Test(match, wildcard_any_depth_not_apex)
{
	add("*.example.com", 4);
	struct policy_rule r;
	cr_expect(match("www.example.com", &r));
	cr_expect(r.wildcard);
	cr_expect_eq(r.line, 4);
	cr_expect_str_eq(r.file, "allow.txt");
	cr_expect(match("a.b.c.d.example.com", NULL));
	cr_expect_not(match("example.com", NULL), "the apex is not below itself");
	cr_expect_not(match("xexample.com", NULL));
	cr_expect_not(match("www.example.org", NULL));
	cr_expect_not(match("com", NULL));
}

Test(match, both_listed)
{
	add("example.com", 1);
	add("*.example.com", 2);
	struct policy_rule r;
	cr_assert(match("example.com", &r));
	cr_expect_not(r.wildcard);
	cr_expect_eq(r.line, 1);
	cr_assert(match("w.example.com", &r));
	cr_expect(r.wildcard);
	cr_expect_eq(r.line, 2);
}

Test(match, exact_wins_over_wildcard)
{
	add("*.example.com", 1);
	add("www.example.com", 2);
	struct policy_rule r;
	cr_assert(match("www.example.com", &r));
	cr_expect_not(r.wildcard);
	cr_expect_eq(r.line, 2);
	/* the exact name's slot does not stop wildcards from matching names below it */
	cr_assert(match("a.www.example.com", &r));
	cr_expect(r.wildcard);
	cr_expect_eq(r.line, 1);
}

Test(match, nearest_wildcard)
{
	cr_assert_eq(policy_set_add(set, "*.com", 5, "far.txt", 5), 0);
	cr_assert_eq(policy_set_add(set, "*.example.com", 13, "near.txt", 9), 0);
	struct policy_rule r;
	cr_assert(match("a.b.example.com", &r));
	cr_expect_str_eq(r.file, "near.txt");
	cr_expect_eq(r.line, 9);
	cr_assert(match("x.example.com", &r));
	cr_expect_eq(r.line, 9);
	cr_assert(match("example.com", &r));
	cr_expect_str_eq(r.file, "far.txt");
	cr_expect_eq(r.line, 5);
	cr_expect(r.wildcard);
}

/* A set looks up only the suffixes whose label count it lists (pset.h): against a plain walk
 * over every suffix (policy_set_has_wire), every name of 1 to 70 labels gets the same answer,
 * with patterns at depths 1 to 66 (63 and more share one bit), after a rule is removed, and in
 * a clone. */
static bool walk_match(const struct policy_set *s, const uint8_t *lname)
{
	if (policy_set_has_wire(s, lname, false))
		return true;
	for (const uint8_t *p = lname; *p;) {
		p += *p + 1;
		if (policy_set_has_wire(s, p, true))
			return true;
	}
	return false;
}

static void name_of_depth(char *out, size_t cap, unsigned depth, unsigned variant)
{
	size_t n = 0;
	out[0] = 0;
	for (unsigned i = depth; i > 0; i--)
		n += (size_t)snprintf(out + n, cap - n, "%s%c", n ? "." : "",
		                      'a' + (char)((i + variant) % 3));
	if (!depth)
		snprintf(out, cap, ".");
}

Test(match, depth_masks_agree_with_every_suffix)
{
	char t[400];
	for (unsigned d = 1; d <= 66; d += 5) {
		name_of_depth(t, sizeof(t), d, 0);
		cr_assert_eq(add(t, d), 0, "%s", t);
		char w[402];
		name_of_depth(t, sizeof(t), d, 1);
		snprintf(w, sizeof(w), "*.%s", t);
		cr_assert_eq(add(w, d + 1000), 0, "%s", w);
	}
	cr_assert_eq(policy_set_remove_wire(set, W("b"), true), MOAT_ENOENT); /* never listed */
	name_of_depth(t, sizeof(t), 11, 0);
	cr_assert_eq(policy_set_remove_wire(set, W(t), false), 0);
	struct policy_set *copy = policy_set_clone(set);
	cr_assert_not_null(copy);
	int listed = 0;
	for (unsigned d = 0; d <= 70; d++)
		for (unsigned v = 0; v < 3; v++) {
			name_of_depth(t, sizeof(t), d, v);
			const uint8_t *n = W(t);
			bool want = walk_match(set, n);
			cr_expect_eq(policy_set_match(set, n, NULL), want, "%u labels, %s", d, t);
			cr_expect_eq(policy_set_match(copy, n, NULL), want, "clone: %u labels", d);
			listed += want;
		}
	cr_expect_gt(listed, 20, "the patterns were reached (%d)", listed);
	policy_set_free(copy);
}

Test(match, case_insensitive)
{
	add("WWW.Example.COM", 1);
	add("*.API.Example.Net", 2);
	cr_expect(match("www.example.com", NULL));
	cr_expect(match("WwW.eXaMpLe.CoM", NULL));
	cr_expect(match("v1.api.example.net", NULL));
	cr_expect(match("V1.API.EXAMPLE.NET", NULL));
}

Test(match, trailing_dot)
{
	add("example.com.", 1);
	add("*.example.org.", 2);
	cr_expect(match("example.com", NULL));
	cr_expect(match("example.com.", NULL));
	cr_expect(match("a.example.org.", NULL));
}

Test(match, escaped_dot)
{
	add("a\\.example.com", 1);
	cr_expect(match("a\\.example.com", NULL));
	cr_expect_not(match("a.example.com", NULL));
	policy_set_free(set);
	set = policy_set_new();
	add("*.example.com", 1);
	cr_expect_not(match("a\\.example.com", NULL), "one label a.example, then com");
	cr_expect(match("a.example.com", NULL));
	cr_expect(match("x\\.y.example.com", NULL));
}

Test(match, root_pattern)
{
	add(".", 3);
	struct policy_rule r;
	cr_assert(match(".", &r));
	cr_expect_eq(r.line, 3);
	cr_expect_not(r.wildcard);
	cr_expect_not(match("com", NULL));
	cr_expect_not(match("example.com", NULL));
}

Test(match, file_names_are_copied)
{
	char file[32] = "first.txt";
	cr_assert_eq(policy_set_add(set, "a.com", 5, file, 1), 0);
	strcpy(file, "clobbered");
	cr_assert_eq(policy_set_add(set, "b.com", 5, "second.txt", 2), 0);
	cr_assert_eq(policy_set_add(set, "c.com", 5, "first.txt", 3), 0);
	struct policy_rule r;
	cr_assert(match("a.com", &r));
	cr_expect_str_eq(r.file, "first.txt");
	cr_assert(match("b.com", &r));
	cr_expect_str_eq(r.file, "second.txt");
	cr_assert(match("c.com", &r));
	cr_expect_str_eq(r.file, "first.txt");
	cr_expect_eq(r.line, 3);
	cr_assert_eq(policy_set_add(set, "d.com", 5, NULL, 0), 0);
	cr_assert(match("d.com", &r));
	cr_expect_not_null(r.file);
	cr_expect_gt(r.line, 0);
}

Test(match, scale_100k)
{
	/* 100k patterns from one file: line 2k+1 exact names, line 2k+2 wildcards */
	char buf[64];
	char path[] = "/tmp/moat-test-policy-big-XXXXXX";
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	FILE *f = fdopen(fd, "w");
	cr_assert_not_null(f);
	for (int i = 0; i < 50000; i++)
		fprintf(f, "n%d.example%d.com\n*.w%d.org\n", i, i % 97, i);
	cr_assert_eq(fclose(f), 0);
	char err[256] = "";
	int rc = policy_set_load_file(set, path, err, sizeof(err));
	unlink(path);
	cr_assert_eq(rc, 0, "%s", err);
	cr_assert_eq(policy_set_count(set), 100000);
	struct policy_rule r;
	for (int i = 0; i < 50000; i++) {
		snprintf(buf, sizeof(buf), "N%d.example%d.com", i, i % 97);
		cr_assert(match(buf, &r), "%s", buf);
		cr_assert_eq(r.line, (uint32_t)(2 * i + 1));
		cr_assert_not(r.wildcard);
		snprintf(buf, sizeof(buf), "x.y.w%d.org", i);
		cr_assert(match(buf, &r), "%s", buf);
		cr_assert_eq(r.line, (uint32_t)(2 * i + 2));
		cr_assert(r.wildcard);
		snprintf(buf, sizeof(buf), "w%d.org", i);
		cr_assert_not(match(buf, NULL), "%s", buf);
		snprintf(buf, sizeof(buf), "n%d.example%d.com", i, (i + 1) % 97);
		cr_assert_not(match(buf, NULL), "%s", buf);
		snprintf(buf, sizeof(buf), "a.n%d.example%d.com", i, i % 97);
		cr_assert_not(match(buf, NULL), "%s", buf);
	}
	/* adding them again changes nothing */
	for (int i = 0; i < 1000; i++) {
		snprintf(buf, sizeof(buf), "*.w%d.org", i);
		cr_assert_eq(add(buf, 1), 0);
	}
	cr_expect_eq(policy_set_count(set), 100000);
}

/* ---- files ---- */

Test(loadfile, comments_blank_lines_whitespace)
{
	char *path = write_tmp("# header comment\n"
	                       "\n"
	                       "   \t\n"
	                       "example.com\n"
	                       "  *.example.org   # trailing comment\n"
	                       "\tfoo.net.\r\n"
	                       "#*.commented.out\n"
	                       "last.example"); /* no final newline */
	char err[256] = "";
	cr_assert_eq(policy_set_load_file(set, path, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(policy_set_count(set), 4);
	struct policy_rule r;
	cr_assert(match("example.com", &r));
	cr_expect_eq(r.line, 4);
	cr_expect_str_eq(r.file, path);
	cr_assert(match("a.example.org", &r));
	cr_expect_eq(r.line, 5);
	cr_expect(match("foo.net", NULL));
	cr_expect(match("last.example", NULL));
	cr_expect_not(match("x.commented.out", NULL));
	drop_tmp(path);
}

static void expect_load_error(const char *content, unsigned line)
{
	char *path = write_tmp(content);
	char err[512] = "";
	char want[300];
	cr_expect_eq(policy_set_load_file(set, path, err, sizeof(err)), MOAT_EINVAL);
	snprintf(want, sizeof(want), "%s:%u:", path, line);
	cr_expect_eq(strncmp(err, want, strlen(want)), 0, "err \"%s\", want prefix \"%s\"", err,
	             want);
	drop_tmp(path);
}

Test(loadfile, bad_line_reports_path_and_line)
{
	expect_load_error("example.com\n# c\n\na.*.b\nok.com\n", 4);
	expect_load_error("*\n", 1);
	expect_load_error("a.com\nb.com\n*.\n", 3);
	expect_load_error("a..b\n", 1);
	expect_load_error("x.com\r\ny.com\r\n*a.b\r\n", 3);
}

Test(loadfile, two_tokens_rejected)
{
	expect_load_error("good.com\nexample.com www.example.com\n", 2);
	expect_load_error("a.com\tb.com\n", 1);
	expect_load_error("http://x/ y\n", 1);
}

/* A port glued to the name gets the rule's own form as the hint. */
Test(loadfile, glued_port_hint)
{
	char *path = write_tmp("ok.example\napi.example.com:443\n");
	char err[512] = "";
	cr_assert_eq(policy_set_load_file(set, path, err, sizeof(err)), MOAT_EINVAL);
	cr_assert(strstr(err, ":2: bad pattern 'api.example.com:443': a port glued to the name; "
	                      "ports follow it after a blank: api.example.com tcp/443"),
	          "%s", err);
	drop_tmp(path);
	/* not a port: the general hint */
	path = write_tmp("api.example.com:http\n");
	cr_assert_eq(policy_set_load_file(set, path, err, sizeof(err)), MOAT_EINVAL);
	cr_assert_null(strstr(err, "tcp/"), "%s", err);
	drop_tmp(path);
}

struct bad_lines {
	char text[8][200];
	int n;
};

static void on_bad(void *ctx, const char *msg)
{
	struct bad_lines *b = ctx;
	if (b->n < 8)
		snprintf(b->text[b->n], sizeof(b->text[0]), "%s", msg);
	b->n++;
}

/* With an error collector the load goes on past bad lines: each one reported, the good lines
 * loaded. */
Test(loadfile, keep_going)
{
	char *path = write_tmp("a.example\nb..example\nc.example tcp/0\nd.example\n*x.example\n");
	char err[512] = "";
	struct bad_lines b = {0};
	policy_set_on_error(set, on_bad, &b);
	cr_assert_eq(policy_set_load_file(set, path, err, sizeof(err)), 0);
	cr_assert_eq(b.n, 3);
	cr_assert(strstr(b.text[0], ":2: bad pattern 'b..example'"), "%s", b.text[0]);
	cr_assert(strstr(b.text[1], ":3: bad port"), "%s", b.text[1]);
	cr_assert(strstr(b.text[2], ":5: bad pattern"), "%s", b.text[2]);
	cr_assert(match("a.example", NULL));
	cr_assert(match("d.example", NULL));
	cr_assert_eq(policy_set_count(set), 2);
	drop_tmp(path);
}

Test(loadfile, missing_file)
{
	char err[256] = "";
	int rc = policy_set_load_file(set, "/nonexistent/moat/allow.txt", err, sizeof(err));
	cr_expect_eq(rc, MOAT_EIO);
	cr_expect_not_null(strstr(err, "/nonexistent/moat/allow.txt"));
}

Test(loadfile, shipped_files_load)
{
	char err[256] = "";
	cr_assert_eq(
	    policy_set_load_file(set, MOAT_SOURCE_DIR "/zones/highrisk.txt", err, sizeof(err)), 0,
	    "%s", err);
	cr_expect_gt(policy_set_count(set), 50);
	cr_expect(match("metadata.google.internal", NULL));
	cr_expect(match("x.nip.io", NULL));
	struct policy_set *ex = policy_set_new();
	cr_assert_eq(
	    policy_set_load_file(ex, MOAT_SOURCE_DIR "/zones/allow/example.txt", err, sizeof(err)),
	    0, "%s", err);
	cr_expect(policy_set_match(ex, W("www.example.com"), NULL));
	policy_set_free(ex);
}

/* ---- snapshots: agents, decisions, chains ---- */

static struct config cfg;
static struct policy *pol;
static char *allow_path, *allow_path2;

static void add_agent(const char *name, const char *const *cidrs, size_t ncidrs, const char *allow)
{
	struct config_agent *na = realloc(cfg.agents, (cfg.nagents + 1) * sizeof(*na));
	cr_assert_not_null(na);
	cfg.agents = na;
	struct config_agent *a = &cfg.agents[cfg.nagents++];
	memset(a, 0, sizeof(*a));
	snprintf(a->name, sizeof(a->name), "%s", name);
	a->clients = calloc(ncidrs ? ncidrs : 1, sizeof(*a->clients));
	cr_assert_not_null(a->clients);
	for (size_t i = 0; i < ncidrs; i++)
		cr_assert_eq(netaddr_parse_cidr(cidrs[i], &a->clients[i]), 0, "%s", cidrs[i]);
	a->nclients = ncidrs;
	if (allow)
		cr_assert_eq(config_strv_push(&a->allow_files, &a->nallow, allow), 0);
}

static void snap_setup(void)
{
	config_init(&cfg);
	cr_assert_eq(cfg.nhighrisk, 1, "config_init lists the shipped high-risk file");
	cr_assert_eq(cfg.nranges, 1, "config_init lists the shipped ranges file");
	allow_path = write_tmp("example.com\n"
	                       "*.example.com\n"
	                       "metadata.google.internal\n"
	                       "*.google.internal\n"
	                       "169.254.169.254\n"
	                       "*.allowed.test\n"
	                       "# line 7\n"
	                       "api.other.test\n");
	allow_path2 = write_tmp("wide.test\n");
	static const char *const narrow[] = {"10.1.2.0/24", "2001:db8:1::/48"};
	static const char *const wide[] = {"10.0.0.0/8", "2001:db8::/32"};
	static const char *const host[] = {"10.1.2.3"};
	add_agent("ci-42", narrow, 2, allow_path);
	add_agent("wide", wide, 2, allow_path2);
	add_agent("host", host, 1, NULL);
	cfg.agents[2].strict_chain = true;
	/* "host" has no allowlist file: give it the first one too, to test strict_chain */
	cr_assert_eq(
	    config_strv_push(&cfg.agents[2].allow_files, &cfg.agents[2].nallow, allow_path), 0);
	char err[256] = "";
	cr_assert_eq(policy_load(&cfg, &pol, err, sizeof(err)), 0, "%s", err);
}

static void snap_teardown(void)
{
	policy_unref(pol);
	pol = NULL;
	config_free(&cfg);
	drop_tmp(allow_path);
	drop_tmp(allow_path2);
}

TestSuite(snapshot, .init = snap_setup, .fini = snap_teardown);

Test(snapshot, allow_count_over_agents)
{
	/* ci-42: 7 patterns; wide: 1; host: the first file again, 7 */
	cr_expect_eq(policy_allow_count(pol), 15);
}

static const struct policy_agent *agent_for(const char *addr)
{
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons(4000);
	} else {
		cr_assert_eq(inet_pton(AF_INET6, addr, &s6->sin6_addr), 1, "%s", addr);
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(4000);
	}
	return policy_agent_for(pol, (const struct sockaddr *)&ss);
}

static const char *agent_name(const char *addr)
{
	const struct policy_agent *a = agent_for(addr);
	return a ? a->cfg.name : "(none)";
}

Test(snapshot, loaded)
{
	cr_expect_eq(pol->refs, 1);
	cr_expect_eq(pol->nagents, 3);
	cr_expect_eq(policy_set_count(pol->agents[0].allow), 7);
	cr_expect_gt(policy_set_count(pol->highrisk), 50);
	cr_expect_null(pol->agents[0].cfg.clients);
	cr_expect_null(pol->agents[0].cfg.allow_files);
	cr_expect_eq(pol->agents[0].nclients, 2);
	cr_expect_str_eq(pol->agents[0].cfg.name, "ci-42");
	cr_expect(pol->agents[2].cfg.strict_chain);
	cr_expect_eq(policy_ref(pol), pol);
	cr_expect_eq(pol->refs, 2);
	policy_unref(pol);
	cr_expect_eq(pol->refs, 1);
}

Test(snapshot, agent_by_client)
{
	cr_expect_str_eq(agent_name("10.1.2.3"), "host");
	cr_expect_str_eq(agent_name("10.1.2.4"), "ci-42");
	cr_expect_str_eq(agent_name("10.1.3.4"), "wide");
	cr_expect_str_eq(agent_name("10.255.255.255"), "wide");
	cr_expect_str_eq(agent_name("11.0.0.1"), "(none)");
	cr_expect_str_eq(agent_name("192.0.2.1"), "(none)");
	cr_expect_str_eq(agent_name("2001:db8:1::5"), "ci-42");
	cr_expect_str_eq(agent_name("2001:db8:2::5"), "wide");
	cr_expect_str_eq(agent_name("2001:db9::1"), "(none)");
	cr_expect_str_eq(agent_name("::1"), "(none)");
	/* IPv4 clients on a dual-stack socket */
	cr_expect_str_eq(agent_name("::ffff:10.1.2.3"), "host");
	cr_expect_str_eq(agent_name("::ffff:10.1.2.9"), "ci-42");
	cr_expect_str_eq(agent_name("::ffff:10.7.0.1"), "wide");
	cr_expect_str_eq(agent_name("::ffff:192.0.2.1"), "(none)");
	/* the IPv4-compatible form is no IPv4 client */
	cr_expect_str_eq(agent_name("::10.1.2.3"), "(none)");
}

Test(snapshot, most_specific_wins_whatever_the_order)
{
	policy_unref(pol);
	pol = NULL;
	/* reverse the agents: the widest first */
	struct config_agent t = cfg.agents[0];
	cfg.agents[0] = cfg.agents[1];
	cfg.agents[1] = t;
	char err[256];
	cr_assert_eq(policy_load(&cfg, &pol, err, sizeof(err)), 0, "%s", err);
	cr_expect_str_eq(agent_name("10.1.2.4"), "ci-42");
	cr_expect_str_eq(agent_name("10.1.3.4"), "wide");
	cr_expect_str_eq(agent_name("10.1.2.3"), "host");
	cr_expect_str_eq(agent_name("2001:db8:1::5"), "ci-42");
}

Test(snapshot, no_agents_no_match)
{
	struct config c;
	config_init(&c);
	c.nhighrisk = 0;
	c.nranges = 0;
	struct policy *p = NULL;
	char err[256];
	cr_assert_eq(policy_load(&c, &p, err, sizeof(err)), 0, "%s", err);
	struct sockaddr_in s4 = {.sin_family = AF_INET};
	inet_pton(AF_INET, "10.1.2.3", &s4.sin_addr);
	cr_expect_null(policy_agent_for(p, (struct sockaddr *)&s4));
	cr_expect_eq(policy_allow_count(p), 0);
	policy_unref(p);
	c.nhighrisk = 1;
	c.nranges = 1;
	config_free(&c);
}

static void decide(const char *agent_addr, const char *name, uint16_t qclass,
                   struct policy_decision *d)
{
	const struct policy_agent *a = agent_for(agent_addr);
	cr_assert_not_null(a);
	memset(d, 0xAA, sizeof(*d));
	policy_decide(pol, a, W(name), qclass, d);
	cr_assert_lt(strlen(d->reason), sizeof(d->reason));
}

Test(snapshot, decide_allowed)
{
	struct policy_decision d;
	decide("10.1.2.4", "example.com", 1, &d);
	cr_expect_eq(d.verdict, POLICY_ALLOW);
	cr_expect_not(d.alert);
	cr_expect_str_eq(d.rule.file, allow_path);
	cr_expect_eq(d.rule.line, 1);
	char want[256], why[sizeof(d.reason)];
	snprintf(want, sizeof(want), "allowed by %s:1", allow_path);
	cr_expect_str_eq(d.reason, "", "left to the rule: the log writes it from there");
	cr_expect_str_eq(policy_reason(&d, why, sizeof(why)), want);
	decide("10.1.2.4", "a.b.EXAMPLE.com", 1, &d);
	cr_expect_eq(d.verdict, POLICY_ALLOW);
	cr_expect(d.rule.wildcard);
	cr_expect_eq(d.rule.line, 2);
	decide("10.1.2.4", "api.other.test", 1, &d);
	cr_expect_eq(d.verdict, POLICY_ALLOW);
	cr_expect_eq(d.rule.line, 8);
	/* a nip.io kind name with a public (documentation) address inside is fine */
	decide("10.1.2.4", "192-0-2-1.allowed.test", 1, &d);
	cr_expect_eq(d.verdict, POLICY_ALLOW, "%s", d.reason);
}

Test(snapshot, decide_not_allowed)
{
	struct policy_decision d;
	decide("10.1.2.4", "www.example.org", 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_NOT_ALLOWED);
	cr_expect_str_eq(d.reason, "moat: not on allowlist of agent ci-42");
	char why[sizeof(d.reason)];
	cr_expect_eq(policy_reason(&d, why, sizeof(why)), d.reason, "a deny's reason is its text");
	cr_expect_not(d.alert);
	cr_expect_null(d.rule.file);
	/* another agent, another allowlist */
	decide("10.200.0.1", "example.com", 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_NOT_ALLOWED);
	cr_expect_str_eq(d.reason, "moat: not on allowlist of agent wide");
	decide("10.200.0.1", "wide.test", 1, &d);
	cr_expect_eq(d.verdict, POLICY_ALLOW);
	decide("10.1.2.4", "other.test", 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_NOT_ALLOWED);
}

Test(snapshot, decide_class)
{
	struct policy_decision d;
	decide("10.1.2.4", "example.com", 3 /* CH */, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_CLASS);
	cr_expect_not(d.alert);
	cr_expect_not_null(strstr(d.reason, "class 3"), "%s", d.reason);
	decide("10.1.2.4", "example.com", 255 /* ANY */, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_CLASS);
	decide("10.1.2.4", "version.bind", 3, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_CLASS);
}

Test(snapshot, decide_ip_literal)
{
	struct policy_decision d;
	decide("10.1.2.4", "169.254.169.254", 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_IPLITERAL, "allowlisted literal still denied");
	cr_expect(d.alert);
	cr_expect_not_null(strstr(d.reason, "169.254.169.254"), "%s", d.reason);
	decide("10.1.2.4", "2852039166", 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_IPLITERAL);
	cr_expect(d.alert);
	decide("10.1.2.4", "192.0.2.1", 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_IPLITERAL);
	cr_expect_not(d.alert, "a public literal is denied but is no alert");
}

Test(snapshot, decide_highrisk_even_when_allowed)
{
	struct policy_decision d;
	decide("10.1.2.4", "metadata.google.internal", 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_HIGHRISK);
	cr_expect(d.alert);
	cr_expect_not_null(strstr(d.rule.file, "highrisk.txt"));
	cr_expect_gt(d.rule.line, 0);
	cr_expect_not_null(strstr(d.reason, "high-risk"), "%s", d.reason);
	cr_expect_not_null(strstr(d.reason, "highrisk.txt:"), "%s", d.reason);
	decide("10.1.2.4", "METADATA.Google.Internal.", 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_HIGHRISK);
	decide("10.1.2.4", "x.y.google.internal", 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_HIGHRISK);
	decide("10.200.0.1", "metadata.google.internal", 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_HIGHRISK, "not on this agent's list either");
}

Test(snapshot, decide_embedded_address)
{
	struct policy_decision d;
	decide("10.1.2.4", "127-0-0-1.allowed.test", 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_EMBEDDED);
	cr_expect(d.alert);
	cr_expect_not_null(strstr(d.reason, "127.0.0.1"), "%s", d.reason);
	decide("10.1.2.4", "app.10.0.0.1.allowed.test", 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_EMBEDDED, "private and not allow_private");
}

/* Regression (issue 12): only the leftmost embedded address was checked, so a harmless one in
 * front hid a blocked one behind it. */
Test(snapshot, decide_embedded_address_in_any_position)
{
	struct policy_decision d;
	decide("10.1.2.4", "1-2-3-4.127-0-0-1.allowed.test", 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_EMBEDDED);
	cr_expect_not_null(strstr(d.reason, "127.0.0.1"), "%s", d.reason);
	decide("10.1.2.4", "x.8.8.8.8.a9fea9fe.allowed.test", 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_EMBEDDED);
	cr_expect_not_null(strstr(d.reason, "169.254.169.254"), "%s", d.reason);
	decide("10.1.2.4", "1-2-3-4.5-6-7-8.allowed.test", 1, &d);
	cr_expect_eq(d.verdict, POLICY_ALLOW, "public addresses only: %s", d.reason);
}

Test(snapshot, decide_embedded_private_allowed)
{
	policy_unref(pol);
	pol = NULL;
	cfg.agents[0].allow_private = true;
	char err[256];
	cr_assert_eq(policy_load(&cfg, &pol, err, sizeof(err)), 0, "%s", err);
	struct policy_decision d;
	decide("10.1.2.4", "app.10.0.0.1.allowed.test", 1, &d);
	cr_expect_eq(d.verdict, POLICY_ALLOW, "%s", d.reason);
	decide("10.1.2.4", "127-0-0-1.allowed.test", 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_EMBEDDED, "loopback stays denied");
}

Test(snapshot, check_chain)
{
	struct policy_decision d;
	const struct policy_agent *lax = agent_for("10.1.2.4");
	const struct policy_agent *strict = agent_for("10.1.2.3");
	cr_assert_not(lax->cfg.strict_chain);
	cr_assert(strict->cfg.strict_chain);

	cr_expect_eq(policy_check_chain(pol, lax, W("cdn.elsewhere.net"), &d), POLICY_ALLOW);
	cr_expect_eq(d.verdict, POLICY_ALLOW);
	cr_expect_eq(policy_check_chain(pol, strict, W("cdn.elsewhere.net"), &d),
	             POLICY_DENY_NOT_ALLOWED);
	cr_expect_eq(d.verdict, POLICY_DENY_NOT_ALLOWED);
	cr_expect_not_null(strstr(d.reason, "cdn.elsewhere.net"), "%s", d.reason);
	cr_expect_not_null(strstr(d.reason, "host"), "%s", d.reason);
	cr_expect_eq(policy_check_chain(pol, strict, W("edge.example.com"), &d), POLICY_ALLOW);
	cr_expect(d.rule.wildcard);
	/* high-risk and embedded addresses are denied with or without strict_chain */
	cr_expect_eq(policy_check_chain(pol, lax, W("metadata.google.internal"), &d),
	             POLICY_DENY_HIGHRISK);
	cr_expect(d.alert);
	cr_expect_eq(policy_check_chain(pol, strict, W("metadata.google.internal"), &d),
	             POLICY_DENY_HIGHRISK);
	cr_expect_eq(policy_check_chain(pol, lax, W("169-254-169-254.elsewhere.net"), &d),
	             POLICY_DENY_EMBEDDED);
	cr_expect_eq(policy_check_chain(pol, lax, W("10.0.0.1"), &d), POLICY_DENY_IPLITERAL);
}

Test(snapshot, verdict_strings)
{
	cr_expect_str_eq(policy_verdict_str(POLICY_ALLOW), "allow");
	cr_expect_str_eq(policy_verdict_str(POLICY_DENY_NOT_ALLOWED), "deny-not-allowed");
	cr_expect_str_eq(policy_verdict_str(POLICY_DENY_HIGHRISK), "deny-high-risk");
	cr_expect_str_eq(policy_verdict_str(POLICY_DENY_IPLITERAL), "deny-ip-literal");
	cr_expect_str_eq(policy_verdict_str(POLICY_DENY_EMBEDDED), "deny-embedded-address");
	cr_expect_str_eq(policy_verdict_str(POLICY_DENY_CLASS), "deny-class");
	cr_expect_str_eq(policy_verdict_str((enum policy_verdict)99), "unknown");
}

Test(snapshot, load_error_reports_file_line)
{
	char *bad = write_tmp("ok.com\n\n*.ok.org\nnot ok\n");
	static const char *const c1[] = {"192.0.2.0/24"};
	add_agent("bad", c1, 1, bad);
	struct policy *p = (struct policy *)0x1;
	char err[512] = "";
	cr_expect_eq(policy_load(&cfg, &p, err, sizeof(err)), MOAT_EINVAL);
	cr_expect_eq(p, (struct policy *)0x1, "nothing returned on error");
	char want[300];
	snprintf(want, sizeof(want), "%s:4:", bad);
	cr_expect_eq(strncmp(err, want, strlen(want)), 0, "err %s", err);
	drop_tmp(bad);
}

Test(snapshot, load_missing_highrisk_fails)
{
	cr_assert_eq(config_strv_push(&cfg.highrisk_files, &cfg.nhighrisk, "/nonexistent/hr.txt"),
	             0);
	struct policy *p = NULL;
	char err[512] = "";
	cr_expect_eq(policy_load(&cfg, &p, err, sizeof(err)), MOAT_EIO);
	cr_expect_null(p);
	cr_expect_not_null(strstr(err, "/nonexistent/hr.txt"), "%s", err);
}

/* moatd's own addresses as the config names them (listen, upstreams, metrics). */
static void own_addresses(void)
{
	cfg.listen = calloc(2, sizeof(*cfg.listen));
	cfg.upstreams = calloc(1, sizeof(*cfg.upstreams));
	cr_assert(cfg.listen && cfg.upstreams);
	cr_assert_eq(netaddr_parse_addrport("192.0.2.2:53", 53, &cfg.listen[0]), 0);
	cr_assert_eq(netaddr_parse_addrport("0.0.0.0:5353", 53, &cfg.listen[1]), 0);
	cfg.nlisten = 2;
	cr_assert_eq(netaddr_parse_addrport("[2001:db8::53]:53", 53, &cfg.upstreams[0]), 0);
	cfg.nupstreams = 1;
	cr_assert_eq(netaddr_parse_addrport("198.51.100.9:9153", 53, &cfg.metrics_addr), 0);
	cfg.has_metrics = true;
}

static enum policy_addr_verdict answer_check(bool allow_private, bool passed, const char *text,
                                             char *why)
{
	uint8_t a[16];
	bool v6 = strchr(text, ':') != NULL;
	cr_assert_eq(inet_pton(v6 ? AF_INET6 : AF_INET, text, a), 1, "%s", text);
	enum policy_addr_verdict v =
	    policy_answer_addr_check(pol, allow_private, passed, a, v6 ? 16 : 4, why, 160);
	cr_assert_eq(policy_answer_addr_ok(pol, allow_private, passed, a, v6 ? 16 : 4, why, 160),
	             v == POLICY_ADDR_OK, "%s: the two forms disagree", text);
	return v;
}

static bool answer_ok(bool allow_private, bool passed, const char *text, char *why)
{
	return answer_check(allow_private, passed, text, why) == POLICY_ADDR_OK;
}

/* The answer check: blocked ranges anywhere; moatd's own addresses (any embedding form) and
 * IPv4-mapped addresses where the client gets them, whatever allow_private says. */
Test(snapshot, answer_addresses)
{
	policy_unref(pol);
	pol = NULL;
	own_addresses();
	char err[256], why[160];
	cr_assert_eq(policy_load(&cfg, &pol, err, sizeof(err)), 0, "%s", err);
	cr_expect(answer_ok(false, true, "192.0.2.10", why));
	cr_expect(!answer_ok(false, false, "169.254.169.254", why), "blocked in any section");
	cr_expect_str_eq(why, "moat: answer contained 169.254.169.254");
	cr_expect(!answer_ok(false, true, "10.0.0.5", why));
	cr_expect(answer_ok(true, true, "10.0.0.5", why), "private allowed");
	static const struct {
		const char *addr, *why;
	} own[] = {
	    {"192.0.2.2", "moat: answer contained 192.0.2.2, moatd's own listen address"},
	    {"64:ff9b::c000:202",
	     "moat: answer contained 64:ff9b::c000:202, moatd's own listen address"},
	    {"2001:db8::53", "moat: answer contained 2001:db8::53, moatd's own upstream"},
	    {"198.51.100.9", "moat: answer contained 198.51.100.9, moatd's own metrics address"},
	    {"::ffff:10.0.0.5", "moat: answer contained ::ffff:10.0.0.5, an IPv4-mapped address"},
	    {"::ffff:192.0.2.10",
	     "moat: answer contained ::ffff:192.0.2.10, an IPv4-mapped address"},
	};
	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
		cr_expect(!answer_ok(true, true, own[i].addr, why), "%s passed", own[i].addr);
		cr_expect_str_eq(why, own[i].why);
		cr_expect(answer_ok(true, false, own[i].addr, why), "%s as glue", own[i].addr);
		cr_expect_eq(answer_check(true, true, own[i].addr, why), POLICY_ADDR_REFUSED_PASSED,
		             "%s: refused only where the client gets it", own[i].addr);
	}
	/* A blocked range is refused wherever it stands, passed or not: the refusal one walk
	 * over an answer lets outrank the others. */
	cr_expect_eq(answer_check(false, true, "169.254.169.254", why), POLICY_ADDR_REFUSED);
	cr_expect_eq(answer_check(false, false, "169.254.169.254", why), POLICY_ADDR_REFUSED);
	cr_expect_eq(answer_check(false, true, "10.0.0.5", why), POLICY_ADDR_REFUSED);
	cr_expect_eq(answer_check(false, true, "::ffff:10.0.0.5", why), POLICY_ADDR_REFUSED,
	             "a mapped private address is blocked first");
}

/* A configured sinkhole: 0.0.0.0 and :: with a warning; 240/4 and 100::/64 fine; other blocked
 * addresses and moatd's own refused. */
Test(snapshot, sinkhole_addresses)
{
	policy_unref(pol);
	pol = NULL;
	own_addresses();
	struct config_agent *a = &cfg.agents[0];
	a->sink_line = 7;
	memset(a->sink4, 0, 4);
	memset(a->sink6, 0, 16);
	char err[300] = "";
	cr_assert_eq(policy_load(&cfg, &pol, err, sizeof(err)), 0, "%s", err);
	size_t n = policy_lint_count(pol->lint);
	bool warned4 = false, warned6 = false;
	for (size_t i = 0; i < n; i++) {
		warned4 |=
		    strstr(policy_lint_get(pol->lint, i), "sinkhole 0.0.0.0 (agent ci-42) reaches "
		                                          "the client's own loopback") != NULL;
		warned6 |=
		    strstr(policy_lint_get(pol->lint, i), "sinkhole :: (agent ci-42)") != NULL;
	}
	cr_expect(warned4 && warned6, "no warning for a 0.0.0.0 / :: sinkhole");
	policy_unref(pol);
	pol = NULL;
	static const struct {
		const char *v4;
		int rc;
		const char *why;
	} cases[] = {
	    {"240.0.0.7", 0, NULL},
	    {"192.0.2.10", 0, NULL},
	    {"127.0.0.1", MOAT_EINVAL, "(always denied)"},
	    {"255.255.255.255", MOAT_EINVAL, "(always denied)"},
	    {"192.0.2.2", MOAT_EINVAL, "(moatd's own listen address)"},
	};
	memcpy(a->sink6, config_sink6_default, 16);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cr_assert_eq(inet_pton(AF_INET, cases[i].v4, a->sink4), 1);
		err[0] = 0;
		int rc = policy_load(&cfg, &pol, err, sizeof(err));
		cr_expect_eq(rc, cases[i].rc, "%s: %s", cases[i].v4, err);
		if (cases[i].why)
			cr_expect(strstr(err, cases[i].why), "%s: %s", cases[i].v4, err);
		if (rc == 0) {
			policy_unref(pol);
			pol = NULL;
		}
	}
}
