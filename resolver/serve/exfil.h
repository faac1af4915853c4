/* exfil.h: the query path's narrowing of what an allowed name can carry (issue 26). After the
 * policy allowed a name (policy_decide stays a pure function of name, client and snapshot),
 * the question's type must be one the agent may ask (moat/channel.h) and a new name under a
 * wildcard must fit the zone's label budget (moat/budget.h, shared by every worker through
 * moat/budget_share.h); once the answer is built, it must fit the agent's answer caps. Each
 * turns the decision into a deny the caller answers and logs as it answers any other. */
#ifndef MOAT_SERVE_EXFIL_H
#define MOAT_SERVE_EXFIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moat/budget.h"
#include "moat/policy.h"
#include "moat/wire.h"

struct worker;

/* The qtype and the label budget of an allowed question (d->verdict POLICY_ALLOW, agent of
 * srv->policy). A deny sets d's verdict (POLICY_DENY_QTYPE or POLICY_DENY_BUDGET), reason and
 * alert (budget); the first budget deny of a zone in a window also says so on stderr. */
void exfil_screen(struct worker *srv, const struct wire_query *q, const struct policy_agent *agent,
                  struct policy_decision *d);

/* What exfil_screen would decide on d (policy_decide's verdict for lname), without billing
 * anything (moatctl explain): d as exfil_screen leaves it, and the figures behind it. */
struct exfil_explain {
	bool qtype_ok;
	bool budgeted; /* the name falls under a wildcard with a budget: bv and window_s are set */
	struct budget_verdict bv;
	uint32_t window_s;
};
void exfil_explain(const struct policy *p, const struct policy_agent *agent, const uint8_t *lname,
                   uint16_t qtype, uint64_t now_ms, struct policy_decision *d,
                   struct exfil_explain *out);

/* The answer built for the client (pkt, len bytes) against the agent's caps: true when it is
 * over one, with d set to POLICY_DENY_ANSWER_CAP and its reason. */
bool exfil_answer_over(const struct policy_agent *agent, const uint8_t *pkt, size_t len,
                       struct policy_decision *d);

#endif
