/* err.c owns the text of moat's error codes and the formatting of error messages into a
 * caller's buffer. */
#include "moat/err.h"
#include "moat/enumtext.h"

/* Indexed by the negated code. */
static const char *const err_text[] = {
    [-MOAT_OK] = "ok",
    [-MOAT_ENOMEM] = "out of memory",
    [-MOAT_EINVAL] = "invalid input",
    [-MOAT_EFORMAT] = "malformed DNS message",
    [-MOAT_ESPACE] = "buffer too small",
    [-MOAT_ENOENT] = "not found",
    [-MOAT_EIO] = "input/output error",
    [-MOAT_ELIMIT] = "limit exceeded",
    [-MOAT_EMISMATCH] = "answer does not match the query",
};

#include <stdarg.h>
#include <stdio.h>

const char *moat_strerror(int err)
{
	return ENUM_TEXT(err_text, -(long)err, "unknown error");
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
