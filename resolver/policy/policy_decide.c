/* policy_decide.c owns the policy snapshot's lifetime and its decisions: the reference count
 * and release of a snapshot, the choice of agent by client address, and the verdict (with its
 * reason and the rule that gave it) for a question or for a name in an answer's CNAME/DNAME
 * chain. Everything here is a pure function of the snapshot and its inputs; the pattern sets it
 * asks are policy.c's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/addrguard.h"
#include "moat/budget_share.h"
#include "moat/enumtext.h"
#include "moat/iplit.h"
#include "moat/local.h"
#include "moat/name.h"
#include "moat/policy.h"
#include "moat/policy_clients.h"
#include "moat/policy_lint.h"
#include "moat/refcount.h"
#include "moat/wire.h"

size_t policy_allow_count(const struct policy *p)
{
	size_t n = 0;
	for (size_t i = 0; i < p->nagents; i++)
		n += policy_set_count(p->agents[i].allow);
	return n;
}

/* Workers share snapshots: the last one to let go frees it, on its own thread. */
static void policy_destroy(struct policy *p)
{
	policy_rpz_release(p);                    /* before the agents: it reads nagents */
	for (size_t i = 0; i < p->nagents; i++) { /* every snapshot holds its own */
		policy_set_free(p->agents[i].decided_allow);
		policy_set_free(p->agents[i].decided_deny);
	}
	budget_share_detach(p);
	for (size_t i = p->base ? p->nconfig : 0; i < p->nagents; i++) {
		free(p->agents[i].clients);
		free(p->agents[i].cfg.budget.zones);
		policy_set_free(p->agents[i].allow);
		forward_table_free(&p->agents[i].fwd);
	}
	free(p->agents);
	policy_clients_free(p->byclient);
	if (p->base) {
		policy_unref(p->base);
		free(p);
		return;
	}
	policy_lint_free(p->lint);
	forward_table_free(&p->fwd);
	local_data_free(p->local);
	policy_set_free(p->highrisk);
	addrguard_free(p->guard);
	free(p);
}

REF_PAIR(policy_ref, policy_unref, struct policy, policy_destroy)

const struct policy_agent *policy_agent_for(const struct policy *p, const struct sockaddr *client)
{
	if (p->byclient)
		return policy_clients_find(p, client);
	/* A snapshot without its index (built by hand, in tests): the same answer, linearly. */
	const struct policy_agent *best = NULL;
	int best_bits = -1;
	for (size_t i = 0; i < p->nagents; i++)
		for (size_t k = 0; k < p->agents[i].nclients; k++) {
			const struct cidr *c = &p->agents[i].clients[k];
			if (c->bits > best_bits && netaddr_cidr_contains(c, client)) {
				best = &p->agents[i];
				best_bits = c->bits;
			}
		}
	return best;
}

static bool class_blocks(enum addr_class cls, const struct policy_agent *agent)
{
	return cls == ADDR_ALWAYS || (cls == ADDR_PRIVATE && !agent->cfg.allow_private);
}

static void reason_set(struct policy_decision *out, const char *a, const char *b, int line);

enum policy_addr_verdict policy_answer_addr_check(const struct policy *p, bool allow_private,
                                                  bool passed, const uint8_t *addr, size_t len,
                                                  char *why, size_t cap)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	enum addr_class cls = addrguard_check(p->guard, addr, len);
	bool blocked = cls == ADDR_ALWAYS || (cls == ADDR_PRIVATE && !allow_private);
	bool is_mapped = passed && len == 16 && !memcmp(addr, mapped, sizeof(mapped));
	const char *self = passed && !blocked ? addrguard_label(p->guard, addr, len) : NULL;
	if (!blocked && !is_mapped && !self)
		return POLICY_ADDR_OK;
	char txt[64];
	addrguard_format(addr, len, txt, sizeof(txt));
	if (self)
		snprintf(why, cap, "moat: answer contained %s, %s", txt, self);
	else if (!blocked)
		snprintf(why, cap, "moat: answer contained %s, an IPv4-mapped address", txt);
	else
		snprintf(why, cap, "moat: answer contained %s", txt);
	return blocked ? POLICY_ADDR_REFUSED : POLICY_ADDR_REFUSED_PASSED;
}

