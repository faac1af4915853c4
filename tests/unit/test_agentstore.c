/* Unit tests for the runtime agents' store (resolver/agentstore.c): the record format (round
 * trip, version, truncated, corrupt or overlong records refused, bounds on every field) and the
 * LMDB environment (batched puts and deletes, abort, records surviving a close and reopen, a
 * corrupt record skipped and reported, a store of another format refused). */
#include <criterion/criterion.h>

#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moat/agentstore.h"
#include "moat/err.h"

static void spec_make(struct agent_spec *s, const char *name, size_t npat)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->deny = DENY_REFUSED;
	cr_assert_eq(netaddr_parse_cidr("198.51.100.7/32", &s->clients[0]), 0);
	cr_assert_eq(netaddr_parse_cidr("2001:db8::/64", &s->clients[1]), 0);
	s->nclients = 2;
	s->patterns = calloc(npat ? npat : 1, sizeof(char *));
	for (size_t i = 0; i < npat; i++) {
		char t[64];
		snprintf(t, sizeof(t), "n%zu.%s.test tcp/443", i, name);
		s->patterns[i] = strdup(t);
	}
	s->npatterns = npat;
}

static int decode(const char *name, const uint8_t *v, size_t n, struct agent_spec *out, char *err)
{
	return agentstore_decode((const uint8_t *)name, strlen(name), v, n, out, err, 160);
}

Test(format, round_trip)
{
	struct agent_spec s, d;
	uint8_t *v;
	size_t n;
	char err[160] = "";
	spec_make(&s, "ci-1", 3);
	cr_assert_eq(agentstore_encode(&s, &v, &n), 0);
	cr_assert_eq(v[0], 1, "an enforce agent is written as version 1 (older readers read it)");
	cr_assert_eq(decode("ci-1", v, n, &d, err), 0, "%s", err);
	cr_assert_str_eq(d.name, "ci-1");
	cr_assert_eq(d.deny, DENY_REFUSED);
	cr_assert_eq(d.nclients, 2);
	cr_assert_eq(memcmp(d.clients, s.clients, 2 * sizeof(s.clients[0])), 0);
	cr_assert_eq(d.npatterns, 3);
	for (size_t i = 0; i < 3; i++)
		cr_assert_str_eq(d.patterns[i], s.patterns[i]);
	agent_spec_clear(&d);
	/* no patterns: an agent that denies everything */
	agent_spec_clear(&s);
	spec_make(&s, "empty", 0);
	free(v);
	cr_assert_eq(agentstore_encode(&s, &v, &n), 0);
	cr_assert_eq(decode("empty", v, n, &d, err), 0, "%s", err);
	cr_assert_eq(d.npatterns, 0);
	agent_spec_clear(&d);
	agent_spec_clear(&s);
	free(v);
}

/* An audit agent needs the flags byte of version 2; it round-trips, and a reader refuses flags it
 * does not know. */
Test(format, audit_mode)
{
	struct agent_spec s, d;
	uint8_t *v;
	size_t n;
	char err[160] = "";
	spec_make(&s, "aud", 2);
	s.mode = AGENT_AUDIT;
	cr_assert_eq(agentstore_encode(&s, &v, &n), 0);
	cr_assert_eq(v[0], 2, "an audit agent is a version 2 record");
	cr_assert_eq(v[2], 1, "bit 0 of the flags byte: audit");
	cr_assert_eq(decode("aud", v, n, &d, err), 0, "%s", err);
	cr_assert_eq(d.mode, AGENT_AUDIT);
	cr_assert_eq(d.deny, DENY_REFUSED);
	cr_assert_eq(d.npatterns, 2);
	agent_spec_clear(&d);
	/* read as version 1 the same bytes do not add up (the flags byte is not a count) */
	v[0] = 1;
	cr_assert_eq(decode("aud", v, n, &d, err), MOAT_EINVAL);
	agent_spec_clear(&s);
	free(v);
}

Test(format, refused)
{
	struct agent_spec s, d;
	uint8_t *v;
	size_t n;
	char err[160];
	spec_make(&s, "ci-2", 2);
	cr_assert_eq(agentstore_encode(&s, &v, &n), 0);
	/* another version */
	v[0] = AGENTSTORE_VERSION + 1;
	cr_assert_eq(decode("ci-2", v, n, &d, err), MOAT_EINVAL);
	cr_assert(strstr(err, "version 3"), "%s", err);
	v[0] = 0;
	cr_assert_eq(decode("ci-2", v, n, &d, err), MOAT_EINVAL);
	v[0] = 1;
	/* every truncation */
	for (size_t k = 0; k < n; k++)
		cr_assert_eq(decode("ci-2", v, k, &d, err), MOAT_EINVAL, "truncated to %zu", k);
	/* every single-bit flip, anywhere */
	for (size_t k = 1; k < n; k++)
		for (int b = 0; b < 8; b++) {
			v[k] ^= (uint8_t)(1u << b);
			cr_assert_eq(decode("ci-2", v, n, &d, err), MOAT_EINVAL, "bit %d of %zu", b,
			             k);
			v[k] ^= (uint8_t)(1u << b);
		}
	/* the record of another name (the key is under the check) */
	cr_assert_eq(decode("ci-3", v, n, &d, err), MOAT_EINVAL);
	cr_assert(strstr(err, "checksum"), "%s", err);
	/* a bad key */
	cr_assert_eq(decode("b@d", v, n, &d, err), MOAT_EINVAL);
	/* trailing bytes */
	uint8_t *w = malloc(n + 1);
	memcpy(w, v, n);
	w[n] = 0;
	cr_assert_eq(decode("ci-2", w, n + 1, &d, err), MOAT_EINVAL);
	free(w);
	cr_assert_eq(decode("ci-2", v, n, &d, err), 0, "the intact record still decodes: %s", err);
	agent_spec_clear(&d);
	free(v);
	/* what encode refuses */
	s.nclients = 0;
	cr_assert_eq(agentstore_encode(&s, &v, &n), MOAT_EINVAL, "no range");
	s.nclients = AGENT_CLIENTS_MAX + 1;
	cr_assert_eq(agentstore_encode(&s, &v, &n), MOAT_EINVAL, "too many ranges");
	s.nclients = 1;
	free(s.patterns[0]);
	s.patterns[0] = strdup("a\nb");
	cr_assert_eq(agentstore_encode(&s, &v, &n), MOAT_EINVAL, "a newline in a line");
	snprintf(s.name, sizeof(s.name), "b@d");
	cr_assert_eq(agentstore_encode(&s, &v, &n), MOAT_EINVAL, "a bad name");
	agent_spec_clear(&s);
}

