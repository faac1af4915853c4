/* config_yaml_agent.c owns the lists of moatd's YAML config: agents (name, clients, allow,
 * deny form, sinkhole), forward zones, local answers and hosts files, and RPZ zones (by file
 * or transfer, with TSIG). Each entry keeps the line it came from for later checks. */
#include "config/config_yaml.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libfyaml.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "moat/err.h"
#include "moat/idn.h"
#include "moat/name.h"
#include "moat/netaddr.h"

static int config_allow_rpz(struct config_ctx *c, struct config_agent *a, struct fy_node *v,
                            int line);

static int config_sinkhole(struct config_ctx *c, struct config_agent *a, struct fy_node *v,
                           int line)
{
	struct fy_node *item;
	void *it = NULL;
	bool have4 = false, have6 = false;
	uint8_t s4[4], s6[16];
	int rc;

	rc = config_seq(c, v, line, "sinkhole");
	if (rc != 0)
		return rc;
	if (fy_node_sequence_item_count(v) < 1)
		return config_fail(c, config_node_line(v, line),
		                   "sinkhole: expected one IPv4 and/or one IPv6 address");
	while ((item = fy_node_sequence_iterate(v, &it)) != NULL) {
		char buf[INET6_ADDRSTRLEN];
		int iline = config_node_line(item, line);

		rc = config_scalar(c, item, line, "sinkhole", "an address", buf, sizeof(buf));
		if (rc != 0)
			return rc;
		if (inet_pton(AF_INET, buf, s4) == 1) {
			if (have4)
				return config_fail(c, iline,
				                   "sinkhole: more than one IPv4 address "
				                   "(expected one IPv4 and/or one IPv6)");
			have4 = true;
		} else if (inet_pton(AF_INET6, buf, s6) == 1) {
			if (have6)
				return config_fail(c, iline,
				                   "sinkhole: more than one IPv6 address "
				                   "(expected one IPv4 and/or one IPv6)");
			have6 = true;
		} else {
			char q[CONFIG_QUOTE_MAX + 8];

			config_quote(q, sizeof(q), buf, strlen(buf));
			return config_fail(c, iline, "sinkhole: bad address '%s'", q);
		}
	}
	/* A family left out keeps its default (config_sink4_default or config_sink6_default). */
	if (have4)
		memcpy(a->sink4, s4, sizeof(s4));
	if (have6)
		memcpy(a->sink6, s6, sizeof(s6));
	return 0;
}

static int config_clients(struct config_ctx *c, struct config_agent *a, struct fy_node *v, int line)
{
	struct cidr *nv;
	size_t n = 0, count;
	struct fy_node *item;
	void *it = NULL;
	int rc;

	rc = config_seq(c, v, line, "clients");
	if (rc != 0)
		return rc;
	count = (size_t)fy_node_sequence_item_count(v);
	nv = calloc(count > 0 ? count : 1, sizeof(*nv));
	if (nv == NULL) {
		moat_errf(c->err, c->errlen, "%s: out of memory", c->label);
		return MOAT_ENOMEM;
	}
	free(a->client_lines);
	a->client_lines = calloc(count > 0 ? count : 1, sizeof(int));
	while ((item = fy_node_sequence_iterate(v, &it)) != NULL && n < count) {
		char buf[INET6_ADDRSTRLEN + 8];
		char q[CONFIG_QUOTE_MAX + 8];
		struct netaddr_prefix p;
		bool host_bits;

		rc = config_scalar(c, item, line, "clients", "an address range", buf, sizeof(buf));
		if (rc != 0)
			goto fail;
		if (netaddr_parse_prefix(buf, 0, &p, &host_bits) != 0) {
			config_quote(q, sizeof(q), buf, strlen(buf));
			rc = config_fail(c, config_node_line(item, line),
			                 host_bits ? "clients: '%s' has host bits set"
			                           : "clients: bad address range '%s'",
			                 q);
			goto fail;
		}
		netaddr_prefix_to_cidr(&p, &nv[n]);
		if (a->client_lines)
			a->client_lines[n] = config_node_line(item, line);
		n++;
	}
	free(a->clients);
	a->clients = nv;
	a->nclients = n;
	return 0;
fail:
	free(nv);
	return rc;
}

/* --- forward zones and local answers ------------------------------------------------------ */

