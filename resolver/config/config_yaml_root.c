/* config_yaml_root.c owns the top-level keys of moatd's YAML config: each key to what it sets,
 * grouped by what it configures (addresses, the running daemon, the policy's parts); the
 * numeric keys are config_limits.c's table. The lists of agents, forward zones and RPZ zones
 * are read by config_yaml_agent.c. */
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
#include "moat/keyfile.h"
#include "moat/netaddr.h"
#include "moat/zonesdir.h"

/* One key of log: only file. */
static int config_log_key(struct config_ctx *c, const char *ks, size_t klen, struct fy_node *val,
                          int kline, void *arg)
{
	char *p;
	int rc;

	(void)arg;
	if (!config_key_is(ks, klen, "file"))
		return config_unknown(c, kline, ks, klen);
	free(c->cfg->log_file);
	c->cfg->log_file = NULL;
	if (config_is_null(val))
		return 0;
	/* The log file is kept as written: it is an output the service manager usually places, not
	 * data that travels with the config. */
	rc = config_path(c, val, kline, "log.file", false, &p);
	if (rc != 0)
		return rc;
	if (strcmp(p, "-") == 0) {
		free(p);
		return 0;
	}
	c->cfg->log_file = p;
	return 0;
}

static int config_log(struct config_ctx *c, struct fy_node *v, int line)
{
	if (config_is_null(v))
		return 0;
	if (config_is_alias(v))
		return config_fail(c, config_node_line(v, line), "log: aliases are not supported");
	if (fy_node_get_type(v) != FYNT_MAPPING)
		return config_fail(c, config_node_line(v, line), "log: expected a mapping");
	if (config_dup_keys(c, v, line) != 0)
		return MOAT_EINVAL;
	return config_each_pair(c, v, line, config_log_key, NULL);
}

/* state_dir: where moatd keeps the agents added at runtime (agentstore.c), relative to the
 * config like the lists. */
static int config_state_dir(struct config_ctx *c, struct fy_node *v, int line)
{
	free(c->cfg->state_dir);
	c->cfg->state_dir = NULL;
	return config_path(c, v, line, "state_dir", true, &c->cfg->state_dir);
}

/* dnstap: {file: PATH} or {socket: PATH}; exactly one of them. */
static int config_dnstap(struct config_ctx *c, struct fy_node *v, int line)
{
	struct fy_node_pair *pair;
	void *it = NULL;
	if (config_is_alias(v) || fy_node_get_type(v) != FYNT_MAPPING ||
	    fy_node_mapping_item_count(v) != 1)
		return config_fail(c, config_node_line(v, line),
		                   "dnstap: expected {file: PATH} or {socket: PATH}");
	pair = fy_node_mapping_iterate(v, &it);
	struct fy_node *k = fy_node_pair_key(pair);
	int kline = config_node_line(k, line);
	const char *ks = NULL;
	size_t klen = 0;
	int rc = config_key(c, k, line, &ks, &klen);
	if (rc != 0)
		return rc;
	bool sock = config_key_is(ks, klen, "socket");
	if (!sock && !config_key_is(ks, klen, "file"))
		return config_unknown(c, kline, ks, klen);
	free(c->cfg->dnstap_path);
	c->cfg->dnstap_path = NULL;
	c->cfg->dnstap_socket = sock;
	return config_path(c, fy_node_pair_value(pair), kline,
	                   sock ? "dnstap.socket" : "dnstap.file", false, &c->cfg->dnstap_path);
}

/* The keys of compiled and signed policy (moat/policy_file.h, moat/policy_sig.h). True if ks is
 * one of them; *rc is then its result. The public key is read here so a bad one is an error at
 * its line. */
static bool config_policy_file_key(struct config_ctx *c, struct fy_node *v, int line,
                                   const char *ks, size_t klen, int *rc)
{
	struct config *cfg = c->cfg;
	if (config_key_is(ks, klen, "policy_pubkey")) {
		char *path = NULL, why[512];
		*rc = config_path(c, v, line, "policy_pubkey", true, &path);
		if (*rc == 0 && keyfile_read(path, cfg->policy_pubkey, 32, why, sizeof(why)))
			*rc = config_fail(c, config_node_line(v, line), "policy_pubkey: %s", why);
		cfg->has_policy_pubkey = *rc == 0;
		free(path);
		return true;
	}
	if (config_key_is(ks, klen, "policy_verify")) {
		char mode[16];
		*rc = config_scalar(c, v, line, "policy_verify", "lazy, full or quick", mode,
		                    sizeof(mode));
		if (*rc == 0 && strcmp(mode, "lazy") && strcmp(mode, "full") &&
		    strcmp(mode, "quick"))
			*rc = config_fail(c, config_node_line(v, line),
			                  "policy_verify: expected lazy, full or quick");
		cfg->policy_verify_quick = *rc == 0 && strcmp(mode, "quick") == 0;
		cfg->policy_verify_full = *rc == 0 && strcmp(mode, "full") == 0;
		return true;
	}
	return false;
}

