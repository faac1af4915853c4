/* bench-rpz-ixfr: what an IXFR of one changed name costs moatd beside a full reload of the same
 * RPZ zone, in one run (by hand: build/bench-rpz-ixfr [N], default 1000000 triggers).
 *   load:  rpz_load_file of an N-trigger zone (what re-reading the whole zone costs)
 *   ixfr:  rpz_data_copy + one delete + one add (what rpz_xfr.c does for a one-name diff,
 *          network aside) + policy_with_rpz (the new snapshot)
 *   held:  the resident memory one loaded zone adds, in bytes a trigger (what sizes the default
 *          max_triggers: an IXFR holds the copy too, twice that while it runs)
 * Prints milliseconds (median of 5) and the ratio. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "moat/config.h"
#include "moat/policy.h"
#include "moat/rpz.h"

static double ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Resident bytes of this process. */
static long rss_bytes(void)
{
	long pages = 0, res = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f && fscanf(f, "%ld %ld", &pages, &res) != 2)
		res = 0;
	if (f)
		fclose(f);
	return res * sysconf(_SC_PAGESIZE);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000000;
	char path[] = "/tmp/bench-rpz-XXXXXX", err[512];
	int fd = mkstemp(path);
	FILE *f = fdopen(fd, "w");
	fprintf(f, "$ORIGIN rpz.bench.\n@ SOA ns. h. 1 60 60 600 60\n");
	for (long i = 0; i < n; i++)
		fprintf(f, "n%07ld.bench.test CNAME .\n", i);
	fclose(f);
	double load[5], ixfr[5];
	struct rpz_data *d = NULL;
	long rss0 = rss_bytes(), held = 0;
	for (int r = 0; r < 5; r++) {
		rpz_data_unref(d);
		double t0 = ms_now();
		if (rpz_load_file(RPZ_HIGHRISK, path, NULL, &d, err, sizeof(err))) {
			fprintf(stderr, "%s\n", err);
			return 1;
		}
		load[r] = ms_now() - t0;
		if (r == 0)
			held = rss_bytes() - rss0;
	}
	struct policy base = {.refs = 1, .nrpz = 1};
	base.rpz = malloc(sizeof(*base.rpz));
	base.rpz[0] = rpz_data_ref(d);
	ldns_rr *del = NULL, *add = NULL;
	ldns_rr_new_frm_str(&del, "n0000001.bench.test.rpz.bench. CNAME .", 60, NULL, NULL);
	ldns_rr_new_frm_str(&add, "new.bench.test.rpz.bench. CNAME .", 60, NULL, NULL);
	for (int r = 0; r < 5; r++) {
		double t0 = ms_now();
		struct rpz_data *c = rpz_data_copy(d);
		if (!c || rpz_data_apply(c, del, false, "rpz:b", 0, err, sizeof(err)) ||
		    rpz_data_apply(c, add, true, "rpz:b", 0, err, sizeof(err)))
			return fprintf(stderr, "ixfr: %s\n", err), 1;
		struct policy *np = policy_with_rpz(&base, 0, c);
		ixfr[r] = ms_now() - t0;
		/* np borrows base (not heap): release by hand */
		rpz_data_unref(np->rpz[0]);
		free(np->rpz);
		free(np);
		base.refs = 1;
		rpz_data_unref(c);
	}
	qsort(load, 5, sizeof(double), cmp);
	qsort(ixfr, 5, sizeof(double), cmp);
	printf("triggers %ld: full load %.1f ms, IXFR of one name (copy + patch + snapshot) %.1f "
	       "ms, ratio %.3f; held %.1f bytes a trigger (%.1f MiB)\n",
	       n, load[2], ixfr[2], ixfr[2] / load[2], (double)held / (double)n,
	       (double)held / 1048576.0);
	ldns_rr_free(del);
	ldns_rr_free(add);
	rpz_data_unref(base.rpz[0]);
	free(base.rpz);
	rpz_data_unref(d);
	unlink(path);
	return 0;
}
