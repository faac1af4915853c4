/* policy_load.c builds a policy snapshot from a validated config: it reads every allowlist,
 * the high-risk names and the blocked answer ranges. Nothing here runs per query. A file that is
 * listed by several agents is read once per agent: simple, and only start-up pays for it. */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/addrguard.h"
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

/* Whether a lies where no kernel delivers to the local host and moat-fw always drops: 240.0.0.0/4
 * but the limited broadcast address, or the discard-only prefix 100::/64. */
static bool sinkhole_safe(const uint8_t *a, size_t len)
{
	static const uint8_t discard[8] = {0x01, 0x00};
	if (len == 4)
		return (a[0] & 0xf0) == 240 &&
		       !(a[0] == 255 && a[1] == 255 && a[2] == 255 && a[3] == 255);
	return memcmp(a, discard, sizeof(discard)) == 0;
}

/* A configured sinkhole address. 0.0.0.0 and :: are taken with a warning: Linux connects them
 * to the client's own loopback, so a client following the answer reaches its own 127.0.0.1 and
 * ::1 services. Other addresses inside the blocked ranges (moatd's own among them) are refused:
 * answers would point clients at what moat keeps them from. */
static int sinkhole_check(const struct config *cfg, const struct config_agent *ca, struct policy *p,
                          char *err, size_t errlen)
{
	static const uint8_t zero[16];
	char where[300], txt[64];
	const uint8_t *addrs[2] = {ca->sink4, ca->sink6};
	size_t lens[2] = {4, 16};
	if (!ca->sink_line)
		return 0;
	for (int i = 0; i < 2; i++) {
		addrguard_format(addrs[i], lens[i], txt, sizeof(txt));
		if (!memcmp(addrs[i], zero, lens[i])) {
			policy_lint_add(
			    p->lint, cfg->where.file ? cfg->where.file : "sinkhole",
			    (uint32_t)ca->sink_line,
			    "sinkhole %s (agent %s) reaches the client's own loopback (Linux "
			    "connects %s to 127.0.0.1 or ::1, and no firewall hook sees it): "
			    "leave sinkhole: out for 240.0.0.1 and 100::1, which reach nothing",
			    txt, ca->name, txt);
			continue;
		}
		enum addr_class cls = addrguard_check(p->guard, addrs[i], lens[i]);
		const char *self = addrguard_label(p->guard, addrs[i], lens[i]);
		if (!self && (sinkhole_safe(addrs[i], lens[i]) || cls == ADDR_OK ||
		              (cls == ADDR_PRIVATE && ca->allow_private)))
			continue;
		config_where_text(cfg, ca->sink_line, "sinkhole", where, sizeof(where));
		snprintf(err, errlen,
		         "%s: sinkhole: %s (agent %s) is inside the blocked ranges (%s): answers "
		         "would point clients at what moat keeps them from",
		         where, txt, ca->name,
		         self                 ? self
		         : cls == ADDR_ALWAYS ? "always denied"
		                              : "private");
		return MOAT_EINVAL;
	}
	return 0;
}

/* One address of moatd itself into the guard, labelled: an answer giving it to a client (or a
 * form that embeds it) is refused like an internal address. A wildcard adds nothing (0.0.0.0 and ::
 * are refused anyway; the host's own addresses are moat-fw's to refuse). */
static int self_add(struct addrguard *g, const struct sockaddr_storage *ss, const char *label)
{
	static const uint8_t zero[16];
	const uint8_t *a = ss->ss_family == AF_INET
	                       ? (const uint8_t *)&((const struct sockaddr_in *)ss)->sin_addr
	                       : (const uint8_t *)&((const struct sockaddr_in6 *)ss)->sin6_addr;
	size_t len = ss->ss_family == AF_INET ? 4 : 16;
	if ((ss->ss_family != AF_INET && ss->ss_family != AF_INET6) || !memcmp(a, zero, len))
		return 0;
	return addrguard_add_host(g, a, len, label);
}

static int self_add_zones(struct addrguard *g, const struct config_forward *f, size_t n)
{
	int rc = 0;
	for (size_t i = 0; i < n && !rc; i++)
		for (size_t k = 0; k < f[i].nupstreams && !rc; k++)
			rc = self_add(g, &f[i].upstreams[k], "moatd's own forward-zone upstream");
	return rc;
}

/* moatd's own addresses: where it listens, its upstreams (global and forward zones), the source
 * of its upstream queries and its metrics endpoint. A sandbox given one of them (a hostile
 * upstream answering a name with it) would reach moatd's other services or the upstream itself
 * (DNS past moat). */
