/* bench-policy: the cost of one allowlist lookup (policy_set_match) as the list grows from 1k
 * to 1M names, to show it stays O(labels) and flat (issue 6). For each size it builds a set
 * of N names "nNNNNNNN.bench.test" plus "*.w.bench.test", then times lookups of a mix of
 * names: listed (exact), under the wildcard, and absent (deny), each 4 labels deep, in an
 * order that defeats the CPU cache the way real traffic does. Prints ns per lookup per size and
 * the ratio to the smallest, and the same lookups on the set compiled and mapped back
 * (moat/policy_file.h, written under /tmp and removed), body trusted (quick) and with each block
 * verified on first use (lazy, the default: the untimed pass verifies what the timed lookups
 * touch, so this is the steady cost of the bitmap checks); then the deny path alone (names on
 * no list: every label's lookup answered by the filter), in memory and compiled (lazy). Run by
 * hand (tests/bench/run does not need it):
 *   build/bench-policy [LOOKUPS [SIZE...]]   default 2000000 lookups, sizes 1k 100k 1M */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "moat/name.h"
#include "moat/policy.h"
#include "moat/policy_file.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double time_lookups(const struct policy_set *s, uint8_t (*q)[NAME_MAXWIRE], long lookups,
                           long *hits)
{
	long warm = 0;
	for (long i = 0; i < (1 << 16); i++) /* one untimed pass: a mapped set's pages fault in */
		warm += policy_set_match(s, q[i], NULL);
	(void)warm;
	double t0 = now_s();
	for (long i = 0; i < lookups; i++)
		*hits += policy_set_match(s, q[i & ((1 << 16) - 1)], NULL);
	return (now_s() - t0) * 1e9 / (double)lookups;
}

int main(int argc, char **argv)
{
	size_t sizes[16] = {1000, 100000, 1000000}, nsizes = 3;
	long lookups = argc > 1 ? strtol(argv[1], NULL, 10) : 2000000;
	enum { NQ = 1 << 16 };
	static uint8_t q[NQ][NAME_MAXWIRE], d[NQ][NAME_MAXWIRE];
	double base = 0;

	if (lookups < 1) {
		fprintf(stderr, "usage: bench-policy [LOOKUPS [SIZE...]]\n");
		return 2;
	}
	for (int i = 2; i < argc && i - 2 < 16; i++, nsizes = (size_t)i - 2)
		sizes[i - 2] = (size_t)strtoul(argv[i], NULL, 10);
	printf("| allowlist names | ns per lookup | x (smallest) | matched | mapped ns | mapped x "
	       "(in memory) | lazy ns | lazy x (in memory) | deny ns | deny lazy ns |\n"
	       "|---|---|---|---|---|---|---|---|---|---|\n");
	for (size_t si = 0; si < nsizes; si++) {
		size_t n = sizes[si];
		struct policy_set *s = policy_set_new();
		char text[64];
		if (!s)
			return 1;
		for (size_t i = 0; i < n; i++) {
			int l = snprintf(text, sizeof(text), "n%07zu.bench.test", i);
			if (policy_set_add(s, text, (size_t)l, "bench", (uint32_t)i + 1) < 0)
				return 1;
		}
		policy_set_add(s, "*.w.bench.test", 14, "bench", 0);
		/* A third listed, a third under the wildcard, a third absent; spread over the set.
		 */
		unsigned seed = 12345;
		for (int i = 0; i < NQ; i++) {
			seed = seed * 1103515245u + 12345u;
			size_t k = (seed >> 8) % n;
			if (i % 3 == 0)
				snprintf(text, sizeof(text), "n%07zu.bench.test", k);
			else if (i % 3 == 1)
				snprintf(text, sizeof(text), "m%07zu.w.bench.test", k);
			else
				snprintf(text, sizeof(text), "d%07zu.x.bench.test", k);
			if (name_from_text(text, strlen(text), q[i]) < 0)
				return 1;
			snprintf(text, sizeof(text), "d%07zu.x.bench.test",
			         (size_t)(seed >> 4) % n);
			if (name_from_text(text, strlen(text), d[i]) < 0)
				return 1;
		}
		long hits = 0;
		double ns = time_lookups(s, q, lookups, &hits);
		if (si == 0)
			base = ns;
		char path[64], err[512];
		snprintf(path, sizeof(path), "/tmp/bench-policy-%d.mpol", (int)getpid());
		struct policy_set *m = NULL, *lz = NULL;
		if (policy_file_write(s, false, path, err, sizeof(err)) ||
		    policy_file_open(path, false, POLICY_VERIFY_QUICK, NULL, &m, err,
		                     sizeof(err)) ||
		    policy_file_open(path, false, POLICY_VERIFY_LAZY, NULL, &lz, err,
		                     sizeof(err))) {
			fprintf(stderr, "bench-policy: %s\n", err);
			return 1;
		}
		unlink(path);
		long mhits = 0, lhits = 0;
		double mns = time_lookups(m, q, lookups, &mhits);
		double lns = time_lookups(lz, q, lookups, &lhits);
		long dh = 0;
		double dns = time_lookups(s, d, lookups, &dh),
		       dlns = time_lookups(lz, d, lookups, &dh);
		printf("| %zu | %.1f | %.2f | %.1f%% | %.1f | %.2f | %.1f | %.2f | %.1f | %.1f |\n",
		       n, ns, ns / base, 100.0 * (double)hits / (double)lookups, mns, mns / ns, lns,
		       lns / ns, dns, dlns);
		if (dh)
			fprintf(stderr, "bench-policy: %ld denied names matched\n", dh);
		if (mhits != hits || lhits != hits)
			fprintf(stderr,
			        "bench-policy: mapped sets matched %ld and %ld, in memory %ld\n",
			        mhits, lhits, hits);
		policy_set_free(lz);
		policy_set_free(m);
		policy_set_free(s);
	}
	return 0;
}
