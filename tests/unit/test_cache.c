/* Unit tests for the answer cache: round trips, what the key is made of, replacement, TTL clamping
 * and expiry at the exact boundary, age reporting, LRU order and eviction, the memory bound under
 * heavy churn, refusal of oversized answers, and a randomised comparison against a simple model
 * of the LRU, reuse of an evicted entry's memory. Nothing here is timed: constant cost is checked
 * by the cache still behaving exactly once full, not by a stopwatch. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "moat/cache.h"
#include "moat/err.h"
#include "moat/name.h"

#define T_A 1
#define T_AAAA 28
#define C_IN 1
#define C_CH 3

/* Wire form of a presentation name that must be valid. */
static void wire(const char *text, uint8_t *out)
{
	int n = name_from_text(text, strlen(text), out);
	cr_assert_gt(n, 0, "name_from_text(\"%s\") = %d", text, n);
}

/* A packet of len bytes whose content depends on seed, so distinct answers are told apart. */
static void fill(uint8_t *pkt, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		pkt[i] = (uint8_t)(seed * 31u + i * 7u);
}

static struct cache_stats stats(const struct cache *c)
{
	struct cache_stats s;
	cache_get_stats(c, &s);
	return s;
}

/* Expect a live hit with exactly these bytes; returns the reported age. */
static uint32_t expect_hit(struct cache *c, const uint8_t *name, uint16_t qt, uint16_t qc, bool d,
                           uint64_t now, const uint8_t *pkt, size_t plen)
{
	size_t len = 12345;
	uint32_t age = 12345;
	const uint8_t *p = cache_get(c, name, qt, qc, d, now, &len, &age);
	cr_assert_not_null(p, "expected a hit at %llu", (unsigned long long)now);
	cr_assert_eq(len, plen);
	if (plen)
		cr_assert_arr_eq(p, pkt, plen);
	return age;
}

static void expect_miss(struct cache *c, const uint8_t *name, uint16_t qt, uint16_t qc, bool d,
                        uint64_t now)
{
	size_t len;
	uint32_t age;
	cr_assert_null(cache_get(c, name, qt, qc, d, now, &len, &age), "expected a miss at %llu",
	               (unsigned long long)now);
}

Test(cache, round_trip)
{
	struct cache *c = cache_new(1 << 20, 0, 86400);
	cr_assert_not_null(c);
	uint8_t n[NAME_MAXWIRE], pkt[300];
	wire("www.example.com", n);
	fill(pkt, sizeof(pkt), 1);
	size_t before = stats(c).bytes;
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), 300, 1000), 0);
	memset(pkt, 0, sizeof(pkt)); /* the cache keeps its own copy */
	uint8_t ref[300];
	fill(ref, sizeof(ref), 1);
	cr_expect_eq(expect_hit(c, n, T_A, C_IN, false, 1000, ref, sizeof(ref)), 0);
	struct cache_stats s = stats(c);
	cr_expect_eq(s.inserts, 1);
	cr_expect_eq(s.hits, 1);
	cr_expect_eq(s.misses, 0);
	cr_expect_eq(s.entries, 1);
	cr_expect_gt(s.bytes, before + sizeof(pkt), "entry bytes include key and header");
	cache_free(c);
}

Test(cache, empty_packet_and_null_outputs)
{
	struct cache *c = cache_new(1 << 16, 0, 3600);
	uint8_t n[NAME_MAXWIRE];
	wire(".", n);
	cr_assert_eq(cache_put(c, n, 2, C_IN, false, NULL, 0, 60, 0), 0);
	cr_expect_not_null(cache_get(c, n, 2, C_IN, false, 0, NULL, NULL));
	cache_free(c);
}

Test(cache, key_has_every_part)
{
	struct cache *c = cache_new(1 << 20, 0, 86400);
	uint8_t n[NAME_MAXWIRE], other[NAME_MAXWIRE], sub[NAME_MAXWIRE], upper[NAME_MAXWIRE];
	uint8_t pkt[64];
	wire("example.com", n);
	wire("example.org", other);
	wire("a.example.com", sub);
	/* Callers fold case; the cache does not, so an unfolded name is a different key. */
	memcpy(upper, "\7Example\3com\0", 13);
	fill(pkt, sizeof(pkt), 2);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), 60, 0), 0);

	expect_hit(c, n, T_A, C_IN, false, 0, pkt, sizeof(pkt));
	expect_miss(c, n, T_AAAA, C_IN, false, 0);
	expect_miss(c, n, T_A, C_CH, false, 0);
	expect_miss(c, n, T_A, C_IN, true, 0);
	expect_miss(c, other, T_A, C_IN, false, 0);
	expect_miss(c, sub, T_A, C_IN, false, 0);
	expect_miss(c, upper, T_A, C_IN, false, 0);
	/* Type and class that differ only in the high byte. */
	expect_miss(c, n, (uint16_t)(T_A | 0x100), C_IN, false, 0);
	expect_miss(c, n, T_A, (uint16_t)(C_IN | 0x100), false, 0);

	struct cache_stats s = stats(c);
	cr_expect_eq(s.hits, 1);
	cr_expect_eq(s.misses, 8);
	cr_expect_eq(s.entries, 1);
	cache_free(c);
}

