/* control_ask.c owns the runtime decisions of moatctl allow / deny (control_ask.h): the list of
 * every agent's decisions (a pattern, its ports, allow or deny, until when), turned into the
 * agent's two pattern sets of a new snapshot (agent_edit_decided) and handed out the way an
 * agent edit is (control_agents.c: staged, the store's batch committed before the reply, then
 * every worker), the asks they answer (ask_resolve), the expiry of temporary ones, and the kept
 * ones written to and read back from the state store. */
#include "ops/control_ask.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "moat/agent_edit.h"
#include "moat/agentstore.h"
#include "moat/ctlproto.h"
#include "moat/err.h"
#include "moat/log.h"
#include "ops/control_agents.h"
#include "serve/ask.h"

struct decision {
	char agent[CONFIG_NAME_MAX];
	char pattern[NAME_MAXTEXT + 2];
	char ports[CTLPROTO_PORTS_MAX];
	bool allow;
	time_t expires; /* 0: kept */
};

static struct decision *dv;
static size_t dn;
static uv_timer_t expiry;
static bool expiry_on;

/* The agent's decisions as the lines of its two sets (allow: "pattern ports"). */
static char **lines_of(const char *agent, bool allow, size_t *n)
{
	char **v = calloc(dn ? dn : 1, sizeof(char *));
	*n = 0;
	for (size_t i = 0; v && i < dn; i++) {
		if (strcmp(dv[i].agent, agent) || dv[i].allow != allow)
			continue;
		char t[NAME_MAXTEXT + CTLPROTO_PORTS_MAX + 4];
		snprintf(t, sizeof(t), "%s%s%s", dv[i].pattern, *dv[i].ports ? " " : "",
		         dv[i].ports);
		if (!(v[*n] = strdup(t)))
			break;
		++*n;
	}
	return v;
}

/* One of the agent's sets from its decisions; *out NULL when it has none. */
static int set_of(const char *agent, bool allow, struct policy_set **out, char *err, size_t errlen)
{
	size_t n;
	char **v = lines_of(agent, allow, &n), label[CONFIG_NAME_MAX + 24];
	int rc = v ? 0 : MOAT_ENOMEM;
	*out = NULL;
	snprintf(label, sizeof(label), "moatctl-%s:%s", allow ? "allow" : "deny", agent);
	if (!rc && n && !(*out = policy_set_new()))
		rc = MOAT_ENOMEM;
	if (!rc && n) {
		if (!allow)
			policy_set_forbid_ports(*out);
		rc = policy_set_load_lines(*out, (const char *const *)v, n, label, err, errlen);
	}
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
	if (rc) {
		policy_set_free(*out);
		*out = NULL;
		if (rc == MOAT_ENOMEM)
			snprintf(err, errlen, "out of memory");
	}
	return rc;
}

/* The agent's kept decisions as the store's text ("allow PATTERN PORTS\n..."), malloc'd. */
static char *kept_text(const char *agent)
{
	size_t cap = 64, n = 0;
	char *t = calloc(1, cap);
	for (size_t i = 0; t && i < dn; i++) {
		if (strcmp(dv[i].agent, agent) || dv[i].expires)
			continue;
		size_t need = n + sizeof(dv[i].pattern) + sizeof(dv[i].ports) + 16;
		if (need > cap) {
			char *nt = realloc(t, cap = need * 2);
			if (!nt) {
				free(t);
				return NULL;
			}
			t = nt;
		}
		n += (size_t)snprintf(t + n, cap - n, "%s %s%s%s\n", dv[i].allow ? "allow" : "deny",
		                      dv[i].pattern, *dv[i].ports ? " " : "", dv[i].ports);
	}
	return t;
}

/* Stage cur with agent's sets rebuilt from the list; with store, its kept decisions written
 * too (in the batch the commit makes durable). *np is the staged snapshot (borrowed). */
