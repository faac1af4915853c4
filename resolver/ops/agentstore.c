/* agentstore.c owns the runtime agents' store (moat/agentstore.h): the record format and the
 * LMDB environment that holds it.
 *
 * One record per agent; the key is its name (1..63 bytes of A-Z a-z 0-9 _ . -). The value,
 * format version 1 or 2, integers big-endian:
 *   u8   version            1 or 2
 *   u8   deny form          0 nxdomain, 1 refused, 2 sinkhole
 *   u8   flags              version 2 only: bit 0 audit mode; other bits zero
 *   u16  nclients           1..AGENT_CLIENTS_MAX
 *   nclients x { u8 addr[16], u8 bits }   ranges as moat keeps them (IPv4 as ::ffff:a.b.c.d)
 *   u32  npatterns          0..AGENT_PATTERNS_MAX
 *   npatterns x { u16 len, len bytes }     allowlist lines, no NUL, no newline
 *   u8   check[8]           BLAKE2b-64 of the key and every byte above
 * A record whose version is not 1 or 2, whose lengths do not add up exactly or whose check does
 * not match is refused (never half-read); a later version adds a new number, and this reader
 * refuses it rather than guess. An agent in enforce mode is written as version 1, so a moatd
 * that reads only version 1 still reads it; an audit agent needs version 2 (an older moatd
 * skips it: its clients are refused, never served unaudited). The key "!format" (a name never
 * starts with '!') holds the store's version as a u32.
 *
 * moatd opens the environment as root before the system-call filter; after it, a commit needs
 * only pwrite/write and fdatasync on the files already open (no MDB_WRITEMAP: no msync, no
 * ftruncate), which the filter allows. MDB_NOMETASYNC: one fdatasync per commit instead of
 * two; a machine crash may then lose the last commit, never the store's integrity. */
#include <errno.h>
#include <lmdb.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "moat/agentstore.h"
#include "moat/bytes.h"
#include "moat/err.h"
#include "moat/strv.h"

#define CHECK_LEN 8
#define MAP_SIZE ((size_t)1 << 30) /* address space only; the file grows as it fills */

static const char format_key[] = "!format";

struct agentstore {
	MDB_env *env;
	MDB_dbi dbi;
	MDB_txn *batch; /* open write transaction, or NULL */
};

static void check_of(const uint8_t *key, size_t klen, const uint8_t *val, size_t len, uint8_t *out)
{
	crypto_generichash_state st;
	crypto_generichash_init(&st, NULL, 0, CHECK_LEN);
	crypto_generichash_update(&st, key, klen);
	crypto_generichash_update(&st, val, len);
	crypto_generichash_final(&st, out, CHECK_LEN);
}

int agentstore_encode(const struct agent_spec *spec, uint8_t **out, size_t *len)
{
	size_t klen = strlen(spec->name);
	if (!config_name_ok(spec->name, klen) || !spec->nclients ||
	    spec->nclients > AGENT_CLIENTS_MAX || spec->npatterns > AGENT_PATTERNS_MAX ||
	    (unsigned)spec->deny > DENY_SINKHOLE || (unsigned)spec->mode > AGENT_AUDIT)
		return MOAT_EINVAL;
	uint8_t flags = spec->mode == AGENT_AUDIT ? 1 : 0;
	size_t n = 4 + (flags ? 1 : 0) + spec->nclients * 17 + 4 + CHECK_LEN;
	for (size_t i = 0; i < spec->npatterns; i++) {
		size_t l = strlen(spec->patterns[i]);
		if (l > AGENT_LINE_MAX || memchr(spec->patterns[i], '\n', l))
			return MOAT_EINVAL;
		n += 2 + l;
	}
	uint8_t *buf = malloc(n), *p = buf;
	if (!buf)
		return MOAT_ENOMEM;
	*p++ = flags ? AGENTSTORE_VERSION : 1;
	*p++ = (uint8_t)spec->deny;
	if (flags)
		*p++ = flags;
	be16_put(p, (uint16_t)spec->nclients);
	p += 2;
	for (size_t i = 0; i < spec->nclients; i++) {
		memcpy(p, spec->clients[i].addr, 16);
		p[16] = spec->clients[i].bits;
		p += 17;
	}
	be32_put(p, (uint32_t)spec->npatterns);
	p += 4;
	for (size_t i = 0; i < spec->npatterns; i++) {
		size_t l = strlen(spec->patterns[i]);
		be16_put(p, (uint16_t)l);
		memcpy(p + 2, spec->patterns[i], l);
		p += 2 + l;
	}
	check_of((const uint8_t *)spec->name, klen, buf, (size_t)(p - buf), p);
	*out = buf;
	*len = n;
	return 0;
}

