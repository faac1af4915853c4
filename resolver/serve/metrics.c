/* metrics.c owns moatd's counters (format and threading in moat/metrics.h): the process-wide
 * agent-name table, counting one query, summing the workers' blocks, and rendering the sum as
 * Prometheus text (built with moat/metrics_text.h, as moat-fw's are) or as JSON. Pure: no event
 * loop, no sockets; ops/metrics_endpoint.c serves the text and ops/control.c the JSON. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "moat/config.h"
#include "moat/metrics.h"
#include "moat/metrics_text.h"
#include "moat/policy.h"
#include "moat/wire.h"
#include "serve/metrics_budget.h"

const uint64_t metrics_hist_bounds_us[METRICS_HIST_BOUNDS] = {
    100, 250, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 2500000,
};

struct metrics_global metrics_global;

static pthread_mutex_t agents_lock = PTHREAD_MUTEX_INITIALIZER;
static char agent_names[METRICS_AGENTS][CONFIG_NAME_MAX];
static unsigned nagent_names; /* written under agents_lock; read with acquire */

void metrics_observe(struct metrics_hist *h, uint64_t us)
{
	unsigned i = 0;
	while (i < METRICS_HIST_BOUNDS && us > metrics_hist_bounds_us[i])
		i++;
	metrics_inc(&h->bucket[i]);
	metrics_inc(&h->count);
	metrics_add(&h->sum_us, us);
}

/* The policy's verdicts carry the log's own tokens (moat/policy.h); the rest are the answer
 * paths'. */
#define DECISION_NAME(v, token) [MD_##v] = token,
static const char *const decision_names[MD_COUNT] = {
    POLICY_VERDICT_TOKENS(DECISION_NAME) /* allow, deny-... */
        [MD_ALLOW_CACHED] = "allow-cached",
    [MD_ALLOW_STALE] = "allow-stale",
    [MD_REFUSE_CLIENT] = "refuse-client",
    [MD_FORMERR] = "formerr",
    [MD_NOTIMP] = "notimp",
    [MD_BADVERS] = "badvers",
    [MD_WOULD_DENY] = "would-deny",
    [MD_OTHER] = "other",
};

const char *metrics_decision_str(enum metrics_decision d)
{
	return d < MD_COUNT ? decision_names[d] : "other";
}

enum metrics_decision metrics_decision_of(const char *decision)
{
	if (!decision)
		return MD_OTHER;
	/* The first letter narrows it to the allows or the denies. */
	for (int d = 0; d < MD_OTHER; d++)
		if (decision_names[d][0] == decision[0] && !strcmp(decision_names[d], decision))
			return (enum metrics_decision)d;
	return MD_OTHER;
}

static unsigned agent_intern(const char *name)
{
	pthread_mutex_lock(&agents_lock);
	unsigned n = nagent_names, slot = METRICS_AGENTS;
	for (unsigned i = 0; i < n; i++)
		if (!strcmp(agent_names[i], name)) {
			slot = i;
			break;
		}
	if (slot == METRICS_AGENTS && n < METRICS_AGENTS) {
		snprintf(agent_names[n], sizeof(agent_names[n]), "%s", name);
		__atomic_store_n(&nagent_names, n + 1, __ATOMIC_RELEASE);
		slot = n;
	}
	pthread_mutex_unlock(&agents_lock);
	return slot;
}

unsigned metrics_agent_slot(struct metrics_worker *m, const char *agent)
{
	const char *name = agent ? agent : "";
	unsigned h = (unsigned)(((uintptr_t)name >> 4) % METRICS_SLOT_CACHE);
	/* The name is compared too: a freed snapshot's memory may hold another agent later. */
	if (m->memo_key[h] == name && m->memo_slot[h] < METRICS_AGENTS &&
	    !strcmp(agent_names[m->memo_slot[h]], name))
		return m->memo_slot[h];
	unsigned slot = agent_intern(name);
	if (slot < METRICS_AGENTS) {
		m->memo_key[h] = name;
		m->memo_slot[h] = (uint8_t)slot;
	}
	return slot;
}