bool policy_answer_addr_ok(const struct policy *p, bool allow_private, bool passed,
                           const uint8_t *addr, size_t len, char *why, size_t cap)
{
	return policy_answer_addr_check(p, allow_private, passed, addr, len, why, cap) ==
	       POLICY_ADDR_OK;
}

/* The checks that apply to every name moat would send upstream, in order of severity. */
static enum policy_verdict check_name(const struct policy *p, const struct policy_agent *agent,
                                      const struct policy_name *n, struct policy_decision *out)
{
	const uint8_t *lname = n->lname;
	uint8_t addr[16];
	size_t alen;
	char txt[64];

	if (iplit_is_literal(lname, addr, &alen)) {
		out->verdict = POLICY_DENY_IPLITERAL;
		out->alert = class_blocks(addrguard_check(p->guard, addr, alen), agent);
		snprintf(out->reason, sizeof(out->reason), "moat: query name is the IP literal %s",
		         addrguard_format(addr, alen, txt, sizeof(txt)));
		return out->verdict;
	}
	if (p->highrisk && policy_set_match_name(p->highrisk, n, &out->rule)) {
		out->verdict = POLICY_DENY_HIGHRISK;
		out->alert = true;
		snprintf(out->reason, sizeof(out->reason), "moat: high-risk name (%s:%u)",
		         out->rule.file, out->rule.line);
		return out->verdict;
	}
	if (p->nhighrisk_rpz && policy_rpz_highrisk(p, lname, &out->rule, &out->nodata)) {
		out->verdict = POLICY_DENY_HIGHRISK;
		out->alert = true;
		reason_set(out, "moat: high-risk name by ", out->rule.file,
		           out->rule.line ? (int)out->rule.line : -1);
		return out->verdict;
	}
	/* Every embedded address, not only the leftmost. */
	uint8_t emb[IPLIT_EMBEDDED_MAX][4];
	size_t nemb = iplit_embedded_v4_all(lname, emb, IPLIT_EMBEDDED_MAX);
	for (size_t i = 0; i < nemb; i++)
		if (class_blocks(addrguard_check(p->guard, emb[i], 4), agent)) {
			out->verdict = POLICY_DENY_EMBEDDED;
			out->alert = true;
			snprintf(out->reason, sizeof(out->reason),
			         "moat: name embeds the address %s",
			         addrguard_format(emb[i], 4, txt, sizeof(txt)));
			return out->verdict;
		}
	return POLICY_ALLOW;
}

/* reason = a + b [+ ":" line]: the reason of nearly every denied query, without printf (which
 * was ~1.5% of a denied query). Cut to fit, always terminated. */
static void reason_set(struct policy_decision *out, const char *a, const char *b, int line)
{
	size_t n = 0, cap = sizeof(out->reason) - 1;
	/* Copied whole, not byte by byte (a deny's reason is 40 bytes: 4% of its instructions). */
	size_t k = strnlen(a, cap);
	memcpy(out->reason, a, k);
	n = k;
	k = strnlen(b, cap - n);
	memcpy(out->reason + n, b, k);
	n += k;
	if (line >= 0 && n < cap) {
		char d[12];
		int k = 0;
		unsigned v = (unsigned)line;
		do
			d[k++] = (char)('0' + v % 10);
		while ((v /= 10) && k < (int)sizeof(d));
		out->reason[n++] = ':';
		while (k > 0 && n < cap)
			out->reason[n++] = d[--k];
	}
	out->reason[n] = 0;
}

const char *policy_reason(const struct policy_decision *d, char *buf, size_t cap)
{
	if (d->reason[0] || !d->rule.file || d->verdict != POLICY_ALLOW || !cap)
		return d->reason;
	snprintf(buf, cap, "allowed by %s:%u", d->rule.file, d->rule.line);
	return buf;
}

