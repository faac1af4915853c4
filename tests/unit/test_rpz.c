/* Unit tests for RPZ zones (rpz.c, policy_rpz.c): every accepted trigger and action, every
 * rejected one with its file:line (files) or owner name (transferred records), RPZ precedence,
 * IXFR-style patching of a copy while the original is unchanged, and decisions of a snapshot
 * built from a config with an RPZ allow zone and an RPZ high-risk zone. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moat/agent_edit.h"
#include "moat/config.h"
#include "moat/config_load.h"
#include "moat/err.h"
#include "moat/name.h"
#include "moat/policy.h"
#include "moat/rpz.h"

static const uint8_t *W(const char *text)
{
	static uint8_t bufs[4][NAME_MAXWIRE];
	static int next;
	uint8_t *b = bufs[next++ & 3];
	cr_assert_gt(name_from_text(text, strlen(text), b), 0);
	return b;
}

static char *write_tmp(const char *content)
{
	char *path = strdup("/tmp/moat-test-rpz-XXXXXX");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
	close(fd);
	return path;
}

#define SOA "$ORIGIN rpz.test.\n@ 60 IN SOA ns. h. 7 60 60 600 60\n@ IN NS ns.\n"

/* Load a zone file of kind; returns rc, err filled. */
static int load(enum rpz_kind kind, const char *body, struct rpz_data **d, char *err, char **path)
{
	char *text = malloc(strlen(SOA) + strlen(body) + 1);
	strcpy(text, SOA);
	strcat(text, body);
	*path = write_tmp(text);
	free(text);
	return rpz_load_file(kind, *path, NULL, d, err, 512);
}

static void expect_reject(enum rpz_kind kind, const char *body, int line, const char *owner,
                          const char *reason)
{
	struct rpz_data *d = NULL;
	char err[512] = "", *path, want[600];
	int rc = load(kind, body, &d, err, &path);
	cr_expect_eq(rc, MOAT_EINVAL, "accepted: %s", body);
	snprintf(want, sizeof(want), "%s:%d: %s", path, line, owner);
	cr_expect(strstr(err, want) != NULL, "want '%s' in '%s'", want, err);
	cr_expect(strstr(err, reason) != NULL, "want '%s' in '%s'", reason, err);
	cr_expect_null(d);
	unlink(path);
	free(path);
}

Test(rpz, allow_zone_accepts_passthru_name_and_wildcard)
{
	struct rpz_data *d;
	char err[512], *path;
	cr_assert_eq(load(RPZ_ALLOW,
	                  "api.example.com CNAME rpz-passthru.\n"
	                  "*.pypi.org.rpz.test. CNAME rpz-passthru.\n",
	                  &d, err, &path),
	             0, "%s", err);
	struct policy_rule r;
	enum rpz_action a;
	cr_expect_eq(d->serial, 7);
	cr_expect_eq(rpz_count(d), 2);
	cr_expect(rpz_match(d, W("api.example.com"), &a, &r));
	cr_expect_eq(a, RPZ_PASSTHRU);
	cr_expect_eq(r.line, 4);
	cr_expect_str_eq(r.file, path);
	cr_expect_not(rpz_match(d, W("www.example.com"), NULL, NULL));
	cr_expect(rpz_match(d, W("files.pypi.org"), NULL, &r));
	cr_expect(r.wildcard);
	cr_expect_eq(r.line, 5);
	cr_expect_not(rpz_match(d, W("pypi.org"), NULL, NULL), "*.name is not the name itself");
	cr_expect_not(rpz_match(d, W("api.example.com.rpz.test"), NULL, NULL));
	rpz_data_unref(d);
	unlink(path);
	free(path);
}