/* The addresses: where moatd listens, its upstreams, its source address, the metrics
 * endpoint. True if ks is one of them; *rc is then its result. */
static bool config_root_net(struct config_ctx *c, struct fy_node *v, int line, const char *ks,
                            size_t klen, int *rc)
{
	struct config *cfg = c->cfg;

	if (config_key_is(ks, klen, "listen")) {
		*rc = config_addrports(c, v, line, "listen", &cfg->listen, &cfg->nlisten,
		                       &cfg->where.listen_lines);
		cfg->where.listen_for = cfg->listen;
	} else if (config_key_is(ks, klen, "upstreams")) {
		*rc = config_addrports(c, v, line, "upstreams", &cfg->upstreams, &cfg->nupstreams,
		                       &cfg->where.upstream_lines);
		cfg->where.upstream_for = cfg->upstreams;
	} else if (config_key_is(ks, klen, "upstream_source")) {
		char buf[INET6_ADDRSTRLEN];

		/* An address only: upstream.c binds each socket to a random source port of
		 * its own, part of what makes forged upstream answers hard to land. */
		*rc = config_scalar(c, v, line, "upstream_source", "an address", buf, sizeof(buf));
		if (*rc == 0 && netaddr_parse_addr(buf, 0, &cfg->upstream_source) != 0) {
			char q[CONFIG_QUOTE_MAX + 8];

			config_quote(q, sizeof(q), buf, strlen(buf));
			*rc = config_fail(c, config_node_line(v, line),
			                  "upstream_source: bad address '%s' (an IP address, "
			                  "no port)",
			                  q);
		}
		if (*rc == 0)
			cfg->has_upstream_source = true;
	} else if (config_key_is(ks, klen, "metrics")) {
		char a[INET6_ADDRSTRLEN + 16];
		*rc = config_scalar(c, v, line, "metrics", "ADDR:PORT", a, sizeof(a));
		if (*rc == 0 && netaddr_parse_addrport(a, 0, &cfg->metrics_addr) < 0)
			*rc = config_fail(c, config_node_line(v, line),
			                  "metrics: expected ADDR:PORT");
		cfg->has_metrics = *rc == 0;
	} else {
		return false;
	}
	return true;
}

/* How the daemon runs: user, filter, rate limit action, firewall, log, control, dnstap,
 * state. True if ks is one of them; *rc is then its result. */
static bool config_root_ops(struct config_ctx *c, struct fy_node *v, int line, const char *ks,
                            size_t klen, int *rc)
{
	struct config *cfg = c->cfg;

	if (config_key_is(ks, klen, "user")) {
		char u[64];
		*rc = config_scalar(c, v, line, "user", "a user name", u, sizeof(u));
		cfg->where.user = config_node_line(v, line);
		if (*rc == 0) {
			free(cfg->user);
			if (!(cfg->user = strdup(u)))
				*rc = config_fail(c, line, "out of memory");
		}
	} else if (config_key_is(ks, klen, "seccomp")) {
		*rc = config_bool(c, v, line, "seccomp", &cfg->seccomp);
	} else if (config_key_is(ks, klen, "ratelimit_action")) {
		char act[16];
		*rc = config_scalar(c, v, line, "ratelimit_action", "refuse or drop", act,
		                    sizeof(act));
		if (*rc == 0 && strcmp(act, "drop") == 0)
			cfg->rl_drop = true;
		else if (*rc == 0 && strcmp(act, "refuse") == 0)
			cfg->rl_drop = false;
		else if (*rc == 0)
			*rc = config_fail(c, config_node_line(v, line),
			                  "ratelimit_action: expected refuse or drop");
	} else if (config_key_is(ks, klen, "firewall_socket")) {
		free(cfg->fw_socket);
		cfg->fw_socket = NULL;
		*rc = config_path(c, v, line, "firewall_socket", false, &cfg->fw_socket);
	} else if (config_key_is(ks, klen, "firewall_fail_open")) {
		*rc = config_bool(c, v, line, "firewall_fail_open", &cfg->fw_fail_open);
	} else if (config_key_is(ks, klen, "log")) {
		*rc = config_log(c, v, line);
		cfg->where.log = config_node_line(v, line);
	} else if (config_key_is(ks, klen, "control")) {
		free(cfg->control_path);
		cfg->control_path = NULL;
		*rc = config_path(c, v, line, "control", false, &cfg->control_path);
	} else if (config_key_is(ks, klen, "control_group")) {
		char g[CONFIG_NAME_MAX];
		*rc = config_scalar(c, v, line, "control_group", "a group name", g, sizeof(g));
		free(cfg->control_group);
		cfg->control_group = *rc == 0 ? strdup(g) : NULL;
	} else if (config_key_is(ks, klen, "dnstap")) {
		*rc = config_dnstap(c, v, line);
	} else if (config_key_is(ks, klen, "state_dir")) {
		*rc = config_state_dir(c, v, line);
	} else {
		return false;
	}
	return true;
}

