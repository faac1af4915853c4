/* budget_share.c owns the process-wide table of agents' label budgets (moat/budget_share.h):
 * finding an agent's budget by name when a snapshot is made, the references snapshots hold, the
 * lock around each question, and the walk the metrics and stats read through. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "moat/budget_share.h"
#include "moat/err.h"

#define BUCKETS 1024 /* agent names hash here; chains stay short up to ~10k agents */

struct budget_share {
	pthread_mutex_t mu;        /* st */
	struct budget_state *st;   /* NULL until the agent's first question under a budget */
	unsigned refs;             /* snapshots holding it; under table_mu */
	struct budget_share *next; /* its bucket's chain; under table_mu */
	char agent[CONFIG_NAME_MAX];
};

static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static struct budget_share *table[BUCKETS];

static unsigned bucket_of(const char *name)
{
	uint32_t h = 2166136261u; /* FNV-1a: names come from the operator, not the sandbox */
	for (const char *s = name; *s; s++)
		h = (h ^ (uint8_t)*s) * 16777619u;
	return h % BUCKETS;
}

/* Under table_mu: the share of name, made if new, with one more reference. */
static struct budget_share *share_take(const char *name)
{
	struct budget_share **b = &table[bucket_of(name)], *s;
	for (s = *b; s; s = s->next)
		if (!strcmp(s->agent, name)) {
			s->refs++;
			return s;
		}
	if (!(s = calloc(1, sizeof(*s))))
		return NULL;
	if (pthread_mutex_init(&s->mu, NULL)) {
		free(s);
		return NULL;
	}
	snprintf(s->agent, sizeof(s->agent), "%s", name);
	s->refs = 1;
	s->next = *b;
	*b = s;
	return s;
}

/* Under table_mu. */
static void share_drop(struct budget_share *s)
{
	if (!s || --s->refs)
		return;
	struct budget_share **p = &table[bucket_of(s->agent)];
	while (*p != s)
		p = &(*p)->next;
	*p = s->next;
	budget_state_free(s->st);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

int budget_share_attach(struct policy *p)
{
	struct budget_share **v = calloc(p->nagents ? p->nagents : 1, sizeof(*v));
	if (!v)
		return MOAT_ENOMEM;
	int rc = 0;
	pthread_mutex_lock(&table_mu);
	for (size_t i = 0; i < p->nagents && !rc; i++)
		if (!(v[i] = share_take(p->agents[i].cfg.name)))
			rc = MOAT_ENOMEM;
	if (rc)
		for (size_t i = 0; i < p->nagents; i++)
			share_drop(v[i]);
	pthread_mutex_unlock(&table_mu);
	if (rc) {
		free(v);
		return rc;
	}
	budget_share_detach(p); /* a constructor that attaches twice keeps the newer */
	p->budgets = v;
	return 0;
}

void budget_share_detach(struct policy *p)
{
	if (!p->budgets)
		return;
	pthread_mutex_lock(&table_mu);
	for (size_t i = 0; i < p->nagents; i++)
		share_drop(p->budgets[i]);
	pthread_mutex_unlock(&table_mu);
	free(p->budgets);
	p->budgets = NULL;
}

static struct budget_share *share_of(const struct policy *p, const struct policy_agent *agent)
{
	if (!p->budgets || agent < p->agents || agent >= p->agents + p->nagents)
		return NULL;
	return p->budgets[agent - p->agents];
}

/* The share of agent, locked; NULL (out filled: every name passes as seen) when p has none. */
static struct budget_share *share_lock(const struct policy *p, const struct policy_agent *agent,
                                       struct budget_verdict *out)
{
	struct budget_share *s = share_of(p, agent);
	if (!s) {
		memset(out, 0, sizeof(*out));
		out->result = BUDGET_SEEN;
		return NULL;
	}
	pthread_mutex_lock(&s->mu);
	return s;
}

void budget_share_account(const struct policy *p, const struct policy_agent *agent,
                          const struct budget_ask *a, struct budget_verdict *out)
{
	struct budget_share *s = share_lock(p, agent, out);
	if (!s)
		return;
	if (!s->st)
		s->st = budget_state_new();
	if (s->st) {
		budget_account(s->st, a, out);
	} else {
		memset(out, 0, sizeof(*out));
		out->result = BUDGET_DENIED;
	}
	pthread_mutex_unlock(&s->mu);
}

void budget_share_peek(const struct policy *p, const struct policy_agent *agent,
                       const struct budget_ask *a, struct budget_verdict *out)
{
	struct budget_share *s = share_lock(p, agent, out);
	if (!s)
		return;
	budget_peek(s->st, a, out);
	pthread_mutex_unlock(&s->mu);
}

void budget_share_each(budget_share_cb cb, void *ctx)
{
	pthread_mutex_lock(&table_mu);
	for (unsigned b = 0; b < BUCKETS; b++)
		for (struct budget_share *s = table[b]; s; s = s->next) {
			pthread_mutex_lock(&s->mu);
			cb(ctx, s->agent, s->st);
			pthread_mutex_unlock(&s->mu);
		}
	pthread_mutex_unlock(&table_mu);
}
