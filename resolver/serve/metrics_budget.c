/* metrics_budget.c owns the label budgets' part of moatd's metrics and stats (issue 26): per
 * agent and zone, what the window holds, the limit, the names denied and the bytes billed; per
 * agent, the names its table holds and its memory. Read from the shared budgets themselves
 * (moat/budget_share.h), under their locks, when a scrape or `moatctl stats` asks: nothing is
 * counted twice on the query path. At most METRICS_BUDGET_SERIES series a metric (agents and
 * zones in the JSON) are written, so a scrape fits its 512 KiB; the JSON says how many were
 * left out. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "moat/budget_share.h"
#include "moat/name.h"
#include "serve/metrics_budget.h"

#define METRICS_BUDGET_SERIES 512

/* The clock budget.c's ticks are cut from: the workers' loops read CLOCK_MONOTONIC too. */
static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* "*.cdn.example", or "other" for the shared account, escaped for a label or a JSON string
 * (name_to_text writes every byte outside the printable ones as \DDD, so only \ and " are left
 * to escape). */
static const char *zone_label(const uint8_t *zone, char *out, size_t cap)
{
	char txt[NAME_MAXTEXT], raw[NAME_MAXTEXT + 4];
	if (!zone) {
		snprintf(out, cap, "other");
		return out;
	}
	name_to_text(zone, txt, sizeof(txt));
	size_t n = strlen(txt);
	if (n > 1 && txt[n - 1] == '.')
		txt[n - 1] = 0;
	snprintf(raw, sizeof(raw), "*.%s", txt);
	if (metrics_label_escape(raw, out, cap) < 0)
		snprintf(out, cap, "?");
	return out;
}

enum family { F_USED, F_LIMIT, F_DENIED, F_CHARGED, F_NAMES, F_MEMORY, F_EVICTED, F_COUNT };

static const struct {
	const char *name, *type, *help;
	bool per_zone;
} families[F_COUNT] = {
    [F_USED] = {"moat_budget_used_bytes", "gauge",
                "New label bytes billed in the window, by agent and wildcard zone.", true},
    [F_LIMIT] = {"moat_budget_limit_bytes", "gauge", "The zone's label budget a window.", true},
    [F_DENIED] = {"moat_budget_denied_total", "counter", "New names denied over the zone's budget.",
                  true},
    [F_CHARGED] = {"moat_budget_charged_bytes_total", "counter",
                   "New label bytes billed to the zone.", true},
    [F_NAMES] = {"moat_budget_names", "gauge", "Names held in the agent's seen-names table.",
                 false},
    [F_MEMORY] = {"moat_budget_memory_bytes", "gauge", "Memory of the agent's budget state.",
                  false},
    [F_EVICTED] = {"moat_budget_evicted_total", "counter",
                   "Seen names dropped from a full table (billed again if they come back).", false},
};

struct walk {
	struct metrics_text *o;
	enum family f;
	const char *agent;
	uint64_t now;
	unsigned zones, agents, left_out; /* series written, and left out (JSON) */
	bool first;
};

static void text_zone(void *ctx, const struct budget_zone_info *z)
{
	struct walk *w = ctx;
	char lab[2 * NAME_MAXTEXT];
	if (w->zones++ >= METRICS_BUDGET_SERIES)
		return;
	uint64_t v = w->f == F_USED     ? z->used
	             : w->f == F_LIMIT  ? z->limit
	             : w->f == F_DENIED ? z->denied
	                                : z->charged;
	metrics_emit(w->o, "%s{agent=\"%s\",zone=\"%s\"} %llu\n", families[w->f].name, w->agent,
	             zone_label(z->zone, lab, sizeof(lab)), (unsigned long long)v);
}

static void text_agent(void *ctx, const char *agent, const struct budget_state *st)
{
	struct walk *w = ctx;
	if (!st)
		return;
	w->agent = agent;
	if (families[w->f].per_zone) {
		budget_state_each_zone(st, w->now, text_zone, w);
		return;
	}
	struct budget_info bi;
	if (w->zones++ >= METRICS_BUDGET_SERIES)
		return;
	budget_state_info(st, &bi);
	uint64_t v = w->f == F_NAMES ? bi.names : w->f == F_MEMORY ? bi.mem_bytes : bi.evicted;
	metrics_emit(w->o, "%s{agent=\"%s\"} %llu\n", families[w->f].name, agent,
	             (unsigned long long)v);
}

void metrics_budget_text(struct metrics_text *o)
{
	struct walk w = {.o = o, .now = now_ms()};
	for (w.f = 0; w.f < F_COUNT; w.f++) {
		metrics_head(o, families[w.f].name, families[w.f].type, families[w.f].help);
		w.zones = 0;
		budget_share_each(text_agent, &w);
	}
}

static void json_zone(void *ctx, const struct budget_zone_info *z)
{
	struct walk *w = ctx;
	char lab[2 * NAME_MAXTEXT];
	if (w->zones++ >= METRICS_BUDGET_SERIES) {
		w->left_out++;
		return;
	}
	metrics_emit(
	    w->o, "%s{\"zone\":\"%s\",\"used\":%u,\"limit\":%u,\"denied\":%llu,\"charged\":%llu}",
	    w->first ? "" : ",", zone_label(z->zone, lab, sizeof(lab)), z->used, z->limit,
	    (unsigned long long)z->denied, (unsigned long long)z->charged);
	w->first = false;
}

static void json_agent(void *ctx, const char *agent, const struct budget_state *st)
{
	struct walk *w = ctx;
	if (!st)
		return;
	if (w->agents++ >= METRICS_BUDGET_SERIES) {
		w->left_out++;
		return;
	}
	struct budget_info bi;
	budget_state_info(st, &bi);
	metrics_emit(w->o,
	             "%s{\"agent\":\"%s\",\"window_s\":%u,\"names\":%zu,\"slots\":%zu,"
	             "\"memory_bytes\":%zu,\"denied\":%llu,\"charged\":%llu,\"evicted\":%llu,"
	             "\"zones\":[",
	             w->agent ? "," : "", agent, bi.window_ms / 1000u, bi.names, bi.slots,
	             bi.mem_bytes, (unsigned long long)bi.denied, (unsigned long long)bi.charged,
	             (unsigned long long)bi.evicted);
	w->agent = agent;
	w->first = true;
	budget_state_each_zone(st, w->now, json_zone, w);
	metrics_emit(w->o, "]}");
}

void metrics_budget_json(struct metrics_text *o)
{
	struct walk w = {.o = o, .now = now_ms()};
	metrics_emit(o, ",\"budget\":{\"agents\":[");
	budget_share_each(json_agent, &w);
	metrics_emit(o, "],\"left_out\":%u}", w.left_out);
}
