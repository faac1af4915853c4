/* ask.c owns the held queries of ask mode (rules in ask.h): the registry of names waiting for
 * an answer (shared, under one lock: coalescing, the per-agent cap, the deadlines), each
 * worker's held queries with their timers, their release when a new snapshot decides them,
 * and the event lines watchers read. */
#include "serve/ask.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "moat/dlist.h"
#include "moat/isotime.h"
#include "moat/log.h"
#include "moat/name.h"
#include "moat/policy.h"
#include "moat/policy_audit.h"
#include "moat/wire.h"
#include "serve/reply.h"
#include "serve/worker.h"

struct ask_entry {
	uint64_t id;
	char agent[CONFIG_NAME_MAX];
	uint8_t lname[NAME_MAXWIRE];
	uint64_t deadline_ms; /* monotonic */
	unsigned waiters;     /* held queries, on any worker */
};

struct agent_max {
	char agent[CONFIG_NAME_MAX];
	unsigned max;
};

static struct {
	pthread_mutex_t lock;
	struct ask_entry *v;
	size_t n, cap;
	uint64_t next_id;
	struct agent_max *max;
	size_t nmax;
	char *events;
	size_t elen, ecap;
	ask_notify_fn notify;
	void *notify_ctx;
} reg = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* A held query, on its worker's list. */
struct held {
	struct dlist link;
	struct worker *w;
	ask_resume_fn resume;
	uint64_t id;
	uv_timer_t timer;
	struct reply_to to;
	struct wire_query q;
};

static struct dlist held_of[CONFIG_WORKERS_MAX];

static uint64_t mono_ms(void)
{
	return uv_hrtime() / 1000000;
}

/* --- events (under reg.lock) ------------------------------------------------------------------ */

static void event_add(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void event_add(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n <= 0 || (size_t)n >= sizeof(line) || reg.elen > (4u << 20))
		return; /* nobody reads: do not grow without bound */
	if (reg.elen + (size_t)n + 1 > reg.ecap) {
		size_t nc = reg.ecap ? reg.ecap * 2 : 4096;
		while (nc < reg.elen + (size_t)n + 1)
			nc *= 2;
		char *ne = realloc(reg.events, nc);
		if (!ne)
			return;
		reg.events = ne;
		reg.ecap = nc;
	}
	memcpy(reg.events + reg.elen, line, (size_t)n + 1);
	reg.elen += (size_t)n;
}

/* The event line of entry e: {"event":KIND,"id":..,"agent":..,"name":.., extra}. */
static void entry_event(const struct ask_entry *e, const char *kind, const char *extra)
{
	char name[NAME_MAXTEXT], nameq[NAME_MAXTEXT * 2], ts[40];
	name_to_text(e->lname, name, sizeof(name));
	log_json_quote(name, nameq, sizeof(nameq));
	isotime_now(ts, sizeof(ts));
	event_add("{\"ts\":\"%s\",\"event\":\"%s\",\"id\":%llu,\"agent\":\"%s\",\"name\":%s%s%s}\n",
	          ts, kind, (unsigned long long)e->id, e->agent, nameq, *extra ? "," : "", extra);
}

static void notify(void)
{
	if (reg.notify)
		reg.notify(reg.notify_ctx);
}

void ask_set_notify(ask_notify_fn fn, void *ctx)
{
	pthread_mutex_lock(&reg.lock);
	reg.notify = fn;
	reg.notify_ctx = ctx;
	pthread_mutex_unlock(&reg.lock);
}

char *ask_events_take(void)
{
	pthread_mutex_lock(&reg.lock);
	char *out = strdup(reg.elen ? reg.events : "");
	reg.elen = 0;
	pthread_mutex_unlock(&reg.lock);
	return out;
}

/* --- the registry (under reg.lock) ------------------------------------------------------------ */

static struct ask_entry *entry_find(const char *agent, const uint8_t *lname)
{
	for (size_t i = 0; i < reg.n; i++)
		if (!strcmp(reg.v[i].agent, agent) && name_equal(reg.v[i].lname, lname))
			return &reg.v[i];
	return NULL;
}

static struct ask_entry *entry_by_id(uint64_t id)
{
	for (size_t i = 0; i < reg.n; i++)
		if (reg.v[i].id == id)
			return &reg.v[i];
	return NULL;
}

static void entry_drop(struct ask_entry *e)
{
	*e = reg.v[--reg.n];
}

static unsigned agent_pending(const char *agent)
{
	unsigned n = 0;
	for (size_t i = 0; i < reg.n; i++)
		n += !strcmp(reg.v[i].agent, agent);
	return n;
}

