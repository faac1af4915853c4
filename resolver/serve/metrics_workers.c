/* metrics_workers.c owns moatd's side of the metrics endpoint: each worker publishes its gauges
 * into its own block once per loop turn, and a scrape (on the endpoint's thread, served by
 * metrics_http.c) sums the workers' blocks with relaxed loads and renders the sum (metrics.c);
 * no worker waits for it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/cache.h"
#include "moat/err.h"
#include "moat/metrics_http.h"
#include "metrics_workers.h"
#include "worker.h"

#define METRICS_TEXT_MAX (512u << 10)

static struct metrics_http *http;
static struct worker *scrape_ws;
static unsigned scrape_n;
static const char *scrape_version;

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
	for (unsigned i = 0; i < n; i++)
		if (ws[i].metrics)
			metrics_sum(sum, ws[i].metrics);
}

/* One scrape: the sum of every worker, as text. */
static char *metrics_workers_body(void *ctx, size_t *len)
{
	(void)ctx;
	struct metrics_worker *sum = malloc(sizeof(*sum));
	char *text = malloc(METRICS_TEXT_MAX);
	int n = MOAT_ENOMEM;
	if (sum && text) {
		metrics_collect(scrape_ws, scrape_n, sum);
		n = metrics_render_text(sum, scrape_version, text, METRICS_TEXT_MAX);
	}
	free(sum);
	if (n < 0) {
		free(text);
		return NULL;
	}
	*len = (size_t)n;
	return text;
}

int metrics_workers_serve(const struct sockaddr *addr, struct worker *ws, unsigned n,
                          const char *version, char *err, size_t errlen)
{
	scrape_ws = ws;
	scrape_n = n;
	scrape_version = version;
	struct metrics_http_opts o = {
	    .program = "moatd", .addr = addr, .fd = -1, .body = metrics_workers_body};
	if (!(http = metrics_http_start(&o))) {
		snprintf(err, errlen, "metrics: cannot listen (address in use or not local?)");
		return MOAT_EIO;
	}
	return 0;
}

void metrics_workers_stop(void)
{
	metrics_http_stop(http);
	http = NULL;
}