Test(rpz, highrisk_zone_nxdomain_nodata_and_precedence)
{
	struct rpz_data *d;
	char err[512], *path;
	cr_assert_eq(load(RPZ_HIGHRISK,
	                  "bad.test CNAME .\n"
	                  "*.bad.test CNAME *.\n"
	                  "*.x.bad.test CNAME .\n"
	                  "quiet.x.bad.test CNAME *.\n",
	                  &d, err, &path),
	             0, "%s", err);
	enum rpz_action a;
	struct policy_rule r;
	cr_expect(rpz_match(d, W("bad.test"), &a, NULL));
	cr_expect_eq(a, RPZ_NXDOMAIN);
	cr_expect(rpz_match(d, W("a.bad.test"), &a, NULL));
	cr_expect_eq(a, RPZ_NODATA);
	cr_expect(rpz_match(d, W("y.x.bad.test"), &a, &r), "the nearer wildcard wins");
	cr_expect_eq(a, RPZ_NXDOMAIN);
	cr_expect_eq(r.line, 6);
	cr_expect(rpz_match(d, W("quiet.x.bad.test"), &a, NULL), "the exact name wins");
	cr_expect_eq(a, RPZ_NODATA);
	cr_expect_not(rpz_match(d, W("good.test"), NULL, NULL));
	rpz_data_unref(d);
	unlink(path);
	free(path);
}

struct reject_case {
	enum rpz_kind kind;
	const char *body;
	int line;
	const char *owner, *reason;
};

static void expect_rejects(const struct reject_case *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		expect_reject(c[i].kind, c[i].body, c[i].line, c[i].owner, c[i].reason);
}

Test(rpz, rejects_other_triggers_with_file_line)
{
	static const struct reject_case cases[] = {
	    {RPZ_HIGHRISK, "32.1.2.0.192.rpz-ip CNAME .\n", 4, "32.1.2.0.192.rpz-ip.rpz.test.",
	     "rpz-ip triggers are not supported"},
	    {RPZ_HIGHRISK, "ok.test CNAME .\nns.evil.rpz-nsdname CNAME .\n", 5,
	     "ns.evil.rpz-nsdname.rpz.test.", "rpz-nsdname triggers"},
	    {RPZ_HIGHRISK, "32.1.2.0.192.rpz-nsip CNAME .\n", 4, "32.1.2.0.192.rpz-nsip",
	     "rpz-nsip"},
	    {RPZ_HIGHRISK, "32.1.2.0.192.rpz-client-ip CNAME .\n", 4, "32.1.2.0.192.rpz-client-ip",
	     "rpz-client-ip triggers"},
	    {RPZ_ALLOW, "a.rpz-future CNAME rpz-passthru.\n", 4, "a.rpz-future",
	     "unknown rpz- triggers"},
	    {RPZ_ALLOW, "*.rpz.test. CNAME rpz-passthru.\n", 4, "*.rpz.test.",
	     "wildcard of the whole zone"},
	    {RPZ_ALLOW, "a.*.b CNAME rpz-passthru.\n", 4, "a.*.b.rpz.test.", "'*' inside a label"},
	    {RPZ_ALLOW, "other.zone. CNAME rpz-passthru.\n", 4, "other.zone.", "outside the zone"},
	    {RPZ_ALLOW, "@ IN TXT \"x\"\n", 4, "rpz.test.", "only SOA and NS"},
	};
	expect_rejects(cases, sizeof(cases) / sizeof(cases[0]));
}

