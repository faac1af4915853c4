/* The label budgets of the running agents (moat/budget.h), shared by every worker and carried
 * from snapshot to snapshot by agent name: a reload, a runtime agent edit or an RPZ transfer
 * builds a new snapshot, and its agents keep the budgets they had (a budget that reset whenever
 * another agent was added would be no budget). A snapshot holds one reference per agent, in
 * policy.budgets (budget_share_attach, called by every snapshot constructor); a budget goes with
 * the last snapshot that has its agent.
 *
 * Threads: one mutex per agent, taken for the few table operations of one question (about a
 * tenth of a microsecond); workers wait on each other only for the same agent. Per-worker
 * shards were the other choice: no lock, but a name seen by one worker would be new to the
 * next (the kernel spreads a client's source ports over the workers), so a benign agent would
 * pay once per worker and each shard would need limit/N to keep the bound. The process-wide
 * table of agents has its own mutex, taken only when snapshots are made or freed and when the
 * figures are read (lock order: the table, then an agent). */
#ifndef MOAT_BUDGET_SHARE_H
#define MOAT_BUDGET_SHARE_H

#include <stdint.h>

#include "moat/budget.h"
#include "moat/policy.h"

struct budget_share;

/* p->budgets: one reference per agent of p, by name (created on first sight). 0 or
 * MOAT_ENOMEM (then p holds none). */
int budget_share_attach(struct policy *p);

/* Let p's references go (policy_unref calls it); a budget no snapshot holds is freed. */
void budget_share_detach(struct policy *p);

/* budget_account / budget_peek on agent's budget, under its lock. The state is made on the
 * first question (an agent that never asks under a wildcard costs ~100 bytes); when it cannot
 * be, the name is denied (out->result BUDGET_DENIED, limit 0): fail closed. agent belongs to
 * p; p without budgets (a snapshot built by hand): every name passes as seen. */
void budget_share_account(const struct policy *p, const struct policy_agent *agent,
                          const struct budget_ask *a, struct budget_verdict *out);
void budget_share_peek(const struct policy *p, const struct policy_agent *agent,
                       const struct budget_ask *a, struct budget_verdict *out);

/* Each agent's budget, with its state (NULL: never asked), under both locks: cb must not
 * call back into this module. */
typedef void (*budget_share_cb)(void *ctx, const char *agent, const struct budget_state *st);
void budget_share_each(budget_share_cb cb, void *ctx);

#endif
