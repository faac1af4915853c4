/* enumtext.h: the text of a code from a table indexed by the code, so a *_str function is its
 * table and one bounds check. Header-only. */
#ifndef MOAT_ENUMTEXT_H
#define MOAT_ENUMTEXT_H

#include <stddef.h>

/* table[code], or unknown when code is outside the table or has no entry there. */
static inline const char *enum_text(const char *const *table, size_t n, long code,
                                    const char *unknown)
{
	return code >= 0 && (size_t)code < n && table[code] ? table[code] : unknown;
}

#define ENUM_TEXT(table, code, unknown)                                                            \
	enum_text((table), sizeof(table) / sizeof((table)[0]), (long)(code), (unknown))

#endif
