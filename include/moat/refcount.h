/* refcount.h: the reference count of what worker threads share (policy snapshots, pattern sets,
 * RPZ data), so the memory-order choice is made once, and REF_PAIR, the ref and unref functions
 * each of them defines with it. Header-only. */
#ifndef MOAT_REFCOUNT_H
#define MOAT_REFCOUNT_H

#include <stdbool.h>

/* One more holder. Relaxed: the new holder got its pointer from one that already holds. */
static inline void ref_take(int *refs)
{
	__atomic_add_fetch(refs, 1, __ATOMIC_RELAXED);
}

/* One holder less; true when it was the last and the caller frees. Acquire-release: the freeing
 * thread sees every write the others made before they let go. */
static inline bool ref_drop(int *refs)
{
	return __atomic_sub_fetch(refs, 1, __ATOMIC_ACQ_REL) <= 0;
}

/* The pair of public functions of a shared struct with an int refs member: `type *ref(type *)`
 * takes one more hold and yields its argument; `void unref(type *)` lets one go (NULL is a no-op)
 * and calls destroy, the module's own free body, when it was the last. */
#define REF_PAIR(ref, unref, type, destroy)                                                        \
	type *ref(type *obj)                                                                       \
	{                                                                                          \
		ref_take(&obj->refs);                                                              \
		return obj;                                                                        \
	}                                                                                          \
	void unref(type *obj)                                                                      \
	{                                                                                          \
		if (obj && ref_drop(&obj->refs))                                                   \
			destroy(obj);                                                              \
	}

#endif