static int stage_agent(const char *agent, struct policy **np, char *err, size_t errlen)
{
	struct policy_set *allow, *deny;
	int rc = set_of(agent, true, &allow, err, errlen);
	if (!rc && (rc = set_of(agent, false, &deny, err, errlen)))
		policy_set_free(allow);
	if (rc)
		return rc;
	struct policy *out;
	if ((rc = agent_edit_decided(control_agents_current(), agent, allow, deny, &out, err,
	                             errlen)))
		return rc;
	struct agentstore *st = control_agents_store();
	char *text = st ? kept_text(agent) : NULL;
	if (st && (!text || agentstore_put_decided(st, agent, text, err, errlen) < 0)) {
		if (!text)
			snprintf(err, errlen, "out of memory");
		free(text);
		policy_unref(out);
		return MOAT_EIO;
	}
	free(text);
	control_agents_stage(out);
	*np = out;
	return 0;
}

static const struct policy_agent *agent_in(const struct policy *p, const char *name)
{
	for (size_t i = 0; i < p->nagents; i++)
		if (!strcmp(p->agents[i].cfg.name, name))
			return &p->agents[i];
	return NULL;
}

static void on_expiry(uv_timer_t *t);

/* Put r's decision in the list (replacing one of the same pattern for the agent). */
static int list_put(const struct ctl_request *r, char *err, size_t errlen)
{
	size_t i = 0;
	while (i < dn && (strcmp(dv[i].agent, r->agent) || strcmp(dv[i].pattern, r->pattern)))
		i++;
	if (i == dn) {
		struct decision *nv = realloc(dv, (dn + 1) * sizeof(*nv));
		if (!nv) {
			snprintf(err, errlen, "out of memory");
			return MOAT_ENOMEM;
		}
		dv = nv;
		dn++;
	}
	struct decision *d = &dv[i];
	memset(d, 0, sizeof(*d));
	snprintf(d->agent, sizeof(d->agent), "%s", r->agent);
	snprintf(d->pattern, sizeof(d->pattern), "%s", r->pattern);
	snprintf(d->ports, sizeof(d->ports), "%s", r->cmd == CTL_ALLOW ? r->ports : "");
	d->allow = r->cmd == CTL_ALLOW;
	d->expires = r->for_s ? time(NULL) + (time_t)r->for_s : 0;
	if (d->expires && !expiry_on) {
		uv_timer_start(&expiry, on_expiry, 1000, 1000);
		expiry_on = true;
	}
	return 0;
}

int control_ask_decide(const struct ctl_request *r, char *body, size_t cap, char *err,
                       size_t errlen)
{
	const struct policy_agent *a = agent_in(control_agents_current(), r->agent);
	if (!a) {
		snprintf(err, errlen, "no agent '%s'", r->agent);
		return MOAT_EINVAL;
	}
	if (!r->for_s && !control_agents_store()) {
		snprintf(err, errlen,
		         "no state_dir: a kept rule needs one (state_dir: or "
		         "--state-dir), or give --for DURATION");
		return MOAT_EINVAL;
	}
	struct decision *saved = dn ? malloc(dn * sizeof(*saved)) : NULL;
	size_t sn = dn;
	if (dn && !saved)
		return MOAT_ENOMEM;
	if (saved)
		memcpy(saved, dv, dn * sizeof(*saved));
	struct policy *np = NULL;
	int rc = list_put(r, err, errlen);
	if (!rc && (rc = stage_agent(r->agent, &np, err, errlen)) == 0) {
		/* Before the commit: the asks it answers leave the registry with the decision's
		 * event; their queries go on when each worker takes the snapshot. */
		const struct policy_agent *na = agent_in(np, r->agent);
		unsigned answered =
		    ask_resolve(r->agent, na->decided_allow, na->decided_deny, "moatctl");
		if ((rc = control_agents_commit(err, errlen)) == 0) {
			char q[NAME_MAXTEXT * 2], pq[CTLPROTO_PORTS_MAX * 2];
			log_json_quote(r->pattern, q, sizeof(q));
			log_json_quote(r->ports, pq, sizeof(pq));
			snprintf(body, cap,
			         "\"agent\":\"%s\",\"pattern\":%s,\"decision\":\"%s\",\"ports\":%s,"
			         "\"for_s\":%u,\"kept\":%s,\"asks_answered\":%u",
			         r->agent, q, r->cmd == CTL_ALLOW ? "allow" : "deny",
			         r->cmd == CTL_ALLOW && *r->ports ? pq : "null", r->for_s,
			         r->for_s ? "false" : "true", answered);
		}
	}
	if (rc) { /* nothing took effect: the list as it was */
		free(dv);
		dv = saved;
		dn = sn;
		saved = NULL;
	}
	free(saved);
	return rc;
}