void metrics_count_query(struct metrics_worker *m, const char *agent, const char *decision,
                         bool tcp, int rcode)
{
	unsigned slot = metrics_agent_slot(m, agent);
	if (!decision || decision != m->memo_decision) { /* a token is never freed or rewritten */
		m->memo_md = (uint8_t)metrics_decision_of(decision);
		m->memo_decision = decision;
	}
	metrics_inc(&m->queries[slot][m->memo_md][tcp]);
	if (rcode >= 0 && rcode < 16)
		metrics_inc(&m->rcodes[rcode]);
}

void metrics_agents_reset(void)
{
	pthread_mutex_lock(&agents_lock);
	nagent_names = 0;
	pthread_mutex_unlock(&agents_lock);
}

static void hist_sum(struct metrics_hist *s, const struct metrics_hist *h)
{
	for (int i = 0; i <= METRICS_HIST_BOUNDS; i++)
		s->bucket[i] += metrics_get(&h->bucket[i]);
	s->count += metrics_get(&h->count);
	s->sum_us += metrics_get(&h->sum_us);
}

void metrics_sum(struct metrics_worker *s, const struct metrics_worker *w)
{
	for (int a = 0; a <= METRICS_AGENTS; a++)
		for (int d = 0; d < MD_COUNT; d++)
			for (int t = 0; t < 2; t++)
				s->queries[a][d][t] += metrics_get(&w->queries[a][d][t]);
	for (int r = 0; r < 16; r++)
		s->rcodes[r] += metrics_get(&w->rcodes[r]);
	hist_sum(&s->upstream, &w->upstream);
	hist_sum(&s->grant, &w->grant);
#define SUM(f) s->f += metrics_get(&w->f)
	SUM(grants_sent);
	SUM(grants_acked);
	SUM(grants_failed);
	SUM(ratelimited);
	SUM(cache_hits);
	SUM(cache_misses);
	SUM(cache_entries);
	SUM(cache_bytes);
	SUM(inflight);
	SUM(tcp_conns);
	SUM(tcp_rejected);
	SUM(dropped);
	SUM(upstream_timeouts);
	SUM(upstream_mismatch);
#undef SUM
}

/* ---- text building (moat/metrics_text.h) ---- */

/* The short names the renderings below are written with. */
#define emit metrics_emit
#define head metrics_head
#define scalar metrics_scalar

static void hist_text(struct metrics_text *o, const char *name, const char *help,
                      const struct metrics_hist *h)
{
	head(o, name, "histogram", help);
	uint64_t cum = 0;
	for (int i = 0; i < METRICS_HIST_BOUNDS; i++) {
		cum += h->bucket[i];
		emit(o, "%s_bucket{le=\"%g\"} %llu\n", name,
		     (double)metrics_hist_bounds_us[i] / 1e6, (unsigned long long)cum);
	}
	cum += h->bucket[METRICS_HIST_BOUNDS];
	emit(o, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)cum);
	emit(o, "%s_sum %.6f\n%s_count %llu\n", name, (double)h->sum_us / 1e6, name,
	     (unsigned long long)h->count);
}

static const char *agent_label(unsigned a, char *buf, size_t cap)
{
	unsigned n = __atomic_load_n(&nagent_names, __ATOMIC_ACQUIRE);
	const char *name = a < n ? agent_names[a] : "other";
	if (metrics_label_escape(name, buf, cap) < 0)
		snprintf(buf, cap, "?");
	return buf;
}

