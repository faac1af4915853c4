/* Unit tests for the allowlist lint (policy_lint.c) and the --check report (check.c): every
 * rule gives its warning at the exact file:line, a clean list gives none, warnings are sorted,
 * --strict turns them into exit status 1, overlapping agent ranges and listen networks are
 * listed. Snapshots are built from configs with the shipped high-risk list. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moat/check.h"
#include "moat/config.h"
#include "moat/policy.h"
#include "moat/policy_lint.h"

static char *write_tmp(const char *content)
{
	char *path = strdup("/tmp/moat-test-lint-XXXXXX");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	size_t len = strlen(content);
	cr_assert_eq(write(fd, content, len), (ssize_t)len);
	close(fd);
	return path;
}

static struct config cfg;
static struct policy *pol;
static char *paths[4];
static size_t npaths;

static void agent(const char *name, const char *cidr, const char *allow_text)
{
	struct config_agent *na = realloc(cfg.agents, (cfg.nagents + 1) * sizeof(*na));
	cr_assert_not_null(na);
	cfg.agents = na;
	struct config_agent *a = &cfg.agents[cfg.nagents++];
	memset(a, 0, sizeof(*a));
	snprintf(a->name, sizeof(a->name), "%s", name);
	a->clients = calloc(1, sizeof(*a->clients));
	cr_assert_eq(netaddr_parse_cidr(cidr, &a->clients[0]), 0);
	a->nclients = 1;
	if (allow_text) {
		paths[npaths] = write_tmp(allow_text);
		cr_assert_eq(config_strv_push(&a->allow_files, &a->nallow, paths[npaths]), 0);
		npaths++;
	}
}

static void load(void)
{
	char err[512] = "";
	cr_assert_eq(policy_load(&cfg, &pol, err, sizeof(err)), 0, "%s", err);
}

static void setup(void)
{
	config_init(&cfg);
	npaths = 0;
	pol = NULL;
}

static void teardown(void)
{
	policy_unref(pol);
	config_free(&cfg);
	for (size_t i = 0; i < npaths; i++) {
		unlink(paths[i]);
		free(paths[i]);
	}
}

TestSuite(lint, .init = setup, .fini = teardown);

/* The i-th warning starts with "path:line: warning: " and contains what. */
static void expect_warning(size_t i, const char *path, unsigned line, const char *what)
{
	char want[512];
	const char *w = policy_lint_get(pol->lint, i);
	cr_assert_not_null(w, "no warning %zu (want %s:%u %s)", i, path, line, what);
	snprintf(want, sizeof(want), "%s:%u: warning: ", path, line);
	cr_expect_eq(strncmp(w, want, strlen(want)), 0, "warning \"%s\", want prefix \"%s\"", w,
	             want);
	cr_expect_not_null(strstr(w, what), "warning \"%s\", want \"%s\"", w, what);
}

Test(lint, clean_list_has_no_warning)
{
	agent("a", "10.0.0.0/24",
	      "example.org\n*.example.com\napi.example.net\n*.test\n*.internal\n");
	load();
	cr_expect_eq(policy_lint_count(pol->lint), 0, "%s", policy_lint_get(pol->lint, 0));
}

Test(lint, public_suffix_wildcards)
{
	agent("a", "10.0.0.0/24", "*.co.uk\n*.github.io\n*.herokuapp.com\nco.uk\n*.example.co\n");
	agent("b", "10.0.1.0/24", "*.com\n");
	load();
	cr_assert_eq(policy_lint_count(pol->lint), 4);
	const char *ps = "wildcard on the public suffix";
	expect_warning(0, paths[0], 1,
	               "wildcard on the public suffix 'co.uk': anyone can register");
	expect_warning(1, paths[0], 2, "'github.io'"); /* the list's private section */
	expect_warning(2, paths[0], 3, "'herokuapp.com'");
	expect_warning(3, paths[1], 1, "'com'");
	for (size_t i = 0; i < 4; i++)
		cr_expect_not_null(strstr(policy_lint_get(pol->lint, i), ps));
}

Test(lint, wildcards_over_public_suffixes)
{
	/* amazonaws.com itself is no public suffix, but s3.amazonaws.com and others below it are */
	agent("a", "10.0.0.0/24", "*.amazonaws.com\n*.api.example.com\n*.example.net\n");
	load();
	cr_assert_eq(policy_lint_count(pol->lint), 1, "%s", policy_lint_get(pol->lint, 1));
	expect_warning(0, paths[0], 1,
	               "wildcard over 'amazonaws.com', which has public suffixes below it");
}

Test(lint, root_and_ip_literals)
{
	agent("a", "10.0.0.0/24", "ok.example\n.\n192.0.2.1\n2852039166\n::1\n");
	load();
	cr_assert_eq(policy_lint_count(pol->lint), 4);
	expect_warning(0, paths[0], 2, "'.' is the root");
	expect_warning(1, paths[0], 3, "'192.0.2.1' is an IP literal");
	expect_warning(2, paths[0], 4, "'2852039166' is an IP literal");
	expect_warning(3, paths[0], 5, "is an IP literal");
}

Test(lint, shadowed_by_highrisk)
{
	agent("a", "10.0.0.0/24", "metadata.google.internal\nfine.example\n*.nip.io\n");
	agent("b", "10.0.1.0/24", "x.nip.io\n");
	load();
	cr_assert_eq(policy_lint_count(pol->lint), 3);
	expect_warning(0, paths[0], 1, "'metadata.google.internal' is on the high-risk list (");
	expect_warning(1, paths[0], 3, "'*.nip.io' is on the high-risk list");
	expect_warning(2, paths[1], 1, "'x.nip.io' is on the high-risk list");
	cr_expect_not_null(strstr(policy_lint_get(pol->lint, 0), "highrisk.txt:"));
	cr_expect_not_null(strstr(policy_lint_get(pol->lint, 0), "stays denied"));
}

