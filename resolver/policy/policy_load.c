/* policy_load.c builds a policy snapshot from a validated config: it reads every allowlist,
 * the high-risk names and the blocked answer ranges. Nothing here runs per query. A file that is
 * listed by several agents is read once per agent: simple, and only start-up pays for it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/addrguard.h"
#include "moat/budget_share.h"
#include "moat/err.h"
#include "moat/local.h"
#include "moat/policy.h"
#include "moat/policy_file.h"
#include "moat/policy_clients.h"
#include "moat/policy_lint.h"

/* An allowlist that cannot be opened: say where the config names it. */
static void listed_at(const struct config *cfg, const struct config_agent *ca, size_t k, int rc,
                      char *err, size_t errlen)
{
	char where[300], msg[512];
	if (rc != MOAT_EIO || !ca->allow_lines || !cfg->where.file)
		return;
	config_where_text(cfg, ca->allow_lines[k], "--allow", where, sizeof(where));
	snprintf(msg, sizeof(msg), "%s: allow: %s (agent %s)", where, err, ca->name);
	snprintf(err, errlen, "%s", msg);
}

/* A configured sinkhole address inside the blocked ranges: the answer would send clients to
 * the very addresses moat keeps them from (0.0.0.0 and ::, the defaults, are what moat-fw
 * always drops, so they are fine). */
static int sinkhole_check(const struct config *cfg, const struct config_agent *ca,
                          const struct addrguard *g, char *err, size_t errlen)
{
	static const uint8_t zero[16];
	char where[300], txt[64];
	const uint8_t *addrs[2] = {ca->sink4, ca->sink6};
	size_t lens[2] = {4, 16};
	if (!ca->sink_line)
		return 0;
	for (int i = 0; i < 2; i++) {
		enum addr_class cls = addrguard_check(g, addrs[i], lens[i]);
		if (!memcmp(addrs[i], zero, lens[i]) || cls == ADDR_OK ||
		    (cls == ADDR_PRIVATE && ca->allow_private))
			continue;
		config_where_text(cfg, ca->sink_line, "sinkhole", where, sizeof(where));
		snprintf(err, errlen,
		         "%s: sinkhole: %s (agent %s) is inside the blocked ranges (%s): answers "
		         "would point clients at what moat keeps them from",
		         where, addrguard_format(addrs[i], lens[i], txt, sizeof(txt)), ca->name,
		         cls == ADDR_ALWAYS ? "always denied" : "private");
		return MOAT_EINVAL;
	}
	return 0;
}

/* local_data lines and hosts files, named by the config lines that list them. */
static int local_load(const struct config *cfg, struct policy *p, char *err, size_t errlen)
{
	char where[300];
	int rc;
	if (!cfg->nlocal && !cfg->nhosts)
		return 0;
	if (!(p->local = local_data_new())) {
		snprintf(err, errlen, "policy: out of memory");
		return MOAT_ENOMEM;
	}
	for (size_t i = 0; i < cfg->nlocal; i++)
		if ((rc = local_data_add(p->local, cfg->local_data[i],
		                         cfg->where.file ? cfg->where.file : "local_data",
		                         cfg->local_lines ? cfg->local_lines[i] : 0, err, errlen)))
			return rc;
	for (size_t i = 0; i < cfg->nhosts; i++)
		if ((rc = local_data_load_hosts(p->local, cfg->hosts_files[i], err, errlen))) {
			if (rc == MOAT_EIO) {
				char msg[512];
				config_where_text(cfg, cfg->hosts_lines ? cfg->hosts_lines[i] : 0,
				                  "hosts", where, sizeof(where));
				snprintf(msg, sizeof(msg), "%s: hosts: %s", where, err);
				snprintf(err, errlen, "%s", msg);
			}
			return rc;
		}
	return local_data_finish(p->local, p->guard, p->lint);
}

/* One agent of the config into a: its own copy of the client ranges, its forward zones and its
 * allowlists (linted into lint as they load). On error err says why (an allocation failure as
 * "policy: out of memory"); what a holds is freed with the snapshot. */