/* The hash the in-flight table files questions under: one per key, the same whether or not
 * cache_prefetch just computed it. */
Test(cache, key_hash_is_the_keys)
{
	struct cache *c = cache_new(1 << 20, 0, 86400);
	uint8_t n[NAME_MAXWIRE], other[NAME_MAXWIRE];
	wire("example.com", n);
	wire("example.org", other);
	uint64_t h = cache_key_hash(c, n, T_A, C_IN, 0);
	cr_expect_eq(cache_key_hash(c, n, T_A, C_IN, 0), h);
	cr_expect_neq(cache_key_hash(c, n, T_AAAA, C_IN, 0), h);
	cr_expect_neq(cache_key_hash(c, n, T_A, C_IN, 1), h);
	cr_expect_neq(cache_key_hash(c, other, T_A, C_IN, 0), h);
	cache_prefetch(c, other, T_A, C_IN, 0);
	cr_expect_eq(cache_key_hash(c, n, T_A, C_IN, 0), h, "another key's memo answered");
	cache_prefetch(c, n, T_A, C_IN, 0);
	cr_expect_eq(cache_key_hash(c, n, T_A, C_IN, 0), h);
	cache_free(c);
}

/* A put with the hash a question table kept files the answer where a get finds it, and replaces
 * what a plain put stored under the same key (one entry, the newer bytes), while another
 * prefetch holds the memo. */
Test(cache, put_with_kept_hash)
{
	struct cache *c = cache_new(1 << 20, 0, 86400);
	uint8_t n[NAME_MAXWIRE], other[NAME_MAXWIRE], p1[40], p2[50];
	wire("example.com", n);
	wire("example.org", other);
	fill(p1, sizeof(p1), 1);
	fill(p2, sizeof(p2), 2);
	uint64_t h = cache_key_hash(c, n, T_A, C_IN, 0);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, 0, p1, sizeof(p1), 60, 0), 0);
	cache_prefetch(c, other, T_A, C_IN, 0);
	cr_assert_eq(cache_put_hashed(c, h, n, T_A, C_IN, 0, p2, sizeof(p2), 60, 0), 0);
	cr_expect_eq(stats(c).entries, 1, "the kept hash found the older entry");
	expect_hit(c, n, T_A, C_IN, false, 1, p2, sizeof(p2));
	cache_free(c);
}

Test(cache, keys_coexist)
{
	struct cache *c = cache_new(1 << 20, 0, 86400);
	uint8_t n[NAME_MAXWIRE], p1[40], p2[50], p3[60], p4[70];
	wire("example.com", n);
	fill(p1, sizeof(p1), 1);
	fill(p2, sizeof(p2), 2);
	fill(p3, sizeof(p3), 3);
	fill(p4, sizeof(p4), 4);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, p1, sizeof(p1), 60, 0), 0);
	cr_assert_eq(cache_put(c, n, T_AAAA, C_IN, false, p2, sizeof(p2), 60, 0), 0);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, true, p3, sizeof(p3), 60, 0), 0);
	cr_assert_eq(cache_put(c, n, T_A, C_CH, false, p4, sizeof(p4), 60, 0), 0);
	expect_hit(c, n, T_A, C_IN, false, 1, p1, sizeof(p1));
	expect_hit(c, n, T_AAAA, C_IN, false, 1, p2, sizeof(p2));
	expect_hit(c, n, T_A, C_IN, true, 1, p3, sizeof(p3));
	expect_hit(c, n, T_A, C_CH, false, 1, p4, sizeof(p4));
	cr_expect_eq(stats(c).entries, 4);
	cache_free(c);
}

Test(cache, replace_same_key)
{
	struct cache *c = cache_new(1 << 20, 0, 86400);
	uint8_t n[NAME_MAXWIRE], old[100], new[40];
	wire("example.com", n);
	fill(old, sizeof(old), 1);
	fill(new, sizeof(new), 2);
	size_t base = stats(c).bytes;
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, old, sizeof(old), 10, 0), 0);
	size_t with_old = stats(c).bytes;
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, new, sizeof(new), 100, 5000), 0);
	struct cache_stats s = stats(c);
	cr_expect_eq(s.entries, 1);
	cr_expect_eq(s.inserts, 2);
	cr_expect_eq(s.evictions, 0);
	cr_expect_eq(s.bytes, with_old - sizeof(old) + sizeof(new), "old entry's bytes released");
	cr_expect_gt(s.bytes, base);
	/* The new entry's TTL and insertion time apply: alive past the old expiry, age from 5 s. */
	cr_expect_eq(expect_hit(c, n, T_A, C_IN, false, 20000, new, sizeof(new)), 15);
	cache_free(c);
}

