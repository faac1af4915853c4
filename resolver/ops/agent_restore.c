/* agent_restore.c owns bringing the runtime agents back at start-up: every record of the state
 * store (agentstore.c) becomes an agent of the loaded snapshot, checked by the same rules as
 * `moatctl agent add` (agent_edit.c). A damaged store was moved aside when it was opened
 * (agentstore.c); a record that still does not decode is skipped with a warning (its clients
 * then match no agent and are refused); an agent that now clashes with the config
 * (its name or a range) stops the start with a clear error: which one wins is the operator's
 * call (moatctl agent del, or change the config), not moatd's. */
#include <stdio.h>

#include "moat/agent_edit.h"
#include "moat/agentstore.h"
#include "moat/err.h"
#include "moat/agent_restore.h"

struct restore {
	struct policy *p;
	char *err;
	size_t errlen;
	size_t n;
};

static int restore_one(void *ctx, const struct agent_spec *spec)
{
	struct restore *r = ctx;
	struct policy *np;
	char warn[300], why[400];
	int rc = agent_edit_add(r->p, spec, &np, warn, sizeof(warn), why, sizeof(why));
	if (rc) {
		snprintf(r->err, r->errlen, "state_dir: runtime agent '%s': %s", spec->name, why);
		return rc;
	}
	policy_unref(r->p);
	r->p = np;
	r->n++;
	return 0;
}

static void restore_bad(void *ctx, const char *name, const char *why)
{
	(void)ctx;
	fprintf(stderr, "moatd: state_dir: runtime agent '%s' skipped: %s\n", name, why);
}

int agent_restore(struct agentstore *st, struct policy **p, size_t *n, char *err, size_t errlen)
{
	struct restore r = {policy_ref(*p), err, errlen, 0};
	int rc = agentstore_each(st, restore_one, restore_bad, &r, err, errlen);
	if (rc) {
		policy_unref(r.p);
		return rc;
	}
	policy_unref(*p);
	*p = r.p;
	*n = r.n;
	return 0;
}
