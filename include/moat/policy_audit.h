/* Audit and ask modes (policy_audit.c): what an agent's mode does with a decision. A name
 * enforce mode would deny only because no allowlist allows it (POLICY_DENY_NOT_ALLOWED, the
 * question's or a strict-chain name's) is answered as the upstream answers, with its addresses
 * granted on every port, and logged as "would-deny" with the reason enforce would have given.
 * Everything denied for safety stays denied in audit mode: high-risk names (with their alert),
 * IP literals, names that embed blocked addresses, other classes, and answers holding blocked
 * addresses (those are checked after this, on the answer). Pure. */
#ifndef MOAT_POLICY_AUDIT_H
#define MOAT_POLICY_AUDIT_H

#include <stdbool.h>

#include "moat/policy.h"

/* If agent is in audit mode and d is a deny that audit lets through, turn d into an allow
 * marked d->audit (reason kept, no rule: every port) and return true; otherwise leave d as it
 * is and return false. */
bool policy_audit(const struct policy_agent *agent, struct policy_decision *d);

/* True when agent asks about d's name instead of denying it (on_unknown: ask, enforce mode):
 * a default deny, not one decided at runtime (moatctl deny) nor one made for safety. */
bool policy_ask_wanted(const struct policy_agent *agent, const struct policy_decision *d);

/* The log's decision word for an allowed query: "would-deny" for an audited one, else
 * allowed (the word the path chose: "allow", "allow-cached", ...). */
const char *policy_audit_word(const struct policy_decision *d, const char *allowed);

#endif
