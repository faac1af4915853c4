/* Fault test of the two LMDB stores (issue 23): 100 runs each of random damage to one page of
 * the runtime-agent store (resolver/ops/agentstore.c) and of moat-fw's ledger (tools/fw/ledger.c),
 * each opened the way its daemon opens it at start (agentstore_open, ledger_open_checked). In
 * every run this process survives (LMDB reads the damaged file only in the checker's child),
 * and either the store was found damaged and moved aside (data.mdb.damaged-*, the store opened
 * empty: nothing of it trusted) or every record read back is one the store was given, unchanged
 * (the damage hit bytes nothing reads: LMDB has no page checksums, the records carry checks).
 * A record read that was never written, or changed, fails the test. The damage: a run of 8 to
 * 128 random bytes at a random place in the used part of a random page (header, node pointers,
 * nodes; a meta page sometimes), the used part taken from the page's own header. */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ledger.h"
#include "moat/agentstore.h"
#include "moat/err.h"

#define RUNS 100
#define PAGE 4096
#define NAGENTS 150
#define NGRANTS 400

static char dir[64];
#include "tmpfiles.h"
static uint8_t *pristine; /* the data file as written, before any damage */
static size_t pristine_len, pages;

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/moat-store-faults.XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
	tmpdir_clear();
	rmdir(dir);
	free(pristine);
	pristine = NULL;
}

TestSuite(faults, .init = setup, .fini = teardown);

/* The data file as the store left it, and how many pages its last transaction uses. */
static void keep_pristine(void)
{
	char p[128];
	MDB_env *env;
	MDB_envinfo ei;
	snprintf(p, sizeof(p), "%s/data.mdb", dir);
	cr_assert_eq(mdb_env_create(&env), 0);
	cr_assert_eq(mdb_env_set_mapsize(env, (size_t)1 << 30), 0);
	cr_assert_eq(mdb_env_open(env, dir, MDB_RDONLY, 0), 0);
	cr_assert_eq(mdb_env_info(env, &ei), 0);
	mdb_env_close(env);
	pages = ei.me_last_pgno + 1;
	cr_assert_gt(pages, 6, "a store of several pages (%zu)", pages);
	pristine_len = pages * PAGE;
	pristine = malloc(pristine_len);
	int fd = open(p, O_RDONLY);
	cr_assert_eq(pread(fd, pristine, pristine_len, 0), (ssize_t)pristine_len);
	close(fd);
}

/* The store back as written, one page of it damaged. Returns the page. */
static size_t damage(void)
{
	char p[128];
	uint8_t page[PAGE];
	size_t pg = (size_t)random() % pages;
	memcpy(page, pristine + pg * PAGE, PAGE);
	uint16_t flags, lower, upper;
	memcpy(&flags, page + 10, 2);
	memcpy(&lower, page + 12, 2);
	memcpy(&upper, page + 14, 2);
	/* branch and leaf pages: the header and pointers below lower, the nodes from upper */
	bool tree = (flags & 3) && lower >= 16 && lower <= upper && upper <= PAGE;
	size_t used = tree ? (size_t)lower + (PAGE - upper) : PAGE;
	size_t len = 8 + (size_t)random() % 121, at = (size_t)random() % used;
	if (tree && at >= lower)
		at = upper + (at - lower);
	for (size_t i = 0; i < len && at + i < PAGE; i++)
		page[at + i] = (uint8_t)random();
	tmpdir_clear();
	snprintf(p, sizeof(p), "%s/data.mdb", dir);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, pristine, pristine_len, 0), (ssize_t)pristine_len);
	cr_assert_eq(pwrite(fd, page, PAGE, (off_t)(pg * PAGE)), PAGE);
	close(fd);
	return pg;
}

/* ---- the runtime-agent store ---- */

static void agent_make(struct agent_spec *s, int i)
{
	memset(s, 0, sizeof(*s));
	snprintf(s->name, sizeof(s->name), "agent-%03d", i);
	s->deny = DENY_NXDOMAIN;
	char cidr[32];
	snprintf(cidr, sizeof(cidr), "10.%d.%d.0/24", i / 256, i % 256);
	cr_assert_eq(netaddr_parse_cidr(cidr, &s->clients[0]), 0);
	s->nclients = 1;
	s->patterns = calloc(2, sizeof(char *));
	char t[64];
	snprintf(t, sizeof(t), "n%d.example.test", i);
	s->patterns[0] = strdup(t);
	snprintf(t, sizeof(t), "*.w%d.example.test tcp/443", i);
	s->patterns[1] = strdup(t);
	s->npatterns = 2;
}

struct agents_seen {
	size_t n, bad;
};

/* Every agent read must be one of those written, field for field. */
static int agent_seen(void *ctx, const struct agent_spec *a)
{
	struct agents_seen *s = ctx;
	struct agent_spec w;
	int i = -1;
	s->n++;
	if (sscanf(a->name, "agent-%d", &i) != 1 || i < 0 || i >= NAGENTS) {
		s->bad++;
		return 0;
	}
	agent_make(&w, i);
	bool same = !strcmp(w.name, a->name) && w.deny == a->deny && w.nclients == a->nclients &&
	            !memcmp(w.clients, a->clients, sizeof(w.clients[0])) &&
	            w.npatterns == a->npatterns && !strcmp(w.patterns[0], a->patterns[0]) &&
	            !strcmp(w.patterns[1], a->patterns[1]);
	s->bad += !same;
	agent_spec_clear(&w);
	return 0;
}

