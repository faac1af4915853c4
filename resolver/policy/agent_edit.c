/* agent_edit.c owns the runtime edits of a policy snapshot (moat/agent_edit.h): checking an
 * agent given over the control socket (or read back from the state store) with the loaders'
 * own rules, and assembling the snapshot that adds it, drops one, or carries the runtime agents
 * over a reload. Nothing here reads a file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/agent_edit.h"
#include "moat/err.h"
#include "moat/policy_clients.h"
#include "moat/policy_lint.h"
#include "moat/rpz.h"
#include "moat/strv.h"

void agent_spec_clear(struct agent_spec *spec)
{
	strv_free(&spec->patterns, &spec->npatterns);
}

static int refuse(char *err, size_t errlen, const char *fmt, const char *a, const char *b)
{
	snprintf(err, errlen, fmt, a, b);
	return MOAT_EINVAL;
}

static const struct policy_agent *by_name(const struct policy *p, const char *name, size_t from)
{
	for (size_t i = from; i < p->nagents; i++)
		if (!strcmp(p->agents[i].cfg.name, name))
			return &p->agents[i];
	return NULL;
}

const struct policy_agent *agent_edit_find(const struct policy *p, const char *name)
{
	return by_name(p, name, p->nconfig);
}

static struct policy_set *ref_or_null(struct policy_set *s)
{
	return s ? policy_set_ref(s) : NULL;
}

/* The runtime decisions (moatctl allow / deny) of o onto a, with references of a's own. */
static void carry_from(struct policy_agent *a, const struct policy_agent *o)
{
	a->decided_allow = o ? ref_or_null(o->decided_allow) : NULL;
	a->decided_deny = o ? ref_or_null(o->decided_deny) : NULL;
}

/* Config agent i of a new snapshot takes the decisions of the agent of that name in old: they
 * outlive an edit and a reload that keeps the agent. Old's agent i is looked at first (an edit
 * keeps the order); the search by name only when it differs (a reload), and none at all when
 * old holds no decision (the common case: an edit then costs what it did). */
static void carry_decided(struct policy_agent *a, size_t i, const struct policy *old, bool any)
{
	const struct policy_agent *o = NULL;
	if (any && i < old->nagents && !strcmp(old->agents[i].cfg.name, a->cfg.name))
		o = &old->agents[i];
	else if (any)
		o = by_name(old, a->cfg.name, 0);
	carry_from(a, o);
}

/* A runtime agent copied for a new snapshot: its own ranges, its set shared. */
static int agent_copy(const struct policy_agent *from, struct policy_agent *to)
{
	*to = *from;
	memset(&to->fwd, 0, sizeof(to->fwd)); /* runtime agents have no forward zones */
	if (!(to->clients = malloc(from->nclients * sizeof(*to->clients))))
		return MOAT_ENOMEM;
	memcpy(to->clients, from->clients, from->nclients * sizeof(*to->clients));
	policy_set_ref(to->allow);
	return 0;
}

/* The RPZ zones of p (policy_rpz.c): a reference to each of src's, the high-risk indices
 * borrowed from the loaded snapshot. */
static int carry_rpz(struct policy *p, const struct policy *src, const struct policy *base)
{
	p->highrisk_rpz = base->highrisk_rpz;
	p->nhighrisk_rpz = base->nhighrisk_rpz;
	if (!src->nrpz)
		return 0;
	if (!(p->rpz = malloc(src->nrpz * sizeof(*p->rpz))))
		return MOAT_ENOMEM;
	for (; p->nrpz < src->nrpz; p->nrpz++)
		p->rpz[p->nrpz] = rpz_data_ref(src->rpz[p->nrpz]);
	return 0;
}

/* base's shared parts and config agents, old's runtime agents but skip, then extra (owned,
 * handed over even on failure). The RPZ zones are old's when old is an edit of the same load
 * (they may be newer than base's: an IXFR), else base's (a reload: rpz_feed_adopt fills them). */
