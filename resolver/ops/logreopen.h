/* logreopen.h: the query log reopened on SIGUSR1 (for logrotate), also after the privilege drop
 * and under the system-call filter: the log's directory is kept open (O_PATH) from start-up,
 * and the filter allows opening for writing only relative to that descriptor. */
#ifndef MOAT_LOGREOPEN_H
#define MOAT_LOGREOPEN_H

#include <stddef.h>

/* Keep the directory of path (the log as opened by log_sink_open). Returns the directory's
 * descriptor (for the filter), -1 for stdout or "-" (nothing to reopen), or a negative MOAT_*
 * code below -1. Main thread, before the privilege drop. */
int logreopen_init(const char *path);

struct log_sink;

/* Reopen the log file f was opened on, by name, in the kept directory (created 0640 if it is
 * gone): the writer's next write goes to the new file (serve/log_sink.h), so the lines still
 * buffered at the signal land there too; no line is split between the two files. Returns 0
 * (also when there is nothing to reopen) or a negative MOAT_* code with err set (f then keeps
 * its old file). */
int logreopen_now(struct log_sink *f, char *err, size_t errlen);

void logreopen_release(void);

#endif
