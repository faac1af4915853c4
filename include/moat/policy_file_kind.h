/* Which files are compiled policies (format in moat/policy_file.h): by the name's extension and
 * by the first bytes. Apart from that header because the signature code (moat/policy_sig.h)
 * must know which kind of signature a file needs, while the compiled-file code checks
 * signatures when it opens one: both sit on this, neither on the other. */
#ifndef MOAT_POLICY_FILE_KIND_H
#define MOAT_POLICY_FILE_KIND_H

#include <stdbool.h>
#include <string.h>

#define POLICY_FILE_EXT ".mpol"
#define POLICY_FILE_MAGIC "MOATPOL" /* the file's first 8 bytes, with its NUL */

/* True if path names a compiled policy (by its extension, POLICY_FILE_EXT). */
static inline bool policy_file_is_compiled(const char *path)
{
	size_t n = strlen(path), e = strlen(POLICY_FILE_EXT);
	return n > e && strcmp(path + n - e, POLICY_FILE_EXT) == 0;
}

#endif
