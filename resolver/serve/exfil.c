/* exfil.c owns the query path's part of issue 26 (serve/exfil.h): the qtype check and the
 * label budget after the policy allowed a name, their explanation for moatctl, and the answer
 * caps once the answer is built. The decisions are the pure modules' (moat/channel.h,
 * moat/budget.h); this file brings the clock, the shared state and the words. */
#include <stdio.h>
#include <string.h>

#include "moat/budget_share.h"
#include "moat/channel.h"
#include "moat/name.h"
#include "serve/exfil.h"
#include "serve/worker.h"

/* The budget question of an allowed name, or false when none applies: an exact rule (one name,
 * no room for data), a zone with no budget, an agent with none. */
static bool budget_ask_of(const struct policy_agent *agent, const uint8_t *lname,
                          const struct policy_decision *d, uint64_t now_ms, struct budget_ask *a)
{
	const struct config_budget *b = &agent->cfg.budget;
	if (!d->rule.wildcard || !d->rule.at || d->rule.at <= lname || !b->window_s)
		return false;
	uint32_t limit = budget_limit(&agent->cfg, d->rule.at);
	if (!limit)
		return false;
	*a = (struct budget_ask){.lname = lname,
	                         .zone = d->rule.at,
	                         .limit = limit,
	                         .window_ms = b->window_s * 1000u,
	                         .now_ms = now_ms};
	return true;
}

static void deny_qtype(const struct policy_agent *agent, uint16_t qtype, struct policy_decision *d)
{
	char t[16];
	d->verdict = POLICY_DENY_QTYPE;
	snprintf(d->reason, sizeof(d->reason), "moat: query type %s is not allowed for agent %s",
	         wire_type_str(qtype, t, sizeof(t)), agent->cfg.name);
}

static void deny_budget(const struct policy_agent *agent, const struct budget_ask *a,
                        const struct budget_verdict *v, struct policy_decision *d)
{
	char zone[NAME_MAXTEXT];
	name_to_text(a->zone, zone, sizeof(zone));
	size_t zl = strlen(zone);
	if (zl > 1 && zone[zl - 1] == '.')
		zone[zl - 1] = 0;
	d->verdict = POLICY_DENY_BUDGET;
	d->alert = true;
	if (!v->limit)
		snprintf(d->reason, sizeof(d->reason),
		         "moat: exfiltration budget of agent %s under *.%.80s: out of memory",
		         agent->cfg.name, zone);
	else
		snprintf(
		    d->reason, sizeof(d->reason),
		    "moat: exfiltration budget of agent %s under *.%.80s spent (%u of %u bytes "
		    "in %u s)",
		    agent->cfg.name, zone, v->used, v->limit, a->window_ms / 1000u);
}

void exfil_screen(struct worker *srv, const struct wire_query *q, const struct policy_agent *agent,
                  struct policy_decision *d)
{
	if (q->qtype == WIRE_ANY)
		return; /* answered here (RFC 8482): nothing goes upstream */
	if (!channel_qtype_allowed(&agent->cfg.channel, q->qtype)) {
		deny_qtype(agent, q->qtype, d);
		return;
	}
	struct budget_ask a;
	if (!budget_ask_of(agent, q->lname, d, uv_now(srv->loop), &a))
		return;
	struct budget_verdict v;
	budget_share_account(srv->policy, agent, &a, &v);
	if (v.result != BUDGET_DENIED)
		return;
	deny_budget(agent, &a, &v, d);
	if (v.first_deny)
		fprintf(stderr,
		        "moatd: ALERT: %s; new names under it are denied until the window "
		        "moves\n",
		        d->reason + 6 /* without "moat: " */);
}

void exfil_explain(const struct policy *p, const struct policy_agent *agent, const uint8_t *lname,
                   uint16_t qtype, uint64_t now_ms, struct policy_decision *d,
                   struct exfil_explain *out)
{
	memset(out, 0, sizeof(*out));
	out->qtype_ok = channel_qtype_allowed(&agent->cfg.channel, qtype);
	if (d->verdict != POLICY_ALLOW)
		return;
	if (!out->qtype_ok) {
		deny_qtype(agent, qtype, d);
		return;
	}
	struct budget_ask a;
	if (qtype == WIRE_ANY || !budget_ask_of(agent, lname, d, now_ms, &a))
		return;
	out->budgeted = true;
	out->window_s = agent->cfg.budget.window_s;
	budget_share_peek(p, agent, &a, &out->bv);
	if (out->bv.result == BUDGET_DENIED)
		deny_budget(agent, &a, &out->bv, d);
}

bool exfil_answer_over(const struct policy_agent *agent, const uint8_t *pkt, size_t len,
                       struct policy_decision *d)
{
	char why[sizeof(d->reason)];
	if (!channel_answer_over(&agent->cfg.channel, agent->cfg.name, pkt, len, why, sizeof(why)))
		return false;
	memset(d, 0, sizeof(*d));
	d->verdict = POLICY_DENY_ANSWER_CAP;
	snprintf(d->reason, sizeof(d->reason), "%s", why);
	return true;
}