static int assemble(struct policy *base, const struct policy *old, const char *skip,
                    struct policy_agent *extra, struct policy **out)
{
	if (base->base)
		base = base->base;
	size_t nrt = old ? old->nagents - old->nconfig : 0;
	struct policy *p = calloc(1, sizeof(*p));
	size_t cap = base->nagents + nrt + 1;
	if (!p || !(p->agents = calloc(cap, sizeof(*p->agents)))) {
		free(p);
		goto nomem;
	}
	p->refs = 1;
	p->base = policy_ref(base);
	p->highrisk = base->highrisk;
	p->guard = base->guard;
	p->lint = base->lint;
	p->lint_skipped = base->lint_skipped;
	p->fwd = base->fwd;
	p->local = base->local;
	memcpy(p->agents, base->agents, base->nagents * sizeof(*p->agents));
	p->nagents = p->nconfig = base->nagents;
	bool any = old && agent_edit_has_decided(old);
	for (size_t i = 0; i < p->nagents; i++)
		carry_decided(&p->agents[i], i, old, any);
	const struct policy *zsrc = old && (old->base ? old->base : old) == base ? old : base;
	if (carry_rpz(p, zsrc, base)) {
		policy_unref(p);
		goto nomem;
	}
	for (size_t i = 0; i < nrt; i++) {
		const struct policy_agent *a = &old->agents[old->nconfig + i];
		if (skip && !strcmp(a->cfg.name, skip))
			continue;
		if (agent_copy(a, &p->agents[p->nagents])) {
			policy_unref(p);
			goto nomem;
		}
		carry_from(&p->agents[p->nagents], a); /* the same agent: its own decisions */
		p->nagents++;
	}
	if (extra) {
		p->agents[p->nagents++] = *extra;
		extra = NULL;
	}
	if (policy_clients_build(p)) {
		policy_unref(p);
		return MOAT_ENOMEM;
	}
	*out = p;
	return 0;
nomem:
	if (extra) {
		free(extra->clients);
		policy_set_free(extra->allow);
	}
	return MOAT_ENOMEM;
}

/* A name and ranges p has no agent for yet. */
static int check_new(const struct policy *p, const char *name, const struct cidr *c, size_t n,
                     char *err, size_t errlen)
{
	char r[64];
	const struct policy_agent *a = by_name(p, name, 0);
	if (a && !a->runtime)
		return refuse(err, errlen, "agent '%s' is from the config file and read-only%s",
		              name, "");
	if (a)
		return refuse(err, errlen,
		              "agent '%s' exists already%s (moatctl agent del it first)", name, "");
	for (size_t i = 0; i < n; i++) {
		netaddr_cidr_text(&c[i], r, sizeof(r));
		for (size_t k = 0; k < i; k++)
			if (c[k].bits == c[i].bits && !memcmp(c[k].addr, c[i].addr, 16))
				return refuse(err, errlen, "client range %s is listed twice%s", r,
				              "");
		if ((a = policy_clients_exact(p, &c[i])))
			return refuse(
			    err, errlen,
			    "client range %s is agent '%s''s already (two agents with one "
			    "range: the second would never be reached)",
			    r, a->cfg.name);
	}
	return 0;
}

/* The agent of spec, checked against cur; its patterns parsed like an allowlist file. */
static int agent_build(const struct policy *cur, const struct agent_spec *spec,
                       struct policy_agent *a, char *warn, size_t warnlen, char *err, size_t errlen)
{
	char label[CONFIG_NAME_MAX + 16];
	if (!config_name_ok(spec->name, strlen(spec->name)))
		return refuse(err, errlen,
		              "bad agent name '%.64s' (1 to 63 of A-Z a-z 0-9 _ . -)%s", spec->name,
		              "");
	if (!spec->nclients || spec->nclients > AGENT_CLIENTS_MAX)
		return refuse(err, errlen, "agent '%s': 1 to 64 client ranges%s", spec->name, "");
	if ((unsigned)spec->deny > DENY_SINKHOLE)
		return refuse(err, errlen, "agent '%s': bad deny form%s", spec->name, "");
	if ((unsigned)spec->mode > AGENT_AUDIT)
		return refuse(err, errlen, "agent '%s': bad mode%s", spec->name, "");
	int rc = check_new(cur, spec->name, spec->clients, spec->nclients, err, errlen);
	if (rc)
		return rc;
	memset(a, 0, sizeof(*a));
	config_agent_init(&a->cfg); /* the config's defaults: sinkhole addresses, TTL */
	snprintf(a->cfg.name, sizeof(a->cfg.name), "%s", spec->name);
	a->cfg.deny = spec->deny;
	a->cfg.mode = spec->mode;
	a->runtime = true;
	a->nclients = spec->nclients;
	struct policy_lint *lint = policy_lint_new();
	if (!lint || !(a->clients = malloc(spec->nclients * sizeof(*a->clients))) ||
	    !(a->allow = policy_set_new())) {
		policy_lint_free(lint);
		free(a->clients);
		return MOAT_ENOMEM;
	}
	memcpy(a->clients, spec->clients, spec->nclients * sizeof(*a->clients));
	snprintf(label, sizeof(label), "runtime:%s", spec->name);
	policy_set_lint_to(a->allow, lint);
	policy_lint_file(lint, label);
	rc = policy_set_load_lines(a->allow, (const char *const *)spec->patterns, spec->npatterns,
	                           label, err, errlen);
	policy_set_lint_to(a->allow, NULL);
	if (!rc)
		policy_lint_agent(lint, a->allow, cur->highrisk);
	size_t nw = policy_lint_count(lint);
	if (warn && warnlen)
		snprintf(warn, warnlen, "%s", nw ? policy_lint_get(lint, 0) : "");
	policy_lint_free(lint);
	if (rc) {
		free(a->clients);
		policy_set_free(a->allow);
	}
	return rc;
}

