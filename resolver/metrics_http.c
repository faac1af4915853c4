/* metrics_http.c owns the metrics endpoint: libmicrohttpd serving GET /metrics in Prometheus
 * text format (moat/metrics.h names every metric) from its internal polling thread, which is
 * created at start-up before the system-call filter and afterwards needs only accept4, recv,
 * send, epoll and close, all allowed. A scrape sums the workers' blocks with relaxed loads; no
 * worker waits for it. At most 8 scrapers at a time, 5 s each: the endpoint cannot be used to
 * hold the daemon's memory. It also publishes each worker's gauges once per loop turn. */
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

#include "moat/cache.h"
#include "moat/err.h"
#include "metrics_http.h"
#include "worker.h"

#define METRICS_TEXT_MAX (512u << 10)

static struct MHD_Daemon *mhd;
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

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_len, void **state)
{
	(void)cls;
	(void)version;
	(void)upload;
	(void)upload_len;
	(void)state;
	struct MHD_Response *r;
	unsigned code = MHD_HTTP_OK;
	if (strcmp(method, "GET") != 0 || strcmp(url, "/metrics") != 0) {
		static const char nf[] = "moatd: GET /metrics\n";
		code = MHD_HTTP_NOT_FOUND;
		r = MHD_create_response_from_buffer(sizeof(nf) - 1, (void *)nf,
		                                    MHD_RESPMEM_PERSISTENT);
	} else {
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
			return MHD_NO; /* the connection closes: no half a scrape */
		}
		r = MHD_create_response_from_buffer((size_t)n, text, MHD_RESPMEM_MUST_FREE);
		if (r)
			MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4");
		else
			free(text);
	}
	if (!r)
		return MHD_NO;
	enum MHD_Result rc = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return rc;
}

int metrics_http_start(const struct sockaddr *addr, struct worker *ws, unsigned n,
                       const char *version, char *err, size_t errlen)
{
	scrape_ws = ws;
	scrape_n = n;
	scrape_version = version;
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
	if (addr->sa_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR, addr,
	                       MHD_OPTION_CONNECTION_LIMIT, 8u, MHD_OPTION_CONNECTION_TIMEOUT, 5u,
	                       MHD_OPTION_END);
	if (!mhd) {
		snprintf(err, errlen, "metrics: cannot listen (address in use or not local?)");
		return MOAT_EIO;
	}
	return 0;
}

void metrics_http_stop(void)
{
	if (mhd)
		MHD_stop_daemon(mhd);
	mhd = NULL;
}