/* What config_forward_key fills: the zone being read, and whether it had its name. */
struct forward_walk {
	struct config_forward *f;
	bool zoned;
};

/* One key of a forward zone. */
static int config_forward_key(struct config_ctx *c, const char *ks, size_t klen, struct fy_node *v,
                              int kline, void *arg)
{
	struct forward_walk *w = arg;
	struct config_forward *f = w->f;
	int *lines = NULL;
	int rc = 0;

	if (config_key_is(ks, klen, "zone")) {
		char buf[IDN_MAXTEXT], conv[IDN_MAXTEXT], why[160], q[CONFIG_QUOTE_MAX + 8];
		const char *t = buf;
		if ((rc = config_scalar(c, v, kline, "zone", "a domain name", buf, sizeof(buf))) !=
		    0)
			return rc;
		int n = idn_from_user(buf, strlen(buf), conv, sizeof(conv), why, sizeof(why));
		config_quote(q, sizeof(q), buf, strlen(buf));
		if (n < 0)
			return config_fail(c, config_node_line(v, kline), "zone: '%s': %s", q, why);
		if (n > 0)
			t = conv;
		if (name_from_text(t, strlen(t), f->zone) <= 1)
			return config_fail(c, config_node_line(v, kline),
			                   "zone: '%s' is not a domain name below the root", q);
		w->zoned = true;
	} else if (config_key_is(ks, klen, "upstreams")) {
		rc = config_addrports(c, v, kline, "forward.upstreams", &f->upstreams,
		                      &f->nupstreams, &lines);
		free(lines);
	} else if (config_key_is(ks, klen, "timeout_ms")) {
		rc =
		    config_u32_as(c, v, kline, "timeout_ms", "upstream_timeout_ms", &f->timeout_ms);
	} else if (config_key_is(ks, klen, "attempts")) {
		rc = config_u32_as(c, v, kline, "attempts", "upstream_attempts", &f->attempts);
	} else if (config_key_is(ks, klen, "allow_private")) {
		rc = config_bool(c, v, kline, "allow_private", &f->allow_private);
	} else {
		return config_unknown(c, kline, ks, klen);
	}
	return rc;
}

static int config_forward_one(struct config_ctx *c, struct fy_node *m, int line,
                              struct config_forward *f)
{
	int fline = config_node_line(m, line), rc;

	if (config_is_alias(m) || m == NULL || fy_node_get_type(m) != FYNT_MAPPING)
		return config_fail(c, fline, "forward: expected {zone: NAME, upstreams: [...]}");
	if (config_dup_keys(c, m, fline) != 0)
		return MOAT_EINVAL;
	f->line = fline;
	struct forward_walk w = {f, false};
	if ((rc = config_each_pair(c, m, fline, config_forward_key, &w)) != 0)
		return rc;
	if (!w.zoned)
		return config_fail(c, fline, "forward: entry without a zone");
	if (f->nupstreams == 0)
		return config_fail(c, fline, "forward: zone without upstreams");
	return 0;
}

/* forward: at the top level or in an agent. The same zone twice in one list is an error (which
 * one would win is not obvious); the same zone in an agent and at the top is the agent's. */
int config_forwards(struct config_ctx *c, struct fy_node *v, int line, struct config_forward **outv,
                    size_t *outn)
{
	struct fy_node *item;
	void *it = NULL;
	int rc = config_seq(c, v, line, "forward");
	size_t count;

	if (rc != 0)
		return rc;
	config_forwards_free(outv, outn);
	count = (size_t)fy_node_sequence_item_count(v);
	if (count == 0)
		return 0;
	if ((*outv = calloc(count, sizeof(**outv))) == NULL)
		return config_fail(c, line, "out of memory");
	while ((item = fy_node_sequence_iterate(v, &it)) != NULL && *outn < count) {
		struct config_forward *f = &(*outv)[(*outn)++];
		if ((rc = config_forward_one(c, item, line, f)) != 0)
			return rc;
		for (size_t i = 0; i + 1 < *outn; i++)
			if (name_equal((*outv)[i].zone, f->zone))
				return config_fail(c, f->line,
				                   "forward: zone listed twice (first at "
				                   "line %d)",
				                   (*outv)[i].line);
	}
	return 0;
}

