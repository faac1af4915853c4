/* strv.c owns the growable list of owned strings (moat/strv.h). */
#include "moat/strv.h"

#include <stdlib.h>
#include <string.h>

#include "moat/err.h"

int strv_intern(char ***v, size_t *n, size_t max, const char *s, size_t *idx)
{
	for (size_t i = *n; i-- > 0;)
		if (strcmp((*v)[i], s) == 0) {
			*idx = i;
			return 0;
		}
	if (*n >= max)
		return MOAT_ELIMIT;
	char **nv = realloc(*v, (*n + 1) * sizeof(*nv));
	if (!nv)
		return MOAT_ENOMEM;
	*v = nv;
	if (!(nv[*n] = strdup(s)))
		return MOAT_ENOMEM;
	*idx = (*n)++;
	return 0;
}

void strv_free(char ***v, size_t *n)
{
	for (size_t i = 0; i < *n; i++)
		free((*v)[i]);
	free(*v);
	*v = NULL;
	*n = 0;
}