int metrics_render_text(const struct metrics_worker *s, const char *version, char *buf, size_t cap)
{
	struct metrics_text o = metrics_text_on(buf, cap);
	const struct metrics_global *g = &metrics_global;
	char lab[2 * CONFIG_NAME_MAX + 2];

	head(&o, "moat_queries_total", "counter", "Queries logged, by agent, decision, transport.");
	for (unsigned a = 0; a <= METRICS_AGENTS; a++)
		for (int d = 0; d < MD_COUNT; d++)
			for (int t = 0; t < 2; t++)
				if (s->queries[a][d][t])
					emit(&o,
					     "moat_queries_total{agent=\"%s\",decision=\"%s\","
					     "transport=\"%s\"} %llu\n",
					     agent_label(a, lab, sizeof(lab)), decision_names[d],
					     t ? "tcp" : "udp",
					     (unsigned long long)s->queries[a][d][t]);
	head(&o, "moat_responses_total", "counter", "Answers sent, by rcode.");
	for (int r = 0; r < 16; r++)
		if (s->rcodes[r])
			emit(&o, "moat_responses_total{rcode=\"%s\"} %llu\n",
			     wire_rcode_str((uint8_t)r), (unsigned long long)s->rcodes[r]);
	hist_text(&o, "moat_upstream_latency_seconds", "Upstream answer latency.", &s->upstream);
	scalar(&o, "moat_upstream_timeouts_total", "counter", "Upstream attempts timed out.",
	       s->upstream_timeouts);
	scalar(&o, "moat_upstream_mismatch_total", "counter",
	       "Upstream datagrams not matching a question.", s->upstream_mismatch);
	scalar(&o, "moat_cache_hits_total", "counter", "Answer cache hits.", s->cache_hits);
	scalar(&o, "moat_cache_misses_total", "counter", "Answer cache misses.", s->cache_misses);
	scalar(&o, "moat_cache_entries", "gauge", "Answers in the cache.", s->cache_entries);
	scalar(&o, "moat_cache_bytes", "gauge", "Bytes charged to the cache.", s->cache_bytes);
	scalar(&o, "moat_inflight_questions", "gauge", "Upstream questions in flight.",
	       s->inflight);
	scalar(&o, "moat_grants_sent_total", "counter", "Grants sent to moat-fw.", s->grants_sent);
	scalar(&o, "moat_grants_acked_total", "counter", "Grants moat-fw confirmed.",
	       s->grants_acked);
	scalar(&o, "moat_grants_failed_total", "counter", "Grants refused, failed or timed out.",
	       s->grants_failed);
	hist_text(&o, "moat_grant_latency_seconds", "Grant sent to moat-fw's answer.", &s->grant);
	scalar(&o, "moat_ratelimited_total", "counter", "Queries over the rate limit.",
	       s->ratelimited);
	scalar(&o, "moat_dropped_total", "counter", "Queries dropped unanswered.", s->dropped);
	scalar(&o, "moat_tcp_connections", "gauge", "Open TCP client connections.", s->tcp_conns);
	scalar(&o, "moat_tcp_rejected_total", "counter", "TCP clients refused (limit).",
	       s->tcp_rejected);
	scalar(&o, "moat_policy_agents", "gauge", "Agents in the running policy.",
	       metrics_get(&g->policy_agents));
	scalar(&o, "moat_policy_patterns", "gauge", "Allow patterns in the running policy.",
	       metrics_get(&g->policy_patterns));
	scalar(&o, "moat_policy_damaged_blocks_total", "counter",
	       "Checks of compiled-policy blocks that did not match their hash (each lookup that "
	       "needed one failed closed).",
	       metrics_get(&g->damaged_blocks));
	scalar(&o, "moat_policy_files_changed_total", "counter",
	       "Compiled-policy files changed after moatd opened them (each lookup that needed one "
	       "failed closed until a reload).",
	       metrics_get(&g->files_changed));
	head(&o, "moat_policy_reloads_total", "counter", "Policy reloads, by result.");
	emit(&o, "moat_policy_reloads_total{result=\"ok\"} %llu\n",
	     (unsigned long long)metrics_get(&g->reloads_ok));
	emit(&o, "moat_policy_reloads_total{result=\"error\"} %llu\n",
	     (unsigned long long)metrics_get(&g->reloads_failed));
	scalar(&o, "moat_policy_last_reload_timestamp_seconds", "gauge",
	       "When the policy was last loaded or a reload tried.",
	       metrics_get(&g->last_reload_unix));
	scalar(&o, "moat_policy_last_reload_success", "gauge", "1 if the last load succeeded.",
	       metrics_get(&g->last_reload_ok));
	scalar(&o, "moat_workers", "gauge", "Worker threads.", metrics_get(&g->workers));
	metrics_budget_text(&o);
	head(&o, "moat_build_info", "gauge", "moatd's version.");
	emit(&o, "moat_build_info{version=\"%s\"} 1\n", version);
	return metrics_text_len(&o);
}

