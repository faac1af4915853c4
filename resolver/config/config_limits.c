/* config_limits.c owns the one table of moatd's numeric settings: each one's YAML key, its
 * flag, its range and its default. config_init takes the defaults from it, the YAML reader and
 * the flags take the ranges from it, and config_validate checks the final values against it, so
 * a limit is written once whichever way a value arrives. Values outside a range are almost
 * certainly typos (a timeout in seconds written into a millisecond key), so they are refused
 * rather than clamped. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "moat/config.h"
#include "moat/err.h"

#define U32(field) offsetof(struct config, field)

static const struct config_limit config_limits[] = {
    {"upstream_timeout_ms", "upstream-timeout", " (ms)", 1, 60000, 1000, U32(upstream_timeout_ms)},
    {"upstream_attempts", NULL, "", 1, 16, 3, U32(upstream_attempts)},
    {"tcp_idle_ms", NULL, "", 100, 3600000, 10000, U32(tcp_idle_ms)},
    {"tcp_max_clients", NULL, "", 1, 1000000, 1024, U32(tcp_max_clients)},
    {"tcp_max_queued", "tcp-max-queued", " (bytes)", 1024, 16u << 20, 64 * 1024,
     U32(tcp_max_queued)},
    {"tcp_max_inflight", NULL, "", 1, 65535, 64, U32(tcp_max_inflight)},
    {"inflight_max", "inflight-max", "", 1, 1000000, 2048, U32(inflight_max)},
    {"inflight_per_client", "inflight-per-client", "", 1, 1000000, 256, U32(inflight_per_client)},
    /* a week; RFC 8767 suggests 1 to 3 days */
    {"serve_stale", "serve-stale", " (seconds)", 0, 604800, 0, U32(serve_stale)},
    {"workers", "workers", "", 1, CONFIG_WORKERS_MAX, 1, U32(workers)},
    /* on by default, above any benign client (tests/bench/burst.sh: an npm install under a
     * Kubernetes search list sends 8400 queries in 0.8 s at its worst; the bucket holds 10000
     * and refills 10000 a second) */
    {"ratelimit_qps", "ratelimit", " (queries/s)", 0, 10000000, 10000, U32(rl_qps)},
    {"ratelimit_burst", NULL, "", 0, 10000000, 0, U32(rl_burst)},
    /* bytes of query log a second, all workers together (log_bound.h); 0: unbounded */
    {"log_bytes_per_s", "log-budget", " (bytes/s)", 0, 1u << 30, 1u << 20, U32(log_budget)},
    {"cache_size_mb", "cache-size", " (MB)", 0, 65536, 32, CONFIG_LIMIT_MB},
    {"cache_min_ttl", NULL, "", 0, 604800, 0, U32(cache_min_ttl)},
    {"cache_max_ttl", NULL, "", 0, 604800, 86400, U32(cache_max_ttl)},
    {"firewall_timeout_ms", NULL, "", 10, 60000, 3000, U32(fw_timeout_ms)},
};

#define CONFIG_NLIMITS (sizeof(config_limits) / sizeof(config_limits[0]))

const struct config_limit *config_limit_key(const char *key, size_t len)
{
	for (size_t i = 0; i < CONFIG_NLIMITS; i++)
		if (strlen(config_limits[i].key) == len &&
		    memcmp(config_limits[i].key, key, len) == 0)
			return &config_limits[i];
	return NULL;
}

const struct config_limit *config_limit_nth(size_t i)
{
	return i < CONFIG_NLIMITS ? &config_limits[i] : NULL;
}

const struct config_limit *config_limit_flag(const char *flag)
{
	for (size_t i = 0; i < CONFIG_NLIMITS; i++)
		if (config_limits[i].flag && strcmp(config_limits[i].flag, flag) == 0)
			return &config_limits[i];
	return NULL;
}

void config_limit_set(struct config *cfg, const struct config_limit *l, uint32_t v)
{
	if (l->off == CONFIG_LIMIT_MB)
		cfg->cache_bytes = (size_t)v << 20;
	else
		memcpy((char *)cfg + l->off, &v, sizeof(v));
}

static uint64_t config_limit_get(const struct config *cfg, const struct config_limit *l)
{
	uint32_t v;

	if (l->off == CONFIG_LIMIT_MB)
		return cfg->cache_bytes >> 20;
	memcpy(&v, (const char *)cfg + l->off, sizeof(v));
	return v;
}

void config_limits_default(struct config *cfg)
{
	for (size_t i = 0; i < CONFIG_NLIMITS; i++)
		config_limit_set(cfg, &config_limits[i], config_limits[i].def);
}

int config_limits_check(const struct config *cfg, char *err, size_t errlen)
{
	for (size_t i = 0; i < CONFIG_NLIMITS; i++) {
		const struct config_limit *l = &config_limits[i];
		uint64_t v = config_limit_get(cfg, l);

		if (v < l->min || v > l->max) {
			snprintf(err, errlen, "%s must be %u..%u", l->key, l->min, l->max);
			return MOAT_EINVAL;
		}
	}
	return 0;
}
