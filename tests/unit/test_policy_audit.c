/* Unit tests for policy_audit.c: an agent in audit mode lets through only the default deny (its
 * reason kept, no rule: every port), never a deny moat makes for safety, and an enforcing agent
 * nothing; the log word follows. */
#include <criterion/criterion.h>

#include <string.h>

#include "moat/policy.h"
#include "moat/policy_audit.h"

static struct policy_decision deny(enum policy_verdict v)
{
	struct policy_decision d;
	memset(&d, 0, sizeof(d));
	d.verdict = v;
	snprintf(d.reason, sizeof(d.reason), "moat: reason %d", (int)v);
	return d;
}

Test(audit, only_the_default_deny)
{
	struct policy_agent a;
	memset(&a, 0, sizeof(a));
	a.cfg.mode = AGENT_AUDIT;
	struct policy_decision d = deny(POLICY_DENY_NOT_ALLOWED);
	struct policy_ports pp = {1, {{POLICY_PROTO_TCP, 443}}};
	d.rule.ports = &pp; /* would never be set on a default deny; must not survive */
	cr_assert(policy_audit(&a, &d));
	cr_assert_eq(d.verdict, POLICY_ALLOW);
	cr_assert(d.audit);
	cr_assert_null(d.rule.ports, "an audited name is granted every port");
	cr_assert_null(d.rule.file);
	cr_assert_str_eq(d.reason, "moat: reason 1", "enforce's reason is kept for the log");
	cr_assert_str_eq(policy_audit_word(&d, "allow-cached"), "would-deny");
	static const enum policy_verdict safety[] = {POLICY_DENY_HIGHRISK, POLICY_DENY_IPLITERAL,
	                                             POLICY_DENY_EMBEDDED, POLICY_DENY_CLASS};
	for (size_t i = 0; i < sizeof(safety) / sizeof(safety[0]); i++) {
		d = deny(safety[i]);
		d.alert = true;
		cr_assert_not(policy_audit(&a, &d), "verdict %d let through", (int)safety[i]);
		cr_assert_eq(d.verdict, safety[i]);
		cr_assert(d.alert);
		cr_assert_not(d.audit);
	}
	d = deny(POLICY_ALLOW);
	cr_assert_not(policy_audit(&a, &d), "an allow is not an audit");
	cr_assert_str_eq(policy_audit_word(&d, "allow-cached"), "allow-cached");
}

Test(audit, enforce_agents_deny)
{
	struct policy_agent a;
	memset(&a, 0, sizeof(a));
	struct policy_decision d = deny(POLICY_DENY_NOT_ALLOWED);
	cr_assert_not(policy_audit(&a, &d));
	cr_assert_eq(d.verdict, POLICY_DENY_NOT_ALLOWED);
	cr_assert_not(policy_audit(NULL, &d));
}
