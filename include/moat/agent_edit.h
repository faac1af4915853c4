/* Runtime agents in the policy snapshot (agent_edit.c): a new snapshot made from the running
 * one plus or minus one agent, without reading any file again. The new snapshot borrows the
 * loaded one's high-risk list, guard, forward zones, local data and config agents (a reference
 * to it), and shares the other runtime agents' pattern sets by reference count: an edit costs
 * a copy of the agent table and a new client index, whatever the size of the lists. Pure. */
#ifndef MOAT_AGENT_EDIT_H
#define MOAT_AGENT_EDIT_H

#include <stdbool.h>
#include <stddef.h>

#include "moat/config.h"
#include "moat/policy.h"

#define AGENT_CLIENTS_MAX 64       /* ranges per runtime agent */
#define AGENT_PATTERNS_MAX 1000000 /* pattern lines per runtime agent */
#define AGENT_LINE_MAX 1024        /* bytes per pattern line */

/* A runtime agent as the control socket and the store carry it: its patterns as the lines of
 * an allowlist file (a pattern, optionally ports), parsed by the file loader's own code. */
struct agent_spec {
	char name[CONFIG_NAME_MAX];
	enum deny_form deny;
	enum agent_mode mode; /* enforce, or audit (moat/config.h) */
	struct cidr clients[AGENT_CLIENTS_MAX];
	size_t nclients;
	char **patterns; /* owned, each owned (NUL-terminated, no newline) */
	size_t npatterns;
};

/* Free spec's patterns (the struct itself is the caller's). */
void agent_spec_clear(struct agent_spec *spec);

/* cur plus the agent of spec. Refused (MOAT_EINVAL, err says why): a bad name, a name cur has
 * already (from the config: read-only; at runtime: del it first), no range, a range listed twice
 * or identical to another agent's, a bad pattern line ("runtime:NAME:N: reason", N counting the
 * pattern lines from 1). Lint warnings of the patterns go to warn ("" when none). Ownership:
 * *out has one reference. */
int agent_edit_add(struct policy *cur, const struct agent_spec *spec, struct policy **out,
                   char *warn, size_t warnlen, char *err, size_t errlen);

/* The bounds a runtime agent given over the control socket must keep, on top of
 * agent_edit_add's checks: no range that is the whole space (0.0.0.0/0, ::/0), and unless force,
 * no range overlapping a config agent's (the more specific one would take its clients over).
 * 0, or MOAT_EINVAL with the range and the reason in err. Agents restored from the store are
 * not asked again: they were checked when added. */
int agent_edit_bounds(const struct policy *cur, const struct agent_spec *spec, bool force,
                      char *err, size_t errlen);

/* cur without the runtime agent name. Refused for an unknown name and a config agent. */
int agent_edit_del(struct policy *cur, const char *name, struct policy **out, char *err,
                   size_t errlen);

/* The runtime agents of old on top of base, a snapshot just loaded (a reload). Refused when
 * one of them now has a config agent's name or range: the reload then fails and old stays. */
int agent_edit_rebase(struct policy *base, struct policy *old, struct policy **out, char *err,
                      size_t errlen);

/* cur with the runtime decisions of agent name (moatctl allow / deny) replaced by allow and
 * deny (either may be NULL; both are handed over, also on failure). Every other agent keeps its
 * own. Refused (MOAT_EINVAL) for an unknown name. Ownership: *out has one reference. */
int agent_edit_decided(struct policy *cur, const char *name, struct policy_set *allow,
                       struct policy_set *deny, struct policy **out, char *err, size_t errlen);

/* True when some agent of p has runtime decisions (a reload must carry them: rebase). */
bool agent_edit_has_decided(const struct policy *p);

/* The runtime agent named name in p, or NULL. */
const struct policy_agent *agent_edit_find(const struct policy *p, const char *name);

#endif