static void note_max(const char *agent, unsigned pending)
{
	for (size_t i = 0; i < reg.nmax; i++)
		if (!strcmp(reg.max[i].agent, agent)) {
			if (pending > reg.max[i].max)
				reg.max[i].max = pending;
			return;
		}
	struct agent_max *nm = realloc(reg.max, (reg.nmax + 1) * sizeof(*nm));
	if (!nm)
		return;
	reg.max = nm;
	snprintf(nm[reg.nmax].agent, sizeof(nm->agent), "%s", agent);
	nm[reg.nmax++].max = pending;
}

/* A waiter of ask id leaves; the last one takes the ask with it (kind: its event, or NULL). */
static void waiter_leaves(uint64_t id, const char *kind, const char *extra)
{
	pthread_mutex_lock(&reg.lock);
	struct ask_entry *e = entry_by_id(id);
	bool told = false;
	if (e && --e->waiters == 0) {
		if (kind) {
			entry_event(e, kind, extra);
			told = true;
		}
		entry_drop(e);
	}
	pthread_mutex_unlock(&reg.lock);
	if (told)
		notify();
}

/* The entry for the question (joined or new): its id and ms left, or ASK_FULL. */
static enum ask_result entry_join(const struct policy_agent *a, const struct wire_query *q,
                                  const char *client, uint64_t *id, uint64_t *left)
{
	uint64_t now = mono_ms();
	pthread_mutex_lock(&reg.lock);
	struct ask_entry *e = entry_find(a->cfg.name, q->lname);
	enum ask_result r = ASK_HELD;
	if (!e) {
		unsigned pending = agent_pending(a->cfg.name);
		if (pending >= a->cfg.ask_max_pending) {
			r = ASK_FULL;
		} else if (reg.n == reg.cap) {
			size_t nc = reg.cap ? reg.cap * 2 : 64;
			struct ask_entry *nv = realloc(reg.v, nc * sizeof(*nv));
			r = nv ? ASK_HELD : ASK_NOMEM;
			if (nv) {
				reg.v = nv;
				reg.cap = nc;
			}
		}
		if (r == ASK_HELD) {
			e = &reg.v[reg.n++];
			memset(e, 0, sizeof(*e));
			e->id = ++reg.next_id;
			snprintf(e->agent, sizeof(e->agent), "%s", a->cfg.name);
			memcpy(e->lname, q->lname, sizeof(e->lname));
			e->deadline_ms = now + a->cfg.ask_timeout_ms;
			note_max(a->cfg.name, pending + 1);
			char extra[200], type[16];
			snprintf(extra, sizeof(extra),
			         "\"type\":\"%s\",\"client\":\"%s\",\"timeout_ms\":%u",
			         wire_type_str(q->qtype, type, sizeof(type)), client,
			         a->cfg.ask_timeout_ms);
			entry_event(e, "ask", extra);
		}
	}
	if (e) {
		e->waiters++;
		*id = e->id;
		*left = e->deadline_ms > now ? e->deadline_ms - now : 0;
	}
	pthread_mutex_unlock(&reg.lock);
	if (r == ASK_HELD && e)
		notify();
	return r;
}

/* --- held queries (their worker's loop) --------------------------------------------------- */

void ask_worker_init(struct worker *w)
{
	dlist_init(&held_of[w->index]);
}

static void held_closed(uv_handle_t *h)
{
	free(h->data);
}

/* h leaves its worker: its hold on the client goes, its timer closes (and frees it). */
static void held_free(struct held *h)
{
	dlist_del(&h->link);
	reply_release(&h->to);
	uv_close((uv_handle_t *)&h->timer, held_closed);
}

/* The question goes on with decision d, for the agent the client has now. */
static void held_decided(struct held *h, struct policy_decision *d)
{
	const struct policy_agent *a =
	    policy_agent_for(h->w->policy, (const struct sockaddr *)&h->to.client);
	if (reply_gone(&h->to))
		h->w->stats.dropped++;
	else
		h->resume(h->w, &h->to, &h->q, a, d);
	held_free(h);
}

static void on_deadline(uv_timer_t *t)
{
	struct held *h = t->data;
	const struct policy_agent *a =
	    policy_agent_for(h->w->policy, (const struct sockaddr *)&h->to.client);
	struct policy_decision d;
	memset(&d, 0, sizeof(d));
	d.verdict = POLICY_DENY_NOT_ALLOWED;
	snprintf(d.reason, sizeof(d.reason),
	         "moat: not on allowlist of agent %s; no answer to the ask in %u ms",
	         a ? a->cfg.name : "?", a ? a->cfg.ask_timeout_ms : 0);
	waiter_leaves(h->id, "timeout", "\"decision\":\"deny\"");
	held_decided(h, &d);
}

