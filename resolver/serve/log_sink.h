/* log_sink.h: where the query log's bytes go (log_sink.c). Each worker appends its formatted
 * lines to a ring of its own (one producer, one consumer, no lock); one writer thread takes what
 * every ring holds and writes it with writev, so a worker never waits on the disk. A full ring
 * refuses the line (the caller counts it; moat/log.h's "suppressed" line says how many). The
 * writer sleeps while the log is quiet and is woken at the end of a worker's loop turn that
 * added lines, so a line reaches the file right after its answer; once lines flow it writes
 * every 1 ms (up to 8 ms when busy) and nobody wakes it.
 * Start-up order: log_sink_open and log_sink_start (the thread) before privileges drop and the
 * system-call filter is loaded; the thread then needs only writev, futex and nanosleep. */
#ifndef MOAT_LOG_SINK_H
#define MOAT_LOG_SINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct log_sink;
struct log_ring;

#define LOG_RING_BYTES (1u << 22) /* per worker: ~10000 lines, 50 ms of a worker at full speed */

/* Open path for appending (NULL or "-": stdout) with nrings rings. /dev/null is no log: *out
 * is then NULL and nothing is ever formatted. Ownership: log_sink_close. Returns 0, or
 * MOAT_EIO (errno set) / MOAT_ENOMEM. */
int log_sink_open(const char *path, unsigned nrings, struct log_sink **out);

/* Start the writer thread; returns once it runs (its thread set-up done, so the filter may be
 * loaded). 0 or MOAT_ENOMEM. */
int log_sink_start(struct log_sink *s);

/* Ring i (0 <= i < nrings): worker i's, used from its thread only. */
struct log_ring *log_sink_ring(struct log_sink *s, unsigned i);

/* Append one line (n bytes). False: the ring is full (the writer is behind), nothing taken. A
 * line written at log_ring_room's pointer is taken where it is, not copied. */
bool log_ring_put(struct log_ring *r, const char *line, size_t n);

/* Room for a line of up to max bytes at the ring's head, in one piece, or NULL (the ring is too
 * full, or its end too near: format elsewhere). What is written there becomes the ring's only
 * when log_ring_put is given that pointer; until then it is free space, and another put
 * overwrites it. */
char *log_ring_room(struct log_ring *r, size_t max);

/* Bytes ever put in the ring: where the next line goes, the "at" of log_ring_peek. */
uint64_t log_ring_head(const struct log_ring *r);

/* The n bytes put at `at` (a log_ring_head), while they are still there, in one piece, and a
 * line formatted at the head (up to LOG_LINE_MAX bytes) cannot reach them; else NULL (the ring
 * went round, or they wrap at its end). The writer only reads them: they stay until the head
 * comes round again. */
const char *log_ring_peek(const struct log_ring *r, uint64_t at, size_t n);

/* End of a loop turn: wake the writer if it sleeps and this ring has lines it has not seen. */
void log_ring_kick(struct log_ring *r);

/* logrotate: the file fd was opened on replaces the log's (fd is consumed). Lines still in the
 * rings (a few milliseconds' worth) go to the new file. stdout is left alone. Returns 0 or
 * MOAT_EIO. Any thread. */
int log_sink_reopen_fd(struct log_sink *s, int fd);

/* After every worker stopped: write what the rings hold, stop the thread, close the file. */
void log_sink_close(struct log_sink *s);

#endif
