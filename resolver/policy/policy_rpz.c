/* policy_rpz.c owns the RPZ part of a policy snapshot: which configured zones it holds (files
 * read here; transferred zones start empty and are filled by rpz_xfr.c), which agents take
 * which zone as an allow source, which zones are high-risk, the cheap snapshot that replaces
 * one zone (an IXFR), and the RPZ lookups of a decision. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/agent_edit.h"
#include "moat/err.h"
#include "moat/policy_lint.h"
#include "moat/policy.h"
#include "moat/rpz.h"

static int zone_index(const struct config *cfg, const char *name, size_t *idx)
{
	for (size_t i = 0; i < cfg->nrpz; i++)
		if (!strcmp(cfg->rpz[i].name, name)) {
			*idx = i;
			return 0;
		}
	return MOAT_ENOENT;
}

/* Every reference by name: to a zone that exists, and each zone used one way only (an allow zone
 * holds passthru triggers, a high-risk zone deny triggers). kinds[i] = -1 for an unused zone. */
static int zone_kinds(const struct config *cfg, int *kinds, char *err, size_t errlen)
{
	char where[300];
	size_t z;
	for (size_t i = 0; i < cfg->nrpz; i++)
		kinds[i] = -1;
	for (size_t k = 0; k < cfg->nhighrisk_rpz; k++) {
		if (zone_index(cfg, cfg->highrisk_rpz[k], &z)) {
			config_where_text(cfg, cfg->highrisk_rpz_lines[k], "highrisk_rpz", where,
			                  sizeof(where));
			snprintf(err, errlen, "%s: highrisk_rpz: no rpz zone named '%s'", where,
			         cfg->highrisk_rpz[k]);
			return MOAT_EINVAL;
		}
		kinds[z] = RPZ_HIGHRISK;
	}
	for (size_t i = 0; i < cfg->nagents; i++)
		for (size_t k = 0; k < cfg->agents[i].nallow_rpz; k++) {
			const struct config_agent *ca = &cfg->agents[i];
			config_where_text(cfg, ca->allow_rpz_lines[k], "allow", where,
			                  sizeof(where));
			if (zone_index(cfg, ca->allow_rpz[k], &z)) {
				snprintf(err, errlen,
				         "%s: allow: no rpz zone named '%s' (agent %s)", where,
				         ca->allow_rpz[k], ca->name);
				return MOAT_EINVAL;
			}
			if (kinds[z] == RPZ_HIGHRISK) {
				snprintf(
				    err, errlen,
				    "%s: allow: rpz zone '%s' is also in highrisk_rpz: a zone is "
				    "either an allow source or a high-risk source",
				    where, ca->allow_rpz[k]);
				return MOAT_EINVAL;
			}
			kinds[z] = RPZ_ALLOW;
		}
	return 0;
}

static int load_zones(const struct config *cfg, struct policy *p, const int *kinds, char *err,
                      size_t errlen)
{
	char label[CONFIG_NAME_MAX + 8];
	for (size_t i = 0; i < cfg->nrpz; i++) {
		const struct config_rpz *z = &cfg->rpz[i];
		enum rpz_kind kind = kinds[i] < 0 ? RPZ_ALLOW : (enum rpz_kind)kinds[i];
		const uint8_t *origin = z->zone[0] ? z->zone : NULL;
		int rc = 0;
		/* With policy_pubkey set, an RPZ file loads only if its signature verifies. */
		if (z->file)
			rc =
			    rpz_load_file_signed(kind, z->file, origin,
			                         cfg->has_policy_pubkey ? cfg->policy_pubkey : NULL,
			                         z->max_triggers, &p->rpz[i], err, errlen);
		else {
			if (!z->tsig_name[0])
				policy_lint_add(
				    p->lint, cfg->where.file ? cfg->where.file : "config",
				    (uint32_t)(z->line > 0 ? z->line : 0),
				    "rpz %s: transferred without tsig: anyone on the path to "
				    "its primary can change the zone (give it a tsig key; "
				    "with policy_pubkey this is refused)",
				    z->name);
			snprintf(label, sizeof(label), "rpz:%s", z->name);
			if (!(p->rpz[i] = rpz_data_new(kind, origin, label)))
				rc = MOAT_ENOMEM;
			else
				p->rpz[i]->max_triggers = z->max_triggers;
		}
		if (rc == MOAT_ENOMEM)
			snprintf(err, errlen, "policy: %s", moat_strerror(rc));
		if (rc)
			return rc;
		p->nrpz = i + 1;
	}
	return 0;
}

