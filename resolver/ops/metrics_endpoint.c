/* metrics_endpoint.c owns moatd's metrics endpoint (`metrics:`): GET /metrics served by
 * metrics_http.c on its own thread, each scrape the sum of every worker's block
 * (serve/metrics_workers.c) rendered as Prometheus text (serve/metrics.c). */
#include <stdio.h>
#include <stdlib.h>

#include "moat/err.h"
#include "moat/metrics_http.h"
#include "ops/metrics_endpoint.h"
#include "serve/metrics_workers.h"

#define METRICS_TEXT_MAX (512u << 10)

static struct metrics_http *http;
static struct worker *scrape_ws;
static unsigned scrape_n;
static const char *scrape_version;

/* One scrape: the sum of every worker, as text. */
static char *endpoint_body(void *ctx, size_t *len)
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

int metrics_endpoint_start(const struct sockaddr *addr, struct worker *ws, unsigned n,
                           const char *version, char *err, size_t errlen)
{
	scrape_ws = ws;
	scrape_n = n;
	scrape_version = version;
	struct metrics_http_opts o = {
	    .program = "moatd", .addr = addr, .fd = -1, .body = endpoint_body};
	char why[200];
	if (!(http = metrics_http_start(&o, why, sizeof(why)))) {
		snprintf(err, errlen, "metrics: %s", why);
		return MOAT_EIO;
	}
	return 0;
}

void metrics_endpoint_stop(void)
{
	metrics_http_stop(http);
	http = NULL;
}
