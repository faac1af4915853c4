/* ask.h: held queries of agents with `on_unknown: ask` (ask.c). A question for a name no rule
 * decides waits while an operator (or a program) decides: `moatctl watch` shows the ask,
 * `moatctl allow` / `moatctl deny` answer it by adding a rule, and the new snapshot releases the
 * held query through the normal path (ask_policy_changed: forward, filter, grant, answer, or
 * the deny). The same name asked again while it waits joins the one ask (coalescing, on any
 * worker); at most ask_max_pending names wait per agent (more are denied at once); after
 * ask_timeout_ms without an answer the name's queries are denied.
 *
 * The registry of asks is shared by the workers (one lock; an ask is a human-scale event, a
 * burst of a thousand costs a thousand short critical sections); each worker keeps its own
 * held queries and their timers. Events for watchers ("ask", "timeout") are queued here and
 * handed to the control socket (ops/control_ask.c) through ask_set_notify. */
#ifndef MOAT_ASK_H
#define MOAT_ASK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct worker;
struct reply_to;
struct wire_query;
struct policy_agent;
struct policy_set;

enum ask_result {
	ASK_HELD = 0, /* the query waits; to was copied (and held) */
	ASK_FULL,     /* the agent has ask_max_pending names waiting: deny it now */
	ASK_NOMEM,
};

/* Worker start: its list of held queries (before the loop runs). */
void ask_worker_init(struct worker *w);

/* What a held query does once decided: query.c's query_decided (a callback, so the query path
 * and this module do not include each other). */
struct policy_decision;
typedef void (*ask_resume_fn)(struct worker *w, struct reply_to *to, const struct wire_query *q,
                              const struct policy_agent *agent, struct policy_decision *d);

/* Hold q (from to) for agent; resume runs when a rule or the deadline decides it. Loop
 * thread. */
enum ask_result ask_hold(struct worker *w, struct reply_to *to, const struct wire_query *q,
                         const struct policy_agent *agent, ask_resume_fn resume);

/* w took a new policy snapshot: every query it holds is decided again on it; those a rule now
 * decides go on (query_decided), the others keep waiting. Loop thread of w. */
void ask_policy_changed(struct worker *w);

/* At shutdown: the held queries are dropped (counted as dropped, like any query in flight). */
void ask_cancel_all(struct worker *w);

/* The control socket's side (any thread unless said). */
typedef void (*ask_notify_fn)(void *ctx);
/* fn(ctx) is called when events are queued (from any thread; it should only wake a loop). */
void ask_set_notify(ask_notify_fn fn, void *ctx);
/* The queued events as JSON lines (malloc'd, "" when none; NULL when out of memory); the queue
 * is then empty. */
char *ask_events_take(void);
/* The asks waiting now, as "ask" event lines (a new watcher's start). malloc'd. */
char *ask_pending_lines(void);
/* The rule just added for agent decides its waiting names that allow or deny match (either may
 * be NULL): they leave the registry, each with a "decision" event (by: what decided it). The
 * held queries themselves go on when their worker takes the new snapshot. Returns how many
 * names were answered. */
unsigned ask_resolve(const char *agent, const struct policy_set *allow,
                     const struct policy_set *deny, const char *by);
/* {"pending":N,"held_max":{"agent":M,...}} for status: names waiting now, and the most that
 * ever waited at once per agent. */
int ask_status_json(char *out, size_t cap);

#endif
