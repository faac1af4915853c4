/* err.c owns the text of moat's error codes and the formatting of error messages into a
 * caller's buffer. */
#include "moat/err.h"

#include <stdarg.h>
#include <stdio.h>

const char *moat_strerror(int err)
{
	switch (err) {
	case MOAT_OK:
		return "ok";
	case MOAT_ENOMEM:
		return "out of memory";
	case MOAT_EINVAL:
		return "invalid input";
	case MOAT_EFORMAT:
		return "malformed DNS message";
	case MOAT_ESPACE:
		return "buffer too small";
	case MOAT_ENOENT:
		return "not found";
	case MOAT_EIO:
		return "input/output error";
	case MOAT_ELIMIT:
		return "limit exceeded";
	case MOAT_EMISMATCH:
		return "answer does not match the query";
	}
	return "unknown error";
}

void moat_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}