/* Re-storing the bytes a get just lent (say, with a fresh TTL) must not read freed memory. */
Test(cache, put_back_borrowed_bytes)
{
	struct cache *c = cache_new(1 << 20, 0, 86400);
	uint8_t n[NAME_MAXWIRE], pkt[200];
	wire("example.com", n);
	fill(pkt, sizeof(pkt), 5);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), 10, 0), 0);
	size_t len;
	const uint8_t *p = cache_get(c, n, T_A, C_IN, false, 0, &len, NULL);
	cr_assert_not_null(p);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, p, len, 60, 1000), 0);
	expect_hit(c, n, T_A, C_IN, false, 30000, pkt, sizeof(pkt));
	cr_expect_eq(stats(c).entries, 1);
	cache_free(c);
}

Test(cache, expiry_exact_boundary)
{
	struct cache *c = cache_new(1 << 20, 0, 86400);
	uint8_t n[NAME_MAXWIRE], pkt[32];
	wire("example.com", n);
	fill(pkt, sizeof(pkt), 1);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), 10, 1000), 0);
	cr_expect_eq(expect_hit(c, n, T_A, C_IN, false, 10999, pkt, sizeof(pkt)), 9);
	expect_miss(c, n, T_A, C_IN, false, 11000);
	struct cache_stats s = stats(c);
	cr_expect_eq(s.expired, 1);
	cr_expect_eq(s.misses, 1);
	cr_expect_eq(s.entries, 0, "expired entry removed on get");
	/* Gone for good: a later get is a plain miss, not a second expiry, and no time travel
	 * brings it back. */
	expect_miss(c, n, T_A, C_IN, false, 5000);
	s = stats(c);
	cr_expect_eq(s.expired, 1);
	cr_expect_eq(s.misses, 2);
	cache_free(c);
}

/* Serve-stale: an expired entry is a miss for cache_get but stays for cache_get_stale until
 * the window ends exactly, then goes; a fresh put replaces it. */
Test(cache, stale_window)
{
	struct cache *c = cache_new(1 << 20, 0, 86400);
	uint8_t n[NAME_MAXWIRE], other[NAME_MAXWIRE], pkt[32], pkt2[32];
	size_t len = 0;
	wire("example.com", n);
	wire("example.net", other);
	fill(pkt, sizeof(pkt), 1);
	fill(pkt2, sizeof(pkt2), 2);
	cache_keep_stale(c, 60);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), 10, 1000), 0);
	expect_miss(c, n, T_A, C_IN, false, 11000);
	cr_expect_eq(stats(c).entries, 1, "kept for the stale window");
	const uint8_t *v = cache_get_stale(c, n, T_A, C_IN, false, 70999, &len);
	cr_assert_not_null(v);
	cr_expect_eq(len, sizeof(pkt));
	cr_expect_arr_eq(v, pkt, sizeof(pkt));
	cr_expect_null(cache_get_stale(c, other, T_A, C_IN, false, 20000, &len));
	cr_expect_null(cache_get_stale(c, n, T_AAAA, C_IN, false, 20000, &len));
	cr_expect_eq(stats(c).stale_hits, 1);
	cr_expect_null(cache_get_stale(c, n, T_A, C_IN, false, 71000, &len), "window is over");
	cr_expect_eq(stats(c).entries, 0);

	/* A fresh answer replaces a stale one. */
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), 10, 100000), 0);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt2, sizeof(pkt2), 10, 120000), 0);
	v = cache_get_stale(c, n, T_A, C_IN, false, 125000, &len);
	cr_assert_not_null(v);
	cr_expect_arr_eq(v, pkt2, sizeof(pkt2));
	cache_free(c);
}

/* Without cache_keep_stale nothing is served stale. */
Test(cache, no_stale_by_default)
{
	struct cache *c = cache_new(1 << 20, 0, 86400);
	uint8_t n[NAME_MAXWIRE], pkt[32];
	wire("example.com", n);
	fill(pkt, sizeof(pkt), 1);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), 10, 1000), 0);
	cr_expect_not_null(cache_get_stale(c, n, T_A, C_IN, false, 10999, NULL), "live is fine");
	cr_expect_null(cache_get_stale(c, n, T_A, C_IN, false, 11000, NULL));
	cache_free(c);
}

Test(cache, age_whole_seconds)
{
	struct cache *c = cache_new(1 << 20, 0, 86400);
	uint8_t n[NAME_MAXWIRE], pkt[32];
	wire("example.com", n);
	fill(pkt, sizeof(pkt), 1);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), 3600, 5000), 0);
	cr_expect_eq(expect_hit(c, n, T_A, C_IN, false, 5000, pkt, sizeof(pkt)), 0);
	cr_expect_eq(expect_hit(c, n, T_A, C_IN, false, 5999, pkt, sizeof(pkt)), 0);
	cr_expect_eq(expect_hit(c, n, T_A, C_IN, false, 6000, pkt, sizeof(pkt)), 1);
	cr_expect_eq(expect_hit(c, n, T_A, C_IN, false, 8500, pkt, sizeof(pkt)), 3);
	cr_expect_eq(expect_hit(c, n, T_A, C_IN, false, 5000 + 3599999, pkt, sizeof(pkt)), 3599);
	/* A clock read before the insertion (should not happen with a monotonic clock) is age 0. */
	cr_expect_eq(expect_hit(c, n, T_A, C_IN, false, 4000, pkt, sizeof(pkt)), 0);
	cache_free(c);
}