static void json_hist(struct metrics_text *o, const char *name, const struct metrics_hist *h)
{
	emit(o, ",\"%s\":{\"count\":%llu,\"sum_us\":%llu,\"buckets_us\":[", name,
	     (unsigned long long)h->count, (unsigned long long)h->sum_us);
	for (int i = 0; i <= METRICS_HIST_BOUNDS; i++)
		emit(o, "%s%llu", i ? "," : "", (unsigned long long)h->bucket[i]);
	emit(o, "]}");
}

/* JSON for moatctl stats: the same numbers as the text, as one object (no leading brace: the
 * control reply wraps it). Agent names are [A-Za-z0-9_.-], so need no escaping. */
int metrics_render_json(const struct metrics_worker *s, const char *version, char *buf, size_t cap)
{
	struct metrics_text o = metrics_text_on(buf, cap);
	const struct metrics_global *g = &metrics_global;
	char lab[2 * CONFIG_NAME_MAX + 2];
	emit(&o, "\"version\":\"%s\",\"queries\":[", version);
	bool first = true;
	for (unsigned a = 0; a <= METRICS_AGENTS; a++)
		for (int d = 0; d < MD_COUNT; d++)
			for (int t = 0; t < 2; t++)
				if (s->queries[a][d][t]) {
					emit(
					    &o,
					    "%s{\"agent\":\"%s\",\"decision\":\"%s\",\"transport\":"
					    "\"%s\",\"count\":%llu}",
					    first ? "" : ",", agent_label(a, lab, sizeof(lab)),
					    decision_names[d], t ? "tcp" : "udp",
					    (unsigned long long)s->queries[a][d][t]);
					first = false;
				}
	emit(&o, "],\"responses\":{");
	first = true;
	for (int r = 0; r < 16; r++)
		if (s->rcodes[r]) {
			emit(&o, "%s\"%s\":%llu", first ? "" : ",", wire_rcode_str((uint8_t)r),
			     (unsigned long long)s->rcodes[r]);
			first = false;
		}
	emit(&o, "}");
	json_hist(&o, "upstream_latency", &s->upstream);
	json_hist(&o, "grant_latency", &s->grant);
	emit(
	    &o,
	    ",\"cache\":{\"hits\":%llu,\"misses\":%llu,\"entries\":%llu,\"bytes\":%llu},"
	    "\"inflight_questions\":%llu,\"grants\":{\"sent\":%llu,\"acked\":%llu,\"failed\":%llu},"
	    "\"ratelimited\":%llu,\"dropped\":%llu,\"tcp_connections\":%llu,\"tcp_rejected\":%llu,"
	    "\"upstream_timeouts\":%llu,\"upstream_mismatch\":%llu,",
	    (unsigned long long)s->cache_hits, (unsigned long long)s->cache_misses,
	    (unsigned long long)s->cache_entries, (unsigned long long)s->cache_bytes,
	    (unsigned long long)s->inflight, (unsigned long long)s->grants_sent,
	    (unsigned long long)s->grants_acked, (unsigned long long)s->grants_failed,
	    (unsigned long long)s->ratelimited, (unsigned long long)s->dropped,
	    (unsigned long long)s->tcp_conns, (unsigned long long)s->tcp_rejected,
	    (unsigned long long)s->upstream_timeouts, (unsigned long long)s->upstream_mismatch);
	emit(&o,
	     "\"policy\":{\"agents\":%llu,\"patterns\":%llu,\"damaged_blocks\":%llu,"
	     "\"files_changed\":%llu,"
	     "\"reloads_ok\":%llu,\"reloads_failed\":%llu,\"last_reload\":%llu,"
	     "\"last_reload_ok\":%s},\"workers\":%llu",
	     (unsigned long long)metrics_get(&g->policy_agents),
	     (unsigned long long)metrics_get(&g->policy_patterns),
	     (unsigned long long)metrics_get(&g->damaged_blocks),
	     (unsigned long long)metrics_get(&g->files_changed),
	     (unsigned long long)metrics_get(&g->reloads_ok),
	     (unsigned long long)metrics_get(&g->reloads_failed),
	     (unsigned long long)metrics_get(&g->last_reload_unix),
	     metrics_get(&g->last_reload_ok) ? "true" : "false",
	     (unsigned long long)metrics_get(&g->workers));
	metrics_budget_json(&o);
	return metrics_text_len(&o);
}
