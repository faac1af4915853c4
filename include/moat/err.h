/* Error codes shared by every moat module and program.
 * Functions return 0 (or a length/count) on success and one of these negative codes on failure. */
#ifndef MOAT_ERR_H
#define MOAT_ERR_H

enum moat_err {
	MOAT_OK = 0,
	MOAT_ENOMEM = -1,    /* allocation failed */
	MOAT_EINVAL = -2,    /* bad argument or bad text (a pattern, an address, a config value) */
	MOAT_EFORMAT = -3,   /* malformed wire data */
	MOAT_ESPACE = -4,    /* output buffer too small */
	MOAT_ENOENT = -5,    /* not found */
	MOAT_EIO = -6,       /* a file or socket failed; errno may say more */
	MOAT_ELIMIT = -7,    /* a configured or protocol limit was hit */
	MOAT_EMISMATCH = -8, /* an upstream answer does not belong to our query */
};

/* Static text for an error code; never NULL. */
const char *moat_strerror(int err);

#include <stddef.h>

/* Format a message into a caller's error buffer (nothing when err is NULL or errlen 0). */
void moat_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