Test(cache, min_ttl_clamp)
{
	struct cache *c = cache_new(1 << 20, 30, 86400);
	uint8_t n[NAME_MAXWIRE], pkt[32];
	wire("example.com", n);
	fill(pkt, sizeof(pkt), 1);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), 5, 0), 0);
	cr_expect_eq(expect_hit(c, n, T_A, C_IN, false, 29999, pkt, sizeof(pkt)), 29);
	expect_miss(c, n, T_A, C_IN, false, 30000);
	cache_free(c);
}

Test(cache, max_ttl_clamp)
{
	struct cache *c = cache_new(1 << 20, 0, 60);
	uint8_t n[NAME_MAXWIRE], pkt[32];
	wire("example.com", n);
	fill(pkt, sizeof(pkt), 1);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), 86400, 0), 0);
	expect_hit(c, n, T_A, C_IN, false, 59999, pkt, sizeof(pkt));
	expect_miss(c, n, T_A, C_IN, false, 60000);
	cr_expect_eq(stats(c).expired, 1);
	cache_free(c);
}

Test(cache, max_ttl_wins_over_min_ttl)
{
	struct cache *c = cache_new(1 << 20, 100, 10);
	uint8_t n[NAME_MAXWIRE], pkt[32];
	wire("example.com", n);
	fill(pkt, sizeof(pkt), 1);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), 1, 0), 0);
	expect_hit(c, n, T_A, C_IN, false, 9999, pkt, sizeof(pkt));
	expect_miss(c, n, T_A, C_IN, false, 10000);
	cache_free(c);
}

Test(cache, large_ttl_no_overflow)
{
	struct cache *c = cache_new(1 << 20, 0, UINT32_MAX);
	uint8_t n[NAME_MAXWIRE], pkt[32];
	wire("example.com", n);
	fill(pkt, sizeof(pkt), 1);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), UINT32_MAX, 1000), 0);
	uint64_t last = 1000 + (uint64_t)UINT32_MAX * 1000 - 1;
	cr_expect_eq(expect_hit(c, n, T_A, C_IN, false, last, pkt, sizeof(pkt)), UINT32_MAX - 1);
	expect_miss(c, n, T_A, C_IN, false, last + 1);
	cache_free(c);
}

Test(cache, ttl_zero_not_stored)
{
	struct cache *c = cache_new(1 << 20, 30, 86400);
	uint8_t n[NAME_MAXWIRE], pkt[32];
	wire("example.com", n);
	fill(pkt, sizeof(pkt), 1);
	size_t base = stats(c).bytes;
	cr_expect_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), 0, 0), 0,
	             "TTL 0 is not an error, min_ttl notwithstanding");
	expect_miss(c, n, T_A, C_IN, false, 0);
	struct cache_stats s = stats(c);
	cr_expect_eq(s.entries, 0);
	cr_expect_eq(s.inserts, 0);
	cr_expect_eq(s.bytes, base);
	cache_free(c);
}

Test(cache, ttl_zero_drops_older_answer)
{
	struct cache *c = cache_new(1 << 20, 0, 86400);
	uint8_t n[NAME_MAXWIRE], pkt[32];
	wire("example.com", n);
	fill(pkt, sizeof(pkt), 1);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), 300, 0), 0);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), 0, 1000), 0);
	expect_miss(c, n, T_A, C_IN, false, 1000);
	cr_expect_eq(stats(c).entries, 0);
	cache_free(c);
}

Test(cache, max_ttl_zero_stores_nothing)
{
	struct cache *c = cache_new(1 << 20, 0, 0);
	uint8_t n[NAME_MAXWIRE], pkt[32];
	wire("example.com", n);
	fill(pkt, sizeof(pkt), 1);
	cr_expect_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), 300, 0), 0);
	cr_expect_eq(stats(c).entries, 0);
	cache_free(c);
}

Test(cache, oversized_refused)
{
	enum { max = 1 << 16 };
	struct cache *c = cache_new(max, 0, 86400);
	uint8_t n[NAME_MAXWIRE];
	static uint8_t pkt[(1 << 16) / 8 + 1];
	wire("example.com", n);
	fill(pkt, sizeof(pkt), 1);
	cr_expect_eq(cache_put(c, n, T_A, C_IN, false, pkt, max / 8 + 1, 60, 0), MOAT_ELIMIT);
	expect_miss(c, n, T_A, C_IN, false, 0);
	cr_expect_eq(stats(c).entries, 0);
	cr_expect_eq(stats(c).inserts, 0);
	/* Exactly an eighth is allowed. */
	cr_expect_eq(cache_put(c, n, T_A, C_IN, false, pkt, max / 8, 60, 0), 0);
	expect_hit(c, n, T_A, C_IN, false, 0, pkt, max / 8);
	/* A refused newer answer still supersedes the cached one. */
	cr_expect_eq(cache_put(c, n, T_A, C_IN, false, pkt, max / 8 + 1, 60, 0), MOAT_ELIMIT);
	expect_miss(c, n, T_A, C_IN, false, 0);
	cache_free(c);
}

