/* The wall-clock time as the logs write it: "2026-12-01T22:00:05.123Z" (UTC, milliseconds;
 * isotime.c). Used by the lines moat-fw's drop log and ask mode's watch stream write (the query
 * log keeps its own hand-written formatter: it is on the path of every query). */
#ifndef MOAT_ISOTIME_H
#define MOAT_ISOTIME_H

#include <stddef.h>

#define ISOTIME_LEN 25 /* with the terminating NUL */

/* Now into out (at least ISOTIME_LEN bytes); returns out. */
char *isotime_now(char *out, size_t cap);

#endif
