/* spare.h: a bounded stack of freed blocks of one size, kept for reuse, so a worker does not
 * malloc and free the same few small objects once per query (each pair cost ~500 instructions
 * of glibc's bins on the forwarded path). One stack per worker and kind; not thread-safe.
 * Header-only. */
#ifndef MOAT_SPARE_H
#define MOAT_SPARE_H

#include <stdlib.h>

#define SPARE_MAX 64 /* blocks kept: more than the queries of one loop turn rarely need */

struct spare {
	void *blk[SPARE_MAX];
	unsigned n;
};

/* A block of size bytes, uninitialised: a kept one, or a new one (NULL when memory is short).
 * Ownership: the caller's, until it hands it to spare_give or free. Every block given to one
 * stack must be of the size its takers ask for. */
static inline void *spare_take(struct spare *s, size_t size)
{
	return s->n ? s->blk[--s->n] : malloc(size);
}

/* Takes p (NULL is ignored): kept for the next spare_take, or freed when the stack is full. */
static inline void spare_give(struct spare *s, void *p)
{
	if (p && s->n < SPARE_MAX)
		s->blk[s->n++] = p;
	else
		free(p);
}

/* Frees every kept block; the stack stays usable. */
static inline void spare_drop(struct spare *s)
{
	while (s->n)
		free(s->blk[--s->n]);
}

#endif
