/* Unit tests for recommend.c on synthetic sets: few names stay exact, many siblings under one
 * registrable domain become one wildcard on it (its apex exact), names under a public suffix
 * (also the private section: github.io) never widen to it, a wildcard the lint warns about (over
 * a public suffix) is taken back, high-risk names and their neighbours are never widened and
 * never listed, IP literals are left out, ports are the union of the connections seen, and the
 * result passes the lint. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "moat/err.h"
#include "moat/name.h"
#include "moat/policy.h"
#include "moat/recommend.h"

static struct recommend_name names[64];
static size_t nnames;

static void seen(const char *text, const char *ports)
{
	struct recommend_name *n = &names[nnames++];
	char why[128];
	memset(n, 0, sizeof(*n));
	cr_assert_gt(name_from_text(text, strlen(text), n->lname), 0, "%s", text);
	if (ports)
		cr_assert_eq(policy_ports_parse(ports, strlen(ports), &n->ports, why, sizeof(why)),
		             0, "%s", why);
}

static void reset(void)
{
	nnames = 0;
}

/* The recommendation as its lines, one a line. */
static void lines_of(const struct recommendation *r, char *out, size_t cap)
{
	out[0] = 0;
	for (size_t i = 0; i < r->n; i++) {
		char t[300];
		recommend_line(&r->rules[i], t, sizeof(t));
		snprintf(out + strlen(out), cap - strlen(out), "%s\n", t);
	}
}

static void expect(const struct policy_set *hr, unsigned wmin, const char *want)
{
	struct recommendation r;
	char got[4096];
	cr_assert_eq(recommend_build(names, nnames, hr, wmin, &r), 0);
	lines_of(&r, got, sizeof(got));
	cr_assert_str_eq(got, want);
	for (size_t i = 0; i < r.nlint; i++)
		cr_assert(0, "lint warned: %s", r.lint[i]);
	recommend_free(&r);
}

Test(recommend, few_names_stay_exact, .init = reset)
{
	seen("api.example.com", "tcp/443");
	seen("cdn.example.com", "tcp/443");
	seen("example.org", NULL);
	expect(NULL, 0,
	       "api.example.com tcp/443\n"
	       "cdn.example.com tcp/443\n"
	       "example.org\n");
}

Test(recommend, many_siblings_one_wildcard, .init = reset)
{
	seen("a.pkgs.example.com", "tcp/443");
	seen("b.pkgs.example.com", "tcp/80");
	seen("c.example.com", "tcp/443");
	seen("d.e.example.com", "udp/123");
	seen("example.com", "tcp/8443");
	seen("A.PKGS.example.com", "tcp/443"); /* the same name: merged */
	seen("solo.example.net", "tcp/443");
	/* 4 distinct names below example.com: one wildcard with their ports, the apex exact */
	expect(NULL, 4,
	       "*.example.com tcp/80,443 udp/123\n"
	       "example.com tcp/8443\n"
	       "solo.example.net tcp/443\n");
	/* with a higher threshold they stay exact */
	expect(NULL, 5,
	       "a.pkgs.example.com tcp/443\n"
	       "b.pkgs.example.com tcp/80\n"
	       "c.example.com tcp/443\n"
	       "d.e.example.com udp/123\n"
	       "example.com tcp/8443\n"
	       "solo.example.net tcp/443\n");
}

/* Names below a public suffix are registrable domains of their own: no wildcard on the suffix,
 * whatever their number (co.uk from the ICANN section, github.io from the private one). */