/* A list of strings with their lines (local_data lines, hosts files). */
int config_lines_list(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                      bool paths, char ***outv, int **outlines, size_t *outn)
{
	struct fy_node *item;
	void *it = NULL;
	int rc = config_seq(c, v, line, key);

	if (rc != 0)
		return rc;
	while ((item = fy_node_sequence_iterate(v, &it)) != NULL) {
		char buf[1024], *p = NULL;
		int *nl = realloc(*outlines, (*outn + 1) * sizeof(**outlines));
		if (nl == NULL)
			return config_fail(c, line, "out of memory");
		*outlines = nl;
		if (paths)
			rc = config_path(c, item, line, key, true, &p);
		else if ((rc = config_scalar(c, item, line, key, "a record", buf, sizeof(buf))) ==
		         0)
			p = strdup(buf);
		if (rc != 0)
			return rc;
		nl[*outn] = config_node_line(item, line);
		size_t n = *outn;
		rc = p ? config_strv_push(outv, &n, p) : MOAT_ENOMEM;
		free(p);
		if (rc != 0)
			return config_fail(c, line, "out of memory");
		*outn = n;
	}
	return 0;
}

/* name: valid, and unique among the agents before this one (index). */
static int config_agent_name(struct config_ctx *c, struct config_agent *a, size_t index,
                             struct fy_node *v, int kline)
{
	char buf[CONFIG_NAME_MAX + 1];
	size_t i;

	int rc = config_scalar(c, v, kline, "name", "an agent name", buf, sizeof(buf));
	if (rc != 0)
		return rc;
	if (!config_name_ok(buf, strlen(buf))) {
		char q[CONFIG_QUOTE_MAX + 8];

		config_quote(q, sizeof(q), buf, strlen(buf));
		return config_fail(c, config_node_line(v, kline),
		                   "name: bad agent name '%s' (1 to %d of "
		                   "A-Z a-z 0-9 _ . -)",
		                   q, CONFIG_NAME_MAX - 1);
	}
	/* Agent names key logs and decisions; two agents with one name would make
	 * both ambiguous. */
	for (i = 0; i < index; i++) {
		if (strcmp(c->cfg->agents[i].name, buf) == 0)
			return config_fail(c, config_node_line(v, kline),
			                   "duplicate agent name '%s'", buf);
	}
	memcpy(a->name, buf, strlen(buf) + 1);
	return 0;
}

/* What config_agent_key fills: the agent being read (index: its place in the list), and whether
 * it had its name. */
struct agent_walk {
	struct config_agent *a;
	size_t index;
	bool named;
};

/* One key of an agent. */
static int config_agent_key(struct config_ctx *c, const char *ks, size_t klen, struct fy_node *v,
                            int kline, void *arg)
{
	struct agent_walk *w = arg;
	struct config_agent *a = w->a;
	int rc = 0;

	if (config_key_is(ks, klen, "name")) {
		if ((rc = config_agent_name(c, a, w->index, v, kline)) != 0)
			return rc;
		w->named = true;
	} else if (config_key_is(ks, klen, "clients")) {
		rc = config_clients(c, a, v, kline);
	} else if (config_key_is(ks, klen, "allow")) {
		rc = config_paths(c, v, kline, "allow", &a->allow_files, &a->nallow, false,
		                  &a->allow_lines);
		if (rc == 0)
			rc = config_allow_rpz(c, a, v, kline);
	} else if (config_key_is(ks, klen, "deny")) {
		const char *s = NULL;
		size_t len = 0;

		rc = config_text(c, v, kline, "deny", "nxdomain, refused or sinkhole", &s, &len);
		if (rc != 0)
			return rc;
		if (config_deny_parse(s, len, &a->deny) != 0)
			return config_fail(c, config_node_line(v, kline),
			                   "deny: expected nxdomain, refused or sinkhole");
	} else if (config_key_is(ks, klen, "sinkhole")) {
		rc = config_sinkhole(c, a, v, kline);
		a->sink_line = config_node_line(v, kline);
	} else if (config_key_is(ks, klen, "sinkhole_ttl")) {
		rc = config_u32(c, v, kline, "sinkhole_ttl", 0, CONFIG_TTL_MAX, &a->sink_ttl);
	} else if (config_key_is(ks, klen, "strict_chain")) {
		rc = config_bool(c, v, kline, "strict_chain", &a->strict_chain);
	} else if (config_key_is(ks, klen, "allow_private")) {
		rc = config_bool(c, v, kline, "allow_private", &a->allow_private);
	} else if (config_key_is(ks, klen, "forward")) {
		rc = config_forwards(c, v, kline, &a->forwards, &a->nforwards);
	} else if (config_key_is(ks, klen, "on_unknown")) {
		const char *s = NULL;
		size_t len = 0;
		if ((rc = config_text(c, v, kline, "on_unknown", "deny or ask", &s, &len)) != 0)
			return rc;
		if (config_key_is(s, len, "ask"))
			a->on_unknown = UNKNOWN_ASK;
		else if (config_key_is(s, len, "deny"))
			a->on_unknown = UNKNOWN_DENY;
		else
			return config_fail(c, config_node_line(v, kline),
			                   "on_unknown: expected deny or ask");
	} else if (config_key_is(ks, klen, "ask_timeout_ms")) {
		rc = config_u32(c, v, kline, "ask_timeout_ms", 100, 600000, &a->ask_timeout_ms);
	} else if (config_key_is(ks, klen, "ask_max_pending")) {
		rc = config_u32(c, v, kline, "ask_max_pending", 1, 100000, &a->ask_max_pending);
	} else if (config_key_is(ks, klen, "mode")) {
		const char *s = NULL;
		size_t len = 0;
		if ((rc = config_text(c, v, kline, "mode", "enforce or audit", &s, &len)) != 0)
			return rc;
		if (config_mode_parse(s, len, &a->mode) != 0)
			return config_fail(c, config_node_line(v, kline),
			                   "mode: expected enforce or audit");
	} else {
		return config_unknown(c, kline, ks, klen);
	}
	return rc;
}