/* ---- the environment ---- */
static char dir[64];

static void env_setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/moat-agentstore-test.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void env_teardown(void)
{
	char p[128];
	snprintf(p, sizeof(p), "%s/data.mdb", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/lock.mdb", dir);
	unlink(p);
	rmdir(dir);
}

struct seen {
	char names[8][CONFIG_NAME_MAX];
	size_t n, bad;
	char badname[CONFIG_NAME_MAX];
};

static int each_cb(void *ctx, const struct agent_spec *s)
{
	struct seen *x = ctx;
	if (x->n < 8)
		snprintf(x->names[x->n], CONFIG_NAME_MAX, "%s", s->name);
	x->n++;
	return 0;
}

static void bad_cb(void *ctx, const char *name, const char *why)
{
	(void)why;
	struct seen *x = ctx;
	snprintf(x->badname, CONFIG_NAME_MAX, "%s", name);
	x->bad++;
}

static struct seen read_all(struct agentstore *st)
{
	struct seen x = {0};
	char err[256];
	cr_assert_eq(agentstore_each(st, each_cb, bad_cb, &x, err, sizeof(err)), 0, "%s", err);
	return x;
}

TestSuite(env, .init = env_setup, .fini = env_teardown);

Test(env, batch_reopen_del_abort)
{
	struct agentstore *st;
	struct agent_spec a, b;
	char err[256];
	cr_assert_eq(agentstore_open(dir, &st, err, sizeof(err)), 0, "%s", err);
	spec_make(&a, "a1", 1);
	spec_make(&b, "b2", 2);
	cr_assert_eq(agentstore_put(st, &a, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(agentstore_put(st, &b, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(agentstore_commit(st, err, sizeof(err)), 0, "%s", err);
	agentstore_close(st);
	cr_assert_eq(agentstore_open(dir, &st, err, sizeof(err)), 0, "%s", err);
	struct seen x = read_all(st);
	cr_assert_eq(x.n, 2, "both agents are back after a reopen");
	cr_assert_str_eq(x.names[0], "a1");
	cr_assert_str_eq(x.names[1], "b2");
	/* an aborted batch leaves nothing */
	cr_assert_eq(agentstore_del(st, "a1", err, sizeof(err)), 0, "%s", err);
	agentstore_abort(st);
	cr_assert_eq(read_all(st).n, 2, "an aborted delete changed nothing");
	cr_assert_eq(agentstore_del(st, "a1", err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(agentstore_commit(st, err, sizeof(err)), 0, "%s", err);
	x = read_all(st);
	cr_assert_eq(x.n, 1);
	cr_assert_str_eq(x.names[0], "b2");
	agentstore_close(st);
	agent_spec_clear(&a);
	agent_spec_clear(&b);
}

/* Write a raw value under key, bypassing the store (a damaged file, a newer moatd). */
static void raw_put(const char *key, const void *val, size_t len)
{
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	cr_assert_eq(mdb_env_create(&env), 0);
	cr_assert_eq(mdb_env_open(env, dir, 0, 0640), 0);
	cr_assert_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
	cr_assert_eq(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
	MDB_val k = {strlen(key), (void *)key}, v = {len, (void *)val};
	cr_assert_eq(mdb_put(txn, dbi, &k, &v, 0), 0);
	cr_assert_eq(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
}

Test(env, corrupt_record_skipped)
{
	struct agentstore *st;
	struct agent_spec a;
	uint8_t *v;
	size_t n;
	char err[256];
	cr_assert_eq(agentstore_open(dir, &st, err, sizeof(err)), 0, "%s", err);
	spec_make(&a, "good", 1);
	cr_assert_eq(agentstore_put(st, &a, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(agentstore_commit(st, err, sizeof(err)), 0, "%s", err);
	agentstore_close(st);
	snprintf(a.name, sizeof(a.name), "hurt");
	cr_assert_eq(agentstore_encode(&a, &v, &n), 0);
	v[n / 2] ^= 0x40;
	raw_put("hurt", v, n);
	free(v);
	cr_assert_eq(agentstore_open(dir, &st, err, sizeof(err)), 0, "%s", err);
	struct seen x = read_all(st);
	cr_assert_eq(x.n, 1, "the good record is read");
	cr_assert_eq(x.bad, 1, "the corrupt one is reported");
	cr_assert_str_eq(x.badname, "hurt");
	agentstore_close(st);
	agent_spec_clear(&a);
}

Test(env, other_format_refused)
{
	struct agentstore *st;
	char err[256] = "";
	static const uint8_t v2[4] = {0, 0, 0, 2};
	raw_put("!format", v2, 4);
	cr_assert_eq(agentstore_open(dir, &st, err, sizeof(err)), MOAT_EINVAL);
	cr_assert(strstr(err, "not version 1"), "%s", err);
}
