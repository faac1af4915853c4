/* bench-policy: the cost of one allowlist lookup (policy_set_match) as the list grows from 1k
 * to 1M names, to show it stays O(labels) and flat (issue 6). For each size it builds a set
 * of N names "nNNNNNNN.bench.test" plus "*.w.bench.test", then times lookups of a mix of
 * names: listed (exact), under the wildcard, and absent (deny), each 4 labels deep, in an
 * order that defeats the CPU cache the way real traffic does. Prints ns per lookup per size and
 * the ratio to the smallest. Run by hand (tests/bench/run does not need it):
 *   build/bench-policy [LOOKUPS]        default 2000000 lookups per size */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "moat/name.h"
#include "moat/policy.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = {1000, 100000, 1000000};
	long lookups = argc > 1 ? strtol(argv[1], NULL, 10) : 2000000;
	enum { NQ = 1 << 16 };
	static uint8_t q[NQ][NAME_MAXWIRE];
	double base = 0;

	if (lookups < 1) {
		fprintf(stderr, "usage: bench-policy [LOOKUPS]\n");
		return 2;
	}
	printf("| allowlist names | ns per lookup | x (1k) | matched |\n|---|---|---|---|\n");
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
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
		}
		long hits = 0;
		double t0 = now_s();
		for (long i = 0; i < lookups; i++)
			hits += policy_set_match(s, q[i & (NQ - 1)], NULL);
		double ns = (now_s() - t0) * 1e9 / (double)lookups;
		if (si == 0)
			base = ns;
		printf("| %zu | %.1f | %.2f | %.1f%% |\n", n, ns, ns / base,
		       100.0 * (double)hits / (double)lookups);
		policy_set_free(s);
	}
	return 0;
}