Test(lint, duplicates_and_covered_lines)
{
	agent("a", "10.0.0.0/24",
	      "*.example.com\nwww.example.com\nexample.org\n*.a.example.com\nEXAMPLE.org.\n");
	load();
	cr_assert_eq(policy_lint_count(pol->lint), 3);
	char first[300];
	snprintf(first, sizeof(first), "'www.example.com' is already covered by a wildcard (%s:1)",
	         paths[0]);
	expect_warning(0, paths[0], 2, first);
	expect_warning(1, paths[0], 4, "'*.a.example.com' is already covered by a wildcard");
	snprintf(first, sizeof(first), "duplicate of %s:3", paths[0]);
	expect_warning(2, paths[0], 5, first);
}

Test(lint, per_agent_not_across_agents)
{
	agent("a", "10.0.0.0/24", "*.example.com\n");
	agent("b", "10.0.1.0/24", "www.example.com\n*.example.com\n");
	load();
	cr_assert_eq(policy_lint_count(pol->lint), 1);
	expect_warning(0, paths[1], 1, "already covered by a wildcard");
}

Test(lint, idn_lines_linted_in_a_label_form)
{
	agent("a", "10.0.0.0/24",
	      "*.b\xc3\xbc"
	      "cher.example\nwww.b\xc3\xbc"
	      "cher.example\n");
	load();
	cr_assert_eq(policy_lint_count(pol->lint), 1);
	expect_warning(0, paths[0], 2, "'www.xn--bcher-kva.example' is already covered");
}

static char *run_check(bool strict, int *status, char **errs)
{
	char *obuf = NULL, *ebuf = NULL;
	size_t olen = 0, elen = 0;
	FILE *o = open_memstream(&obuf, &olen), *e = open_memstream(&ebuf, &elen);
	*status = check_report(&cfg, pol, strict, o, e);
	fclose(o);
	fclose(e);
	*errs = ebuf;
	return obuf;
}

Test(lint, strict_check_fails_on_warnings_only)
{
	agent("a", "10.0.0.0/24", "*.co.uk\n");
	load();
	int st;
	char *errs, *out = run_check(false, &st, &errs);
	cr_expect_eq(st, 0);
	cr_expect_not_null(strstr(errs, ":1: warning: wildcard on the public suffix 'co.uk'"));
	cr_expect_not_null(strstr(out, "configuration OK"));
	free(out);
	free(errs);
	out = run_check(true, &st, &errs);
	cr_expect_eq(st, 1);
	cr_expect_not_null(strstr(errs, "--strict: 1 warning(s)"));
	cr_expect_null(strstr(out, "configuration OK"));
	free(out);
	free(errs);
}

Test(lint, strict_check_passes_clean_policy)
{
	agent("a", "10.0.0.0/24", "example.org\n");
	load();
	int st;
	char *errs, *out = run_check(true, &st, &errs);
	cr_expect_eq(st, 0);
	cr_expect_not_null(strstr(out, "configuration OK: 1 agent(s), 1 allow pattern(s)"));
	cr_expect_eq(strlen(errs), 0, "%s", errs);
	free(out);
	free(errs);
}

Test(lint, check_lists_overlaps_and_listen_networks)
{
	agent("wide", "10.0.0.0/16", NULL);
	agent("narrow", "10.0.5.0/24", NULL);
	agent("other", "192.0.2.0/24", NULL);
	cfg.listen = calloc(2, sizeof(*cfg.listen));
	cfg.nlisten = 2;
	cr_assert_eq(netaddr_parse_addrport("10.0.5.1:53", 53, &cfg.listen[0]), 0);
	cr_assert_eq(netaddr_parse_addrport("0.0.0.0:53", 53, &cfg.listen[1]), 0);
	load();
	int st;
	char *errs, *out = run_check(false, &st, &errs);
	cr_expect_eq(st, 0);
	cr_expect_not_null(strstr(out, "overlap: 10.0.5.0/24 (agent narrow) lies inside "
	                               "10.0.0.0/16 (agent wide): its clients go to narrow"),
	                   "%s", out);
	cr_expect_null(strstr(out, "(agent other)"));
	cr_expect_not_null(strstr(out, "listen 10.0.5.1:53: clients on its network go to agent "
	                               "narrow"),
	                   "%s", out);
	cr_expect_not_null(strstr(out, "listen 0.0.0.0:53: every local network"), "%s", out);
	free(out);
	free(errs);
}

Test(lint, large_lists_skip_the_walk_at_start_up)
{
	agent("a", "10.0.0.0/24", "*.com\nexample.org\nexample.org\n");
	cfg.lint_max_patterns = 1; /* what moatd sets (100000) outside --check, made small */
	load();
	cr_expect(pol->lint_skipped);
	cr_assert_eq(policy_lint_count(pol->lint), 1, "duplicates are still found while loading");
	expect_warning(0, paths[0], 3, "duplicate of");
	policy_unref(pol);
	cfg.lint_max_patterns = 2;
	load();
	cr_expect_not(pol->lint_skipped);
	cr_expect_eq(policy_lint_count(pol->lint), 2);
}