/* What the policy is made of: lists, agents, forward zones, local answers, RPZ zones. True if ks is
 * one of them; *rc is then its result. */
static bool config_root_policy(struct config_ctx *c, struct fy_node *v, int line, const char *ks,
                               size_t klen, int *rc)
{
	struct config *cfg = c->cfg;

	if (config_key_is(ks, klen, "highrisk")) {
		*rc = config_paths(c, v, line, "highrisk", &cfg->highrisk_files, &cfg->nhighrisk,
		                   true, NULL);
	} else if (config_key_is(ks, klen, "blocked_ranges")) {
		*rc = config_paths(c, v, line, "blocked_ranges", &cfg->range_files, &cfg->nranges,
		                   true, NULL);
	} else if (config_key_is(ks, klen, "zones_dir")) {
		char *dir = NULL;
		*rc = config_path(c, v, line, "zones_dir", true, &dir);
		if (*rc == 0 && config_set_zones_dir(cfg, dir) != 0)
			*rc = config_fail(c, line, "out of memory");
		free(dir);
	} else if (config_key_is(ks, klen, "agents")) {
		*rc = config_agents(c, v, line);
	} else if (config_key_is(ks, klen, "forward")) {
		*rc = config_forwards(c, v, line, &cfg->forwards, &cfg->nforwards);
	} else if (config_key_is(ks, klen, "local_data")) {
		*rc = config_lines_list(c, v, line, "local_data", false, &cfg->local_data,
		                        &cfg->local_lines, &cfg->nlocal);
	} else if (config_key_is(ks, klen, "rpz")) {
		*rc = config_rpz_list(c, v, line);
	} else if (config_key_is(ks, klen, "highrisk_rpz")) {
		*rc = config_rpz_names(c, v, line, "highrisk_rpz", &cfg->highrisk_rpz,
		                       &cfg->highrisk_rpz_lines, &cfg->nhighrisk_rpz);
	} else if (config_key_is(ks, klen, "hosts")) {
		*rc = config_lines_list(c, v, line, "hosts", true, &cfg->hosts_files,
		                        &cfg->hosts_lines, &cfg->nhosts);
	} else {
		return false;
	}
	return true;
}

/* One top-level key: a numeric setting of config_limits.c's table, or one of the groups above. */
static int config_root_key(struct config_ctx *c, const char *ks, size_t klen, struct fy_node *v,
                           int line, void *arg)
{
	struct config *cfg = c->cfg;
	const struct config_limit *lim;
	uint32_t n;
	int rc;

	(void)arg;
	/* Compared one by one like every other key, so a typo finds its nearest one here too. */
	for (size_t i = 0; (lim = config_limit_nth(i)) && !config_key_is(ks, klen, lim->key); i++)
		;
	if (lim != NULL) {
		rc = config_u32_as(c, v, line, lim->key, lim->key, &n);
		if (rc == 0)
			config_limit_set(cfg, lim, n);
		if (lim->off == offsetof(struct config, cache_min_ttl))
			cfg->where.cache_min_ttl = config_node_line(v, line);
	} else if (!config_root_net(c, v, line, ks, klen, &rc) &&
	           !config_root_ops(c, v, line, ks, klen, &rc) &&
	           !config_root_policy(c, v, line, ks, klen, &rc) &&
	           !config_policy_file_key(c, v, line, ks, klen, &rc)) {
		return config_unknown(c, line, ks, klen);
	}
	return rc;
}

int config_root(struct config_ctx *c, struct fy_node *root)
{
	struct config *cfg = c->cfg;

	/* An empty file is a config of defaults; config_validate will say what is missing. */
	if (config_is_null(root))
		return 0;
	if (config_is_alias(root) || fy_node_get_type(root) != FYNT_MAPPING)
		return config_fail(c, config_node_line(root, 1), "expected a mapping of keys");
	if (config_dup_keys(c, root, 1) != 0)
		return MOAT_EINVAL;
	free(cfg->where.file);
	if ((cfg->where.file = strdup(c->label)) == NULL)
		return config_fail(c, 1, "out of memory");
	return config_each_pair(c, root, 1, config_root_key, NULL);
}
