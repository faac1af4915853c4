/* ledger.c owns moat-fw's LMDB grant ledger (record format in ledger.h): opening the environment,
 * batched extend-only writes, iteration over live records and purging of expired ones.
 *
 * LMDB gives crash safety for free: a transaction is either fully in data.mdb after commit or not
 * at all, so a killed moat-fw never leaves half a batch. Commits are not synchronous: the
 * environment is opened MDB_NOSYNC | MDB_WRITEMAP, so a committed batch is in the shared mapping
 * (it survives a crash of moat-fw, which is what an ACK promises) and ledger_sync, once a second,
 * makes it durable on disk. Only a power loss can undo that last second, and a power loss also
 * empties the kernel's sets: nothing is open that the ledger forgot (ledger_open says more). */
#include "ledger.h"
#include "moat/bytes.h"
#include "moat/err.h"

#include <errno.h>
#include <stdbool.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define LEDGER_VAL_MIN 10 /* expiry, agent_len, at least one agent byte */

struct ledger {
	MDB_env *env;
	MDB_dbi dbi;
	MDB_txn *batch; /* the open write transaction of a batch, or NULL */
	bool dirty;     /* committed since the last ledger_sync */
};

void ledger_key_encode(const struct ledger_key *key, uint8_t *out)
{
	out[0] = key->family;
	memcpy(out + 1, key->src, 16);
	memcpy(out + 17, key->dst, 16);
	out[33] = key->proto;
	be16_put(out + 34, key->port);
}

static void ledger_key_decode(const uint8_t *in, struct ledger_key *key)
{
	key->family = in[0];
	memcpy(key->src, in + 1, 16);
	memcpy(key->dst, in + 17, 16);
	key->proto = in[33];
	key->port = be16_get(in + 34);
}

static int ledger_key_ok(const MDB_val *k)
{
	if (k->mv_size != LEDGER_KEYLEN)
		return 0;
	const uint8_t *p = k->mv_data;
	uint16_t port = be16_get(p + 34);
	bool scoped = p[33] == 6 || p[33] == 17;
	return (p[0] == 4 || p[0] == 6) &&
	       (scoped ? port != 0 : (p[33] == 0 || p[33] == 255) && !port);
}

static const char ledger_version_key[] = "version";

static bool ledger_is_version_key(const MDB_val *k)
{
	return k->mv_size == sizeof(ledger_version_key) - 1 &&
	       memcmp(k->mv_data, ledger_version_key, k->mv_size) == 0;
}

/* Version 1 -> 2 inside txn: each 33-byte record becomes its "every port" record (what version
 * 1 opened). Then the version record. */
static int ledger_migrate(MDB_txn *txn, MDB_dbi dbi)
{
	MDB_cursor *cur;
	MDB_val k, v;
	int rc = mdb_cursor_open(txn, dbi, &cur);
	if (rc)
		return rc;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;) {
		if (k.mv_size != LEDGER_KEYLEN_V1) {
			rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
			continue;
		}
		uint8_t nk[LEDGER_KEYLEN], val[9 + LEDGER_AGENT_MAX];
		size_t vl = v.mv_size < sizeof(val) ? v.mv_size : sizeof(val);
		memcpy(val, v.mv_data, vl);
		memset(nk, 0, sizeof(nk));
		memcpy(nk, k.mv_data, LEDGER_KEYLEN_V1);
		if ((rc = mdb_cursor_del(cur, 0)) != 0)
			break;
		MDB_val nkv = {sizeof(nk), nk}, nvv = {vl, val};
		if ((rc = mdb_put(txn, dbi, &nkv, &nvv, 0)) != 0)
			break;
		/* Go on after the record just written (it sorts after the old key). */
		rc = mdb_cursor_get(cur, &nkv, &v, MDB_SET_RANGE);
		if (rc == 0)
			rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(cur);
	if (rc != MDB_NOTFOUND)
		return rc;
	uint8_t ver[4] = {0, 0, 0, LEDGER_VERSION};
	MDB_val vk = {sizeof(ledger_version_key) - 1, (void *)ledger_version_key},
	        vv = {sizeof(ver), ver};
	return mdb_put(txn, dbi, &vk, &vv, 0);
}

