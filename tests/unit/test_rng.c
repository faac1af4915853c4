/* Unit tests for the user-space random stream (IDs and source ports). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <sodium.h>
#include <string.h>

#include "moat/rng.h"

static void setup(void)
{
	cr_assert(sodium_init() >= 0);
}

TestSuite(rng, .init = setup);

Test(rng, uniform_stays_in_range_and_covers_it)
{
	static unsigned seen[1000];
	memset(seen, 0, sizeof(seen));
	for (int i = 0; i < 200000; i++) {
		uint32_t v = rng_uniform(1000);
		cr_assert_lt(v, 1000u);
		seen[v]++;
	}
	/* Each bucket expects 200; a chi-square over 999 degrees of freedom stays well under 1200
	 * for a uniform source (p < 1e-8 to exceed), and a biased or stuck one goes far above. */
	double chi = 0;
	for (int i = 0; i < 1000; i++) {
		cr_assert_gt(seen[i], 0u, "value %d never drawn", i);
		chi += (seen[i] - 200.0) * (seen[i] - 200.0) / 200.0;
	}
	cr_assert_lt(chi, 1200.0, "chi-square %f", chi);
}

Test(rng, degenerate_bounds)
{
	cr_assert_eq(rng_uniform(0), 0u);
	cr_assert_eq(rng_uniform(1), 0u);
	for (int i = 0; i < 1000; i++)
		cr_assert_lt(rng_uniform(2), 2u);
}

Test(rng, no_repeats_across_refills)
{
	/* 64-bit draws over many refills (and one reseed): a repeat means a reused keystream. */
	enum { N = 300000 };
	static uint64_t v[N];
	rng_buf(v, sizeof(v));
	for (int i = 0; i < N; i++)
		for (int k = 1; k <= 64 && i + k < N; k++)
			cr_assert_neq(v[i], v[i + k]);
	/* and every 16-bit lane is used (ports and IDs take 16 bits at a time) */
	static uint8_t hit[65536];
	memset(hit, 0, sizeof(hit));
	const uint16_t *h = (const uint16_t *)v;
	for (size_t i = 0; i < sizeof(v) / 2; i++)
		hit[h[i]] = 1;
	size_t n = 0;
	for (size_t i = 0; i < sizeof(hit); i++)
		n += hit[i];
	cr_assert_gt(n, 65000u, "only %zu of 65536 16-bit values seen in 1.2M draws", n);
}

Test(rng, odd_sizes_join_up)
{
	uint8_t a[7], b[513], c[1];
	memset(b, 0, sizeof(b));
	rng_buf(a, sizeof(a));
	rng_buf(b, sizeof(b));
	rng_buf(c, sizeof(c));
	size_t zeros = 0;
	for (size_t i = 0; i < sizeof(b); i++)
		zeros += b[i] == 0;
	cr_assert_lt(zeros, 20u, "%zu zero bytes in 513 random ones", zeros);
}

static void *draw(void *out)
{
	rng_buf(out, 32);
	return NULL;
}

Test(rng, threads_get_their_own_streams)
{
	uint8_t x[32], y[32];
	pthread_t t1, t2;
	pthread_create(&t1, NULL, draw, x);
	pthread_create(&t2, NULL, draw, y);
	pthread_join(t1, NULL);
	pthread_join(t2, NULL);
	cr_assert(memcmp(x, y, sizeof(x)) != 0);
}