Test(cache, bad_name_refused)
{
	struct cache *c = cache_new(1 << 16, 0, 86400);
	uint8_t pkt[16] = {0};
	const uint8_t ptr[] = {0xc0, 0x0c}; /* a compression pointer */
	uint8_t runaway[300];               /* labels that never end within 255 bytes */
	memset(runaway, 63, sizeof(runaway));
	cr_expect_eq(cache_put(c, ptr, T_A, C_IN, false, pkt, sizeof(pkt), 60, 0), MOAT_EINVAL);
	cr_expect_eq(cache_put(c, runaway, T_A, C_IN, false, pkt, sizeof(pkt), 60, 0), MOAT_EINVAL);
	expect_miss(c, ptr, T_A, C_IN, false, 0);
	cr_expect_eq(stats(c).entries, 0);
	cache_free(c);
}

Test(cache, longest_name)
{
	struct cache *c = cache_new(1 << 20, 0, 86400);
	uint8_t n[NAME_MAXWIRE], pkt[32];
	/* Four labels of 63, 63, 63 and 61 bytes: 255 wire bytes, the maximum. */
	size_t o = 0;
	const uint8_t lens[] = {63, 63, 63, 61};
	for (int i = 0; i < 4; i++) {
		n[o++] = lens[i];
		memset(n + o, 'a' + i, lens[i]);
		o += lens[i];
	}
	n[o++] = 0;
	cr_assert_eq(o, NAME_MAXWIRE);
	fill(pkt, sizeof(pkt), 9);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, true, pkt, sizeof(pkt), 60, 0), 0);
	expect_hit(c, n, T_A, C_IN, true, 0, pkt, sizeof(pkt));
	cache_free(c);
}

/* Fixed-width names ("k00042.test.") so that every entry costs the same number of bytes. */
static void key_name(unsigned i, uint8_t *out)
{
	char text[32];
	snprintf(text, sizeof(text), "k%07u.test", i);
	wire(text, out);
}

/* How many entries of packet length plen fit in a cache of max bytes: measured, not assumed, so
 * the tests do not depend on the entry header's size or the table's. */
static size_t capacity(struct cache *c, size_t max, size_t plen, size_t *per)
{
	uint8_t n[NAME_MAXWIRE], pkt[512];
	size_t base = stats(c).bytes;
	key_name(9999999, n);
	fill(pkt, plen, 0);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, plen, 60, 0), 0);
	*per = stats(c).bytes - base;
	/* Take it out again by superseding it with a TTL-0 answer. */
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, plen, 0, 0), 0);
	cr_assert_eq(stats(c).bytes, base);
	return (max - base) / *per;
}

Test(cache, lru_get_refreshes)
{
	enum { max = 8192, plen = 100 };
	struct cache *c = cache_new(max, 0, 86400);
	size_t per;
	size_t cap = capacity(c, max, plen, &per);
	cr_assert_geq(cap, 4, "cap %zu", cap);
	uint8_t n[NAME_MAXWIRE], pkt[plen];

	for (unsigned i = 0; i < cap; i++) {
		key_name(i, n);
		fill(pkt, plen, i);
		cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, plen, 60, 0), 0);
	}
	cr_assert_eq(stats(c).entries, cap);
	cr_assert_eq(stats(c).evictions, 0);

	/* Touch the oldest; the second oldest becomes the victim. */
	key_name(0, n);
	fill(pkt, plen, 0);
	expect_hit(c, n, T_A, C_IN, false, 1, pkt, plen);

	key_name((unsigned)cap, n);
	fill(pkt, plen, (unsigned)cap);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, plen, 60, 2), 0);
	cr_expect_eq(stats(c).evictions, 1);
	cr_expect_eq(stats(c).entries, cap);

	key_name(1, n);
	expect_miss(c, n, T_A, C_IN, false, 3);
	key_name(0, n);
	fill(pkt, plen, 0);
	expect_hit(c, n, T_A, C_IN, false, 3, pkt, plen);
	for (unsigned i = 2; i <= cap; i++) {
		key_name(i, n);
		fill(pkt, plen, i);
		expect_hit(c, n, T_A, C_IN, false, 3, pkt, plen);
	}
	/* Those gets refreshed 2..cap after 0, so 0 is next out. */
	key_name((unsigned)cap + 1, n);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, plen, 60, 4), 0);
	key_name(0, n);
	expect_miss(c, n, T_A, C_IN, false, 5);
	key_name(2, n);
	fill(pkt, plen, 2);
	expect_hit(c, n, T_A, C_IN, false, 5, pkt, plen);
	cr_expect_eq(stats(c).evictions, 2);
	cache_free(c);
}