/* Check the version record, migrating an older ledger. 0, or an LMDB code / -1 (too new). */
static int ledger_check_version(MDB_txn *txn, MDB_dbi dbi, char *err, size_t errlen)
{
	MDB_val vk = {sizeof(ledger_version_key) - 1, (void *)ledger_version_key}, vv;
	int rc = mdb_get(txn, dbi, &vk, &vv);
	if (rc == MDB_NOTFOUND)
		return ledger_migrate(txn, dbi);
	if (rc)
		return rc;
	const uint8_t *p = vv.mv_data;
	uint32_t ver = vv.mv_size == 4 ? be32_get(p) : 0;
	if (ver == LEDGER_VERSION)
		return 0;
	snprintf(err, errlen, "ledger format version %u is not %d (newer moat-fw?)", ver,
	         LEDGER_VERSION);
	return -1;
}

/* Expiry of a well-formed value, with the agent name copied out when agent != NULL; 0 when the
 * value is malformed (0 is never a live expiry). */
static uint64_t ledger_val_parse(const MDB_val *v, char *agent)
{
	const uint8_t *p = v->mv_data;
	if (v->mv_size < LEDGER_VAL_MIN)
		return 0;
	size_t alen = p[8];
	if (alen == 0 || alen > LEDGER_AGENT_MAX || v->mv_size != 9 + alen)
		return 0;
	uint64_t e = (uint64_t)be32_get(p) << 32 | be32_get(p + 4);
	if (agent) {
		memcpy(agent, p + 9, alen);
		agent[alen] = '\0';
	}
	return e;
}

int ledger_open(const char *dir, struct ledger **out, char *err, size_t errlen)
{
	int rc;

	if (err && errlen)
		err[0] = '\0';
	if (!dir || !out)
		return MOAT_EINVAL;
	*out = NULL;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		snprintf(err, errlen, "%s: cannot create: %s", dir, strerror(errno));
		return MOAT_EIO;
	}
	struct ledger *l = calloc(1, sizeof(*l));
	if (!l)
		return MOAT_ENOMEM;
	if ((rc = mdb_env_create(&l->env)) != 0) {
		snprintf(err, errlen, "mdb_env_create: %s", mdb_strerror(rc));
		free(l);
		return MOAT_EIO;
	}
	/* 64 MiB of map is ~ a million records. With MDB_WRITEMAP the file is that size at once,
	 * sparse: only the pages used take disk. */
	rc = mdb_env_set_mapsize(l->env, LEDGER_MAPSIZE);
	if (rc == 0)
		/* No fsync per commit: a commit still reaches the file (and so survives a crash of
		 * moat-fw, while the kernel keeps its sets); ledger_sync makes it durable once a
		 * second. Only a power loss can undo the last second of grants, and a power loss
		 * empties the kernel's sets too: re-resolving grants again (fail closed). A durable
		 * commit costs ~1 ms or more, on the path of every answer. MDB_WRITEMAP: a commit
		 * writes into the shared mapping instead of calling pwrite per page (~4 us instead
		 * of ~18 us a grant here), and the mapping outlives a crash of moat-fw just the
		 * same. */
		rc = mdb_env_open(l->env, dir, MDB_NOSYNC | MDB_WRITEMAP, 0600);
	MDB_txn *txn = NULL;
	if (rc == 0)
		rc = mdb_txn_begin(l->env, NULL, 0, &txn);
	if (rc == 0)
		rc = mdb_dbi_open(txn, NULL, 0, &l->dbi);
	if (rc == 0 && (rc = ledger_check_version(txn, l->dbi, err, errlen)) < 0) {
		mdb_txn_abort(txn);
		mdb_env_close(l->env);
		free(l);
		return MOAT_EIO;
	}
	if (rc == 0) {
		rc = mdb_txn_commit(txn);
		txn = NULL;
	}
	if (rc != 0) {
		if (txn)
			mdb_txn_abort(txn);
		snprintf(err, errlen, "%s: %s", dir, mdb_strerror(rc));
		mdb_env_close(l->env);
		free(l);
		return MOAT_EIO;
	}
	*out = l;
	return 0;
}

