/* lmdbcheck.c owns the walk over an LMDB environment that a store check's child runs (see
 * moat/lmdbcheck.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "moat/lmdbcheck.h"

int lmdbcheck_open(struct lmdbcheck *c, const char *dir, size_t mapsize, char *why, size_t whylen)
{
	char data[4096];
	struct stat st;
	memset(c, 0, sizeof(*c));
	snprintf(data, sizeof(data), "%s/data.mdb", dir);
	if (stat(data, &st) < 0 && errno == ENOENT)
		return 1;
	int rc = mdb_env_create(&c->env);
	if (!rc)
		rc = mdb_env_set_mapsize(c->env, mapsize);
	if (!rc)
		rc = mdb_env_open(c->env, dir, MDB_RDONLY | MDB_NOTLS, 0);
	if (!rc)
		rc = mdb_txn_begin(c->env, NULL, MDB_RDONLY, &c->txn);
	if (!rc)
		rc = mdb_dbi_open(c->txn, NULL, 0, &c->dbi);
	if (rc) {
		snprintf(why, whylen, "LMDB cannot open it: %s", mdb_strerror(rc));
		lmdbcheck_close(c);
		return -1;
	}
	return 0;
}

/* The main database: keys in order, each record checked, the count as recorded. */
static int walk_main(struct lmdbcheck *c, lmdbcheck_record_fn fn, void *arg, char *why,
                     size_t whylen)
{
	MDB_cursor *cur;
	MDB_stat ms;
	MDB_val k, v, prev = {0, NULL};
	size_t n = 0;
	int rc = mdb_stat(c->txn, c->dbi, &ms);
	if (!rc)
		rc = mdb_cursor_open(c->txn, c->dbi, &cur);
	if (rc) {
		snprintf(why, whylen, "LMDB: %s", mdb_strerror(rc));
		return -1;
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT), n++) {
		if (prev.mv_data && mdb_cmp(c->txn, c->dbi, &prev, &k) >= 0) {
			snprintf(why, whylen, "keys out of order after record %zu", n);
			rc = -1;
			break;
		}
		if (fn(&k, &v, arg, why, whylen)) {
			rc = -1;
			break;
		}
		prev = k;
	}
	mdb_cursor_close(cur);
	if (rc == -1)
		return -1;
	if (rc != MDB_NOTFOUND) {
		snprintf(why, whylen, "LMDB, after record %zu: %s", n, mdb_strerror(rc));
		return -1;
	}
	if (n != ms.ms_entries) {
		snprintf(why, whylen, "%zu records found, the database says %zu", n,
		         (size_t)ms.ms_entries);
		return -1;
	}
	return 0;
}

/* The free list (database 0): each record a count and that many page numbers inside the file. */
static int walk_free(struct lmdbcheck *c, char *why, size_t whylen)
{
	MDB_cursor *cur;
	MDB_envinfo ei;
	MDB_val k, v;
	int rc = mdb_env_info(c->env, &ei);
	if (!rc)
		rc = mdb_cursor_open(c->txn, 0, &cur);
	if (rc) {
		snprintf(why, whylen, "LMDB free list: %s", mdb_strerror(rc));
		return -1;
	}
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		const size_t *pg = v.mv_data; /* MDB_IDL: count, then the page numbers */
		bool ok = v.mv_size >= sizeof(size_t) && v.mv_size % sizeof(size_t) == 0;
		size_t cnt = 0;
		if (ok) {
			memcpy(&cnt, pg, sizeof(cnt));
			ok = cnt == v.mv_size / sizeof(size_t) - 1;
		}
		for (size_t i = 1; ok && i <= cnt; i++) {
			size_t p;
			memcpy(&p, pg + i, sizeof(p));
			ok = p >= 2 && p <= ei.me_last_pgno;
		}
		if (!ok) {
			snprintf(why, whylen, "a damaged free-list record");
			rc = -1;
			break;
		}
	}
	mdb_cursor_close(cur);
	if (rc == -1)
		return -1;
	if (rc != MDB_NOTFOUND) {
		snprintf(why, whylen, "LMDB free list: %s", mdb_strerror(rc));
		return -1;
	}
	return 0;
}

int lmdbcheck_walk(struct lmdbcheck *c, lmdbcheck_record_fn fn, void *arg, char *why, size_t whylen)
{
	return walk_main(c, fn, arg, why, whylen) || walk_free(c, why, whylen) ? -1 : 0;
}

void lmdbcheck_close(struct lmdbcheck *c)
{
	if (c->txn)
		mdb_txn_abort(c->txn);
	if (c->env)
		mdb_env_close(c->env);
	memset(c, 0, sizeof(*c));
}
