/* metrics_workers.c owns the workers' counter blocks seen from outside the query path: each
 * worker publishes its gauges into its own block once per loop turn, and a reader on any thread
 * (the metrics endpoint, ops/metrics_endpoint.c; the control socket's stats) sums the workers'
 * blocks with relaxed loads; no worker waits for it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/cache.h"
#include "moat/err.h"
#include "moat/policy_file.h"
#include "serve/metrics_workers.h"
#include "serve/worker.h"

void metrics_publish(struct worker *w)
{
	struct metrics_worker *m = w->metrics;
	if (!m)
		return;
	if (w->cache) {
		struct cache_stats cs;
		cache_get_stats(w->cache, &cs);
		metrics_set(&m->cache_hits, cs.hits);
		metrics_set(&m->cache_misses, cs.misses);
		metrics_set(&m->cache_entries, cs.entries);
		metrics_set(&m->cache_bytes, cs.bytes);
	}
	metrics_set(&m->tcp_conns, w->ntcp);
	metrics_set(&m->tcp_rejected, w->stats.tcp_rejected);
	metrics_set(&m->dropped, w->stats.dropped);
	metrics_set(&m->upstream_timeouts, w->stats.upstream_timeouts);
	metrics_set(&m->upstream_mismatch, w->stats.upstream_mismatch);
}

void metrics_collect(struct worker *ws, unsigned n, struct metrics_worker *sum)
{
	memset(sum, 0, sizeof(*sum));
	/* the policy counts its damaged blocks itself; the process-wide block shows the count */
	metrics_set(&metrics_global.damaged_blocks, policy_file_damaged_total());
	metrics_set(&metrics_global.files_changed, policy_file_tainted_total());
	for (unsigned i = 0; i < n; i++)
		if (ws[i].metrics)
			metrics_sum(sum, ws[i].metrics);
}
