/* Unit tests for the quick filter of a pattern set built in memory (resolver/policy/pset.h): it
 * must never turn away a listed name (through loads, one-by-one adds, every resize and a clone),
 * and it must turn away nearly every absent one, which is what saves a deny its SipHash. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/name.h"
#include "moat/policy.h"
#include "policy/pset.h"

static size_t wire_of(const char *text, uint8_t wire[NAME_MAXWIRE])
{
	int n = name_from_text(text, strlen(text), wire);
	cr_assert_gt(n, 0, "bad test name %s", text);
	return (size_t)n;
}

/* 20000 names in one load, then 3000 added one by one (the table doubles several times). */
static struct policy_set *big_set(void)
{
	struct policy_set *s = policy_set_new();
	cr_assert_not_null(s);
	enum { N = 20000 };
	char **lines = calloc(N, sizeof(*lines));
	cr_assert_not_null(lines);
	for (int i = 0; i < N; i++) {
		lines[i] = malloc(48);
		snprintf(lines[i], 48, i % 5 ? "host%d.example.test" : "*.zone%d.example.test", i);
	}
	char err[256];
	cr_assert_eq(policy_set_load_lines(s, (const char *const *)lines, N, "t", err, sizeof(err)),
	             0, "%s", err);
	for (int i = 0; i < N; i++)
		free(lines[i]);
	free(lines);
	for (int i = 0; i < 3000; i++) {
		char t[64];
		uint8_t w[NAME_MAXWIRE];
		snprintf(t, sizeof(t), "added%d.example.test", i);
		wire_of(t, w);
		cr_assert_eq(policy_set_add_wire(s, w, false, "t", (uint32_t)i + 1), 0);
	}
	return s;
}

static void expect_all_listed(const struct policy_set *s)
{
	char t[80];
	uint8_t w[NAME_MAXWIRE];
	for (int i = 0; i < 20000; i++) {
		snprintf(t, sizeof(t), i % 5 ? "host%d.example.test" : "x.zone%d.example.test", i);
		wire_of(t, w);
		cr_expect(policy_set_match(s, w, NULL), "%s not matched", t);
	}
	for (int i = 0; i < 3000; i++) {
		snprintf(t, sizeof(t), "added%d.example.test", i);
		size_t n = wire_of(t, w);
		cr_expect(pquick_maybe(s, w, n), "%s turned away", t);
		cr_expect(policy_set_match(s, w, NULL), "%s not matched", t);
	}
}

Test(policy_quick, never_turns_away_a_listed_name)
{
	struct policy_set *s = big_set();
	cr_assert_not_null(s->quick);
	expect_all_listed(s);
	struct policy_set *c = policy_set_clone(s);
	cr_assert_not_null(c);
	policy_set_free(s); /* the clone's filter is its own */
	expect_all_listed(c);
	uint8_t w[NAME_MAXWIRE];
	size_t n = wire_of("late.example.test", w);
	cr_assert_eq(policy_set_add_wire(c, w, false, "t", 1), 0);
	cr_expect(pquick_maybe(c, w, n));
	cr_expect(policy_set_match(c, w, NULL));
	policy_set_free(c);
}

Test(policy_quick, turns_away_nearly_every_absent_name)
{
	struct policy_set *s = big_set();
	unsigned by = 0, asked = 0;
	for (int i = 0; i < 20000; i++) {
		char t[64];
		uint8_t w[NAME_MAXWIRE];
		snprintf(t, sizeof(t), "d%07d.example.test", i);
		size_t n = wire_of(t, w);
		asked++;
		by += pquick_maybe(s, w, n);
		cr_expect(!policy_set_match(s, w, NULL), "%s matched", t);
	}
	/* A word per 4 slots, two bits a name: ~1-2% let by. 5% would mean it is broken. */
	cr_expect_lt(by * 20, asked, "%u of %u absent names let by", by, asked);
	policy_set_free(s);
}

/* Every byte of a name counts, whatever its length (the tail under 8 bytes, and the overlapping
 * last word of a longer name). */
Test(policy_quick, hash_reads_every_byte)
{
	uint8_t a[64], b[64];
	for (size_t len = 1; len <= sizeof(a); len++) {
		for (size_t i = 0; i < len; i++)
			a[i] = (uint8_t)('a' + (i * 7 + len) % 26);
		for (size_t pos = 0; pos < len; pos++) {
			memcpy(b, a, len);
			b[pos] ^= 0x20;
			cr_expect_neq(pquick_hash(a, len, 42), pquick_hash(b, len, 42),
			              "len %zu: byte %zu not hashed", len, pos);
		}
		cr_expect_neq(pquick_hash(a, len, 42), pquick_hash(a, len, 43), "seed not used");
	}
}