/* Once a second while temporary rules exist: those past their time go, in one commit. */
static void on_expiry(uv_timer_t *t)
{
	time_t now = time(NULL);
	char err[300], agents[64][CONFIG_NAME_MAX];
	size_t na = 0, keep = 0;
	bool temp = false;
	for (size_t i = 0; i < dn; i++) {
		if (dv[i].expires && dv[i].expires <= now) {
			bool seen = false;
			for (size_t k = 0; k < na && !seen; k++)
				seen = !strcmp(agents[k], dv[i].agent);
			if (!seen && na < 64)
				snprintf(agents[na++], sizeof(agents[0]), "%s", dv[i].agent);
			continue;
		}
		temp |= dv[i].expires != 0;
		dv[keep++] = dv[i];
	}
	dn = keep;
	struct policy *np;
	for (size_t k = 0; k < na; k++)
		if (stage_agent(agents[k], &np, err, sizeof(err)) < 0)
			fprintf(stderr, "moatd: expiring the rules of agent %s: %s\n", agents[k],
			        err);
	if (na && control_agents_commit(err, sizeof(err)) < 0)
		fprintf(stderr, "moatd: expiring temporary rules: %s\n", err);
	if (!temp) {
		uv_timer_stop(t);
		expiry_on = false;
	}
}

void control_ask_init(uv_loop_t *loop)
{
	uv_timer_init(loop, &expiry);
}

void control_ask_stop(void)
{
	uv_close((uv_handle_t *)&expiry, NULL);
	free(dv);
	dv = NULL;
	dn = 0;
}

/* --- the kept decisions, at start ---------------------------------------------------------- */

struct restore_ctx {
	struct policy **p;
	char *err;
	size_t errlen;
	size_t n;
};

static int restore_agent(void *ctx, const char *agent, const char *text)
{
	struct restore_ctx *c = ctx;
	for (const char *l = text; *l;) {
		size_t len = strcspn(l, "\n");
		char line[NAME_MAXTEXT + CTLPROTO_PORTS_MAX + 16], verb[8], pat[NAME_MAXTEXT + 2];
		int used = 0;
		snprintf(line, sizeof(line), "%.*s", (int)len, l);
		l += len + (l[len] == '\n');
		struct ctl_request r = {0};
		if (sscanf(line, "%7s %255s %n", verb, pat, &used) < 2 ||
		    (strcmp(verb, "allow") && strcmp(verb, "deny")))
			continue;
		r.cmd = !strcmp(verb, "allow") ? CTL_ALLOW : CTL_DENY;
		snprintf(r.agent, sizeof(r.agent), "%s", agent);
		snprintf(r.pattern, sizeof(r.pattern), "%s", pat);
		snprintf(r.ports, sizeof(r.ports), "%s", line + used);
		if (list_put(&r, c->err, c->errlen) < 0)
			return MOAT_ENOMEM;
	}
	if (!agent_in(*c->p, agent)) { /* its agent is gone: its rules wait in the store */
		fprintf(stderr, "moatd: runtime rules of agent %s kept, no such agent now\n",
		        agent);
		return 0;
	}
	struct policy_set *allow, *deny;
	struct policy *np;
	int rc = set_of(agent, true, &allow, c->err, c->errlen);
	if (!rc && (rc = set_of(agent, false, &deny, c->err, c->errlen)))
		policy_set_free(allow);
	if (!rc && !(rc = agent_edit_decided(*c->p, agent, allow, deny, &np, c->err, c->errlen))) {
		policy_unref(*c->p);
		*c->p = np;
		c->n++;
	}
	return rc;
}

int control_ask_restore(struct agentstore *st, struct policy **p, char *err, size_t errlen)
{
	struct restore_ctx c = {p, err, errlen, 0};
	if (!st)
		return 0;
	int rc = agentstore_each_decided(st, restore_agent, &c, err, errlen);
	if (c.n)
		fprintf(stderr,
		        "moatd: runtime rules (moatctl allow/deny) of %zu agent(s) restored\n",
		        c.n);
	return rc;
}