static int bad(char *err, size_t errlen, const char *why)
{
	snprintf(err, errlen, "%s", why);
	return MOAT_EINVAL;
}

/* The patterns part of a record: [p, end) holds exactly n lines. */
static int decode_patterns(const uint8_t *p, const uint8_t *end, uint32_t n,
                           struct agent_spec *spec, char *err, size_t errlen)
{
	if (n > AGENT_PATTERNS_MAX || (size_t)(end - p) < (size_t)n * 2)
		return bad(err, errlen, "pattern count out of range");
	if (n && !(spec->patterns = calloc(n, sizeof(char *))))
		return MOAT_ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		if (end - p < 2)
			return bad(err, errlen, "truncated pattern");
		size_t l = be16_get(p);
		p += 2;
		if (l > AGENT_LINE_MAX || (size_t)(end - p) < l || memchr(p, 0, l) ||
		    memchr(p, '\n', l))
			return bad(err, errlen, "bad pattern line");
		if (!(spec->patterns[i] = strndup((const char *)p, l)))
			return MOAT_ENOMEM;
		spec->npatterns = i + 1;
		p += l;
	}
	return p == end ? 0 : bad(err, errlen, "bytes after the last pattern");
}

int agentstore_decode(const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen,
                      struct agent_spec *spec, char *err, size_t errlen)
{
	uint8_t check[CHECK_LEN];
	memset(spec, 0, sizeof(*spec));
	if (klen >= CONFIG_NAME_MAX || !config_name_ok((const char *)key, klen))
		return bad(err, errlen, "bad agent name");
	memcpy(spec->name, key, klen);
	if (vlen < 1 || val[0] < 1 || val[0] > AGENTSTORE_VERSION) {
		snprintf(err, errlen, "record version %u, this moatd reads 1 to %d",
		         vlen ? val[0] : 0, AGENTSTORE_VERSION);
		return MOAT_EINVAL;
	}
	size_t head = val[0] >= 2 ? 1 : 0; /* the flags byte */
	if (vlen < 4 + head + 17 + 4 + CHECK_LEN)
		return bad(err, errlen, "truncated record");
	check_of(key, klen, val, vlen - CHECK_LEN, check);
	if (sodium_memcmp(check, val + vlen - CHECK_LEN, CHECK_LEN) != 0)
		return bad(err, errlen, "checksum mismatch (corrupt record)");
	const uint8_t *p = val + 1, *end = val + vlen - CHECK_LEN;
	if (*p > DENY_SINKHOLE)
		return bad(err, errlen, "bad deny form");
	spec->deny = (enum deny_form) * p++;
	if (head && (*p & ~1u))
		return bad(err, errlen, "unknown flags");
	if (head)
		spec->mode = (*p++ & 1) ? AGENT_AUDIT : AGENT_ENFORCE;
	size_t nc = be16_get(p);
	p += 2;
	if (!nc || nc > AGENT_CLIENTS_MAX || (size_t)(end - p) < nc * 17 + 4)
		return bad(err, errlen, "client count out of range");
	for (size_t i = 0; i < nc; i++, p += 17) {
		if (p[16] > 128)
			return bad(err, errlen, "bad client range");
		memcpy(spec->clients[i].addr, p, 16);
		spec->clients[i].bits = p[16];
	}
	spec->nclients = nc;
	uint32_t np = be32_get(p);
	int rc = decode_patterns(p + 4, end, np, spec, err, errlen);
	if (rc)
		agent_spec_clear(spec);
	return rc;
}

static int lmdb_fail(char *err, size_t errlen, const char *what, int rc)
{
	snprintf(err, errlen, "state store: %s: %s", what, mdb_strerror(rc));
	return MOAT_EIO;
}

