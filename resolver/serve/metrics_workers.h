/* metrics_workers.h: moatd's side of the counters (metrics_workers.c): publishing a worker's own
 * gauges into its block, summing the workers, and serving the sum on the metrics endpoint
 * (`metrics:`). */
#ifndef MOAT_METRICS_WORKERS_H
#define MOAT_METRICS_WORKERS_H

#include <stddef.h>
#include <sys/socket.h>

#include "moat/metrics.h"

struct worker;

/* On w's thread, once per loop turn: copy the cache, TCP and stats counters into w->metrics. */
void metrics_publish(struct worker *w);

/* Any thread: the sum of n workers' blocks into *sum (zeroed here). */
void metrics_collect(struct worker *ws, unsigned n, struct metrics_worker *sum);

/* Serve GET /metrics on addr (moat/metrics_http.h: its own thread, started here, so before the
 * system-call filter). ws is borrowed until metrics_workers_stop. Returns 0 or MOAT_EIO. */
int metrics_workers_serve(const struct sockaddr *addr, struct worker *ws, unsigned n,
                          const char *version, char *err, size_t errlen);
void metrics_workers_stop(void);

#endif