static int config_agent(struct config_ctx *c, struct config_agent *a, size_t index,
                        struct fy_node *m, int line)
{
	int aline = config_node_line(m, line);
	int rc;

	a->line = aline;
	if (config_is_alias(m))
		return config_fail(c, aline, "agents: aliases are not supported");
	if (m == NULL || fy_node_get_type(m) != FYNT_MAPPING)
		return config_fail(c, aline, "agents: each agent must be a mapping with a name");
	if (config_dup_keys(c, m, aline) != 0)
		return MOAT_EINVAL;

	struct agent_walk w = {a, index, false};
	if ((rc = config_each_pair(c, m, aline, config_agent_key, &w)) != 0)
		return rc;
	if (!w.named)
		return config_fail(c, aline, "agents: agent without a name");
	/* Checked here as well as in config_validate so the error carries a line number. */
	if (a->nclients == 0)
		return config_fail(c, aline, "agent '%s' has no clients", a->name);
	return 0;
}

int config_agents(struct config_ctx *c, struct fy_node *v, int line)
{
	struct config *cfg = c->cfg;
	struct fy_node *item;
	void *it = NULL;
	size_t count;
	int rc, first = 0;

	rc = config_seq(c, v, line, "agents");
	if (rc != 0)
		return rc;
	config_agents_free(cfg);
	count = (size_t)fy_node_sequence_item_count(v);
	if (count == 0)
		return 0;
	cfg->agents = calloc(count, sizeof(*cfg->agents));
	if (cfg->agents == NULL) {
		moat_errf(c->err, c->errlen, "%s: out of memory", c->label);
		return MOAT_ENOMEM;
	}
	while ((item = fy_node_sequence_iterate(v, &it)) != NULL && cfg->nagents < count) {
		struct config_agent *a = &cfg->agents[cfg->nagents];

		config_agent_init(a);
		/* Counted before parsing so config_free releases a half-read agent. */
		cfg->nagents++;
		rc = config_agent(c, a, cfg->nagents - 1, item, line);
		if (rc != 0 && (rc != MOAT_EINVAL || c->max_errors <= 1))
			return rc;
		first = first ? first : rc; /* --check: the next agent's errors too */
	}
	return first;
}

/* --- RPZ zones ------------------------------------------------------------------------------ */

/* Append a zone name to a list (the zones are matched by name at policy load). */
static int config_rpz_push(struct config_ctx *c, const char *name, int line, char ***v, int **lines,
                           size_t *n)
{
	int *nl = realloc(*lines, (*n + 1) * sizeof(**lines));
	if (!nl)
		return config_fail(c, line, "out of memory");
	*lines = nl;
	nl[*n] = line;
	if (config_strv_push(v, n, name) != 0)
		return config_fail(c, line, "out of memory");
	return 0;
}