Test(cache, replacement_refreshes_lru)
{
	enum { max = 8192, plen = 100 };
	struct cache *c = cache_new(max, 0, 86400);
	size_t per;
	size_t cap = capacity(c, max, plen, &per);
	uint8_t n[NAME_MAXWIRE], pkt[plen];
	fill(pkt, plen, 0);
	for (unsigned i = 0; i < cap; i++) {
		key_name(i, n);
		cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, plen, 60, 0), 0);
	}
	/* Re-putting the oldest makes it the newest and costs no eviction. */
	key_name(0, n);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, plen, 60, 0), 0);
	cr_expect_eq(stats(c).evictions, 0);
	key_name((unsigned)cap, n);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, plen, 60, 0), 0);
	key_name(0, n);
	expect_hit(c, n, T_A, C_IN, false, 0, pkt, plen);
	key_name(1, n);
	expect_miss(c, n, T_A, C_IN, false, 0);
	cache_free(c);
}

Test(cache, big_entry_evicts_several)
{
	enum { max = 16384 };
	struct cache *c = cache_new(max, 0, 86400);
	size_t per;
	size_t cap = capacity(c, max, 16, &per);
	uint8_t n[NAME_MAXWIRE], pkt[max / 8];
	fill(pkt, sizeof(pkt), 3);
	for (unsigned i = 0; i < cap; i++) {
		key_name(i, n);
		cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, 16, 60, 0), 0);
	}
	cr_assert_eq(stats(c).evictions, 0);
	key_name(100000, n);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), 60, 0), 0);
	struct cache_stats s = stats(c);
	cr_expect_leq(s.bytes, max);
	cr_expect_gt(s.evictions, 1, "a 2 KiB answer displaces many small ones");
	cr_expect_eq(s.entries, cap + 1 - s.evictions);
	/* The victims are the oldest: key 0 is gone, the newest small one and the big one remain.
	 */
	key_name(0, n);
	expect_miss(c, n, T_A, C_IN, false, 0);
	key_name((unsigned)cap - 1, n);
	expect_hit(c, n, T_A, C_IN, false, 0, pkt, 16);
	key_name(100000, n);
	expect_hit(c, n, T_A, C_IN, false, 0, pkt, sizeof(pkt));
	cache_free(c);
}

Test(cache, memory_bound_under_churn)
{
	enum { max = 32768 };
	const unsigned total = 100000;
	struct cache *c = cache_new(max, 0, 86400);
	cr_assert_not_null(c);
	cr_assert_leq(stats(c).bytes, max, "the table alone fits the budget");
	uint8_t n[NAME_MAXWIRE];
	static uint8_t pkt[32768 / 8];
	size_t peak_entries = 0;
	for (unsigned i = 0; i < total; i++) {
		/* Sizes from 12 bytes to the largest allowed, so evictions free odd amounts. */
		size_t len = 12 + (i * 2654435761u) % (max / 8 - 12 + 1);
		key_name(i, n);
		memcpy(pkt, &i, sizeof(i)); /* stamp only: filling 2 KiB 100k times is slow */
		cr_assert_eq(cache_put(c, n, (uint16_t)(1 + i % 3), C_IN, i & 1, pkt, len, 3600, i),
		             0, "put %u", i);
		struct cache_stats s = stats(c);
		cr_assert_leq(s.bytes, max, "put %u: %zu bytes > %zu", i, s.bytes, max);
		cr_assert_geq(s.entries, 1);
		if (s.entries > peak_entries)
			peak_entries = s.entries;
	}
	struct cache_stats s = stats(c);
	cr_expect_eq(s.inserts, total);
	cr_expect_eq(s.evictions, total - s.entries, "every insert is live or was evicted once");
	cr_expect_lt(peak_entries, max / 64, "entries bounded by the byte budget");

	/* Full cache: the newest entry is there, the oldest long gone, and put+get still work. */
	unsigned last = total - 1;
	size_t len = 12 + (last * 2654435761u) % (max / 8 - 12 + 1);
	key_name(last, n);
	memcpy(pkt, &last, sizeof(last));
	expect_hit(c, n, (uint16_t)(1 + last % 3), C_IN, last & 1, total, pkt, len);
	key_name(0, n);
	expect_miss(c, n, 1, C_IN, false, total);
	key_name(total, n);
	fill(pkt, 100, 7);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, 100, 60, total), 0);
	expect_hit(c, n, T_A, C_IN, false, total, pkt, 100);
	cr_expect_leq(stats(c).bytes, max);
	cache_free(c);
}

/* A budget too small for anything but the table: every put is refused, nothing breaks. */
Test(cache, tiny_budget)
{
	struct cache *c = cache_new(64, 0, 86400);
	cr_assert_not_null(c);
	uint8_t n[NAME_MAXWIRE], pkt[8] = {0};
	wire("example.com", n);
	cr_expect_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), 60, 0), MOAT_ELIMIT);
	expect_miss(c, n, T_A, C_IN, false, 0);
	cr_expect_eq(stats(c).entries, 0);
	cache_free(c);
	cache_free(NULL);
}

