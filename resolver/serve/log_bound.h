/* log_bound.h: one worker's query log (log_bound.c): the lines it formats (moat/log.h) and the
 * bounds that keep a flood from becoming a log flood, each query still counted exactly once:
 *   - a refused or denied query identical to one logged less than a second ago (every key but
 *     "ts") is only counted; a second after that first line one line with "repeated":N says
 *     how many came;
 *   - a byte budget per second (log_bytes_per_s, split evenly between the workers, bursts of a
 *     second's worth): a line over it is not even formatted, and at most once a second a
 *     "suppressed" line says how many were left out (also those a full ring refused).
 * Loop thread only. */
#ifndef MOAT_LOG_BOUND_H
#define MOAT_LOG_BOUND_H

#include <stdint.h>

#include "moat/log.h"

struct log_out;
struct log_ring;

/* A worker's log into ring, with budget bytes a second (0: unbounded). Ownership:
 * log_out_free. NULL on allocation failure. */
struct log_out *log_out_new(struct log_ring *ring, uint64_t budget);
void log_out_free(struct log_out *o);

/* Log one query at now_ms (the loop's monotonic clock, uv_now). */
void log_out_query(struct log_out *o, const struct log_query *e, uint64_t now_ms);

/* The end of a loop turn, and a timer each second: close the counts that are due (repeats a
 * second old, suppressed lines once a second) and wake the writer. Cheap when nothing is due. */
void log_out_flush(struct log_out *o, uint64_t now_ms);

/* At stop, before log_sink_close: every open count is written, whatever its age. */
void log_out_close(struct log_out *o, uint64_t now_ms);

#endif
