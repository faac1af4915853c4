/* metrics_budget.h: the label budgets in moatd's metrics (metrics_budget.c). metrics.c appends
 * them to its renderings.
 *   moat_budget_used_bytes{agent,zone}           gauge: new label bytes billed in the window
 *   moat_budget_limit_bytes{agent,zone}          gauge: the zone's budget a window
 *   moat_budget_denied_total{agent,zone}         counter: new names denied over the budget
 *   moat_budget_charged_bytes_total{agent,zone}  counter: new label bytes billed
 *   moat_budget_names{agent}                     gauge: names in the seen-names table
 *   moat_budget_memory_bytes{agent}              gauge: memory of the agent's budget state
 *   moat_budget_evicted_total{agent}             counter: names dropped from a full table
 * zone is the wildcard ("*.cdn.example") or "other" (the shared account past 64 zones). The
 * counters of a zone start over when its account is reused (its window emptied and another zone
 * needed one) and with the agent (a budget lives as long as some snapshot has its agent). JSON
 * (moatctl stats): "budget":{"agents":[{"agent","window_s","names","slots","memory_bytes",
 * "denied","charged","evicted","zones":[{"zone","used","limit","denied","charged"}]}],
 * "left_out":N} (agents and zones past 512 of each are left out, as from the text).  */
#ifndef MOAT_SERVE_METRICS_BUDGET_H
#define MOAT_SERVE_METRICS_BUDGET_H

#include "moat/metrics_text.h"

void metrics_budget_text(struct metrics_text *o);
void metrics_budget_json(struct metrics_text *o);

#endif