int agent_edit_bounds(const struct policy *cur, const struct agent_spec *spec, bool force,
                      char *err, size_t errlen)
{
	char r[64], cr[64];
	for (size_t i = 0; i < spec->nclients; i++) {
		const struct cidr *c = &spec->clients[i];
		netaddr_cidr_text(c, r, sizeof(r));
		if (netaddr_cidr_whole(c))
			return refuse(
			    err, errlen,
			    "client range %s is the whole address space: an agent serves a "
			    "sandbox's own range%s",
			    r, "");
		for (size_t k = 0; k < cur->nconfig && !force; k++) {
			const struct policy_agent *a = &cur->agents[k];
			for (size_t j = 0; j < a->nclients; j++) {
				if (!netaddr_cidr_overlap(c, &a->clients[j]))
					continue;
				netaddr_cidr_text(&a->clients[j], cr, sizeof(cr));
				snprintf(
				    err, errlen,
				    "client range %s overlaps %s of config agent '%s' (the more "
				    "specific range would take those clients over): add it with "
				    "force if that is meant",
				    r, cr, a->cfg.name);
				return MOAT_EINVAL;
			}
		}
	}
	return 0;
}

int agent_edit_add(struct policy *cur, const struct agent_spec *spec, struct policy **out,
                   char *warn, size_t warnlen, char *err, size_t errlen)
{
	struct policy_agent a;
	int rc = agent_build(cur, spec, &a, warn, warnlen, err, errlen);
	if (rc)
		return rc;
	if ((rc = assemble(cur, cur, NULL, &a, out)))
		snprintf(err, errlen, "agent '%s': %s", spec->name, moat_strerror(rc));
	return rc;
}

int agent_edit_del(struct policy *cur, const char *name, struct policy **out, char *err,
                   size_t errlen)
{
	const struct policy_agent *a = by_name(cur, name, 0);
	if (!a)
		return refuse(err, errlen, "no agent '%.64s'%s", name, "");
	if (!a->runtime)
		return refuse(err, errlen, "agent '%s' is from the config file and read-only%s",
		              name, "");
	int rc = assemble(cur, cur, name, NULL, out);
	if (rc)
		snprintf(err, errlen, "agent '%s': %s", name, moat_strerror(rc));
	return rc;
}

int agent_edit_decided(struct policy *cur, const char *name, struct policy_set *allow,
                       struct policy_set *deny, struct policy **out, char *err, size_t errlen)
{
	int rc = by_name(cur, name, 0) ? assemble(cur, cur, NULL, NULL, out) : MOAT_EINVAL;
	if (rc) {
		policy_set_free(allow);
		policy_set_free(deny);
		if (rc == MOAT_EINVAL)
			return refuse(err, errlen, "no agent '%.64s'%s", name, "");
		snprintf(err, errlen, "agent '%s': %s", name, moat_strerror(rc));
		return rc;
	}
	for (size_t i = 0; i < (*out)->nagents; i++) {
		struct policy_agent *a = &(*out)->agents[i];
		if (strcmp(a->cfg.name, name))
			continue;
		policy_set_free(a->decided_allow);
		policy_set_free(a->decided_deny);
		a->decided_allow = allow;
		a->decided_deny = deny;
	}
	return 0;
}

int agent_edit_rebase(struct policy *base, struct policy *old, struct policy **out, char *err,
                      size_t errlen)
{
	for (size_t i = old->nconfig; i < old->nagents; i++) {
		const struct policy_agent *a = &old->agents[i];
		int rc = check_new(base, a->cfg.name, a->clients, a->nclients, err, errlen);
		if (rc) {
			char why[400];
			snprintf(why, sizeof(why), "%s", err);
			snprintf(err, errlen, "runtime agent '%s' clashes with the config: %s",
			         a->cfg.name, why);
			return rc;
		}
	}
	return assemble(base, old, NULL, NULL, out);
}

bool agent_edit_has_decided(const struct policy *p)
{
	for (size_t i = 0; i < p->nagents; i++)
		if (p->agents[i].decided_allow || p->agents[i].decided_deny)
			return true;
	return false;
}
