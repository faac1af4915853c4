/* logreopen.h: the query log reopened on SIGUSR1 (for logrotate), also after the privilege drop
 * and under the system-call filter, which refuses moatd every open for writing: a helper process
 * forked at start opens the log's name beneath the log's directory (and nothing else) and hands
 * the descriptor back (logreopen.c says how it is confined). */
#ifndef MOAT_LOGREOPEN_H
#define MOAT_LOGREOPEN_H

#include <stddef.h>

/* Start the helper for path (the log as opened by log_sink_open; NULL or "-": nothing to reopen),
 * running as user (what moatd becomes; NULL: as moatd runs now). Returns 0 or a negative MOAT_*
 * code (SIGUSR1 then cannot reopen). Main thread, before the privilege drop and before any
 * thread is started (it forks). */
int logreopen_init(const char *path, const char *user);

struct log_sink;

/* Reopen the log file f was opened on, by name, in the kept directory (created 0640 if it is
 * gone): the writer's next write goes to the new file (serve/log_sink.h), so the lines still
 * buffered at the signal land there too; no line is split between the two files. Returns 0
 * (also when there is nothing to reopen) or a negative MOAT_* code with err set (f then keeps
 * its old file). */
int logreopen_now(struct log_sink *f, char *err, size_t errlen);

/* Close moatd's end: the helper exits. */
void logreopen_release(void);

#endif
