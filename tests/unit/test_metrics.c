/* Unit tests for the counters (moat/metrics.h): decision names, agent slots (interning, the
 * "other" overflow, a reused name address), summing workers, and the Prometheus text: every
 * sample line well-formed and announced by its TYPE, histogram buckets cumulative up to +Inf ==
 * _count, labels escaped, a short buffer refused. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/err.h"
#include "moat/metrics.h"

static char text[1 << 19];

static struct metrics_worker *worker(void)
{
	struct metrics_worker *m = calloc(1, sizeof(*m));
	cr_assert_not_null(m);
	return m;
}

Test(metrics, decisions)
{
	for (int d = 0; d < MD_COUNT; d++)
		cr_expect_eq(metrics_decision_of(metrics_decision_str((enum metrics_decision)d)),
		             (enum metrics_decision)d, "%s", metrics_decision_str(d));
	cr_expect_eq(metrics_decision_of("allow-stale"), MD_ALLOW_STALE);
	cr_expect_eq(metrics_decision_of("allowx"), MD_OTHER);
	cr_expect_eq(metrics_decision_of(""), MD_OTHER);
	cr_expect_eq(metrics_decision_of(NULL), MD_OTHER);
}

Test(metrics, agent_slots)
{
	metrics_agents_reset();
	struct metrics_worker *m = worker();
	unsigned a = metrics_agent_slot(m, "ci-1");
	cr_expect_eq(metrics_agent_slot(m, "ci-1"), a, "memoised");
	char copy[] = "ci-1";
	cr_expect_eq(metrics_agent_slot(m, copy), a, "by name, not by address");
	unsigned none = metrics_agent_slot(m, NULL);
	cr_expect_neq(none, a);
	cr_expect_eq(metrics_agent_slot(m, ""), none, "no agent is the name \"\"");
	/* A buffer that held one name and now holds another (a freed snapshot reused). */
	char reused[16] = "ci-2";
	unsigned b = metrics_agent_slot(m, reused);
	strcpy(reused, "ci-3");
	unsigned c = metrics_agent_slot(m, reused);
	cr_expect_neq(b, c, "the memo checks the name");
	char name[16];
	for (int i = 0; i < 2 * METRICS_AGENTS; i++) {
		snprintf(name, sizeof(name), "n%d", i);
		cr_expect_leq(metrics_agent_slot(m, name), METRICS_AGENTS);
	}
	cr_expect_eq(metrics_agent_slot(m, "n200"), METRICS_AGENTS, "overflow counts as other");
	cr_expect_eq(metrics_agent_slot(m, "ci-1"), a, "early names keep their slot");
	free(m);
	metrics_agents_reset();
}

/* Check every line: comments are HELP/TYPE, a sample's family had a TYPE before it. */
static int check_lines(const char *t)
{
	char fam[128] = "";
	int samples = 0;
	for (const char *l = t; *l;) {
		const char *e = strchr(l, '\n');
		cr_assert_not_null(e, "text ends with a newline");
		char line[512];
		size_t n = (size_t)(e - l);
		cr_assert_lt(n, sizeof(line));
		memcpy(line, l, n);
		line[n] = 0;
		if (!strncmp(line, "# TYPE ", 7)) {
			sscanf(line + 7, "%127s", fam);
		} else if (line[0] == '#') {
			cr_expect(!strncmp(line, "# HELP ", 7), "%s", line);
		} else {
			cr_expect(fam[0] && !strncmp(line, fam, strlen(fam)), "%s under %s", line,
			          fam);
			const char *sp = strrchr(line, ' ');
			cr_assert_not_null(sp, "%s", line);
			char *end;
			strtod(sp + 1, &end);
			cr_expect_eq(*end, 0, "value of %s", line);
			samples++;
		}
		l = e + 1;
	}
	return samples;
}