static int agent_load(const struct config *cfg, const struct config_agent *ca,
                      struct policy_agent *a, struct policy_lint *lint, char *err, size_t errlen)
{
	a->cfg = *ca;
	a->cfg.clients = NULL;
	a->cfg.allow_files = NULL;
	a->cfg.nallow = 0;
	a->cfg.client_lines = a->cfg.allow_lines = NULL;
	a->cfg.forwards = NULL;
	a->cfg.nforwards = 0;
	a->cfg.budget.zones = NULL; /* its own copy (moat/config.h), freed with the snapshot */
	if (ca->budget.nzones &&
	    !(a->cfg.budget.zones = malloc(ca->budget.nzones * sizeof(*ca->budget.zones))))
		goto oom;
	if (ca->budget.nzones)
		memcpy(a->cfg.budget.zones, ca->budget.zones,
		       ca->budget.nzones * sizeof(*ca->budget.zones));
	if (forward_table_build(&a->fwd, ca->forwards, ca->nforwards, cfg) ||
	    !(a->clients = malloc((ca->nclients ? ca->nclients : 1) * sizeof(*a->clients))))
		goto oom;
	memcpy(a->clients, ca->clients, ca->nclients * sizeof(*a->clients));
	a->nclients = ca->nclients;
	if (!(a->allow = policy_set_new()))
		goto oom;
	policy_set_lint_to(a->allow, lint);
	for (size_t k = 0; k < ca->nallow; k++) {
		policy_lint_file(lint, ca->allow_files[k]);
		int rc = policy_source_load(cfg, a->allow, ca->allow_files[k], false, err, errlen);
		if (rc) {
			listed_at(cfg, ca, k, rc, err, errlen);
			return rc;
		}
	}
	policy_set_lint_to(a->allow, NULL);
	return 0;
oom:
	snprintf(err, errlen, "policy: %s", moat_strerror(MOAT_ENOMEM));
	return MOAT_ENOMEM;
}

int policy_load(const struct config *cfg, struct policy **out, char *err, size_t errlen)
{
	int rc = MOAT_ENOMEM;
	struct policy *p = calloc(1, sizeof(*p));
	if (!p)
		goto fail_msg;
	p->refs = 1;
	if (!(p->lint = policy_lint_new()))
		goto fail_msg;
	if (!(p->agents = calloc(cfg->nagents ? cfg->nagents : 1, sizeof(*p->agents))))
		goto fail_msg;
	for (size_t i = 0; i < cfg->nagents; i++) {
		p->nagents = i + 1;
		if ((rc = agent_load(cfg, &cfg->agents[i], &p->agents[i], p->lint, err, errlen)))
			goto fail;
	}
	if (forward_table_build(&p->fwd, cfg->forwards, cfg->nforwards, cfg))
		goto fail_msg;
	if (!(p->highrisk = policy_set_new()))
		goto fail_msg;
	policy_set_forbid_ports(p->highrisk);
	for (size_t k = 0; k < cfg->nhighrisk; k++)
		if ((rc = policy_source_load(cfg, p->highrisk, cfg->highrisk_files[k], true, err,
		                             errlen)))
			goto fail;
	size_t total = 0;
	for (size_t i = 0; i < p->nagents; i++)
		total += policy_set_count(p->agents[i].allow);
	for (size_t i = 0;
	     i < p->nagents && (!cfg->lint_max_patterns || total <= cfg->lint_max_patterns); i++)
		policy_lint_agent(p->lint, p->agents[i].allow, p->highrisk);
	p->lint_skipped = cfg->lint_max_patterns && total > cfg->lint_max_patterns;
	if (!(p->guard = addrguard_new()))
		goto fail_msg;
	for (size_t k = 0; k < cfg->nranges; k++)
		if ((rc = addrguard_load_file(p->guard, cfg->range_files[k], err, errlen)))
			goto fail;
	for (size_t i = 0; i < cfg->nagents; i++)
		if ((rc = sinkhole_check(cfg, &cfg->agents[i], p->guard, err, errlen)))
			goto fail;
	if ((rc = local_load(cfg, p, err, errlen)))
		goto fail;
	p->nconfig = p->nagents;
	if (policy_clients_build(p))
		goto fail_msg;
	if ((rc = policy_rpz_load(cfg, p, err, errlen)))
		goto fail;
	if (budget_share_attach(p))
		goto fail_msg;
	*out = p;
	return 0;
fail_msg:
	rc = MOAT_ENOMEM; /* every jump here is an allocation that failed */
	snprintf(err, errlen, "policy: %s", moat_strerror(rc));
fail:
	if (p)
		policy_unref(p);
	return rc;
}
