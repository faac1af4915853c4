/* Unit tests for runtime edits of a policy snapshot (resolver/agent_edit.c) and the agent index
 * by client address (resolver/policy_clients.c): an added agent answers its clients with its
 * own patterns while the old snapshot stays as it was; config agents and the other runtime
 * agents' sets are shared, not rebuilt; del and a reload's rebase; every refusal with its
 * reason; and the index picks the same agent as the linear scan it replaces. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moat/agent_edit.h"
#include "moat/err.h"
#include "moat/name.h"
#include "moat/policy_clients.h"

static struct config cfg;
static struct policy *base;
static char allow_path[64];

static void cfg_agent(const char *name, const char *cidr)
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
	cr_assert_eq(config_strv_push(&a->allow_files, &a->nallow, allow_path), 0);
}

static void setup(void)
{
	snprintf(allow_path, sizeof(allow_path), "/tmp/moat-agent-edit.XXXXXX");
	int fd = mkstemp(allow_path);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, "ops.test\n", 9), 9);
	close(fd);
	config_init(&cfg);
	cfg_agent("ops", "10.0.0.0/8");
	cfg_agent("lab", "2001:db8::/32");
	char err[256] = "";
	cr_assert_eq(policy_load(&cfg, &base, err, sizeof(err)), 0, "%s", err);
}

static void teardown(void)
{
	policy_unref(base);
	config_free(&cfg);
	unlink(allow_path);
}

TestSuite(edit, .init = setup, .fini = teardown);

static void spec_of(struct agent_spec *s, const char *name, const char *cidr, const char *pat)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	cr_assert_eq(netaddr_parse_cidr(cidr, &s->clients[0]), 0, "%s", cidr);
	s->nclients = 1;
	s->patterns = calloc(2, sizeof(char *));
	if (pat) {
		s->patterns[0] = strdup(pat);
		s->npatterns = 1;
	}
}

static const struct policy_agent *agent_at(const struct policy *p, const char *addr)
{
	struct sockaddr_storage ss;
	cr_assert_eq(netaddr_parse_addrport(addr, 0, &ss), 0, "%s", addr);
	return policy_agent_for(p, (const struct sockaddr *)&ss);
}

static bool allows(const struct policy *p, const char *addr, const char *name)
{
	uint8_t w[NAME_MAXWIRE];
	struct policy_decision d;
	const struct policy_agent *a = agent_at(p, addr);
	cr_assert_not_null(a, "%s has an agent", addr);
	cr_assert_gt(name_from_text(name, strlen(name), w), 0);
	policy_decide(p, a, w, 1, &d);
	return d.verdict == POLICY_ALLOW;
}

static struct policy *add(struct policy *cur, const char *name, const char *cidr, const char *pat)
{
	struct agent_spec s;
	struct policy *np = NULL;
	char warn[256], err[512] = "";
	spec_of(&s, name, cidr, pat);
	cr_assert_eq(agent_edit_add(cur, &s, &np, warn, sizeof(warn), err, sizeof(err)), 0, "%s",
	             err);
	agent_spec_clear(&s);
	return np;
}

static void refused(struct policy *cur, struct agent_spec *s, const char *why)
{
	struct policy *np = NULL;
	char warn[256], err[512] = "";
	cr_assert_eq(agent_edit_add(cur, s, &np, warn, sizeof(warn), err, sizeof(err)),
	             MOAT_EINVAL);
	cr_assert_null(np);
	cr_assert(strstr(err, why), "'%s' in '%s'", why, err);
	agent_spec_clear(s);
}

Test(edit, add_answers_and_shares)
{
	struct policy *p1 = add(base, "a1", "198.51.100.1/32", "a1.test");
	struct policy *p2 = add(p1, "a2", "198.51.100.2", "*.a2.test");
	cr_assert_eq(base->nagents, 2, "the loaded snapshot is unchanged");
	cr_assert_eq(p1->nagents, 3);
	cr_assert_eq(p2->nagents, 4);
	cr_assert(allows(p2, "198.51.100.1", "a1.test"));
	cr_assert(!allows(p2, "198.51.100.1", "x.a2.test"), "a1 is denied a2's names");
	cr_assert(allows(p2, "198.51.100.2", "x.a2.test"));
	cr_assert(!allows(p2, "198.51.100.2", "a1.test"), "a2 is denied a1's names");
	cr_assert(allows(p2, "10.1.2.3", "ops.test"), "a config agent keeps its policy");
	cr_assert(!allows(p2, "10.1.2.3", "a1.test"));
	cr_assert_null(agent_at(p1, "198.51.100.2"), "p1 does not know a2");
	cr_assert_str_eq(agent_at(p2, "198.51.100.2")->cfg.name, "a2");
	/* shared, not rebuilt */
	cr_assert_eq(p2->highrisk, base->highrisk);
	cr_assert_eq(p2->guard, base->guard);
	cr_assert_eq(p2->agents[0].allow, base->agents[0].allow, "config agent's set shared");
	cr_assert_eq(p2->agents[2].allow, p1->agents[2].allow, "a1's set shared by p1 and p2");
	cr_assert(p2->agents[2].runtime && !p2->agents[0].runtime);
	cr_assert_eq(p2->nconfig, 2);
	/* the rule names the runtime agent and the pattern's line */
	uint8_t w[NAME_MAXWIRE];
	struct policy_decision d;
	name_from_text("a1.test", 7, w);
	policy_decide(p2, agent_at(p2, "198.51.100.1"), w, 1, &d);
	cr_assert_str_eq(d.rule.file, "runtime:a1");
	cr_assert_eq(d.rule.line, 1);
	/* the older snapshots stay valid after the newer is gone, and the reverse */
	policy_unref(p1);
	cr_assert(allows(p2, "198.51.100.1", "a1.test"));
	policy_unref(p2);
	cr_assert(allows(base, "10.1.2.3", "ops.test"));
}