Test(metrics, render_sum_of_workers)
{
	metrics_agents_reset();
	struct metrics_worker *w1 = worker(), *w2 = worker(), *sum = worker();
	metrics_count_query(w1, "ci-42", "allow", false, 0);
	metrics_count_query(w2, "ci-42", "allow", false, 0);
	metrics_count_query(w2, "ci-42", "deny-high-risk", true, 3);
	metrics_count_query(w1, NULL, "formerr", false, 1);
	metrics_observe(&w1->upstream, 50);      /* first bucket */
	metrics_observe(&w2->upstream, 1000);    /* le=0.001 exactly */
	metrics_observe(&w2->upstream, 9000000); /* +Inf */
	metrics_inc(&w1->grants_sent);
	metrics_set(&w2->cache_entries, 7);
	metrics_sum(sum, w1);
	metrics_sum(sum, w2);
	metrics_set(&metrics_global.damaged_blocks, 4);
	cr_expect_eq(sum->upstream.count, 3);
	cr_expect_eq(sum->cache_entries, 7);
	int n = metrics_render_text(sum, "9.9", text, sizeof(text));
	cr_assert_gt(n, 0);
	cr_expect_eq((size_t)n, strlen(text));
	cr_expect_gt(check_lines(text), 20);
	cr_expect(strstr(text, "moat_queries_total{agent=\"ci-42\",decision=\"allow\",transport="
	                       "\"udp\"} 2\n"));
	cr_expect(strstr(text, "moat_queries_total{agent=\"ci-42\",decision=\"deny-high-risk\","
	                       "transport=\"tcp\"} 1\n"));
	cr_expect(strstr(text, "moat_queries_total{agent=\"\",decision=\"formerr\",transport="
	                       "\"udp\"} 1\n"));
	cr_expect(strstr(text, "moat_responses_total{rcode=\"NOERROR\"} 2\n"));
	cr_expect(strstr(text, "moat_responses_total{rcode=\"NXDOMAIN\"} 1\n"));
	cr_expect(strstr(text, "moat_upstream_latency_seconds_bucket{le=\"0.0001\"} 1\n"));
	cr_expect(strstr(text, "moat_upstream_latency_seconds_bucket{le=\"0.001\"} 2\n"));
	cr_expect(strstr(text, "moat_upstream_latency_seconds_bucket{le=\"2.5\"} 2\n"));
	cr_expect(strstr(text, "moat_upstream_latency_seconds_bucket{le=\"+Inf\"} 3\n"));
	cr_expect(strstr(text, "moat_upstream_latency_seconds_count 3\n"));
	cr_expect(strstr(text, "moat_upstream_latency_seconds_sum 9.001050\n"));
	cr_expect(strstr(text, "moat_grants_sent_total 1\n"));
	cr_expect(strstr(text, "moat_cache_entries 7\n"));
	cr_expect(strstr(text, "moat_policy_damaged_blocks_total 4\n"));
	cr_expect(strstr(text, "moat_build_info{version=\"9.9\"} 1\n"));
	cr_expect_null(strstr(text, "deny-not-allowed"), "series never counted are left out");
	/* JSON: the same numbers */
	n = metrics_render_json(sum, "9.9", text, sizeof(text));
	cr_assert_gt(n, 0);
	cr_expect(strstr(text, "{\"agent\":\"ci-42\",\"decision\":\"allow\",\"transport\":\"udp\","
	                       "\"count\":2}"));
	cr_expect(strstr(text, "\"grants\":{\"sent\":1,\"acked\":0,\"failed\":0}"));
	cr_expect(strstr(text, "\"upstream_latency\":{\"count\":3,"));
	cr_expect(strstr(text, "\"damaged_blocks\":4,"));
	/* too small: refused, not cut */
	char small[100];
	cr_expect_eq(metrics_render_text(sum, "9.9", small, sizeof(small)), MOAT_ESPACE);
	cr_expect_eq(metrics_render_json(sum, "9.9", small, sizeof(small)), MOAT_ESPACE);
	free(w1);
	free(w2);
	free(sum);
	metrics_agents_reset();
}

Test(metrics, label_escape)
{
	char out[32];
	cr_expect_eq(metrics_label_escape("a\"b\\c\nd", out, sizeof(out)), 10);
	cr_expect_str_eq(out, "a\\\"b\\\\c\\nd");
	cr_expect_eq(metrics_label_escape("abcdef", out, 4), MOAT_ESPACE);
	cr_expect_eq(metrics_label_escape("", out, 1), 0);
}