Test(rpz, rejects_other_actions_with_file_line)
{
	static const struct reject_case cases[] = {
	    {RPZ_HIGHRISK, "a.test CNAME rpz-drop.\n", 4, "a.test.rpz.test.",
	     "action rpz-drop is not supported"},
	    {RPZ_HIGHRISK, "a.test CNAME rpz-tcp-only.\n", 4, "a.test.rpz.test.",
	     "action rpz-tcp-only is not supported"},
	    {RPZ_HIGHRISK, "a.test CNAME rpz-other.\n", 4, "a.test.rpz.test.",
	     "unknown action rpz-other."},
	    {RPZ_HIGHRISK, "a.test CNAME walled.garden.\n", 4, "a.test.rpz.test.",
	     "CNAME walled.garden. is local data"},
	    {RPZ_HIGHRISK, "a.test CNAME *.walled.garden.\n", 4, "a.test.rpz.test.",
	     "is local data"},
	    {RPZ_HIGHRISK, "a.test A 192.0.2.1\n", 4, "a.test.rpz.test.",
	     "A record: local data is not supported"},
	    {RPZ_HIGHRISK, "a.test TXT \"x\"\n", 4, "a.test.rpz.test.", "TXT record"},
	    {RPZ_ALLOW, "a.test CNAME .\n", 4, "a.test.rpz.test.",
	     "does not belong in an allow zone"},
	    {RPZ_ALLOW, "a.test CNAME *.\n", 4, "a.test.rpz.test.",
	     "does not belong in an allow zone"},
	    {RPZ_HIGHRISK, "a.test CNAME rpz-passthru.\n", 4, "a.test.rpz.test.",
	     "does not belong in a high-risk zone"},
	    {RPZ_HIGHRISK, "a.test CNAME .\nb.test CNAME .\na.test CNAME *.\n", 6,
	     "a.test.rpz.test.", "two actions"},
	    {RPZ_HIGHRISK, "a.test CH CNAME .\n", 4, "a.test.rpz.test.", "class"},
	};
	expect_rejects(cases, sizeof(cases) / sizeof(cases[0]));
}