/* Deterministic xorshift so failures reproduce. */
static uint32_t rng(uint32_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 17;
	*s ^= *s << 5;
	return *s;
}

#define MODEL_KEYS 256

/* A reference LRU of equal-sized entries: order[0] is the oldest. Slow and obvious. */
struct model {
	int order[MODEL_KEYS];
	size_t count;
	uint64_t expires[MODEL_KEYS], inserted[MODEL_KEYS];
	unsigned version[MODEL_KEYS];
};

static int model_find(const struct model *m, int k)
{
	for (size_t i = 0; i < m->count; i++)
		if (m->order[i] == k)
			return (int)i;
	return -1;
}

static void model_drop(struct model *m, size_t at)
{
	memmove(m->order + at, m->order + at + 1, (m->count - at - 1) * sizeof(int));
	m->count--;
}

/* Random puts, gets and time steps over a key pool three times the capacity, with TTLs short
 * enough that expiry, eviction and replacement all happen often; the cache must agree with the
 * model on every lookup and on every counter. This exercises unlinking from the middle of bucket
 * chains and of the LRU list far more than the targeted tests. */
Test(cache, matches_model)
{
	enum { max = 3000, plen = 20 };
	struct cache *c = cache_new(max, 0, 86400);
	size_t per;
	size_t cap = capacity(c, max, plen, &per);
	cr_assert_lt(cap * 3, MODEL_KEYS + 1, "cap %zu", cap);
	cr_assert_gt(cap, 8, "cap %zu", cap);
	int nkeys = (int)(cap * 3);
	struct model m = {0};
	uint64_t now = 0, evictions = 0, expired = 0, hits = 0, misses = 0;
	uint32_t seed = 0x9e3779b9u;
	uint8_t n[NAME_MAXWIRE], pkt[plen];

	for (int step = 0; step < 200000; step++) {
		uint32_t r = rng(&seed);
		int k = (int)(r % (uint32_t)nkeys);
		key_name((unsigned)k, n);
		switch ((r >> 16) % 8) {
		case 0:
			now += (r >> 8) % 700;
			break;
		case 1:
		case 2:
		case 3: {
			uint32_t ttl = (r >> 20) % 6; /* 0..5 s, 0 meaning "do not cache" */
			int at = model_find(&m, k);
			if (at >= 0)
				model_drop(&m, (size_t)at);
			m.version[k]++;
			fill(pkt, plen, m.version[k] * 1000u + (unsigned)k);
			cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, plen, ttl, now), 0);
			if (ttl == 0)
				break;
			if (m.count == cap) {
				model_drop(&m, 0);
				evictions++;
			}
			m.order[m.count++] = k;
			m.inserted[k] = now;
			m.expires[k] = now + ttl * 1000u;
			break;
		}
		default: {
			int at = model_find(&m, k);
			size_t len;
			uint32_t age;
			const uint8_t *p = cache_get(c, n, T_A, C_IN, false, now, &len, &age);
			if (at < 0 || now >= m.expires[k]) {
				cr_assert_null(p, "step %d key %d", step, k);
				misses++;
				if (at >= 0) {
					model_drop(&m, (size_t)at);
					expired++;
				}
				break;
			}
			cr_assert_not_null(p, "step %d key %d", step, k);
			fill(pkt, plen, m.version[k] * 1000u + (unsigned)k);
			cr_assert_eq(len, plen);
			cr_assert_arr_eq(p, pkt, plen, "step %d key %d", step, k);
			cr_assert_eq(age, (now - m.inserted[k]) / 1000);
			model_drop(&m, (size_t)at);
			m.order[m.count++] = k;
			hits++;
			break;
		}
		}
		struct cache_stats s = stats(c);
		cr_assert_eq(s.entries, m.count, "step %d", step);
		cr_assert_leq(s.bytes, max);
	}
	struct cache_stats s = stats(c);
	cr_expect_eq(s.evictions, evictions);
	cr_expect_eq(s.expired, expired);
	cr_expect_eq(s.hits, hits);
	cr_expect_eq(s.misses, misses);
	cr_expect_gt(evictions, 1000);
	cr_expect_gt(expired, 1000);
	cr_expect_gt(hits, 1000);
	cache_free(c);
}