/* highrisk_rpz: [NAME...] */
int config_rpz_names(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                     char ***outv, int **lines, size_t *n)
{
	struct fy_node *item;
	void *it = NULL;
	int rc = config_seq(c, v, line, key);
	while (!rc && (item = fy_node_sequence_iterate(v, &it)) != NULL) {
		char buf[CONFIG_NAME_MAX];
		int l = config_node_line(item, line);
		rc = config_scalar(c, item, line, key, "an rpz zone name", buf, sizeof(buf));
		if (!rc)
			rc = config_rpz_push(c, buf, l, outv, lines, n);
	}
	return rc;
}

/* An allow: entry "rpz:NAME" names an RPZ zone, not a file: config_paths made it a path, which
 * is taken back out of the agent's files here (the list is walked in the same order). */
static int config_allow_rpz(struct config_ctx *c, struct config_agent *a, struct fy_node *v,
                            int line)
{
	struct fy_node *item;
	void *it = NULL;
	size_t k = 0, keep = 0;
	while ((item = fy_node_sequence_iterate(v, &it)) != NULL && k < a->nallow) {
		size_t len = 0;
		const char *s = fy_node_get_scalar(item, &len);
		if (s && len > 4 && !memcmp(s, "rpz:", 4)) {
			char name[CONFIG_NAME_MAX];
			int l = config_node_line(item, line);
			if (len - 4 >= sizeof(name) || !config_name_ok(s + 4, len - 4))
				return config_fail(c, l, "allow: bad rpz zone name");
			memcpy(name, s + 4, len - 4);
			name[len - 4] = 0;
			free(a->allow_files[k++]);
			if (config_rpz_push(c, name, l, &a->allow_rpz, &a->allow_rpz_lines,
			                    &a->nallow_rpz))
				return MOAT_EINVAL;
			continue;
		}
		if (a->allow_lines)
			a->allow_lines[keep] = a->allow_lines[k];
		a->allow_files[keep++] = a->allow_files[k++];
	}
	a->nallow = keep;
	return 0;
}

/* One key of an RPZ zone's tsig. */
static int config_tsig_key(struct config_ctx *c, const char *ks, size_t klen, struct fy_node *v,
                           int kline, void *arg)
{
	struct config_rpz *z = arg;
	char buf[1024];
	int rc;

	if (config_key_is(ks, klen, "name"))
		rc = config_scalar(c, v, kline, "tsig.name", "a key name", z->tsig_name,
		                   sizeof(z->tsig_name));
	else if (config_key_is(ks, klen, "algorithm"))
		rc = config_scalar(c, v, kline, "tsig.algorithm", "hmac-sha256 or the like",
		                   z->tsig_alg, sizeof(z->tsig_alg));
	else if (config_key_is(ks, klen, "secret")) {
		rc = config_scalar(c, v, kline, "tsig.secret", "a base64 secret", buf, sizeof(buf));
		free(z->tsig_secret);
		if (!rc && !(z->tsig_secret = strdup(buf)))
			rc = config_fail(c, kline, "out of memory");
		explicit_bzero(buf, sizeof(buf));
	} else
		return config_unknown(c, kline, ks, klen);
	return rc;
}

static int config_rpz_tsig(struct config_ctx *c, struct fy_node *m, int line, struct config_rpz *z)
{
	int rc;
	if (m == NULL || fy_node_get_type(m) != FYNT_MAPPING || config_is_alias(m))
		return config_fail(c, line, "tsig: expected {name, algorithm, secret}");
	snprintf(z->tsig_alg, sizeof(z->tsig_alg), "hmac-sha256");
	rc = config_each_pair(c, m, line, config_tsig_key, z);
	if (!rc && (!z->tsig_name[0] || !z->tsig_secret))
		rc = config_fail(c, line, "tsig: name and secret are required");
	/* the HMACs ldns signs with; a typo must fail here, not at the first transfer */
	static const char *const algs[] = {"hmac-md5.sig-alg.reg.int",
	                                   "hmac-sha1",
	                                   "hmac-sha224",
	                                   "hmac-sha256",
	                                   "hmac-sha384",
	                                   "hmac-sha512"};
	bool known = false;
	size_t al = strlen(z->tsig_alg);
	if (al && z->tsig_alg[al - 1] == '.')
		z->tsig_alg[--al] = 0;
	for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++)
		known |= strcasecmp(z->tsig_alg, algs[i]) == 0;
	if (!rc && !known)
		rc = config_fail(c, line,
		                 "tsig.algorithm: expected hmac-sha256 (or hmac-sha1, -sha224, "
		                 "-sha384, -sha512, hmac-md5.sig-alg.reg.int)");
	return rc;
}

