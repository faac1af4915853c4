/* limits.c owns moatd's file-descriptor budget (see limits.h). */
#include <stdio.h>
#include <sys/resource.h>

#include "moat/err.h"
#include "serve/limits.h"
#include "serve/upstream.h"

/* Listening sockets, the log, the firewall channel, the event loops' own descriptors. */
#define FIXED_PER_WORKER 16
#define FIXED 64

uint64_t limits_nofile_need(const struct config *cfg, unsigned nworkers)
{
	uint32_t share = (cfg->inflight_max + nworkers - 1) / nworkers;
	uint64_t pool = (uint64_t)nworkers * upstream_pool_max(share, cfg->nupstreams);
	/* Every question in flight may hold one TCP attempt to an upstream. */
	return FIXED + (uint64_t)nworkers * (FIXED_PER_WORKER + 2 * cfg->nlisten) +
	       cfg->tcp_max_clients + cfg->inflight_max + pool;
}

int limits_fit_nofile(struct config *cfg, char *msg, size_t msglen)
{
	struct rlimit rl;
	msg[0] = '\0';
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return MOAT_EIO;
	uint64_t need = limits_nofile_need(cfg, cfg->workers);
	if (rl.rlim_cur >= need)
		return 0;
	struct rlimit want = {need, rl.rlim_max > need ? rl.rlim_max : need};
	if (setrlimit(RLIMIT_NOFILE, &want) == 0)
		return 0; /* root may raise the hard limit too */
	want.rlim_cur = rl.rlim_max;
	want.rlim_max = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &want) < 0)
		want.rlim_cur = rl.rlim_cur;
	/* Shrink the caps together until they fit what we have. */
	uint32_t tcp0 = cfg->tcp_max_clients, inf0 = cfg->inflight_max;
	while (limits_nofile_need(cfg, cfg->workers) > want.rlim_cur &&
	       (cfg->tcp_max_clients > 16 || cfg->inflight_max > 16)) {
		if (cfg->tcp_max_clients > 16)
			cfg->tcp_max_clients = cfg->tcp_max_clients * 3 / 4;
		if (cfg->inflight_max > 16)
			cfg->inflight_max = cfg->inflight_max * 3 / 4;
	}
	if (cfg->inflight_per_client > cfg->inflight_max)
		cfg->inflight_per_client = cfg->inflight_max;
	if (limits_nofile_need(cfg, cfg->workers) > want.rlim_cur) {
		snprintf(msg, msglen, "RLIMIT_NOFILE %llu is too low to serve (need %llu)",
		         (unsigned long long)want.rlim_cur,
		         (unsigned long long)limits_nofile_need(cfg, cfg->workers));
		return MOAT_EINVAL;
	}
	snprintf(msg, msglen,
	         "RLIMIT_NOFILE is %llu (need %llu): lowered tcp_max_clients %u -> %u, "
	         "inflight_max %u -> %u",
	         (unsigned long long)want.rlim_cur, (unsigned long long)need, tcp0,
	         cfg->tcp_max_clients, inf0, cfg->inflight_max);
	return 0;
}
