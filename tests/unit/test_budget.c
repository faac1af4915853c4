/* Unit tests for budget.c (moat/budget.h): a new name is billed the wire bytes of its labels
 * below the zone, a seen one is free, a zone past its limit denies new names and keeps the seen
 * ones, the window moves on, zones are billed apart (and past 64 together), no interval of one
 * window ever holds more than the limit (random runs, checked against an exact log), a name is
 * never free unless it was billed before, the table stays within its cap, peek changes nothing,
 * and the per-rule limits. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/budget.h"
#include "moat/name.h"

static const uint8_t KEY[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
#define HOUR 3600000u

/* name (text) with its zone (text, a suffix of name). */
struct q {
	uint8_t lname[NAME_MAXWIRE];
	const uint8_t *zone;
};

static void q_make(struct q *q, const char *name, const char *zone)
{
	cr_assert_gt(name_from_text(name, strlen(name), q->lname), 0, "%s", name);
	size_t nl = strlen(name), zl = strlen(zone);
	cr_assert(nl > zl && !strcmp(name + nl - zl, zone), "%s not under %s", name, zone);
	/* the zone starts where its text starts: every label before it is one length byte more */
	q->zone = q->lname + (nl - zl);
}

static enum budget_result ask(struct budget_state *st, const char *name, const char *zone,
                              uint32_t limit, uint64_t now, struct budget_verdict *v)
{
	struct q q;
	struct budget_verdict tmp;
	q_make(&q, name, zone);
	struct budget_ask a = {q.lname, q.zone, limit, HOUR, now};
	budget_account(st, &a, v ? v : &tmp);
	return (v ? v : &tmp)->result;
}

Test(budget, new_names_billed_seen_free)
{
	struct budget_state *st = budget_state_new_key(KEY);
	struct budget_verdict v;
	cr_expect_eq(ask(st, "abc.def.cdn.example", "cdn.example", 100, 0, &v), BUDGET_CHARGED);
	cr_expect_eq(v.charge, 8, "abc.def. is 8 wire bytes");
	cr_expect_eq(v.used, 8);
	cr_expect_eq(ask(st, "ABC.def.cdn.example", "cdn.example", 100, 10, &v), BUDGET_SEEN,
	             "names are lower-cased wire: the same name");
	cr_expect_eq(v.charge, 0);
	cr_expect_eq(ask(st, "x.cdn.example", "cdn.example", 100, 20, &v), BUDGET_CHARGED);
	cr_expect_eq(v.used, 10);
	budget_state_free(st);
}

Test(budget, spent_denies_new_keeps_seen)
{
	struct budget_state *st = budget_state_new_key(KEY);
	struct budget_verdict v;
	char name[64];
	int charged = 0;
	for (int i = 0; i < 20; i++) {
		snprintf(name, sizeof(name), "n%04d.z.example", i); /* 6 bytes each */
		if (ask(st, name, "z.example", 40, (uint64_t)i, &v) == BUDGET_CHARGED)
			charged++;
		else
			cr_expect_eq(v.result, BUDGET_DENIED);
		cr_expect(v.result != BUDGET_DENIED || v.first_deny == (i == charged),
		          "the first deny of the episode only");
	}
	cr_expect_eq(charged, 6, "6 x 6 bytes fit in 40, a 7th does not");
	for (int i = 0; i < 6; i++) {
		snprintf(name, sizeof(name), "n%04d.z.example", i);
		cr_expect_eq(ask(st, name, "z.example", 40, 100, NULL), BUDGET_SEEN,
		             "a name sent before keeps resolving: %s", name);
	}
	cr_expect_eq(ask(st, "a.z.example", "z.example", 40, 100, &v), BUDGET_CHARGED,
	             "2 bytes still fit");
	cr_expect_eq(v.used, 38);
	budget_state_free(st);
}

Test(budget, window_moves)
{
	struct budget_state *st = budget_state_new_key(KEY);
	struct budget_verdict v;
	cr_expect_eq(ask(st, "aaaaaaaa.z.example", "z.example", 10, 1000, NULL), BUDGET_CHARGED);
	cr_expect_eq(ask(st, "bbbbbbbb.z.example", "z.example", 10, 2000, NULL), BUDGET_DENIED);
	/* a charge stays at least one window, at most one window and one tick (window/32) */
	cr_expect_eq(ask(st, "bbbbbbbb.z.example", "z.example", 10, 1000 + HOUR - 1, NULL),
	             BUDGET_DENIED, "not before a whole window");
	cr_expect_eq(ask(st, "bbbbbbbb.z.example", "z.example", 10, 1000 + HOUR + HOUR / 32, &v),
	             BUDGET_CHARGED, "after a window and a tick");
	cr_expect_eq(v.used, 9);
	budget_state_free(st);
}

