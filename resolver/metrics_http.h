/* metrics_http.h: the daemon's side of the counters (metrics_http.c): publishing a worker's own
 * gauges into its block, summing the workers, and the Prometheus endpoint (`metrics:`). */
#ifndef MOAT_METRICS_HTTP_H
#define MOAT_METRICS_HTTP_H

#include <stddef.h>
#include <sys/socket.h>

#include "moat/metrics.h"

struct worker;

/* On w's thread, once per loop turn: copy the cache, TCP and stats counters into w->metrics. */
void metrics_publish(struct worker *w);

/* Any thread: the sum of n workers' blocks into *sum (zeroed here). */
void metrics_collect(struct worker *ws, unsigned n, struct metrics_worker *sum);

/* Serve GET /metrics on addr from libmicrohttpd's own thread (started here, so before the
 * system-call filter). ws is borrowed until metrics_http_stop. Returns 0 or MOAT_EIO. */
int metrics_http_start(const struct sockaddr *addr, struct worker *ws, unsigned n,
                       const char *version, char *err, size_t errlen);
void metrics_http_stop(void);

#endif