int ledger_sync(struct ledger *l)
{
	if (!l || !l->dirty)
		return 0;
	int rc = mdb_env_sync(l->env, 1);
	if (rc == 0)
		l->dirty = false;
	return rc == 0 ? 0 : MOAT_EIO;
}

void ledger_close(struct ledger *l)
{
	if (!l)
		return;
	if (l->batch)
		mdb_txn_abort(l->batch);
	ledger_sync(l);
	mdb_env_close(l->env);
	free(l);
}

int ledger_batch_begin(struct ledger *l)
{
	if (!l || l->batch)
		return MOAT_EINVAL;
	if (mdb_txn_begin(l->env, NULL, 0, &l->batch) != 0) {
		l->batch = NULL;
		return MOAT_EIO;
	}
	return 0;
}

int ledger_batch_put(struct ledger *l, const struct ledger_key *key, uint64_t expiry,
                     const char *agent, uint64_t *prev)
{
	uint8_t kb[LEDGER_KEYLEN];
	uint8_t vb[9 + LEDGER_AGENT_MAX];

	if (prev)
		*prev = 0;
	if (!l || !l->batch || !key || !agent || (key->family != 4 && key->family != 6) ||
	    expiry == 0)
		return MOAT_EINVAL;
	ledger_key_encode(key, kb);
	if (!ledger_key_ok(&(MDB_val){sizeof(kb), kb}))
		return MOAT_EINVAL;
	size_t alen = strlen(agent);
	if (alen == 0 || alen > LEDGER_AGENT_MAX)
		return MOAT_EINVAL;
	MDB_val k = {.mv_size = sizeof(kb), .mv_data = kb};
	MDB_val v;
	int rc = mdb_get(l->batch, l->dbi, &k, &v);
	if (rc == 0) {
		uint64_t old = ledger_val_parse(&v, NULL);
		if (prev)
			*prev = old;
		if (old >= expiry)
			return 0; /* extend-only: the ledger already holds as long or longer */
	} else if (rc != MDB_NOTFOUND) {
		return MOAT_EIO;
	}
	be32_put(vb, (uint32_t)(expiry >> 32));
	be32_put(vb + 4, (uint32_t)expiry);
	vb[8] = (uint8_t)alen;
	memcpy(vb + 9, agent, alen);
	v.mv_size = 9 + alen;
	v.mv_data = vb;
	return mdb_put(l->batch, l->dbi, &k, &v, 0) == 0 ? 0 : MOAT_EIO;
}

int ledger_batch_commit(struct ledger *l)
{
	if (!l || !l->batch)
		return MOAT_EINVAL;
	int rc = mdb_txn_commit(l->batch); /* frees the transaction even on failure */
	l->batch = NULL;
	if (rc == 0)
		l->dirty = true;
	return rc == 0 ? 0 : MOAT_EIO;
}

void ledger_batch_abort(struct ledger *l)
{
	if (l && l->batch) {
		mdb_txn_abort(l->batch);
		l->batch = NULL;
	}
}

/* A transaction (flags: MDB_RDONLY or 0, a write) and a cursor over the records. 0, or -1 with
 * nothing left open. */
static int ledger_walk_open(struct ledger *l, unsigned flags, MDB_txn **txn, MDB_cursor **cur)
{
	if (mdb_txn_begin(l->env, NULL, flags, txn) != 0)
		return -1;
	if (mdb_cursor_open(*txn, l->dbi, cur) != 0) {
		mdb_txn_abort(*txn);
		return -1;
	}
	return 0;
}

/* cb for every well-formed record from the key start (NULL: the first) while its first plen
 * bytes match start's, in key order, in one read transaction; expired ones too when told. */
