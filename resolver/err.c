/* err.c owns the text of moat's error codes. */
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

const char *moat_strerror(int err)
{
	return ENUM_TEXT(err_text, -(long)err, "unknown error");
}
