/* isotime.c owns the logs' time text (moat/isotime.h): now, UTC, to the millisecond. */
#include "moat/isotime.h"

#include <stdio.h>
#include <sys/time.h>
#include <time.h>

char *isotime_now(char *out, size_t cap)
{
	struct timeval tv;
	struct tm tm;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	size_t n = strftime(out, cap, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, cap - n, ".%03ldZ", (long)(tv.tv_usec / 1000));
	return out;
}