/* One key of an RPZ zone. */
static int config_rpz_key(struct config_ctx *c, const char *ks, size_t klen, struct fy_node *v,
                          int kline, void *arg)
{
	struct config_rpz *z = arg;
	char buf[PATH_MAX];
	int rc;
	if (config_key_is(ks, klen, "name")) {
		rc = config_scalar(c, v, kline, "rpz.name", "a zone name", buf, CONFIG_NAME_MAX);
		if (!rc && !config_name_ok(buf, strlen(buf)))
			rc = config_fail(c, kline, "rpz.name: 1 to %d of A-Z a-z 0-9 _ . -",
			                 CONFIG_NAME_MAX - 1);
		if (!rc)
			snprintf(z->name, sizeof(z->name), "%s", buf);
	} else if (config_key_is(ks, klen, "file")) {
		free(z->file);
		z->file = NULL;
		rc = config_path(c, v, kline, "rpz.file", true, &z->file);
	} else if (config_key_is(ks, klen, "zone")) {
		rc = config_scalar(c, v, kline, "rpz.zone", "a domain name", buf, sizeof(buf));
		if (!rc && name_from_text(buf, strlen(buf), z->zone) <= 1)
			rc = config_fail(c, kline, "rpz.zone: not a domain name below the root");
	} else if (config_key_is(ks, klen, "primary")) {
		rc = config_scalar(c, v, kline, "rpz.primary", "ADDR:PORT", buf, sizeof(buf));
		if (!rc && netaddr_parse_addrport(buf, 53, &z->primary) != 0)
			rc = config_fail(c, kline, "rpz.primary: expected ADDR[:PORT]");
	} else if (config_key_is(ks, klen, "tsig")) {
		rc = config_rpz_tsig(c, v, kline, z);
	} else {
		return config_unknown(c, kline, ks, klen);
	}
	return rc;
}

/* rpz: [{name, file} | {name, primary, zone, tsig}] */
int config_rpz_list(struct config_ctx *c, struct fy_node *v, int line)
{
	struct config *cfg = c->cfg;
	struct fy_node *m;
	void *it = NULL;
	int rc = config_seq(c, v, line, "rpz");
	if (rc)
		return rc;
	config_rpz_free(cfg);
	size_t count = (size_t)fy_node_sequence_item_count(v);
	if (count && !(cfg->rpz = calloc(count, sizeof(*cfg->rpz))))
		return config_fail(c, line, "out of memory");
	while ((m = fy_node_sequence_iterate(v, &it)) != NULL && cfg->nrpz < count) {
		struct config_rpz *z = &cfg->rpz[cfg->nrpz++];
		z->line = config_node_line(m, line);
		if (config_is_alias(m) || fy_node_get_type(m) != FYNT_MAPPING)
			return config_fail(c, z->line,
			                   "rpz: expected {name, file} or {name, primary, zone}");
		if (config_dup_keys(c, m, z->line) != 0)
			return MOAT_EINVAL;
		if ((rc = config_each_pair(c, m, z->line, config_rpz_key, z)) != 0)
			return rc;
		if (!z->name[0])
			return config_fail(c, z->line, "rpz: zone without a name");
		for (size_t i = 0; i + 1 < cfg->nrpz; i++)
			if (!strcmp(cfg->rpz[i].name, z->name))
				return config_fail(c, z->line, "rpz: duplicate name '%s'", z->name);
		if (!z->file == !z->primary.ss_family)
			return config_fail(c, z->line, "rpz '%s': give either file or primary",
			                   z->name);
		if (z->primary.ss_family && !z->zone[0])
			return config_fail(c, z->line, "rpz '%s': primary needs zone", z->name);
	}
	return 0;
}
