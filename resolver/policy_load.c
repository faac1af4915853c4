/* policy_load.c builds a policy snapshot from a validated config: it reads every allowlist,
 * the high-risk names and the blocked answer ranges. Nothing here runs per query. A file that is
 * listed by several agents is read once per agent: simple, and only start-up pays for it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/addrguard.h"
#include "moat/err.h"
#include "moat/policy.h"

int policy_load(const struct config *cfg, struct policy **out, char *err, size_t errlen)
{
	int rc = MOAT_ENOMEM;
	struct policy *p = calloc(1, sizeof(*p));
	if (!p)
		goto fail_msg;
	p->refs = 1;
	if (!(p->agents = calloc(cfg->nagents ? cfg->nagents : 1, sizeof(*p->agents))))
		goto fail_msg;
	for (size_t i = 0; i < cfg->nagents; i++) {
		const struct config_agent *ca = &cfg->agents[i];
		struct policy_agent *a = &p->agents[i];
		p->nagents = i + 1;
		a->cfg = *ca;
		a->cfg.clients = NULL;
		a->cfg.allow_files = NULL;
		a->cfg.nallow = 0;
		if (!(a->clients = malloc((ca->nclients ? ca->nclients : 1) * sizeof(*a->clients))))
			goto fail_msg;
		memcpy(a->clients, ca->clients, ca->nclients * sizeof(*a->clients));
		a->nclients = ca->nclients;
		if (!(a->allow = policy_set_new()))
			goto fail_msg;
		for (size_t k = 0; k < ca->nallow; k++)
			if ((rc = policy_set_load_file(a->allow, ca->allow_files[k], err, errlen)))
				goto fail;
	}
	if (!(p->highrisk = policy_set_new()))
		goto fail_msg;
	policy_set_forbid_ports(p->highrisk);
	for (size_t k = 0; k < cfg->nhighrisk; k++)
		if ((rc = policy_set_load_file(p->highrisk, cfg->highrisk_files[k], err, errlen)))
			goto fail;
	if (!(p->guard = addrguard_new()))
		goto fail_msg;
	for (size_t k = 0; k < cfg->nranges; k++)
		if ((rc = addrguard_load_file(p->guard, cfg->range_files[k], err, errlen)))
			goto fail;
	*out = p;
	return 0;
fail_msg:
	snprintf(err, errlen, "policy: %s", moat_strerror(rc));
fail:
	if (p)
		policy_unref(p);
	return rc;
}