enum ask_result ask_hold(struct worker *w, struct reply_to *to, const struct wire_query *q,
                         const struct policy_agent *agent, ask_resume_fn resume)
{
	char client[64];
	uint64_t id = 0, left = 0;
	log_format_addr((const struct sockaddr *)&to->client, false, client, sizeof(client));
	enum ask_result r = entry_join(agent, q, client, &id, &left);
	if (r != ASK_HELD)
		return r;
	struct held *h = malloc(sizeof(*h));
	if (!h) {
		waiter_leaves(id, NULL, "");
		return ASK_NOMEM;
	}
	h->w = w;
	h->resume = resume;
	h->id = id;
	h->to = *to;
	reply_hold(&h->to);
	h->q = *q;
	uv_timer_init(w->loop, &h->timer);
	h->timer.data = h;
	uv_timer_start(&h->timer, on_deadline, left, 0);
	dlist_add(&held_of[w->index], &h->link);
	return ASK_HELD;
}

void ask_policy_changed(struct worker *w)
{
	struct dlist *l = &held_of[w->index];
	if (!l->next)
		return; /* not a worker this module knows (tests) */
	for (struct dlist *it = l->next, *next; it != l; it = next) {
		next = it->next;
		struct held *h = container_of(it, struct held, link);
		const struct policy_agent *a =
		    policy_agent_for(w->policy, (const struct sockaddr *)&h->to.client);
		struct policy_decision d;
		if (a)
			policy_decide(w->policy, a, h->q.lname, h->q.qclass, &d);
		if (a && policy_ask_wanted(a, &d))
			continue; /* still undecided: it keeps waiting */
		uv_timer_stop(&h->timer);
		waiter_leaves(h->id, "decision", "\"decision\":\"policy\",\"by\":\"reload\"");
		if (!a) {
			memset(&d, 0, sizeof(d));
			d.verdict = POLICY_DENY_NOT_ALLOWED;
		}
		held_decided(h, &d);
	}
}

void ask_cancel_all(struct worker *w)
{
	struct dlist *l = &held_of[w->index];
	while (l->next && !dlist_empty(l)) {
		struct held *h = container_of(l->next, struct held, link);
		w->stats.dropped++;
		uv_timer_stop(&h->timer);
		waiter_leaves(h->id, NULL, "");
		held_free(h);
	}
}

/* --- the control socket's side ---------------------------------------------------------------- */

unsigned ask_resolve(const char *agent, const struct policy_set *allow,
                     const struct policy_set *deny, const char *by)
{
	unsigned n = 0;
	char extra[160];
	pthread_mutex_lock(&reg.lock);
	for (size_t i = 0; i < reg.n;) {
		struct ask_entry *e = &reg.v[i];
		bool no = deny && policy_set_match(deny, e->lname, NULL);
		bool yes = !no && allow && policy_set_match(allow, e->lname, NULL);
		if (strcmp(e->agent, agent) || (!no && !yes)) {
			i++;
			continue;
		}
		snprintf(extra, sizeof(extra), "\"decision\":\"%s\",\"by\":\"%s\"",
		         yes ? "allow" : "deny", by);
		entry_event(e, "decision", extra);
		entry_drop(e); /* the waiters find it gone when they leave */
		n++;
	}
	pthread_mutex_unlock(&reg.lock);
	if (n)
		notify();
	return n;
}

char *ask_pending_lines(void)
{
	pthread_mutex_lock(&reg.lock);
	size_t saved = reg.elen;
	uint64_t now = mono_ms();
	for (size_t i = 0; i < reg.n; i++) {
		char extra[64];
		snprintf(extra, sizeof(extra), "\"pending\":true,\"left_ms\":%llu",
		         (unsigned long long)(reg.v[i].deadline_ms > now
		                                  ? reg.v[i].deadline_ms - now
		                                  : 0));
		entry_event(&reg.v[i], "ask", extra);
	}
	/* The lines just built are this watcher's alone: cut them back out of the queue. */
	char *out = strndup(reg.events ? reg.events + saved : "", reg.elen - saved);
	reg.elen = saved;
	if (reg.events)
		reg.events[saved] = 0;
	pthread_mutex_unlock(&reg.lock);
	return out;
}

int ask_status_json(char *out, size_t cap)
{
	pthread_mutex_lock(&reg.lock);
	size_t n = (size_t)snprintf(out, cap, "{\"pending\":%zu,\"held_max\":{", reg.n);
	for (size_t i = 0; i < reg.nmax && n < cap; i++)
		n += (size_t)snprintf(out + n, cap - n, "%s\"%s\":%u", i ? "," : "",
		                      reg.max[i].agent, reg.max[i].max);
	if (n < cap)
		n += (size_t)snprintf(out + n, cap - n, "}}");
	pthread_mutex_unlock(&reg.lock);
	return n < cap ? (int)n : -1;
}
