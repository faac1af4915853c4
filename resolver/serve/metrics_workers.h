/* metrics_workers.h: moatd's side of the counters (metrics_workers.c): publishing a worker's own
 * gauges into its block, and summing the workers (for ops/metrics_endpoint.c and the control
 * socket's stats). */
#ifndef MOAT_METRICS_WORKERS_H
#define MOAT_METRICS_WORKERS_H

#include <stddef.h>

#include "moat/metrics.h"

struct worker;

/* On w's thread, once per loop turn: copy the cache, TCP and stats counters into w->metrics. */
void metrics_publish(struct worker *w);

/* Any thread: the sum of n workers' blocks into *sum (zeroed here). */
void metrics_collect(struct worker *ws, unsigned n, struct metrics_worker *sum);

#endif