Test(rpz, file_errors)
{
	struct rpz_data *d = NULL;
	char err[512];
	char *p = write_tmp("a.rpz.test. CNAME .\n");
	cr_expect_eq(rpz_load_file(RPZ_HIGHRISK, p, NULL, &d, err, sizeof(err)), MOAT_EINVAL);
	cr_expect(strstr(err, ":1: the zone must start with its SOA record"), "%s", err);
	unlink(p);
	free(p);
	p = write_tmp(SOA "a.test CNAME\n");
	cr_expect_eq(rpz_load_file(RPZ_HIGHRISK, p, NULL, &d, err, sizeof(err)), MOAT_EINVAL);
	cr_expect(strstr(err, ":4: "), "%s", err);
	unlink(p);
	free(p);
	cr_expect_eq(rpz_load_file(RPZ_HIGHRISK, "/nonexistent/z.rpz", NULL, &d, err, sizeof(err)),
	             MOAT_EIO);
	/* ldns joins a relative owner to $ORIGIN past 255 bytes: refused, and the message says
	 * where (found by fuzz_rpz: the error text was left unset) */
	p = write_tmp("$ORIGIN "
	              "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa."
	              "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa."
	              "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa."
	              "\naaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa."
	              "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 60 IN SOA "
	              "ns. h. 7 60 60 600 60\n");
	err[0] = 0;
	cr_expect_eq(rpz_load_file(RPZ_HIGHRISK, p, NULL, &d, err, sizeof(err)), MOAT_EINVAL);
	cr_expect(strstr(err, p) == err && strstr(err, ":2: the SOA's owner is longer"),
	          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", err);
	unlink(p);
	free(p);
}

static ldns_rr *RR(const char *text)
{
	ldns_rr *rr = NULL;
	cr_assert_eq(ldns_rr_new_frm_str(&rr, text, 60, NULL, NULL), LDNS_STATUS_OK, "%s", text);
	return rr;
}

/* A transferred record names its owner (no line), and an IXFR patches a copy: the published
 * zone is unchanged until the copy replaces it. */
Test(rpz, transferred_records_and_patching_a_copy)
{
	char err[512];
	struct rpz_data *d = rpz_data_new(RPZ_HIGHRISK, W("rpz.test"), "rpz:feed");
	ldns_rr *a = RR("a.test.rpz.test. CNAME ."), *b = RR("*.b.test.rpz.test. CNAME *.");
	ldns_rr *bad = RR("c.test.rpz.test. CNAME rpz-drop.");
	cr_assert_eq(rpz_data_apply(d, a, true, "rpz:feed", 0, err, sizeof(err)), 0);
	cr_assert_eq(rpz_data_apply(d, b, true, "rpz:feed", 0, err, sizeof(err)), 0);
	cr_expect_eq(rpz_data_apply(d, bad, true, "rpz:feed", 0, err, sizeof(err)), MOAT_EINVAL);
	cr_expect_str_eq(err, "rpz:feed: c.test.rpz.test.: action rpz-drop is not supported (only "
	                      "rpz-passthru., . and *.)");
	d->loaded = true;
	struct rpz_data *c = rpz_data_copy(d);
	cr_assert_not_null(c);
	cr_expect_eq(rpz_data_apply(c, a, false, "rpz:feed", 0, err, sizeof(err)), 0);
	cr_expect_eq(rpz_data_apply(c, a, false, "rpz:feed", 0, err, sizeof(err)), MOAT_ENOENT);
	cr_expect(strstr(err, "does not hold it"), "%s", err);
	ldns_rr *n = RR("new.test.rpz.test. CNAME .");
	cr_expect_eq(rpz_data_apply(c, n, true, "rpz:feed", 0, err, sizeof(err)), 0);
	cr_expect(rpz_match(d, W("a.test"), NULL, NULL), "the original keeps its record");
	cr_expect_not(rpz_match(d, W("new.test"), NULL, NULL));
	cr_expect_not(rpz_match(c, W("a.test"), NULL, NULL), "the copy lost it");
	cr_expect(rpz_match(c, W("new.test"), NULL, NULL));
	cr_expect(rpz_match(c, W("x.b.test"), NULL, NULL));
	cr_expect_eq(rpz_count(c), 2);
	ldns_rr_free(a);
	ldns_rr_free(b);
	ldns_rr_free(bad);
	ldns_rr_free(n);
	rpz_data_unref(c);
	rpz_data_unref(d);
}

/* A snapshot from a config: the allow zone allows, the high-risk zone denies (NODATA form
 * too), and policy_with_rpz replaces one zone without touching the old snapshot. */
/* Two RPZ files (an allow zone, a high-risk zone) and a transferred allow zone "feed", all
 * taken by agent a1 (10.0.0.0/8), loaded into cfg and *p; the feed's next contents in *z. */
struct three {
	char *allow, *hr;
	struct config cfg;
	struct rpz_data *z;
	ldns_rr *rr;
};

static struct policy *three_load(struct three *t)
{
	char err[512];
	t->allow =
	    write_tmp(SOA "ok.example CNAME rpz-passthru.\n*.ok.example CNAME rpz-passthru.\n"
	                  "evil.example CNAME rpz-passthru.\n");
	t->hr = write_tmp("$ORIGIN hr.test.\n@ SOA ns. h. 1 60 60 600 60\n"
	                  "evil.example CNAME .\nquiet.ok.example CNAME *.\n");
	char cfgtext[2048];
	snprintf(cfgtext, sizeof(cfgtext),
	         "upstreams: [192.0.2.53]\nlisten: [127.0.0.1:5300]\n"
	         "rpz:\n  - {name: allowz, file: %s}\n  - {name: hrz, file: %s}\n"
	         "  - {name: feed, primary: \"192.0.2.1:53\", zone: rpz.example.}\n"
	         "highrisk_rpz: [hrz]\n"
	         "agents:\n  - name: a1\n    clients: [10.0.0.0/8]\n    allow: [\"rpz:allowz\", "
	         "\"rpz:feed\"]\n",
	         t->allow, t->hr);
	config_init(&t->cfg);
	cr_assert_eq(
	    config_load_string(&t->cfg, cfgtext, strlen(cfgtext), "t.yaml", err, sizeof(err)), 0,
	    "%s", err);
	struct policy *p;
	cr_assert_eq(policy_load(&t->cfg, &p, err, sizeof(err)), 0, "%s", err);
	t->z = rpz_data_new(RPZ_ALLOW, W("rpz.example"), "rpz:feed");
	t->rr = RR("feed.example.rpz.example. CNAME rpz-passthru.");
	cr_assert_eq(rpz_data_apply(t->z, t->rr, true, "rpz:feed", 0, err, sizeof(err)), 0, "%s",
	             err);
	t->z->loaded = true;
	return p;
}

static void three_free(struct three *t)
{
	rpz_data_unref(t->z);
	ldns_rr_free(t->rr);
	config_free(&t->cfg);
	unlink(t->allow);
	unlink(t->hr);
	free(t->allow);
	free(t->hr);
}

Test(rpz, policy_decisions_and_cheap_snapshot)
{
	struct three t;
	struct policy *p = three_load(&t);
	cr_assert_eq(t.cfg.nrpz, 3);
	cr_assert_eq(t.cfg.agents[0].nallow_rpz, 2);
	cr_assert_eq(t.cfg.agents[0].nallow, 0);
	const struct policy_agent *ag = &p->agents[0];
	struct policy_decision d;
	policy_decide(p, ag, W("www.ok.example"), 1, &d);
	cr_expect_eq(d.verdict, POLICY_ALLOW, "%s", d.reason);
	policy_decide(p, ag, W("nope.example"), 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_NOT_ALLOWED);
	policy_decide(p, ag, W("evil.example"), 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_HIGHRISK, "high-risk wins over allow");
	cr_expect(d.alert);
	cr_expect_not(d.nodata);
	policy_decide(p, ag, W("quiet.ok.example"), 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_HIGHRISK);
	cr_expect(d.nodata);
	/* the transferred zone is empty until a transfer fills it */
	policy_decide(p, ag, W("feed.example"), 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_NOT_ALLOWED);
	struct policy *np = policy_with_rpz(p, 2, t.z);
	cr_assert_not_null(np);
	policy_decide(np, &np->agents[0], W("feed.example"), 1, &d);
	cr_expect_eq(d.verdict, POLICY_ALLOW);
	cr_expect_str_eq(d.reason, "allowed by rpz:feed");
	policy_decide(p, ag, W("feed.example"), 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_NOT_ALLOWED, "the old snapshot is unchanged");
	policy_unref(p); /* np keeps its base alive */
	policy_decide(np, &np->agents[0], W("www.ok.example"), 1, &d);
	cr_expect_eq(d.verdict, POLICY_ALLOW);
	policy_unref(np);
	three_free(&t);
}

/* An agent added at runtime keeps every RPZ zone (agent_edit.c carries them), and a transfer's
 * snapshot (policy_with_rpz) keeps the runtime agent. */
Test(rpz, runtime_agents_and_zones_follow_each_other)
{
	char err[512], warn[256];
	struct three t;
	struct policy *p = three_load(&t), *ed, *np;
	struct agent_spec s;
	memset(&s, 0, sizeof(s));
	snprintf(s.name, sizeof(s.name), "rt");
	cr_assert_eq(netaddr_parse_cidr("192.0.2.7/32", &s.clients[0]), 0);
	s.nclients = 1;
	s.patterns = calloc(1, sizeof(char *));
	s.patterns[0] = strdup("evil.example");
	s.npatterns = 1;
	cr_assert_eq(agent_edit_add(p, &s, &ed, warn, sizeof(warn), err, sizeof(err)), 0, "%s",
	             err);
	agent_spec_clear(&s);
	struct policy_decision d;
	cr_assert_eq(ed->nrpz, 3);
	policy_decide(ed, &ed->agents[0], W("ok.example"), 1, &d);
	cr_expect_eq(d.verdict, POLICY_ALLOW, "the config agent's RPZ allow zone stays: %s",
	             d.reason);
	const struct policy_agent *rt = agent_edit_find(ed, "rt");
	cr_assert_not_null(rt);
	policy_decide(ed, rt, W("evil.example"), 1, &d);
	cr_expect_eq(d.verdict, POLICY_DENY_HIGHRISK, "the RPZ high-risk zone stays");
	cr_assert_not_null(np = policy_with_rpz(ed, 2, t.z));
	cr_expect_not_null(agent_edit_find(np, "rt"), "a transfer keeps the runtime agent");
	policy_decide(np, &np->agents[0], W("feed.example"), 1, &d);
	cr_expect_eq(d.verdict, POLICY_ALLOW);
	policy_unref(p);
	policy_unref(ed);
	struct policy *del;
	cr_assert_eq(agent_edit_del(np, "rt", &del, err, sizeof(err)), 0, "%s", err);
	policy_decide(del, &del->agents[0], W("feed.example"), 1, &d);
	cr_expect_eq(d.verdict, POLICY_ALLOW, "an agent del keeps the transferred zone");
	policy_unref(np);
	policy_unref(del);
	three_free(&t);
}

Test(rpz, config_errors)
{
	const char *bad[][2] = {
	    {"rpz:\n  - {name: z}\n", "give either file or primary"},
	    {"rpz:\n  - {name: z, primary: \"192.0.2.1\"}\n", "primary needs zone"},
	    {"rpz:\n  - {name: z, file: a}\n  - {name: z, file: b}\n", "duplicate name"},
	    {"rpz:\n  - {name: z, primary: \"192.0.2.1\", zone: a., tsig: {name: k}}\n",
	     "name and secret are required"},
	    {"rpz:\n  - {name: z, primary: \"192.0.2.1\", zone: a., tsig: {name: k, secret: x, "
	     "algorithm: hmac-sha257}}\n",
	     "tsig.algorithm: expected hmac-sha256"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct config cfg;
		char err[512];
		config_init(&cfg);
		cr_expect_eq(config_load_string(&cfg, bad[i][0], strlen(bad[i][0]), "t.yaml", err,
		                                sizeof(err)),
		             MOAT_EINVAL, "%s", bad[i][0]);
		cr_expect(strstr(err, bad[i][1]), "want '%s' in '%s'", bad[i][1], err);
		config_free(&cfg);
	}
	struct config cfg;
	char err[512];
	struct policy *p;
	const char *t = "upstreams: [192.0.2.53]\nlisten: [127.0.0.1:5300]\nhighrisk_rpz: [nope]\n"
	                "agents:\n  - {name: a, clients: [10.0.0.0/8]}\n";
	config_init(&cfg);
	cr_assert_eq(config_load_string(&cfg, t, strlen(t), "t.yaml", err, sizeof(err)), 0, "%s",
	             err);
	cr_expect_eq(policy_load(&cfg, &p, err, sizeof(err)), MOAT_EINVAL);
	cr_expect(strstr(err, "t.yaml:3: highrisk_rpz: no rpz zone named 'nope'"), "%s", err);
	config_free(&cfg);
}

/* A zone's trigger cap: one more trigger than max_triggers refuses the zone (file or transfer),
 * with the cap named; as many as it allows load. */
Test(rpz, max_triggers_refuses_the_zone)
{
	char err[512] = "", *path = write_tmp("$ORIGIN rpz.test.\n@ SOA ns. h. 1 60 60 600 60\n"
	                                      "a.example CNAME rpz-passthru.\n"
	                                      "b.example CNAME rpz-passthru.\n"
	                                      "*.c.example CNAME rpz-passthru.\n");
	struct rpz_data *d = NULL;
	cr_assert_eq(rpz_load_file_signed(RPZ_ALLOW, path, NULL, NULL, 3, &d, err, sizeof(err)), 0,
	             "%s", err);
	cr_assert_eq(rpz_count(d), 3);
	cr_assert_eq(d->max_triggers, 3, "the cap goes with the zone (an IXFR patches a copy)");
	struct rpz_data *c = rpz_data_copy(d);
	cr_assert_eq(c->max_triggers, 3);
	ldns_rr *rr = RR("d.example.rpz.test. 60 IN CNAME rpz-passthru.");
	cr_assert_eq(rpz_data_apply(c, rr, true, "rpz:feed", 0, err, sizeof(err)), MOAT_ELIMIT);
	ldns_rr_free(rr);
	cr_assert(strstr(err, "more than 3 triggers"), "%s", err);
	rpz_data_unref(c);
	rpz_data_unref(d);
	d = NULL;
	cr_assert_eq(rpz_load_file_signed(RPZ_ALLOW, path, NULL, NULL, 2, &d, err, sizeof(err)),
	             MOAT_ELIMIT);
	cr_assert(strstr(err, "max_triggers"), "%s", err);
	cr_assert_null(d);
	unlink(path);
	free(path);
}