Test(edit, refusals)
{
	struct policy *p1 = add(base, "a1", "198.51.100.1/32", "a1.test");
	struct agent_spec s;
	spec_of(&s, "ops", "198.51.100.9/32", "x.test");
	refused(p1, &s, "from the config file and read-only");
	spec_of(&s, "a1", "198.51.100.9/32", "x.test");
	refused(p1, &s, "exists already");
	spec_of(&s, "a9", "10.0.0.0/8", "x.test");
	refused(p1, &s, "agent 'ops''s already");
	spec_of(&s, "a9", "198.51.100.1/32", "x.test");
	refused(p1, &s, "agent 'a1''s already");
	spec_of(&s, "a9", "198.51.100.9/32", "x.test");
	s.clients[1] = s.clients[0];
	s.nclients = 2;
	refused(p1, &s, "listed twice");
	spec_of(&s, "a9", "198.51.100.9/32", "ok.test");
	s.patterns[1] = strdup("bad..name");
	s.npatterns = 2;
	refused(p1, &s, "runtime:a9:2: bad pattern 'bad..name'");
	spec_of(&s, "a9", "198.51.100.9/32", "ok.test udp/99999");
	refused(p1, &s, "runtime:a9:1:");
	spec_of(&s, "b@d", "198.51.100.9/32", "ok.test");
	refused(p1, &s, "bad agent name");
	spec_of(&s, "a9", "198.51.100.9/32", "ok.test");
	s.nclients = 0;
	refused(p1, &s, "1 to 64 client ranges");
	/* IDN: a U-label pattern is stored as its A-label, as from a file */
	struct policy *p2 = add(p1, "a9", "198.51.100.9/32", "bücher.test");
	cr_assert(allows(p2, "198.51.100.9", "xn--bcher-kva.test"));
	/* a more specific range inside a config agent's is fine (and wins) */
	struct policy *p3 = add(p2, "a10", "10.9.9.9/32", "a10.test");
	cr_assert_str_eq(agent_at(p3, "10.9.9.9")->cfg.name, "a10");
	cr_assert_str_eq(agent_at(p3, "10.9.9.8")->cfg.name, "ops");
	policy_unref(p1);
	policy_unref(p2);
	policy_unref(p3);
}