int policy_rpz_load(const struct config *cfg, struct policy *p, char *err, size_t errlen)
{
	for (size_t i = 0; i < p->nagents; i++) { /* the copy must not point into cfg */
		p->agents[i].cfg.allow_rpz = NULL;
		p->agents[i].cfg.allow_rpz_lines = NULL;
		p->agents[i].cfg.nallow_rpz = 0;
	}
	if (!cfg->nrpz) /* then any reference names a missing zone (kinds is never written) */
		return zone_kinds(cfg, NULL, err, errlen);
	int *kinds = calloc(cfg->nrpz, sizeof(*kinds));
	p->rpz = calloc(cfg->nrpz, sizeof(*p->rpz));
	p->highrisk_rpz = calloc(cfg->nhighrisk_rpz + 1, sizeof(*p->highrisk_rpz));
	int rc =
	    kinds && p->rpz && p->highrisk_rpz ? zone_kinds(cfg, kinds, err, errlen) : MOAT_ENOMEM;
	if (!rc)
		rc = load_zones(cfg, p, kinds, err, errlen);
	for (size_t k = 0; !rc && k < cfg->nhighrisk_rpz; k++)
		zone_index(cfg, cfg->highrisk_rpz[k], &p->highrisk_rpz[p->nhighrisk_rpz++]);
	for (size_t i = 0; !rc && i < p->nagents; i++) {
		const struct config_agent *ca = &cfg->agents[i];
		struct policy_agent *a = &p->agents[i];
		if (!ca->nallow_rpz)
			continue;
		if (!(a->allow_rpz = calloc(ca->nallow_rpz, sizeof(*a->allow_rpz)))) {
			rc = MOAT_ENOMEM;
			break;
		}
		for (size_t k = 0; k < ca->nallow_rpz; k++)
			zone_index(cfg, ca->allow_rpz[k], &a->allow_rpz[a->nallow_rpz++]);
	}
	if (rc == MOAT_ENOMEM)
		snprintf(err, errlen, "policy: %s", moat_strerror(rc));
	free(kinds);
	return rc;
}

struct policy *policy_with_rpz(struct policy *cur, size_t idx, struct rpz_data *d)
{
	char err[64];
	struct policy *np;
	if (idx >= cur->nrpz ||
	    agent_edit_rebase(cur->base ? cur->base : cur, cur, &np, err, sizeof(err)))
		return NULL;
	/* np holds cur's zones and runtime agents: only zone idx changes. */
	rpz_data_unref(np->rpz[idx]);
	np->rpz[idx] = rpz_data_ref(d);
	return np;
}

void policy_rpz_release(struct policy *p)
{
	for (size_t i = 0; i < p->nrpz; i++)
		rpz_data_unref(p->rpz[i]);
	free(p->rpz);
	p->rpz = NULL;
	p->nrpz = 0;
	if (p->base)
		return; /* the rest belongs to the base */
	free(p->highrisk_rpz);
	p->highrisk_rpz = NULL;
	for (size_t i = 0; i < p->nagents; i++)
		free(p->agents[i].allow_rpz);
}

bool policy_rpz_allows(const struct policy *p, const struct policy_agent *agent,
                       const uint8_t *lname, struct policy_rule *rule)
{
	for (size_t k = 0; k < agent->nallow_rpz; k++)
		if (rpz_match(p->rpz[agent->allow_rpz[k]], lname, NULL, rule))
			return true;
	return false;
}

bool policy_rpz_highrisk(const struct policy *p, const uint8_t *lname, struct policy_rule *rule,
                         bool *nodata)
{
	enum rpz_action act;
	for (size_t k = 0; k < p->nhighrisk_rpz; k++)
		if (rpz_match(p->rpz[p->highrisk_rpz[k]], lname, &act, rule)) {
			*nodata = act == RPZ_NODATA;
			return true;
		}
	return false;
}

void policy_rpz_report(const struct config *cfg, const struct policy *p, FILE *out)
{
	for (size_t i = 0; i < p->nrpz && i < cfg->nrpz; i++) {
		const struct rpz_data *d = p->rpz[i];
		const char *kind = d->kind == RPZ_ALLOW ? "allow" : "high-risk";
		if (d->loaded)
			fprintf(out,
			        "moatd: rpz %s: %s zone from its file, %zu trigger(s), serial %u\n",
			        cfg->rpz[i].name, kind, rpz_count(d), d->serial);
		else
			fprintf(out,
			        "moatd: rpz %s: %s zone, transferred from its primary once moatd "
			        "runs\n",
			        cfg->rpz[i].name, kind);
	}
}
