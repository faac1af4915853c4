/* strv.h: a growable list of owned strings, used where a structure names its source files once
 * and refers to them by index (the pattern sets, the lint messages). */
#ifndef MOAT_STRV_H
#define MOAT_STRV_H

#include <stddef.h>

/* The index of s in the n strings at *v, appended as a copy (owned by the list: the caller frees
 * each string and the array) when absent. The newest strings are looked at first: a loader asks
 * for the file it is reading again and again. 0 with *idx set; MOAT_ELIMIT when s is new and the
 * list already holds max; MOAT_ENOMEM (the list unchanged but perhaps larger). */
int strv_intern(char ***v, size_t *n, size_t max, const char *s, size_t *idx);

/* Free the n strings at *v and the array; the list is then empty (*v NULL, *n 0). */
void strv_free(char ***v, size_t *n);

#endif