Test(budget, zones_apart_and_other)
{
	struct budget_state *st = budget_state_new_key(KEY);
	struct budget_verdict v;
	char name[64], zone[32];
	cr_expect_eq(ask(st, "aaaa.one.example", "one.example", 5, 0, NULL), BUDGET_CHARGED);
	cr_expect_eq(ask(st, "bbbb.one.example", "one.example", 5, 0, NULL), BUDGET_DENIED);
	cr_expect_eq(ask(st, "bbbb.two.example", "two.example", 5, 0, NULL), BUDGET_CHARGED,
	             "another zone, its own budget");
	/* 64 accounts, then one shared "other" */
	for (int z = 0; z < BUDGET_ZONES + 3; z++) {
		snprintf(zone, sizeof(zone), "z%d.example", z);
		snprintf(name, sizeof(name), "a.%s", zone);
		ask(st, name, zone, 100, 1, &v);
		cr_expect_eq(v.other, z >= BUDGET_ZONES - 2, "zone %d", z);
	}
	struct budget_info bi;
	budget_state_info(st, &bi);
	cr_expect_eq(bi.zones, BUDGET_ZONES);
	budget_state_free(st);
}

/* Random runs: names drawn from a pool (so some repeat), random lengths, random gaps, across a
 * few windows. Every charge is logged; afterwards no interval of one window may hold more than
 * the limit, and a SEEN verdict must always be for a name billed before. */
static void random_run(unsigned seed, uint32_t limit, uint64_t gap_max)
{
	enum { N = 20000, POOL = 3000 };
	struct budget_state *st = budget_state_new_key(KEY);
	static uint64_t t_log[N];
	static uint32_t b_log[N];
	static bool billed[POOL];
	memset(billed, 0, sizeof(billed));
	size_t nlog = 0;
	srand(seed);
	uint64_t now = 0;
	for (int i = 0; i < N; i++) {
		now += (uint64_t)rand() % gap_max;
		int k = rand() % POOL;
		char name[128];
		snprintf(name, sizeof(name), "%.*s%d.zone.example", k % 40,
		         "abcdefghijklmnopqrstuvwxyz0123456789abcd", k);
		struct budget_verdict v;
		ask(st, name, "zone.example", limit, now, &v);
		if (v.result == BUDGET_SEEN)
			cr_assert(billed[k], "seed %u: %s free without having been billed", seed,
			          name);
		if (v.result == BUDGET_CHARGED) {
			billed[k] = true;
			t_log[nlog] = now;
			b_log[nlog++] = v.charge;
		}
	}
	/* every window [t_log[i], t_log[i] + HOUR) */
	uint64_t sum = 0;
	for (size_t i = 0, j = 0; i < nlog; i++) {
		while (j < nlog && t_log[j] < t_log[i] + HOUR)
			sum += b_log[j++];
		cr_assert_leq(sum, limit, "seed %u: %llu bytes in the hour from %llu", seed,
		              (unsigned long long)sum, (unsigned long long)t_log[i]);
		sum -= b_log[i];
	}
	cr_expect_gt(nlog, 10, "the run billed something");
	budget_state_free(st);
}

Test(budget, never_more_than_the_limit_in_a_window)
{
	random_run(1, 4096, 2000);   /* ~20k queries in ~11 h */
	random_run(2, 4096, 200000); /* sparse */
	random_run(3, 200, 50);      /* a flood against a tiny budget */
	random_run(4, 100000, 1000); /* a budget never reached */
}

Test(budget, peek_changes_nothing)
{
	struct budget_state *st = budget_state_new_key(KEY);
	struct q q;
	struct budget_verdict p1, p2, v;
	q_make(&q, "abc.z.example", "z.example");
	struct budget_ask a = {q.lname, q.zone, 10, HOUR, 5};
	budget_peek(NULL, &a, &p1);
	cr_expect_eq(p1.result, BUDGET_CHARGED, "no state yet: a new name that fits");
	budget_peek(st, &a, &p1);
	budget_peek(st, &a, &p2);
	cr_expect_eq(p1.result, BUDGET_CHARGED);
	cr_expect_eq(p2.result, BUDGET_CHARGED, "peeking did not bill it");
	cr_expect_eq(p1.used, 4);
	budget_account(st, &a, &v);
	cr_expect_eq(v.result, BUDGET_CHARGED);
	budget_peek(st, &a, &p1);
	cr_expect_eq(p1.result, BUDGET_SEEN);
	cr_expect_eq(p1.used, 4, "what the zone holds");
	q_make(&q, "defghijk.z.example", "z.example");
	a.lname = q.lname;
	a.zone = q.zone;
	budget_peek(st, &a, &p1);
	cr_expect_eq(p1.result, BUDGET_DENIED);
	cr_expect_eq(p1.charge, 9);
	budget_state_free(st);
}