Test(recommend, never_on_a_public_suffix, .init = reset)
{
	seen("alice.github.io", "tcp/443");
	seen("bob.github.io", "tcp/443");
	seen("carol.github.io", "tcp/443");
	seen("dave.github.io", "tcp/443");
	seen("erin.github.io", "tcp/443");
	seen("a.shop.co.uk", "tcp/443");
	seen("b.shop.co.uk", "tcp/443");
	seen("c.shop.co.uk", "tcp/443");
	seen("d.shop.co.uk", "tcp/443");
	seen("other.co.uk", "tcp/443");
	expect(NULL, 4,
	       "*.shop.co.uk tcp/443\n"
	       "alice.github.io tcp/443\n"
	       "bob.github.io tcp/443\n"
	       "carol.github.io tcp/443\n"
	       "dave.github.io tcp/443\n"
	       "erin.github.io tcp/443\n"
	       "other.co.uk tcp/443\n");
}

/* amazonaws.com is registrable, but s3.amazonaws.com below it is a public suffix: the lint
 * warns about *.amazonaws.com, so the names stay exact. */
Test(recommend, lint_takes_a_wildcard_back, .init = reset)
{
	seen("ec2.amazonaws.com", "tcp/443");
	seen("sts.amazonaws.com", "tcp/443");
	seen("iam.amazonaws.com", "tcp/443");
	seen("sqs.amazonaws.com", "tcp/443");
	expect(NULL, 4,
	       "ec2.amazonaws.com tcp/443\n"
	       "iam.amazonaws.com tcp/443\n"
	       "sqs.amazonaws.com tcp/443\n"
	       "sts.amazonaws.com tcp/443\n");
}

Test(recommend, highrisk_never_listed_nor_widened, .init = reset)
{
	struct policy_set *hr = policy_set_new();
	cr_assert_eq(policy_set_add(hr, "paste.example.com", 17, "hr.txt", 1), 0);
	cr_assert_eq(policy_set_add(hr, "*.tunnel.example", 16, "hr.txt", 2), 0);
	seen("a.example.com", "tcp/443");
	seen("b.example.com", "tcp/443");
	seen("c.example.com", "tcp/443");
	seen("d.example.com", "tcp/443");
	seen("paste.example.com", "tcp/443"); /* a high-risk neighbour: no *.example.com */
	seen("x.tunnel.example", "tcp/443");  /* high-risk by wildcard */
	seen("y.tunnel.example", "tcp/443");
	seen("z.tunnel.example", "tcp/443");
	seen("w.tunnel.example", "tcp/443");
	/* a name the log marked high-risk (an RPZ feed, say), not in this list */
	seen("evil.example.net", "tcp/443");
	names[nnames - 1].highrisk = true;
	seen("ok.example.net", "tcp/443");
	struct recommendation r;
	cr_assert_eq(recommend_build(names, nnames, hr, 4, &r), 0);
	char got[2048];
	lines_of(&r, got, sizeof(got));
	cr_assert_str_eq(got, "a.example.com tcp/443\n"
	                      "b.example.com tcp/443\n"
	                      "c.example.com tcp/443\n"
	                      "d.example.com tcp/443\n"
	                      "ok.example.net tcp/443\n");
	cr_assert_eq(r.skipped, 6, "paste, four tunnel names and evil are left out");
	cr_assert_eq(r.nlint, 0);
	recommend_free(&r);
	policy_set_free(hr);
}

Test(recommend, literals_and_ports, .init = reset)
{
	seen("192.0.2.7", "tcp/443");
	seen("quiet.example.org", NULL); /* resolved, never connected */
	seen("busy.example.org", "tcp/1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16");
	seen("busy.example.org", "tcp/17"); /* the 17th port: every port */
	struct recommendation r;
	cr_assert_eq(recommend_build(names, nnames, NULL, 4, &r), 0);
	cr_assert_eq(r.n, 2);
	cr_assert_str_eq(r.rules[0].pattern, "busy.example.org");
	cr_assert(r.rules[0].any_port);
	cr_assert_eq(r.rules[0].ports.n, 0);
	cr_assert_str_eq(r.rules[1].pattern, "quiet.example.org");
	cr_assert(r.rules[1].no_conn);
	cr_assert_eq(r.skipped, 1, "the IP literal");
	recommend_free(&r);
}
