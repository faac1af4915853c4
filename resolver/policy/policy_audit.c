/* policy_audit.c owns the verdicts of the agent modes (moat/policy_audit.h): which denials an
 * agent in audit mode lets through, and how they are logged; which ones an asking agent holds. Only
 * the default deny is audited; what moat denies for safety is decided before it (policy_decide.c
 * checks IP literals, high-risk names and embedded addresses first) and never reaches the audit. */
#include "moat/policy_audit.h"

#include <string.h>

bool policy_audit(const struct policy_agent *agent, struct policy_decision *d)
{
	if (!agent || agent->cfg.mode != AGENT_AUDIT || d->verdict != POLICY_DENY_NOT_ALLOWED)
		return false;
	d->verdict = POLICY_ALLOW;
	d->audit = true;
	d->nodata = false;
	/* No rule allowed it: the grant opens every port, so the connections the agent makes
	 * work and can be seen (moat-fw's connection log), as they would under a rule without
	 * ports. */
	memset(&d->rule, 0, sizeof(d->rule));
	return true;
}

const char *policy_audit_word(const struct policy_decision *d, const char *allowed)
{
	return d->audit ? "would-deny" : allowed;
}

bool policy_ask_wanted(const struct policy_agent *agent, const struct policy_decision *d)
{
	return agent && agent->cfg.on_unknown == UNKNOWN_ASK && agent->cfg.mode == AGENT_ENFORCE &&
	       d->verdict == POLICY_DENY_NOT_ALLOWED && !d->decided;
}