static void agent_bad(void *ctx, const char *name, const char *why)
{
	(void)name, (void)why;
	((struct agents_seen *)ctx)->bad++; /* a bad record read: damage not seen at open */
}

Test(faults, agent_store_random_page_damage, .timeout = 120)
{
	char err[512];
	struct agentstore *st;
	cr_assert_eq(agentstore_open(dir, &st, err, sizeof(err)), 0, "%s", err);
	for (int i = 0; i < NAGENTS; i++) {
		struct agent_spec a;
		agent_make(&a, i);
		cr_assert_eq(agentstore_put(st, &a, err, sizeof(err)), 0, "%s", err);
		agent_spec_clear(&a);
	}
	cr_assert_eq(agentstore_commit(st, err, sizeof(err)), 0, "%s", err);
	agentstore_close(st);
	keep_pristine();
	srandom(23);
	int moved = 0, intact = 0;
	for (int run = 0; run < RUNS; run++) {
		size_t pg = damage();
		cr_assert_eq(agentstore_open(dir, &st, err, sizeof(err)), 0,
		             "run %d (page %zu): %s", run, pg, err);
		struct agents_seen s = {0};
		cr_assert_geq(agentstore_each(st, agent_seen, agent_bad, &s, err, sizeof(err)), 0,
		              "run %d: %s", run, err);
		agentstore_close(st);
		cr_assert_eq(s.bad, 0, "run %d (page %zu): %zu records read that were not written",
		             run, pg, s.bad);
		if (tmpdir_has("data.mdb.damaged-")) {
			cr_assert_eq(s.n, 0, "run %d: a store moved aside opens empty", run);
			moved++;
		} else {
			cr_assert_eq(s.n, NAGENTS, "run %d (page %zu): %zu of %d agents, no move",
			             run, pg, s.n, NAGENTS);
			intact++;
		}
	}
	cr_log_info("agent store, %d runs over %zu pages: %d moved aside, %d harmless", RUNS, pages,
	            moved, intact);
	cr_expect_gt(moved, RUNS / 4, "damage was found in %d runs only", moved);
}

/* ---- moat-fw's ledger ---- */

static struct ledger_key grant_key(int i)
{
	struct ledger_key k;
	memset(&k, 0, sizeof(k));
	k.family = 4;
	k.dst[0] = 198;
	k.dst[1] = 51;
	k.dst[2] = (uint8_t)(100 + i / 256);
	k.dst[3] = (uint8_t)(i % 256);
	k.proto = i % 2 ? 6 : 0;
	k.port = i % 2 ? 443 : 0;
	return k;
}

struct grants_seen {
	size_t n, bad;
};

static int grant_seen(const struct ledger_entry *e, void *ctx)
{
	struct grants_seen *s = ctx;
	int i = (e->key.dst[2] - 100) * 256 + e->key.dst[3];
	struct ledger_key k = grant_key(i);
	s->n++;
	s->bad += i < 0 || i >= NGRANTS || memcmp(&k, &e->key, sizeof(k)) ||
	          e->expiry != 4000000000u + (uint64_t)i || strcmp(e->agent, "box");
	return 0;
}

Test(faults, ledger_random_page_damage, .timeout = 120)
{
	char err[512];
	struct ledger *l;
	cr_assert_eq(ledger_open(dir, &l, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(ledger_batch_begin(l), 0);
	for (int i = 0; i < NGRANTS; i++) {
		struct ledger_key k = grant_key(i);
		cr_assert_eq(ledger_batch_put(l, &k, 4000000000u + (uint64_t)i, "box", NULL), 0);
	}
	cr_assert_eq(ledger_batch_commit(l), 0);
	ledger_close(l);
	keep_pristine();
	srandom(2023);
	int moved = 0, intact = 0;
	for (int run = 0; run < RUNS; run++) {
		size_t pg = damage();
		cr_assert_eq(ledger_open_checked(dir, &l, err, sizeof(err)), 0,
		             "run %d (page %zu): %s", run, pg, err);
		struct grants_seen s = {0};
		cr_assert_geq(ledger_iterate(l, 0, grant_seen, &s), 0, "run %d", run);
		ledger_close(l);
		cr_assert_eq(s.bad, 0, "run %d (page %zu): %zu grants read that were not made", run,
		             pg, s.bad);
		if (tmpdir_has("data.mdb.damaged-")) {
			cr_assert_eq(s.n, 0, "run %d: a ledger moved aside opens empty (closed)",
			             run);
			moved++;
		} else {
			cr_assert_eq(s.n, NGRANTS, "run %d (page %zu): %zu of %d grants, no move",
			             run, pg, s.n, NGRANTS);
			intact++;
		}
	}
	cr_log_info("ledger, %d runs over %zu pages: %d moved aside, %d harmless", RUNS, pages,
	            moved, intact);
	cr_expect_gt(moved, RUNS / 4, "damage was found in %d runs only", moved);
}