/* The format record: written into a new store, checked in an old one. */
static int format_check(struct agentstore *st, char *err, size_t errlen)
{
	MDB_txn *txn;
	MDB_val k = {sizeof(format_key) - 1, (void *)format_key}, v;
	uint8_t want[4];
	be32_put(want, AGENTSTORE_FORMAT);
	int rc = mdb_txn_begin(st->env, NULL, 0, &txn);
	if (rc)
		return lmdb_fail(err, errlen, "begin", rc);
	if ((rc = mdb_dbi_open(txn, NULL, 0, &st->dbi))) {
		mdb_txn_abort(txn);
		return lmdb_fail(err, errlen, "open", rc);
	}
	rc = mdb_get(txn, st->dbi, &k, &v);
	if (rc == MDB_NOTFOUND) {
		v = (MDB_val){4, want};
		rc = mdb_put(txn, st->dbi, &k, &v, 0);
	} else if (rc == 0 && (v.mv_size != 4 || memcmp(v.mv_data, want, 4))) {
		mdb_txn_abort(txn);
		snprintf(err, errlen, "state store: format is not version %d", AGENTSTORE_FORMAT);
		return MOAT_EINVAL;
	}
	if (rc || (rc = mdb_txn_commit(txn))) {
		if (rc)
			mdb_txn_abort(txn);
		return lmdb_fail(err, errlen, "format record", rc);
	}
	return 0;
}

int agentstore_open(const char *dir, struct agentstore **out, char *err, size_t errlen)
{
	struct agentstore *st = calloc(1, sizeof(*st));
	if (!st)
		return MOAT_ENOMEM;
	if (mkdir(dir, 0750) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "state_dir %s: cannot create: %m", dir);
		free(st);
		return MOAT_EIO;
	}
	int rc = mdb_env_create(&st->env);
	if (!rc)
		rc = mdb_env_set_mapsize(st->env, MAP_SIZE);
	/* MDB_NOTLS: the control socket's thread is the only user, but the reader slot must not
	 * depend on thread-local storage set up before the filter. */
	if (!rc)
		rc = mdb_env_open(st->env, dir, MDB_NOMETASYNC | MDB_NOTLS, 0640);
	if (rc) {
		snprintf(err, errlen, "state_dir %s: %s", dir, mdb_strerror(rc));
		mdb_env_close(st->env);
		free(st);
		return MOAT_EIO;
	}
	if ((rc = format_check(st, err, errlen))) {
		agentstore_close(st);
		return rc;
	}
	*out = st;
	return 0;
}

void agentstore_close(struct agentstore *st)
{
	if (!st)
		return;
	agentstore_abort(st);
	mdb_env_close(st->env);
	free(st);
}

static int batch(struct agentstore *st, char *err, size_t errlen)
{
	int rc = st->batch ? 0 : mdb_txn_begin(st->env, NULL, 0, &st->batch);
	if (rc) {
		st->batch = NULL;
		return lmdb_fail(err, errlen, "begin", rc);
	}
	return 0;
}

int agentstore_put(struct agentstore *st, const struct agent_spec *spec, char *err, size_t errlen)
{
	uint8_t *val;
	size_t len;
	int rc = agentstore_encode(spec, &val, &len);
	if (rc)
		return bad(err, errlen, "agent cannot be encoded");
	if ((rc = batch(st, err, errlen))) {
		free(val);
		return rc;
	}
	MDB_val k = {strlen(spec->name), (void *)spec->name}, v = {len, val};
	rc = mdb_put(st->batch, st->dbi, &k, &v, 0);
	free(val);
	return rc ? lmdb_fail(err, errlen, "put", rc) : 0;
}

int agentstore_del(struct agentstore *st, const char *name, char *err, size_t errlen)
{
	int rc = batch(st, err, errlen);
	if (rc)
		return rc;
	MDB_val k = {strlen(name), (void *)name};
	rc = mdb_del(st->batch, st->dbi, &k, NULL);
	return rc && rc != MDB_NOTFOUND ? lmdb_fail(err, errlen, "del", rc) : 0;
}

int agentstore_commit(struct agentstore *st, char *err, size_t errlen)
{
	if (!st->batch)
		return 0;
	int rc = mdb_txn_commit(st->batch);
	st->batch = NULL;
	return rc ? lmdb_fail(err, errlen, "commit", rc) : 0;
}

void agentstore_abort(struct agentstore *st)
{
	if (st->batch)
		mdb_txn_abort(st->batch);
	st->batch = NULL;
}

