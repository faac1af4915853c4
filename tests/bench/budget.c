/* bench-budget: what the label budget (issue 26, moat/budget.h) costs a query, and how much of
 * it a benign workload uses. Run by hand:
 *
 *   build/bench-budget [LOOKUPS]
 *       The hit path: names under an allowed wildcard that the agent has sent before (the
 *       steady state of a benign agent), each through policy_decide (the reference, in the same
 *       run) and then through the budget step the query path adds (fingerprint, the agent's
 *       lock, two buckets), one thread and then two threads on the same agent (the lock
 *       contended), in 21 alternating rounds, the fastest of each kept. Also the first sight
 *       of a name (billed, then denied). Prints ns per query and the budget's cost as a ratio
 *       to policy_decide.
 *   build/bench-budget --replay QUERIES ALLOWLIST [--window S] [--limit BYTES]
 *       Runs a workload through budget.c with its own clock (QUERIES: "SECONDS QTYPE NAME"
 *       lines, tests/e2e/peers/benign_workload.py --queries; ALLOWLIST: its --allowlist):
 *       prints the names denied, each wildcard zone's busiest window and the margin, the
 *       budget over the busiest zone's use. Defaults: the built-in budget (4096, 3600 s). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "moat/budget.h"
#include "moat/budget_share.h"
#include "moat/name.h"
#include "moat/policy.h"

#define NQ 4096   /* distinct names in the hit set */
#define ROUNDS 21 /* of each measurement */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct hit_run {
	struct policy *p;
	uint8_t (*q)[NAME_MAXWIRE];
	long n;
	bool budget;
	double ns;
	long seen;
};

/* n questions through policy_decide, and through the budget step too when r->budget. */
static void *hit_loop(void *arg)
{
	struct hit_run *r = arg;
	const struct policy_agent *a = &r->p->agents[0];
	double t0 = now_s();
	for (long i = 0; i < r->n; i++) {
		const uint8_t *name = r->q[(i * 2654435761u) & (NQ - 1)];
		struct policy_decision d;
		policy_decide(r->p, a, name, 1, &d);
		if (!r->budget)
			continue;
		struct budget_ask ask = {name, d.rule.at, 4096, 3600000, 1000};
		struct budget_verdict v;
		budget_share_account(r->p, a, &ask, &v);
		r->seen += v.result == BUDGET_SEEN;
	}
	r->ns = (now_s() - t0) * 1e9 / (double)r->n;
	return NULL;
}

static double hits(struct policy *p, uint8_t (*q)[NAME_MAXWIRE], long n, bool budget, int threads)
{
	struct hit_run r[2];
	pthread_t t[2];
	for (int i = 0; i < threads; i++) {
		r[i] = (struct hit_run){p, q, n, budget, 0, 0};
		pthread_create(&t[i], NULL, hit_loop, &r[i]);
	}
	double ns = 0;
	for (int i = 0; i < threads; i++) {
		pthread_join(t[i], NULL);
		ns += r[i].ns / threads;
		if (budget && r[i].seen != n)
			fprintf(stderr, "bench-budget: %ld of %ld were not seen\n", n - r[i].seen,
			        n);
	}
	return ns;
}

static int hit_bench(long lookups)
{
	static uint8_t q[NQ][NAME_MAXWIRE];
	struct policy p = {0};
	struct policy_agent a = {0};
	config_agent_init(&a.cfg);
	snprintf(a.cfg.name, sizeof(a.cfg.name), "bench");
	a.allow = policy_set_new();
	if (!a.allow || policy_set_add(a.allow, "*.cdn.example", 13, "bench", 1) ||
	    policy_set_add(a.allow, "*.other.example", 15, "bench", 2))
		return 1;
	p.agents = &a;
	p.nagents = 1;
	if (budget_share_attach(&p))
		return 1;
	for (int i = 0; i < NQ; i++) {
		char t[96];
		int n = snprintf(t, sizeof(t), "d%013x.e%05d.cdn.example", (unsigned)i * 7919u, i);
		name_from_text(t, (size_t)n, q[i]);
	}
	/* first sight: each name billed (a budget large enough for all of them) */
	double t0 = now_s();
	for (int i = 0; i < NQ; i++) {
		struct policy_decision d;
		policy_decide(&p, &a, q[i], 1, &d);
		struct budget_ask ask = {q[i], d.rule.at, 4096, 3600000, 1000};
		struct budget_verdict v;
		budget_share_account(&p, &a, &ask, &v); /* 4096 bytes: only the first ~180 fit */
	}
	double first_ns = (now_s() - t0) * 1e9 / NQ;
	/* the hit set: every name sent before (billed against a budget that has room) */
	for (int i = 0; i < NQ; i++) {
		struct policy_decision d;
		policy_decide(&p, &a, q[i], 1, &d);
		struct budget_ask ask = {q[i], d.rule.at, 1u << 24, 3600000, 1000};
		struct budget_verdict v;
		budget_share_account(&p, &a, &ask, &v);
	}
	/* ROUNDS short runs of each, alternating, and the fastest of each kept: on a shared
	 * machine a round that lost the CPU says nothing about the code */
	printf("| run (fastest of %d rounds) | ns per query | budget's ns | x policy_decide |\n"
	       "|---|---|---|---|\n",
	       ROUNDS);
	for (int threads = 1; threads <= 2; threads++) {
		double base = 1e18, with = 1e18;
		for (int r = 0; r < ROUNDS; r++) {
			double b = hits(&p, q, lookups / ROUNDS, false, threads);
			double w = hits(&p, q, lookups / ROUNDS, true, threads);
			base = b < base ? b : base;
			with = w < with ? w : with;
		}
		printf("| hit, %d thread%s: policy_decide | %.1f | | |\n", threads,
		       threads > 1 ? "s (one agent)" : "", base);
		printf("| hit, %d thread%s: + budget | %.1f | %.1f | %.2f |\n", threads,
		       threads > 1 ? "s (one agent)" : "", with, with - base, with / base);
	}
	printf("| first sight (billed, or denied once spent), 1 thread | %.1f | | |\n", first_ns);
	budget_share_detach(&p);
	policy_set_free(a.allow);
	return 0;
}

