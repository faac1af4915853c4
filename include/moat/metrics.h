/* moatd's counters and their two renderings (Prometheus text for the metrics endpoint, JSON for
 * `moatctl stats`). metrics_label_escape and the text building come from moat/metrics_text.h.
 *
 * Each worker owns one struct metrics_worker and is its only writer: an increment is a relaxed
 * atomic load and store (a plain `inc` on x86-64, no locked instruction, no shared cache line),
 * and a reader on another thread (the scrape, the control socket) sums every worker's block
 * with relaxed loads. Values read that way may lag by one loop turn but are never torn.
 * Gauges a worker keeps in its own state (cache size, TCP connections, questions in flight) are
 * copied into its block once per loop turn (metrics_publish in the daemon), not per query.
 *
 * Queries are counted by (agent, decision, transport). Agents are known by name in a
 * process-wide table (metrics_agent_slot), so a reload that reorders or renames agents keeps
 * each name's counters; names past METRICS_AGENTS are counted as agent "other".
 *
 * Metric names (Prometheus text format 0.0.4):
 *   moat_queries_total{agent,decision,transport}   counter
 *   moat_responses_total{rcode}                    counter (answers sent, by rcode)
 *   moat_upstream_latency_seconds                  histogram (answered upstream questions)
 *   moat_upstream_timeouts_total, moat_upstream_mismatch_total   counters
 *   moat_cache_hits_total, moat_cache_misses_total counters
 *   moat_cache_entries, moat_cache_bytes           gauges
 *   moat_inflight_questions                        gauge (upstream questions in flight)
 *   moat_grants_sent_total, moat_grants_acked_total, moat_grants_failed_total   counters
 *   moat_grant_latency_seconds                     histogram (grant sent to ack)
 *   moat_ratelimited_total, moat_dropped_total     counters
 *   moat_tcp_connections                           gauge;  moat_tcp_rejected_total counter
 *   moat_policy_agents, moat_policy_patterns       gauges
 *   moat_policy_damaged_blocks_total               counter (compiled blocks that failed their hash)
 *   moat_policy_files_changed_total                counter (compiled files changed after open)
 *   moat_policy_reloads_total{result}              counter (result ok|error)
 *   moat_policy_last_reload_timestamp_seconds, moat_policy_last_reload_success   gauges
 *   moat_workers                                   gauge
 *   moat_build_info{version}                       gauge, always 1 */
#ifndef MOAT_METRICS_H
#define MOAT_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moat/metrics_text.h"

#define METRICS_AGENTS 64      /* named agents tracked; slot METRICS_AGENTS is "other" */
#define METRICS_HIST_BOUNDS 12 /* upper bounds, plus +Inf */
#define METRICS_SLOT_CACHE 16  /* per-worker memo of agent-name pointer -> slot */

enum metrics_decision {
	MD_ALLOW = 0,
	MD_ALLOW_CACHED,
	MD_ALLOW_STALE,
	MD_DENY_NOT_ALLOWED,
	MD_DENY_HIGHRISK,
	MD_DENY_IPLITERAL,
	MD_DENY_EMBEDDED,
	MD_DENY_CLASS,
	MD_DENY_QTYPE,
	MD_DENY_BUDGET,
	MD_DENY_ANSWER_CAP,
	MD_REFUSE_CLIENT,
	MD_FORMERR,
	MD_NOTIMP,
	MD_BADVERS,
	MD_WOULD_DENY, /* audit mode: answered, enforce would deny it (moat/policy_audit.h) */
	MD_OTHER,
	MD_COUNT,
};

/* Bounds in microseconds: 100 us .. 2.5 s. */
extern const uint64_t metrics_hist_bounds_us[METRICS_HIST_BOUNDS];

struct metrics_hist {
	uint64_t bucket[METRICS_HIST_BOUNDS + 1]; /* not cumulative; the last is +Inf */
	uint64_t count, sum_us;
};

struct metrics_worker {
	uint64_t queries[METRICS_AGENTS + 1][MD_COUNT][2]; /* [agent][decision][udp=0 tcp=1] */
	uint64_t rcodes[16];
	struct metrics_hist upstream, grant;
	uint64_t grants_sent, grants_acked, grants_failed;
	uint64_t ratelimited;
	/* published once per loop turn (metrics_publish) */
	uint64_t cache_hits, cache_misses, cache_entries, cache_bytes;
	uint64_t inflight, tcp_conns, tcp_rejected, dropped, upstream_timeouts, upstream_mismatch;
	/* the worker's own memo for metrics_agent_slot; not a counter */
	const char *memo_key[METRICS_SLOT_CACHE];
	uint8_t memo_slot[METRICS_SLOT_CACHE];
	/* and of metrics_count_query: the last decision token's address and its counter */
	const char *memo_decision;
	uint8_t memo_md;
};

/* Process-wide facts, written by the main thread (start-up, reload); damaged_blocks and
 * files_changed copied from policy_file_damaged_total and policy_file_tainted_total
 * (moat/policy_file.h) by metrics_collect before each reading. */
struct metrics_global {
	uint64_t policy_agents, policy_patterns;
	uint64_t damaged_blocks, files_changed;
	uint64_t reloads_ok, reloads_failed;
	uint64_t last_reload_unix; /* start-up counts as the first load */
	uint64_t last_reload_ok;   /* 1 or 0 */
	uint64_t workers;
	uint64_t start_unix;
};

extern struct metrics_global metrics_global;

static inline uint64_t metrics_get(const uint64_t *c)
{
	return __atomic_load_n(c, __ATOMIC_RELAXED);
}

static inline void metrics_set(uint64_t *c, uint64_t v)
{
	__atomic_store_n(c, v, __ATOMIC_RELAXED);
}

/* Single writer per block: load + store, no read-modify-write instruction. */
static inline void metrics_add(uint64_t *c, uint64_t v)
{
	metrics_set(c, metrics_get(c) + v);
}

static inline void metrics_inc(uint64_t *c)
{
	metrics_add(c, 1);
}

void metrics_observe(struct metrics_hist *h, uint64_t us);

/* "allow-cached" -> MD_ALLOW_CACHED; unknown or NULL -> MD_OTHER. Pure. */
enum metrics_decision metrics_decision_of(const char *decision);
const char *metrics_decision_str(enum metrics_decision d);

/* The slot of an agent name (NULL, no agent: the name ""), interned in the process-wide table on
 * first sight (under a lock) and memoised per worker by the name's address, so the hot path
 * costs a pointer compare. Thread-safe for distinct m. */
unsigned metrics_agent_slot(struct metrics_worker *m, const char *agent);

/* Count one logged query. decision is a token with static storage (the log's): its counter is
 * memoised by address, so a worker's run of one decision costs a pointer compare. */
void metrics_count_query(struct metrics_worker *m, const char *agent, const char *decision,
                         bool tcp, int rcode);

/* Add every counter of w into sum (relaxed loads of w). */
void metrics_sum(struct metrics_worker *sum, const struct metrics_worker *w);

/* Render sum (of every worker) and metrics_global. Returns the length written (text is
 * NUL-terminated) or MOAT_ESPACE. version goes into moat_build_info. */
int metrics_render_text(const struct metrics_worker *sum, const char *version, char *out,
                        size_t cap);
int metrics_render_json(const struct metrics_worker *sum, const char *version, char *out,
                        size_t cap);

/* For tests: forget every interned agent name. */
void metrics_agents_reset(void);

#endif