Test(cache, flush_name_and_all)
{
	struct cache *c = cache_new(1 << 20, 0, 86400);
	uint8_t n[NAME_MAXWIRE], sub[NAME_MAXWIRE], parent[NAME_MAXWIRE], pkt[64];
	wire("www.example.com", n);
	wire("a.www.example.com", sub);
	wire("example.com", parent);
	fill(pkt, sizeof(pkt), 3);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), 60, 0), 0);
	cr_assert_eq(cache_put(c, n, T_AAAA, C_IN, true, pkt, sizeof(pkt), 60, 0), 0);
	cr_assert_eq(cache_put(c, sub, T_A, C_IN, false, pkt, sizeof(pkt), 60, 0), 0);
	cr_assert_eq(cache_put(c, parent, T_A, C_IN, false, pkt, sizeof(pkt), 60, 0), 0);
	size_t before = stats(c).bytes;
	cr_expect_eq(cache_flush(c, n), 2, "every type of that name, nothing else");
	expect_miss(c, n, T_A, C_IN, false, 0);
	expect_miss(c, n, T_AAAA, C_IN, true, 0);
	expect_hit(c, sub, T_A, C_IN, false, 0, pkt, sizeof(pkt));
	expect_hit(c, parent, T_A, C_IN, false, 0, pkt, sizeof(pkt));
	cr_expect_lt(stats(c).bytes, before, "the budget is given back");
	cr_expect_eq(cache_flush(c, n), 0);
	cr_expect_eq(cache_flush(c, NULL), 2);
	cr_expect_eq(stats(c).entries, 0);
	expect_miss(c, parent, T_A, C_IN, false, 0);
	/* the cache works on after a flush */
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, sizeof(pkt), 60, 0), 0);
	expect_hit(c, n, T_A, C_IN, false, 0, pkt, sizeof(pkt));
	cache_free(c);
}

/* The key bytes (also hashed by moatd's in-flight table): the name, then qtype, qclass and the
 * variant big-endian; a malformed name has no key. */
Test(cache, key_bytes)
{
	uint8_t n[NAME_MAXWIRE], k[CACHE_MAXKEY];
	wire("a.example", n);
	int nl = name_wire_len(n, NAME_MAXWIRE);
	cr_assert_eq(cache_key(k, n, T_AAAA, C_CH, 0x01020304u), nl + CACHE_KEYTAIL);
	cr_expect_eq(memcmp(k, n, (size_t)nl), 0);
	const uint8_t tail[CACHE_KEYTAIL] = {0, T_AAAA, 0, C_CH, 1, 2, 3, 4};
	cr_expect_eq(memcmp(k + nl, tail, sizeof(tail)), 0);
	const uint8_t bad[] = {5, 'a'}; /* a label running past the end */
	uint8_t badname[NAME_MAXWIRE] = {0};
	memcpy(badname, bad, sizeof(bad));
	memset(badname + 2, 63, sizeof(badname) - 2);
	cr_expect_eq(cache_key(k, badname, T_A, C_IN, 0), MOAT_EINVAL);
}

/* A full cache stores each answer in the memory of the entry it evicts when their sizes are
 * close (no free and malloc a query), and the budget bounds the memory whatever the sizes. */
Test(cache, full_cache_reuses_evicted_entry)
{
	enum { max = 8192, plen = 100 };
	struct cache *c = cache_new(max, 0, 86400);
	size_t per;
	size_t cap = capacity(c, max, plen, &per);
	uint8_t n[NAME_MAXWIRE], pkt[plen + 40];
	for (unsigned i = 0; i < cap; i++) {
		key_name(i, n);
		fill(pkt, plen, i);
		cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, plen, 60, 0), 0);
	}
	cr_assert_eq(stats(c).evictions, 0);
	/* The LRU tail, k0: where its bytes are is where the next answer's go. */
	key_name(0, n);
	size_t len;
	uint32_t age;
	const uint8_t *tail = cache_get(c, n, T_A, C_IN, false, 0, &len, &age);
	cr_assert_not_null(tail);
	for (unsigned i = 1; i < cap; i++) { /* k0 back to the tail: k1.. are newer now */
		key_name(i, n);
		cr_assert_not_null(cache_get(c, n, T_A, C_IN, false, 0, &len, &age));
	}
	key_name(cap, n);
	fill(pkt, plen - 8, 7);
	cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, plen - 8, 60, 0), 0);
	struct cache_stats s = stats(c);
	cr_expect_eq(s.evictions, 1);
	key_name(0, n);
	expect_miss(c, n, T_A, C_IN, false, 0);
	key_name(cap, n);
	const uint8_t *got = cache_get(c, n, T_A, C_IN, false, 0, &len, &age);
	cr_assert_not_null(got);
	cr_expect_eq(got, tail, "the evicted entry's memory holds the new answer");
	cr_expect_eq(len, plen - 8);
	cr_expect_arr_eq(got, pkt, plen - 8);
	cr_expect_leq(s.bytes, max);
	/* Churn of mixed sizes: reused or not, never over the budget, every answer intact. */
	for (unsigned i = 0; i < 2000; i++) {
		size_t l = plen - 60 + (i * 37) % 100;
		key_name(cap + 1 + i, n);
		fill(pkt, l, i);
		cr_assert_eq(cache_put(c, n, T_A, C_IN, false, pkt, l, 60, 0), 0);
		cr_assert_leq(stats(c).bytes, max, "step %u", i);
		expect_hit(c, n, T_A, C_IN, false, 0, pkt, l);
	}
	cache_free(c);
}