static int ledger_walk(struct ledger *l, const uint8_t *start, size_t plen, uint64_t now,
                       bool expired, int (*cb)(const struct ledger_entry *e, void *ctx), void *ctx)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k = {LEDGER_KEYLEN, (void *)start}, v;
	struct ledger_entry e;
	int count = 0, ret = 0, rc;

	if (ledger_walk_open(l, MDB_RDONLY, &txn, &cur) != 0)
		return MOAT_EIO;
	for (rc = mdb_cursor_get(cur, &k, &v, start ? MDB_SET_RANGE : MDB_FIRST);
	     rc == 0 && (!start || (k.mv_size >= plen && !memcmp(k.mv_data, start, plen)));
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (!ledger_key_ok(&k))
			continue;
		e.expiry = ledger_val_parse(&v, e.agent);
		if (e.expiry <= now && !expired)
			continue;
		ledger_key_decode(k.mv_data, &e.key);
		e.remaining = e.expiry > now ? e.expiry - now : 0;
		count++;
		if ((ret = cb(&e, ctx)) != 0)
			break;
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	if (ret != 0)
		return ret;
	if (rc != 0 && rc != MDB_NOTFOUND)
		return MOAT_EIO;
	return count;
}

int ledger_iterate(struct ledger *l, uint64_t now,
                   int (*cb)(const struct ledger_entry *e, void *ctx), void *ctx)
{
	if (!l || !cb)
		return MOAT_EINVAL;
	return ledger_walk(l, NULL, 0, now, false, cb, ctx);
}

int ledger_each_dst(struct ledger *l, uint8_t family, const uint8_t *src, const uint8_t *dst,
                    uint64_t now, int (*cb)(const struct ledger_entry *e, void *ctx), void *ctx)
{
	struct ledger_key want = {.family = family};
	uint8_t start[LEDGER_KEYLEN];
	if (!l || !cb || l->batch)
		return MOAT_EINVAL;
	if (src)
		memcpy(want.src, src, 16);
	memcpy(want.dst, dst, 16);
	ledger_key_encode(&want, start); /* proto 0, port 0: the first key of the destination */
	/* Keys sort by family, source, destination: the destination's records are adjacent. */
	return ledger_walk(l, start, 33, now, true, cb, ctx);
}

/* Delete, in one write transaction, every record doomed(k, v, ctx) says is to go. The number
 * deleted, or MOAT_EIO. */
static int ledger_delete_where(struct ledger *l,
                               bool (*doomed)(const MDB_val *k, const MDB_val *v, void *ctx),
                               void *ctx)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	int count = 0, rc;

	if (ledger_walk_open(l, 0, &txn, &cur) != 0)
		return MOAT_EIO;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (!doomed(&k, &v, ctx))
			continue;
		/* After a cursor delete, MDB_NEXT moves to the record that followed. */
		if (mdb_cursor_del(cur, 0) != 0) {
			rc = -1;
			break;
		}
		count++;
	}
	mdb_cursor_close(cur);
	if (rc != MDB_NOTFOUND) {
		mdb_txn_abort(txn);
		return MOAT_EIO;
	}
	if (count == 0) {
		mdb_txn_abort(txn); /* nothing deleted: no commit to write */
		return 0;
	}
	return mdb_txn_commit(txn) == 0 ? count : MOAT_EIO;
}

/* Expired and malformed records (never the version record). */
static bool ledger_stale(const MDB_val *k, const MDB_val *v, void *ctx)
{
	uint64_t now = *(const uint64_t *)ctx;
	return !((ledger_key_ok(k) && ledger_val_parse(v, NULL) > now) || ledger_is_version_key(k));
}

int ledger_purge(struct ledger *l, uint64_t now)
{
	if (!l || l->batch)
		return MOAT_EINVAL;
	return ledger_delete_where(l, ledger_stale, &now);
}

struct ledger_match {
	bool (*match)(const struct ledger_key *key, void *ctx);
	void *ctx;
};

static bool ledger_matched(const MDB_val *k, const MDB_val *v, void *ctx)
{
	const struct ledger_match *m = ctx;
	struct ledger_key key;
	(void)v;
	if (!ledger_key_ok(k))
		return false;
	ledger_key_decode(k->mv_data, &key);
	return m->match(&key, m->ctx);
}

int ledger_delete_if(struct ledger *l, bool (*match)(const struct ledger_key *key, void *ctx),
                     void *ctx)
{
	if (!l || !match || l->batch)
		return MOAT_EINVAL;
	struct ledger_match m = {match, ctx};
	return ledger_delete_where(l, ledger_matched, &m);
}