/* ---- --replay ---- */

struct zone_use {
	uint8_t zone[NAME_MAXWIRE];
	uint32_t max_used;
	unsigned names;
};

static int replay(const char *queries, const char *allowlist, uint32_t window_s, uint32_t limit)
{
	char err[512];
	struct policy_set *set = policy_set_new();
	if (!set || policy_set_load_file(set, allowlist, err, sizeof(err))) {
		fprintf(stderr, "bench-budget: %s\n", err);
		return 1;
	}
	FILE *f = fopen(queries, "r");
	if (!f) {
		perror(queries);
		return 1;
	}
	struct budget_state *st = budget_state_new();
	static struct zone_use zones[256];
	unsigned nzones = 0, nq = 0, denied = 0, unlisted = 0;
	char line[512], type[16], name[300];
	double t;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lf %15s %299s", &t, type, name) != 3)
			continue;
		uint8_t w[NAME_MAXWIRE];
		struct policy_rule rule;
		nq++;
		if (name_from_text(name, strlen(name), w) < 0 || !policy_set_match(set, w, &rule)) {
			unlisted++;
			continue;
		}
		if (!rule.wildcard)
			continue;
		struct budget_ask a = {w, rule.at, limit, window_s * 1000u, (uint64_t)(t * 1000)};
		struct budget_verdict v;
		budget_account(st, &a, &v);
		denied += v.result == BUDGET_DENIED;
		unsigned z = 0;
		while (z < nzones && !name_equal(zones[z].zone, rule.at))
			z++;
		if (z == nzones && nzones < 256)
			memcpy(zones[nzones++].zone, rule.at, (size_t)name_wire_len(rule.at, 255));
		if (z < nzones && v.result == BUDGET_CHARGED) {
			zones[z].names++;
			if (v.used > zones[z].max_used)
				zones[z].max_used = v.used;
		}
	}
	fclose(f);
	uint32_t worst = 0;
	printf("| wildcard zone | new names | busiest window (bytes) |\n|---|---|---|\n");
	for (unsigned z = 0; z < nzones; z++) {
		char txt[NAME_MAXTEXT];
		name_to_text(zones[z].zone, txt, sizeof(txt));
		printf("| *.%s | %u | %u |\n", txt, zones[z].names, zones[z].max_used);
		if (zones[z].max_used > worst)
			worst = zones[z].max_used;
	}
	struct budget_info bi;
	budget_state_info(st, &bi);
	printf("\nqueries=%u unlisted=%u denied=%u limit=%u window_s=%u busiest_zone_bytes=%u "
	       "margin=%.1fx names=%zu memory_bytes=%zu\n",
	       nq, unlisted, denied, limit, window_s, worst, worst ? (double)limit / worst : 0.0,
	       bi.names, bi.mem_bytes);
	budget_state_free(st);
	policy_set_free(set);
	return denied ? 3 : 0;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "--replay")) {
		uint32_t window = CONFIG_BUDGET_WINDOW, limit = CONFIG_BUDGET_BYTES;
		for (int i = 4; i + 1 < argc; i += 2) {
			if (!strcmp(argv[i], "--window"))
				window = (uint32_t)strtoul(argv[i + 1], NULL, 10);
			else if (!strcmp(argv[i], "--limit"))
				limit = (uint32_t)strtoul(argv[i + 1], NULL, 10);
		}
		return replay(argv[2], argv[3], window ? window : 1, limit ? limit : 1);
	}
	long lookups = argc > 1 ? strtol(argv[1], NULL, 10) : 2000000;
	if (lookups < 1) {
		fprintf(stderr, "usage: bench-budget [LOOKUPS] | --replay QUERIES ALLOWLIST "
		                "[--window S] [--limit BYTES]\n");
		return 2;
	}
	return hit_bench(lookups);
}
