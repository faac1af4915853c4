/* control_agents.c owns the control socket's agent commands (`agent add`, `agent del`): each is
 * a snapshot edit (agent_edit.c) staged on top of the running policy and a write staged in the
 * state store (agentstore.c). control.c commits once per read of a connection (every request
 * of that read, and before any other command), so a burst of adds costs one disk sync, and no
 * reply leaves before its agent is durable. Only then does the new snapshot go to the workers,
 * the way a reload hands its snapshot over: worker 0 (this thread) takes it at once, the others
 * at their next loop turn; a query keeps the snapshot it started with. With transferred RPZ
 * zones the edit goes through the transfer thread (rpz_feed_set_current), so an IXFR never
 * publishes a snapshot without a just-added agent and an edit never drops an IXFR.
 *
 * An add is refused for a range that is the whole space and, unless forced, one overlapping a
 * config agent's (agent_edit_bounds); with a firewall channel its reply warns when moat-fw's
 * last HELLO does not cover every client range (that sandbox's DNS and grants would fail). */
#include <stdio.h>
#include <string.h>

#include "moat/agent_edit.h"
#include "moat/config.h"
#include "moat/agentstore.h"
#include "moat/err.h"
#include "moat/log.h"
#include "moat/metrics.h"
#include "moat/policy.h"
#include "ops/control_agents.h"
#include "ops/rpz_feed.h"
#include "serve/fwchan.h"
#include "serve/worker.h"

static struct worker *ws;
static unsigned nws;
static struct agentstore *store;
static struct policy *staged; /* one reference; NULL: nothing staged */
static struct rpz_feed *feed; /* transferred RPZ zones; NULL: none */

void control_agents_feed(struct rpz_feed *f)
{
	feed = f;
}

void control_agents_init(struct worker *w, unsigned n, struct agentstore *st)
{
	ws = w;
	nws = n;
	store = st;
}

bool control_agents_staged(void)
{
	return staged != NULL;
}

static struct policy *current(void)
{
	return staged ? staged : ws[0].policy;
}

static void stage(struct policy *np)
{
	policy_unref(staged);
	staged = np;
}

/* Stage the edited snapshot np once the store has staged the same change (rc: the store's
 * answer); when it could not, np is dropped and the running policy stays. */
static int stage_stored(struct policy *np, int rc)
{
	if (rc) {
		policy_unref(np);
		return rc;
	}
	stage(np);
	return 0;
}

/* Whether moat-fw covers spec's clients, as far as its last HELLO says: "" when it does (or no
 * firewall is configured), else the warning for the reply. */
static void coverage_warning(const struct agent_spec *spec, char *out, size_t cap)
{
	struct fwproto_hello h;
	struct cidr by[FWPROTO_MAXRANGE];
	char r[64];
	*out = 0;
	if (!ws[0].cfg->fw_socket)
		return;
	if (!fwchan_coverage(&h)) {
		snprintf(out, cap,
		         "moat-fw has not said which sandboxes it covers (no channel "
		         "since start): the client ranges are not checked against it");
		return;
	}
	if (h.placement != FWPROTO_FORWARD)
		return; /* netns: every client of the namespace */
	for (size_t i = 0; i < h.nrange; i++) {
		struct netaddr_prefix p = {.family = h.range[i].family, .bits = h.range[i].bits};
		memcpy(p.addr, h.range[i].addr, 16);
		netaddr_prefix_to_cidr(&p, &by[i]);
	}
	for (size_t i = 0; i < spec->nclients; i++) {
		if (netaddr_cidr_covered(&spec->clients[i], by, h.nrange))
			continue;
		netaddr_cidr_text(&spec->clients[i], r, sizeof(r));
		snprintf(out, cap,
		         "moat-fw covers no sandbox range holding all of %s: its DNS and grants "
		         "there are dropped; start moat-fw with --sandbox for it",
		         r);
		return;
	}
}

struct policy *control_agents_current(void)
{
	return current();
}

struct agentstore *control_agents_store(void)
{
	return store;
}

void control_agents_stage(struct policy *np)
{
	stage(np);
}

int control_agents_add(const struct agent_spec *spec, bool force, char *body, size_t cap, char *err,
                       size_t errlen)
{
	struct policy *np;
	char warn[300], wq[700], cover[300], cq[700];
	if (!store) {
		snprintf(err, errlen,
		         "no state_dir: runtime agents need one (state_dir: or --state-dir)");
		return MOAT_EINVAL;
	}
	/* The add's own checks first: a range identical to another agent's is said as such. */
	int rc = agent_edit_add(current(), spec, &np, warn, sizeof(warn), err, errlen);
	if (rc)
		return rc;
	if ((rc = agent_edit_bounds(current(), spec, force, err, errlen))) {
		policy_unref(np);
		return rc;
	}
	if ((rc = stage_stored(np, agentstore_put(store, spec, err, errlen))))
		return rc;
	coverage_warning(spec, cover, sizeof(cover));
	log_json_quote(warn, wq, sizeof(wq));
	log_json_quote(cover, cq, sizeof(cq));
	snprintf(body, cap,
	         "\"agent\":\"%s\",\"patterns\":%zu,\"agents\":%zu,\"lint\":%s,\"warning\":%s",
	         spec->name, policy_set_count(agent_edit_find(np, spec->name)->allow), np->nagents,
	         *warn ? wq : "null", *cover ? cq : "null");
	return 0;
}

int control_agents_del(const char *name, char *body, size_t cap, char *err, size_t errlen)
{
	struct policy *np;
	/* A runtime agent exists only with a store. */
	int rc = agent_edit_del(current(), name, &np, err, errlen);
	if (rc || (rc = stage_stored(np, agentstore_del(store, name, err, errlen))))
		return rc;
	snprintf(body, cap, "\"agent\":\"%s\",\"agents\":%zu", name, np->nagents);
	return 0;
}

int control_agents_commit(char *err, size_t errlen)
{
	if (!staged)
		return 0;
	int rc = agentstore_commit(store, err, errlen);
	if (rc) {
		stage(NULL);
		return rc;
	}
	if (feed) /* with the feed's newest zones; the feed posts it to every worker */
		rpz_feed_set_current(feed, staged);
	worker_take_policy(&ws[0], staged); /* the staged reference passes to worker 0 */
	for (unsigned i = 1; i < nws && !feed; i++)
		worker_post_policy(&ws[i], staged);
	metrics_set(&metrics_global.policy_agents, staged->nagents);
	metrics_set(&metrics_global.policy_patterns, policy_allow_count(staged));
	staged = NULL;
	return 0;
}