void policy_decide(const struct policy *p, const struct policy_agent *agent, const uint8_t *lname,
                   uint16_t qclass, struct policy_decision *out)
{
	memset(out, 0, sizeof(*out));
	if (qclass != WIRE_CLASS_IN) {
		out->verdict = POLICY_DENY_CLASS;
		snprintf(out->reason, sizeof(out->reason), "moat: class %u is not served", qclass);
		return;
	}
	struct policy_name n;
	if (!policy_name_of(lname, &n)) {
		/* Not a wire name (the parser lets none through): listed nowhere. */
		out->verdict = POLICY_DENY_NOT_ALLOWED;
		reason_set(out, "moat: not on allowlist of agent ", agent->cfg.name, -1);
		return;
	}
	/* The allowlist is asked last but is the large table: its slot loads during the checks. */
	policy_set_prefetch_name(agent->allow, &n);
	if (check_name(p, agent, &n, out) != POLICY_ALLOW)
		return;
	if (agent->decided_deny && policy_set_match_name(agent->decided_deny, &n, &out->rule)) {
		out->verdict = POLICY_DENY_NOT_ALLOWED;
		out->decided = true;
		reason_set(out, "moat: denied by moatctl deny for agent ", agent->cfg.name, -1);
		return;
	}
	/* An allow by a listed rule leaves the reason to the rule (policy_reason): a hit's text
	 * would be built, copied and checked again by the log, ~250 instructions of ~7500. */
	if (policy_set_match_name(agent->allow, &n, &out->rule)) {
		out->verdict = POLICY_ALLOW;
		return;
	}
	if (agent->nallow_rpz && policy_rpz_allows(p, agent, lname, &out->rule)) {
		out->verdict = POLICY_ALLOW;
		reason_set(out, "allowed by ", out->rule.file,
		           out->rule.line ? (int)out->rule.line : -1);
		return;
	}
	if (agent->decided_allow && policy_set_match_name(agent->decided_allow, &n, &out->rule)) {
		out->verdict = POLICY_ALLOW;
		return;
	}
	out->verdict = POLICY_DENY_NOT_ALLOWED;
	reason_set(out, "moat: not on allowlist of agent ", agent->cfg.name, -1);
}

enum policy_verdict policy_check_chain(const struct policy *p, const struct policy_agent *agent,
                                       const uint8_t *lname, struct policy_decision *out)
{
	memset(out, 0, sizeof(*out));
	struct policy_name n;
	if (!policy_name_of(lname, &n)) {
		out->verdict = POLICY_DENY_NOT_ALLOWED;
		snprintf(out->reason, sizeof(out->reason), "moat: chain name is not a wire name");
		return out->verdict;
	}
	if (check_name(p, agent, &n, out) != POLICY_ALLOW)
		return out->verdict;
	bool listed =
	    policy_set_match_name(agent->allow, &n, &out->rule) ||
	    (agent->nallow_rpz && policy_rpz_allows(p, agent, lname, &out->rule)) ||
	    (agent->decided_allow && policy_set_match_name(agent->decided_allow, &n, &out->rule));
	if (agent->cfg.strict_chain && !listed) {
		char txt[NAME_MAXTEXT];
		name_to_text(lname, txt, sizeof(txt));
		out->verdict = POLICY_DENY_NOT_ALLOWED;
		snprintf(out->reason, sizeof(out->reason),
		         "moat: chain name %.80s not on allowlist of agent %s (strict-chain)", txt,
		         agent->cfg.name);
		return out->verdict;
	}
	out->verdict = POLICY_ALLOW;
	return POLICY_ALLOW;
}

#define VERDICT_TEXT(v, token) [POLICY_##v] = token,
static const char *const verdict_text[] = {POLICY_VERDICT_TOKENS(VERDICT_TEXT)};

const char *policy_verdict_str(enum policy_verdict v)
{
	return ENUM_TEXT(verdict_text, v, "unknown");
}