Test(edit, del_and_rebase)
{
	struct policy *p1 = add(base, "a1", "198.51.100.1/32", "a1.test");
	struct policy *p2 = add(p1, "a2", "2001:db8:1::1/128", "a2.test");
	struct policy *p3 = NULL, *p4 = NULL, *nb = NULL;
	char err[512] = "";
	cr_assert_eq(agent_edit_del(p2, "ops", &p3, err, sizeof(err)), MOAT_EINVAL);
	cr_assert(strstr(err, "read-only"), "%s", err);
	cr_assert_eq(agent_edit_del(p2, "nosuch", &p3, err, sizeof(err)), MOAT_EINVAL);
	cr_assert(strstr(err, "no agent 'nosuch'"), "%s", err);
	cr_assert_eq(agent_edit_del(p2, "a1", &p3, err, sizeof(err)), 0, "%s", err);
	cr_assert_null(agent_at(p3, "198.51.100.1"), "a1's client is refused after del");
	cr_assert(allows(p3, "2001:db8:1::1", "a2.test"), "a2 stays");
	cr_assert(allows(p2, "198.51.100.1", "a1.test"), "the running snapshot is unchanged");
	/* a reload: a new loaded snapshot, the runtime agents carried over, sets shared */
	char e2[256] = "";
	cr_assert_eq(policy_load(&cfg, &nb, e2, sizeof(e2)), 0, "%s", e2);
	cr_assert_eq(agent_edit_rebase(nb, p3, &p4, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(p4->base, nb);
	cr_assert_eq(p4->nagents, 3);
	cr_assert(allows(p4, "2001:db8:1::1", "a2.test"));
	cr_assert_eq(p4->agents[2].allow, p3->agents[2].allow);
	policy_unref(p4);
	policy_unref(nb);
	/* a reload whose config now has a runtime agent's range is refused */
	struct config_agent *ca = &cfg.agents[1];
	cr_assert_eq(netaddr_parse_cidr("2001:db8:1::1/128", &ca->clients[0]), 0);
	cr_assert_eq(policy_load(&cfg, &nb, e2, sizeof(e2)), 0, "%s", e2);
	p4 = NULL;
	cr_assert_eq(agent_edit_rebase(nb, p3, &p4, err, sizeof(err)), MOAT_EINVAL);
	cr_assert_null(p4);
	cr_assert(strstr(err, "runtime agent 'a2' clashes with the config"), "%s", err);
	policy_unref(nb);
	policy_unref(p1);
	policy_unref(p2);
	policy_unref(p3);
}

static struct policy_set *set_of(const char *line)
{
	struct policy_set *s = policy_set_new();
	char err[256] = "";
	const char *lines[] = {line};
	cr_assert_eq(policy_set_load_lines(s, lines, 1, "moatctl-allow:ops", err, sizeof(err)), 0,
	             "%s", err);
	return s;
}

/* Runtime decisions (moatctl allow / deny): a new snapshot with the agent's two sets; a deny
 * wins over the allowlist, an allow adds to it; they go along with later edits and a reload
 * (rebase, by agent name), and the older snapshots keep what they had. */
Test(edit, decided_rules)
{
	struct policy *p1 = NULL, *p2 = NULL, *p3 = NULL, *p4 = NULL, *nb = NULL;
	char err[512] = "";
	cr_assert_not(agent_edit_has_decided(base));
	cr_assert_eq(agent_edit_decided(base, "nosuch", NULL, NULL, &p1, err, sizeof(err)),
	             MOAT_EINVAL);
	cr_assert_eq(agent_edit_decided(base, "ops", set_of("new.test tcp/443"), set_of("ops.test"),
	                                &p1, err, sizeof(err)),
	             0, "%s", err);
	cr_assert(agent_edit_has_decided(p1));
	cr_assert(allows(p1, "10.1.2.3", "new.test"), "a runtime allow adds");
	cr_assert_not(allows(p1, "10.1.2.3", "ops.test"), "a runtime deny wins over the list");
	cr_assert(allows(base, "10.1.2.3", "ops.test"), "the older snapshot keeps its rules");
	uint8_t w[NAME_MAXWIRE];
	struct policy_decision d;
	cr_assert_gt(name_from_text("ops.test", 8, w), 0);
	policy_decide(p1, agent_at(p1, "10.1.2.3"), w, 1, &d);
	cr_assert(d.decided, "a decided deny is not asked about again");
	cr_assert_gt(name_from_text("new.test", 8, w), 0);
	policy_decide(p1, agent_at(p1, "10.1.2.3"), w, 1, &d);
	cr_assert_str_eq(d.rule.file, "moatctl-allow:ops");
	cr_assert_eq(d.rule.ports->n, 1);
	/* another edit keeps them; so does a reload */
	p2 = add(p1, "a1", "198.51.100.1/32", "a1.test");
	cr_assert(allows(p2, "10.1.2.3", "new.test"), "an agent add dropped the decisions");
	cr_assert_eq(p2->agents[0].decided_allow, p1->agents[0].decided_allow, "shared");
	cr_assert_eq(policy_load(&cfg, &nb, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(agent_edit_rebase(nb, p2, &p3, err, sizeof(err)), 0, "%s", err);
	cr_assert(allows(p3, "10.1.2.3", "new.test"), "a reload dropped the decisions");
	cr_assert_not(allows(p3, "10.1.2.3", "ops.test"));
	cr_assert_not(allows(p3, "2001:db8::1", "new.test"), "another agent got them");
	/* replaced: the allow gone, the deny gone */
	cr_assert_eq(agent_edit_decided(p3, "ops", NULL, NULL, &p4, err, sizeof(err)), 0, "%s",
	             err);
	cr_assert_not(allows(p4, "10.1.2.3", "new.test"));
	cr_assert(allows(p4, "10.1.2.3", "ops.test"));
	cr_assert(allows(p3, "10.1.2.3", "new.test"), "p3 unchanged");
	policy_unref(p4);
	policy_unref(p3);
	policy_unref(nb);
	policy_unref(p2);
	policy_unref(p1);
}

/* The index against the linear scan, over nested ranges of both families and random
 * addresses near them. */
Test(edit, index_matches_linear)
{
	struct policy *p = policy_ref(base), *np;
	char name[32], cidr[64];
	static const char *const shapes[] = {"198.51.%u.%u/32", "203.0.%u.0/24", "192.0.%u.0/23",
	                                     "2001:db8:%x::%x/128", "2001:db8:%x::/48"};
	unsigned seed = 7;
	for (int i = 0; i < 300; i++) {
		seed = seed * 1103515245u + 12345u;
		unsigned a = (seed >> 8) % 256, b = (seed >> 16) % 256;
		if (i % 5 == 2)
			a &= 0xfe; /* a /23 starts on an even third byte */
		snprintf(name, sizeof(name), "r%d", i);
		snprintf(cidr, sizeof(cidr), shapes[i % 5], a, b);
		struct agent_spec s;
		struct policy *q = NULL;
		char warn[64], err[512];
		spec_of(&s, name, cidr, "x.test");
		if (agent_edit_add(p, &s, &q, warn, sizeof(warn), err, sizeof(err)) == 0) {
			policy_unref(p);
			p = q;
		}
		agent_spec_clear(&s);
	}
	cr_assert_gt(p->nagents, 200);
	struct policy_clients *idx = p->byclient;
	np = p;
	for (int i = 0; i < 20000; i++) {
		seed = seed * 1103515245u + 12345u;
		unsigned a = (seed >> 8) % 256, b = (seed >> 16) % 256;
		char addr[64];
		if (i % 2)
			snprintf(addr, sizeof(addr), i % 4 == 1 ? "198.51.%u.%u" : "203.0.%u.%u", a,
			         b);
		else
			snprintf(addr, sizeof(addr), i % 4 == 0 ? "2001:db8:%x::%x" : "10.%u.0.%u",
			         a, b);
		const struct policy_agent *fast = agent_at(np, addr);
		np->byclient = NULL;
		const struct policy_agent *slow = agent_at(np, addr);
		np->byclient = idx;
		cr_assert_eq(fast, slow, "%s: index %s, scan %s", addr, fast ? fast->cfg.name : "-",
		             slow ? slow->cfg.name : "-");
	}
	policy_unref(p);
}

/* agent_edit_bounds: never the whole space; no overlap with a config agent unless forced; a
 * runtime agent gets the config's sinkhole defaults. */
Test(edit, bounds)
{
	struct agent_spec s;
	char err[400];
	spec_of(&s, "wide", "0.0.0.0/0", "a.test");
	cr_expect_eq(agent_edit_bounds(base, &s, false, err, sizeof(err)), MOAT_EINVAL);
	cr_expect(strstr(err, "0.0.0.0/0 is the whole address space"), "%s", err);
	cr_expect_eq(agent_edit_bounds(base, &s, true, err, sizeof(err)), MOAT_EINVAL, "forced");
	agent_spec_clear(&s);
	spec_of(&s, "wide6", "::/0", "a.test");
	cr_expect_eq(agent_edit_bounds(base, &s, true, err, sizeof(err)), MOAT_EINVAL);
	agent_spec_clear(&s);

	spec_of(&s, "inside", "10.9.0.0/16", "a.test");
	cr_expect_eq(agent_edit_bounds(base, &s, false, err, sizeof(err)), MOAT_EINVAL);
	cr_expect(strstr(err, "10.9.0.0/16 overlaps 10.0.0.0/8 of config agent 'ops'"), "%s", err);
	cr_expect_eq(agent_edit_bounds(base, &s, true, err, sizeof(err)), 0, "forced: %s", err);
	agent_spec_clear(&s);
	spec_of(&s, "holds", "2001:db8:1::/48", "a.test");
	cr_expect_eq(agent_edit_bounds(base, &s, false, err, sizeof(err)), MOAT_EINVAL);
	cr_expect(strstr(err, "of config agent 'lab'"), "%s", err);
	agent_spec_clear(&s);
	spec_of(&s, "holds", "2001:d00::/24", "a.test");
	cr_expect_eq(agent_edit_bounds(base, &s, false, err, sizeof(err)), MOAT_EINVAL,
	             "a range holding a config agent's");
	agent_spec_clear(&s);
	spec_of(&s, "apart", "198.51.100.0/24", "a.test");
	cr_expect_eq(agent_edit_bounds(base, &s, false, err, sizeof(err)), 0, "%s", err);

	/* a runtime agent's sinkhole: the config's defaults, not 0.0.0.0 and :: */
	struct policy *np;
	char warn[300];
	cr_assert_eq(agent_edit_add(base, &s, &np, warn, sizeof(warn), err, sizeof(err)), 0, "%s",
	             err);
	const struct policy_agent *a = agent_edit_find(np, "apart");
	cr_assert_not_null(a);
	cr_expect_eq(memcmp(a->cfg.sink4, config_sink4_default, 4), 0);
	cr_expect_eq(memcmp(a->cfg.sink6, config_sink6_default, 16), 0);
	cr_expect_eq(a->cfg.sink_ttl, 60);
	policy_unref(np);
	agent_spec_clear(&s);
}
