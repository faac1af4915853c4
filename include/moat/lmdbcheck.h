/* The walk a store check runs in its child (moat/storecheck.h) over an LMDB environment: opened
 * read-only without its lock file, every record of the main database visited in key order (each
 * handed to the store's own record check, which reads its bytes), as many as the database's
 * record says it holds, and every page number of the free list inside the file (a later write
 * would take those pages). Damage LMDB cannot see (no page checksums) shows as a record that
 * fails its store's check, keys out of order, a count that differs, or a crash of the child. */
#ifndef MOAT_LMDBCHECK_H
#define MOAT_LMDBCHECK_H

#include <lmdb.h>
#include <stddef.h>

struct lmdbcheck {
	MDB_env *env;
	MDB_txn *txn; /* read-only */
	MDB_dbi dbi;  /* the main database */
};

/* Open the environment in dir for the walk. 0 (open: close it), 1 (no data file: nothing to
 * check), or -1 with why. */
int lmdbcheck_open(struct lmdbcheck *c, const char *dir, size_t mapsize, char *why, size_t whylen);

/* A record's own check: 0 when sound, else nonzero with why. */
typedef int (*lmdbcheck_record_fn)(const MDB_val *k, const MDB_val *v, void *arg, char *why,
                                   size_t whylen);

/* The walk: 0 when sound, else -1 with why. */
int lmdbcheck_walk(struct lmdbcheck *c, lmdbcheck_record_fn fn, void *arg, char *why,
                   size_t whylen);

void lmdbcheck_close(struct lmdbcheck *c);

#endif
