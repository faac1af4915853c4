/* Unit tests for budget_share.c (moat/budget_share.h): a budget follows its agent's name from
 * snapshot to snapshot (what one snapshot billed, the next sees), goes with the last snapshot
 * that has the agent, is walked for the metrics, and a snapshot without budgets lets names
 * pass as seen. Also through the real constructors: policy_load and a runtime agent add keep a
 * config agent's budget. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "moat/agent_edit.h"
#include "moat/budget_share.h"
#include "moat/config_load.h"
#include "moat/name.h"

static struct policy *snapshot(const char *const *names, size_t n)
{
	struct policy *p = calloc(1, sizeof(*p));
	p->agents = calloc(n, sizeof(*p->agents));
	p->nagents = n;
	for (size_t i = 0; i < n; i++) {
		config_agent_init(&p->agents[i].cfg);
		snprintf(p->agents[i].cfg.name, CONFIG_NAME_MAX, "%s", names[i]);
	}
	cr_assert_eq(budget_share_attach(p), 0);
	return p;
}

static void snapshot_free(struct policy *p)
{
	budget_share_detach(p);
	free(p->agents);
	free(p);
}

static enum budget_result ask(const struct policy *p, size_t agent, const char *name, bool peek)
{
	uint8_t w[NAME_MAXWIRE];
	name_from_text(name, strlen(name), w);
	struct budget_ask a = {w, w + w[0] + 1, 4096, 3600000, 1000};
	struct budget_verdict v;
	if (peek)
		budget_share_peek(p, &p->agents[agent], &a, &v);
	else
		budget_share_account(p, &p->agents[agent], &a, &v);
	return v.result;
}

static void count_agent(void *ctx, const char *agent, const struct budget_state *st)
{
	(void)agent;
	if (st)
		(*(int *)ctx)++;
}

Test(budget_share, carried_by_name)
{
	const char *n1[] = {"ci-1", "ci-2"}, *n2[] = {"ci-3", "ci-2"};
	struct policy *p1 = snapshot(n1, 2);
	cr_expect_eq(ask(p1, 1, "abc.cdn.example", false), BUDGET_CHARGED);
	struct policy *p2 = snapshot(n2, 2); /* a reload: ci-2 moved, ci-1 went, ci-3 came */
	cr_expect_eq(ask(p2, 1, "abc.cdn.example", true), BUDGET_SEEN, "ci-2 kept its budget");
	cr_expect_eq(ask(p2, 0, "abc.cdn.example", true), BUDGET_CHARGED, "ci-3 has its own");
	int with_state = 0;
	budget_share_each(count_agent, &with_state);
	cr_expect_eq(with_state, 1, "only ci-2 has asked");
	snapshot_free(p1);
	cr_expect_eq(ask(p2, 1, "abc.cdn.example", false), BUDGET_SEEN,
	             "the older snapshot going does not take it");
	snapshot_free(p2);
	struct policy *p3 = snapshot(n2, 2);
	cr_expect_eq(ask(p3, 1, "abc.cdn.example", false), BUDGET_CHARGED,
	             "after the last snapshot with ci-2 went, a new ci-2 starts afresh");
	snapshot_free(p3);
	with_state = 0;
	budget_share_each(count_agent, &with_state);
	cr_expect_eq(with_state, 0);
}

Test(budget_share, hand_built_snapshot)
{
	struct policy p = {0};
	struct policy_agent a = {0};
	p.agents = &a;
	p.nagents = 1;
	cr_expect_eq(ask(&p, 0, "abc.cdn.example", false), BUDGET_SEEN);
}

Test(budget_share, through_the_constructors)
{
	char err[512] = "", warn[256];
	const char *text = "upstreams: [\"192.0.2.53\"]\nlisten: [\"127.0.0.1:53\"]\n"
	                   "agents:\n  - {name: cfg, clients: [10.0.0.0/24],\n"
	                   "     budget: {zones: {\"*.cdn.example\": 100, \"*.x.example\": 0}}}\n";
	struct config cfg;
	config_init(&cfg);
	cr_assert_eq(config_load_string(&cfg, text, strlen(text), "t.yaml", err, sizeof(err)), 0,
	             "%s", err);
	struct policy *p = NULL, *p2 = NULL, *p3 = NULL;
	cr_assert_eq(policy_load(&cfg, &p, err, sizeof(err)), 0, "%s", err);
	cr_assert_not_null(p->budgets);
	cr_expect_eq(ask(p, 0, "abc.cdn.example", false), BUDGET_CHARGED);
	cr_assert_eq(p->agents[0].cfg.budget.nzones, 2);
	cr_expect_neq(p->agents[0].cfg.budget.zones, cfg.agents[0].budget.zones,
	              "the snapshot has its own copy of the rule budgets");
	struct agent_spec spec = {.name = "rt", .nclients = 1};
	cr_assert_eq(netaddr_parse_cidr("198.51.100.0/24", &spec.clients[0]), 0);
	cr_assert_eq(agent_edit_add(p, &spec, &p2, warn, sizeof(warn), err, sizeof(err)), 0, "%s",
	             err);
	cr_expect_eq(ask(p2, 0, "abc.cdn.example", true), BUDGET_SEEN, "an add keeps it");
	const struct policy_agent *rt = agent_edit_find(p2, "rt");
	cr_assert_not_null(rt);
	cr_expect_eq(rt->cfg.budget.bytes, CONFIG_BUDGET_BYTES, "runtime agents get the defaults");
	cr_assert_eq(policy_load(&cfg, &p3, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(ask(p3, 0, "abc.cdn.example", true), BUDGET_SEEN, "and so does a reload");
	config_free(&cfg); /* snapshots never point into the config */
	uint8_t z[NAME_MAXWIRE];
	name_from_text("cdn.example", 11, z);
	cr_expect_eq(budget_limit(&p2->agents[0].cfg, z), 100, "read after the config is gone");
	policy_unref(p);
	policy_unref(p2);
	policy_unref(p3);
}