/* A read transaction and a cursor on the store's records. */
static int read_open(struct agentstore *st, MDB_txn **txn, MDB_cursor **cur, char *err,
                     size_t errlen)
{
	int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, txn);
	if (rc)
		return lmdb_fail(err, errlen, "begin", rc);
	if ((rc = mdb_cursor_open(*txn, st->dbi, cur))) {
		mdb_txn_abort(*txn);
		return lmdb_fail(err, errlen, "cursor", rc);
	}
	return 0;
}

int agentstore_each(struct agentstore *st, agentstore_cb cb, agentstore_bad_cb badcb, void *ctx,
                    char *err, size_t errlen)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k, v;
	int rc = read_open(st, &txn, &cur, err, errlen);
	if (rc)
		return rc;
	int out = 0;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && !out;
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		if (k.mv_size && ((const char *)k.mv_data)[0] == '!')
			continue; /* the store's own records */
		struct agent_spec spec;
		char why[160], name[CONFIG_NAME_MAX];
		if (agentstore_decode(k.mv_data, k.mv_size, v.mv_data, v.mv_size, &spec, why,
		                      sizeof(why)) < 0) {
			snprintf(name, sizeof(name), "%.*s", (int)(k.mv_size < 63 ? k.mv_size : 63),
			         (const char *)k.mv_data);
			if (badcb)
				badcb(ctx, name, why);
			continue;
		}
		out = cb(ctx, &spec);
		agent_spec_clear(&spec);
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	if (!out && rc != MDB_NOTFOUND)
		return lmdb_fail(err, errlen, "read", rc);
	return out;
}

#define DECIDED_PREFIX "!decided:"

int agentstore_put_decided(struct agentstore *st, const char *agent, const char *text, char *err,
                           size_t errlen)
{
	char key[sizeof(DECIDED_PREFIX) + CONFIG_NAME_MAX];
	snprintf(key, sizeof(key), DECIDED_PREFIX "%s", agent);
	int rc = batch(st, err, errlen);
	if (rc)
		return rc;
	MDB_val k = {strlen(key), key};
	if (!*text) {
		rc = mdb_del(st->batch, st->dbi, &k, NULL);
		return rc && rc != MDB_NOTFOUND ? lmdb_fail(err, errlen, "del", rc) : 0;
	}
	size_t tl = strlen(text), n = 1 + tl + CHECK_LEN;
	uint8_t *val = malloc(n);
	if (!val)
		return bad(err, errlen, "out of memory");
	val[0] = 1;
	memcpy(val + 1, text, tl);
	check_of((const uint8_t *)key, strlen(key), val, 1 + tl, val + 1 + tl);
	MDB_val v = {n, val};
	rc = mdb_put(st->batch, st->dbi, &k, &v, 0);
	free(val);
	return rc ? lmdb_fail(err, errlen, "put", rc) : 0;
}

int agentstore_each_decided(struct agentstore *st, agentstore_decided_cb cb, void *ctx, char *err,
                            size_t errlen)
{
	MDB_txn *txn;
	MDB_cursor *cur;
	MDB_val k = {sizeof(DECIDED_PREFIX) - 1, DECIDED_PREFIX}, v;
	int rc = read_open(st, &txn, &cur, err, errlen);
	if (rc)
		return rc;
	int out = 0;
	size_t pl = sizeof(DECIDED_PREFIX) - 1;
	for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
	     rc == 0 && !out && k.mv_size > pl && !memcmp(k.mv_data, DECIDED_PREFIX, pl);
	     rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
		uint8_t check[CHECK_LEN];
		char agent[CONFIG_NAME_MAX];
		const uint8_t *val = v.mv_data;
		size_t al = k.mv_size - pl;
		if (al >= sizeof(agent) || v.mv_size < 1 + CHECK_LEN || val[0] != 1)
			continue;
		check_of(k.mv_data, k.mv_size, val, v.mv_size - CHECK_LEN, check);
		if (sodium_memcmp(check, val + v.mv_size - CHECK_LEN, CHECK_LEN) != 0 ||
		    memchr(val + 1, 0, v.mv_size - 1 - CHECK_LEN))
			continue; /* a damaged record is left out, never half-read */
		memcpy(agent, (const char *)k.mv_data + pl, al);
		agent[al] = 0;
		char *text = strndup((const char *)val + 1, v.mv_size - 1 - CHECK_LEN);
		out = text ? cb(ctx, agent, text) : MOAT_ENOMEM;
		free(text);
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	return out;
}