Test(budget, table_capped_and_evicted_names_billed_again)
{
	struct budget_state *st = budget_state_new_key(KEY);
	char name[64];
	for (unsigned i = 0; i < 3 * BUDGET_SLOTS_MAX; i++) {
		snprintf(name, sizeof(name), "n%u.z.example", i);
		cr_assert_eq(ask(st, name, "z.example", 1u << 24, i, NULL), BUDGET_CHARGED);
	}
	struct budget_info bi;
	budget_state_info(st, &bi);
	cr_expect_leq(bi.slots, BUDGET_SLOTS_MAX);
	cr_expect_gt(bi.evicted, 0);
	cr_expect_leq(bi.mem_bytes, 1u << 20, "within 1 MiB: %zu", bi.mem_bytes);
	unsigned seen = 0, again = 0;
	for (unsigned i = 0; i < 3 * BUDGET_SLOTS_MAX; i++) {
		snprintf(name, sizeof(name), "n%u.z.example", i);
		if (ask(st, name, "z.example", 1u << 24, 3 * BUDGET_SLOTS_MAX, NULL) == BUDGET_SEEN)
			seen++;
		else
			again++;
	}
	cr_expect_leq(seen, BUDGET_SLOTS_MAX, "no more seen than the table holds");
	cr_expect_gt(again, 0, "evicted names are billed again");
	budget_state_free(st);
}

Test(budget, table_uses_its_slots)
{
	/* two buckets a name and one cuckoo step: half the cap's slots fill without a loss */
	struct budget_state *st = budget_state_new_key(KEY);
	char name[64];
	for (unsigned i = 0; i < BUDGET_SLOTS_MAX / 2; i++) {
		snprintf(name, sizeof(name), "d%08x.z.example", i * 2654435761u);
		cr_assert_eq(ask(st, name, "z.example", 1u << 24, 5, NULL), BUDGET_CHARGED);
	}
	struct budget_info bi;
	budget_state_info(st, &bi);
	cr_expect_eq(bi.evicted, 0);
	cr_expect_eq(bi.names, BUDGET_SLOTS_MAX / 2);
	for (unsigned i = 0; i < BUDGET_SLOTS_MAX / 2; i++) {
		snprintf(name, sizeof(name), "d%08x.z.example", i * 2654435761u);
		cr_assert_eq(ask(st, name, "z.example", 1u << 24, 6, NULL), BUDGET_SEEN, "%s",
		             name);
	}
	budget_state_free(st);
}

Test(budget, window_change_starts_over)
{
	struct budget_state *st = budget_state_new_key(KEY);
	struct q q;
	struct budget_verdict v;
	q_make(&q, "abcdefgh.z.example", "z.example");
	struct budget_ask a = {q.lname, q.zone, 10, HOUR, 0};
	budget_account(st, &a, &v);
	cr_expect_eq(v.result, BUDGET_CHARGED);
	a.window_ms = 5000;
	budget_account(st, &a, &v);
	cr_expect_eq(v.result, BUDGET_CHARGED, "a new window: billed afresh");
	budget_state_free(st);
}

Test(budget, clock_a_little_behind)
{
	struct budget_state *st = budget_state_new_key(KEY);
	cr_expect_eq(ask(st, "aaaa.z.example", "z.example", 10, 100000, NULL), BUDGET_CHARGED);
	/* another worker's loop read the clock a moment earlier */
	cr_expect_eq(ask(st, "bbbb.z.example", "z.example", 10, 99990, NULL), BUDGET_CHARGED);
	cr_expect_eq(ask(st, "cccc.z.example", "z.example", 10, 99000, NULL), BUDGET_DENIED);
	cr_expect_eq(ask(st, "aaaa.z.example", "z.example", 10, 50, NULL), BUDGET_SEEN);
	budget_state_free(st);
}

Test(budget, limits_per_rule)
{
	struct config_agent a;
	config_agent_init(&a);
	uint8_t z1[NAME_MAXWIRE], z2[NAME_MAXWIRE];
	name_from_text("cdn.example", 11, z1);
	name_from_text("other.example", 13, z2);
	cr_expect_eq(budget_limit(&a, z1), CONFIG_BUDGET_BYTES);
	struct config_budget_zone zones[1];
	a.budget.zones = zones;
	memcpy(a.budget.zones[0].zone, z1, sizeof(z1));
	a.budget.zones[0].bytes = 16384;
	a.budget.nzones = 1;
	cr_expect_eq(budget_limit(&a, z1), 16384);
	cr_expect_eq(budget_limit(&a, z2), CONFIG_BUDGET_BYTES);
	a.budget.zones[0].bytes = 0;
	cr_expect_eq(budget_limit(&a, z1), 0, "a rule with its budget off");
	a.budget.bytes = 0;
	cr_expect_eq(budget_limit(&a, z2), 0, "the agent's budget off");
}