static int self_load(const struct config *cfg, struct addrguard *g)
{
	int rc = 0;
	for (size_t i = 0; i < cfg->nlisten && !rc; i++)
		rc = self_add(g, &cfg->listen[i], "moatd's own listen address");
	for (size_t i = 0; i < cfg->nupstreams && !rc; i++)
		rc = self_add(g, &cfg->upstreams[i], "moatd's own upstream");
	if (!rc && cfg->has_upstream_source)
		rc = self_add(g, &cfg->upstream_source, "moatd's own upstream source");
	if (!rc && cfg->has_metrics)
		rc = self_add(g, &cfg->metrics_addr, "moatd's own metrics address");
	if (!rc)
		rc = self_add_zones(g, cfg->forwards, cfg->nforwards);
	for (size_t i = 0; i < cfg->nagents && !rc; i++)
		rc = self_add_zones(g, cfg->agents[i].forwards, cfg->agents[i].nforwards);
	return rc;
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

/* The errors --check collects (cfg->check_max_errors): every bad line of every file, one per
 * line in the report, at most max of them (then how many more). */
struct load_errs {
	char *out;
	size_t cap, len;
	unsigned n, max;
};

static void errs_add(void *ctx, const char *msg)
{
	struct load_errs *e = ctx;
	if (e->n++ >= e->max || e->len + 1 >= e->cap)
		return;
	int k = snprintf(e->out + e->len, e->cap - e->len, "%s%s", e->len ? "\n" : "", msg);
	if (k > 0)
		e->len = (size_t)k >= e->cap - e->len ? e->cap - 1 : e->len + (size_t)k;
}

/* A file-level error (rc): collected and passed over when --check collects, else kept. */
static int errs_keep(struct load_errs *e, int rc, const char *err)
{
	if (!rc || !e || rc == MOAT_ENOMEM)
		return rc;
	errs_add(e, err);
	return 0;
}

static int policy_load_all(const struct config *cfg, struct load_errs *errs, struct policy **out,
                           char *err, size_t errlen);

/* One agent of the config into a: its own copy of the client ranges, its forward zones and its
 * allowlists (linted into lint as they load). On error err says why (an allocation failure as
 * "policy: out of memory"); what a holds is freed with the snapshot. */
static int agent_load(const struct config *cfg, const struct config_agent *ca,
                      struct policy_agent *a, struct policy_lint *lint, struct load_errs *errs,
                      char *err, size_t errlen)
{
	a->cfg = *ca;
	a->cfg.clients = NULL;
	a->cfg.allow_files = NULL;
	a->cfg.nallow = 0;
	a->cfg.client_lines = a->cfg.allow_lines = NULL;
	a->cfg.forwards = NULL;
	a->cfg.nforwards = 0;
	if (forward_table_build(&a->fwd, ca->forwards, ca->nforwards, cfg) ||
	    !(a->clients = malloc((ca->nclients ? ca->nclients : 1) * sizeof(*a->clients))))
		goto oom;
	memcpy(a->clients, ca->clients, ca->nclients * sizeof(*a->clients));
	a->nclients = ca->nclients;
	if (!(a->allow = policy_set_new()))
		goto oom;
	policy_set_lint_to(a->allow, lint);
	if (errs)
		policy_set_on_error(a->allow, errs_add, errs);
	for (size_t k = 0; k < ca->nallow; k++) {
		policy_lint_file(lint, ca->allow_files[k]);
		int rc = policy_source_load(cfg, a->allow, ca->allow_files[k], false, err, errlen);
		if (rc)
			listed_at(cfg, ca, k, rc, err, errlen);
		if ((rc = errs_keep(errs, rc, err)))
			return rc;
	}
	policy_set_on_error(a->allow, NULL, NULL);
	policy_set_lint_to(a->allow, NULL);
	return 0;
oom:
	snprintf(err, errlen, "policy: %s", moat_strerror(MOAT_ENOMEM));
	return MOAT_ENOMEM;
}

int policy_load(const struct config *cfg, struct policy **out, char *err, size_t errlen)
{
	struct load_errs collect = {err, errlen, 0, 0, cfg->check_max_errors};
	if (errlen)
		err[0] = 0;
	int rc = policy_load_all(cfg, collect.max > 1 ? &collect : NULL, out, err, errlen);
	if (rc || !collect.n)
		return rc;
	if (collect.n > collect.max && collect.len + 1 < errlen)
		snprintf(err + collect.len, errlen - collect.len, "\n... and %u more error(s)",
		         collect.n - collect.max);
	policy_unref(*out);
	*out = NULL;
	return MOAT_EINVAL;
}

/* policy_load; with errs, bad lines and files are collected there and loading goes on. */
static int policy_load_all(const struct config *cfg, struct load_errs *errs, struct policy **out,
                           char *err, size_t errlen)
{
	char ebuf[512] = "";
	if (errs) { /* err collects; each error is written here first */
		err = ebuf;
		errlen = sizeof(ebuf);
	}
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
		if ((rc = agent_load(cfg, &cfg->agents[i], &p->agents[i], p->lint, errs, err,
		                     errlen)))
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
	if (self_load(cfg, p->guard))
		goto fail_msg;
	for (size_t i = 0; i < cfg->nagents; i++)
		if ((rc = sinkhole_check(cfg, &cfg->agents[i], p, err, errlen)))
			goto fail;
	if ((rc = local_load(cfg, p, err, errlen)))
		goto fail;
	p->nconfig = p->nagents;
	if (policy_clients_build(p))
		goto fail_msg;
	if ((rc = policy_rpz_load(cfg, p, err, errlen)))
		goto fail;
	*out = p;
	return 0;
fail_msg:
	rc = MOAT_ENOMEM; /* every jump here is an allocation that failed */
	snprintf(err, errlen, "policy: %s", moat_strerror(rc));
fail:
	if (errs) /* the error that stopped the load, after those collected before it */
		errs_add(errs, ebuf);
	if (p)
		policy_unref(p);
	return rc;
}
