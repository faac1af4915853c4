/* query.c owns the path of one client query. It reads top to bottom in the order a query
 * takes it:
 *   receive -> read the question (malformed, other opcodes, rate limit) -> pick the agent by
 *   client address -> decide on the name -> deny: answer locally (never forwarded) | allow:
 *   forward with moatd's own query (fetch.c: cache, shared in-flight question, upstream) ->
 *   filter: check every chain name and every address of the answer -> grant the addresses
 *   through moat-fw and wait for its ack (when a firewall is configured) -> reply: rebuild with
 *   TTLs capped at the grant -> log.
 * Local answers are built in a stack buffer (local_answer.c): the deny path allocates nothing.
 * The client is reached through the reply seam (reply.h) only. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "moat/bytes.h"
#include "moat/err.h"
#include "moat/inflight.h"
#include "moat/log.h"
#include "moat/metrics.h"
#include "moat/netaddr.h"
#include "moat/policy.h"
#include "moat/policy_audit.h"
#include "moat/ratelimit.h"
#include "serve/ask.h"
#include "serve/exfil.h"
#include "serve/fetch.h"
#include "serve/fwchan.h"
#include "serve/log_bound.h"
#include "serve/reply.h"
#include "serve/local_answer.h"
#include "serve/query.h"

#define LOG_MAXADDR 32

/* The addresses a client got, as the log lists them (the first 32). */
struct addr_list {
	uint8_t addr[LOG_MAXADDR * 16];
	uint8_t len[LOG_MAXADDR];
	unsigned n;
	size_t used;
};

/* An allowed query: lives from the fetch until the reply. */
struct query {
	struct worker *srv;
	struct policy *policy; /* a reload cannot pull rules from under us: the worker's own */
	bool holds_policy;     /* snapshot (it stays while the query is answered at once), or a
	                        * reference of the query's own once it waits (query_wait) */
	const struct policy_agent *agent;
	const struct upstream_set *fwd; /* the forward zone asked (in policy), NULL: global */
	struct reply_to to;
	struct fetch_wait *wait; /* while the answer is on its way */
	struct answer *ans;      /* reference, once it is here */
	uint32_t fw_token;       /* while the firewall grant is pending */
	bool holds_slot;         /* counted in srv->inflight (slot) while it waits upstream */
	uint32_t slot;
	uint64_t grant_t0; /* when the grant was sent (us), for its latency */
	const char *grant; /* moat-fw's verdict for the log; NULL: not asked yet */
	uint32_t grant_life;
	struct dlist link;
	struct query *next_spare; /* in srv->query_spare once freed */
	struct policy_decision decision;
	struct wire_query q;
	bool have_passed;        /* passed holds ans's released addresses (for the log) */
	struct addr_list passed; /* collected while they were checked (answer_passes) */
};

#define QUERY_SPARE 64 /* freed queries kept for reuse, per worker: no malloc a query */

/* The path, in order; each step is defined below in this order. */
static bool screen(struct worker *srv, struct reply_to *to, struct wire_query *q,
                   enum wire_query_status st, const uint8_t *pkt, size_t len);
static void query_notify(struct worker *srv, struct reply_to *to, const struct wire_query *q,
                         const uint8_t *pkt, size_t len);
static void answer_denied(struct worker *srv, struct reply_to *to, const struct wire_query *q,
                          const struct policy_agent *agent, const struct policy_decision *d);
static void forward(struct worker *srv, struct reply_to *to, const struct wire_query *q,
                    const struct policy_agent *agent, const struct policy_decision *d);
static void on_fetched(void *ctx, int status, struct answer *ans);
static void on_answer(struct query *qr);
static bool answer_passes(struct query *qr, struct policy_decision *d);
static bool grant_first(struct query *qr);
static void on_granted(void *ctx, uint16_t status, uint32_t lifetime);
static void release(struct query *qr, uint32_t ttl_cap);
static void log_it(struct worker *srv, const struct reply_to *to, const struct wire_query *q,
                   const char *agent, const char *decision, const char *reason, int rcode,
                   bool alert, const struct sockaddr *upstream, int64_t up_us);
static void log_query_done(struct query *qr, const char *decision, const char *reason, int rcode,
                           bool alert, bool released);
static void log_emit(struct worker *srv, const struct reply_to *to, const struct log_query *e);
static void give_slot(struct query *qr);
static void query_free(struct query *qr);

/* ------------------------------------------------------------------ receive, decide -- */

/* policy_agent_for, kept for the last address (the port aside) while the snapshot stays: a
 * sandbox asks from one address, and the lookup by prefix lengths was ~250 instructions. */
static const struct policy_agent *agent_of(struct worker *srv, const struct sockaddr *client)
{
	if (srv->agent_memo.valid && netaddr_same_host(client, &srv->agent_memo.client))
		return srv->agent_memo.agent;
	srv->agent_memo.agent = policy_agent_for(srv->policy, client);
	srv->agent_memo.valid = client->sa_family == AF_INET || client->sa_family == AF_INET6;
	if (srv->agent_memo.valid)
		memcpy(&srv->agent_memo.client, client,
		       client->sa_family == AF_INET ? sizeof(struct sockaddr_in)
		                                    : sizeof(struct sockaddr_in6));
	return srv->agent_memo.agent;
}

void query_handle(struct worker *srv, struct reply_to *to, const uint8_t *pkt, size_t len,
                  bool oversized)
{
	struct wire_query q;
	srv->stats.queries++;
	if (srv->dnstap)
		dnstap_client(srv, (const struct sockaddr *)&to->client, reply_tcp(to), pkt, len,
		              false);

	enum wire_query_status st = wire_query_parse(pkt, len, &q);
	if (oversized && st != WQ_DROP)
		st = WQ_FORMERR;
	if (!screen(srv, to, &q, st, pkt, len))
		return;

	/* Who is asking: moat is never an open resolver. */
	const struct policy_agent *agent = agent_of(srv, (const struct sockaddr *)&to->client);
	if (!agent) {
		srv->stats.refused_clients++;
		int rc =
		    local_answer_send(srv, to, &q, NULL, false, WIRE_REFUSED, WIRE_EDE_PROHIBITED,
		                      "moat: client is not in any agent's range");
		log_it(srv, to, &q, NULL, "refuse-client", "client is not in any agent's range", rc,
		       false, NULL, -1);
		return;
	}

	/* Zone transfers, TSIG/TKEY, MAILA/MAILB, OPT as a type: never forwarded. */
	if (wire_qtype_is_meta(q.qtype)) {
		int rc =
		    local_answer_send(srv, to, &q, NULL, false, WIRE_NOTIMP, WIRE_EDE_NOT_SUPPORTED,
		                      "moat: meta query type not supported");
		log_it(srv, to, &q, agent->cfg.name, "notimp", "meta query type not supported", rc,
		       false, NULL, -1);
		return;
	}

	/* Decide on the name. An agent that asks holds a name no rule decides (ask.c) until a
	 * rule does or its time is up; over its cap of waiting names it is denied now. */
	struct policy_decision d;
	policy_decide(srv->policy, agent, q.lname, q.qclass, &d);
	if (policy_ask_wanted(agent, &d)) {
		enum ask_result r = ask_hold(srv, to, &q, agent, query_decided);
		if (r == ASK_HELD)
			return;
		snprintf(d.reason, sizeof(d.reason),
		         "moat: not on allowlist of agent %s (%u names already wait for an answer)",
		         agent->cfg.name, agent->cfg.ask_max_pending);
	}
	query_decided(srv, to, &q, agent, &d);
}

void query_decided(struct worker *srv, struct reply_to *to, const struct wire_query *q,
                   const struct policy_agent *agent, struct policy_decision *d)
{
	if (!agent) {
		int rc =
		    local_answer_send(srv, to, q, NULL, false, WIRE_REFUSED, WIRE_EDE_PROHIBITED,
		                      "moat: client is not in any agent's range");
		log_it(srv, to, q, NULL, "refuse-client", "client is not in any agent's range", rc,
		       false, NULL, -1);
		return;
	}
	if (d->verdict == POLICY_ALLOW)
		exfil_screen(srv, q, agent, d); /* its qtype, its label budget (serve/exfil.h) */
	/* A deny is answered here and never leaves the box, unless the agent audits and enforce
	 * mode would deny it only for want of a rule (policy_audit.h). */
	if (d->verdict != POLICY_ALLOW && !policy_audit(agent, d)) {
		answer_denied(srv, to, q, agent, d);
		return;
	}

	/* ANY is answered here (RFC 8482): never forwarded, never an amplifier. */
	if (q->qtype == WIRE_ANY) {
		int rc = local_answer_any(srv, to, q);
		log_it(srv, to, q, agent->cfg.name, policy_audit_word(d, "allow"),
		       "moat: ANY answered locally (RFC 8482)", rc, false, NULL, -1);
		return;
	}

	forward(srv, to, q, agent, d);
}

/* What stops a message before policy sees it: nothing to answer (a response, no header), the
 * client's rate limit, a malformed query, another opcode or EDNS version. Returns true when
 * the question goes on. */
static bool screen(struct worker *srv, struct reply_to *to, struct wire_query *q,
                   enum wire_query_status st, const uint8_t *pkt, size_t len)
{
	if (st == WQ_DROP) {
		srv->stats.dropped++;
		return false;
	}
	/* One client's flood must not take the resolver from the others. Limited queries are
	 * counted, not logged one by one: a flood would otherwise become a log flood (main.c
	 * reports the count every 10 s). */
	if (srv->rl &&
	    !ratelimit_allow(srv->rl, (const struct sockaddr *)&to->client, uv_now(srv->loop))) {
		srv->stats.ratelimited++;
		metrics_inc(&srv->metrics->ratelimited);
		if (!srv->cfg->rl_drop && st == WQ_OK)
			local_answer_send(srv, to, q, NULL, false, WIRE_REFUSED,
			                  WIRE_EDE_PROHIBITED, "moat: rate limit");
		return false;
	}
	if (st == WQ_OK)
		return true;
	/* What moatd answers to a query it will not read further, by status. */
	static const struct {
		const char *decision, *reason;
		uint8_t rcode;
	} refuse[] = {
	    [WQ_FORMERR] = {"formerr", "malformed query", WIRE_FORMERR},
	    [WQ_NOTIMP] = {"notimp", "opcode not supported", WIRE_NOTIMP},
	    [WQ_BADVERS] = {"badvers", "EDNS version not supported", WIRE_BADVERS},
	};
	if (st == WQ_FORMERR) {
		srv->stats.formerr++;
		q->has_question = false; /* never echo what we could not read */
		q->edns = false;
	} else if (st == WQ_NOTIMP) {
		q->has_question = false;
		if (q->opcode == WIRE_OP_NOTIFY) {
			query_notify(srv, to, q, pkt, len);
			return false;
		}
	}
	int rc = local_answer_send(srv, to, q, NULL, false, refuse[st].rcode, 0, NULL);
	log_it(srv, to, q, NULL, refuse[st].decision, refuse[st].reason, rc, false, NULL, -1);
	return false;
}

/* A NOTIFY: accepted only for a transferred RPZ zone, from its primary, with its TSIG (then its
 * transfer starts); anything else NOTIFY-related is REFUSED. */
static void query_notify(struct worker *srv, struct reply_to *to, const struct wire_query *q,
                         const uint8_t *pkt, size_t len)
{
	uint8_t out[1024];
	char why[200] = "no RPZ zone is transferred";
	int n = srv->notify
	            ? srv->notify(srv->notify_ctx, pkt, len, (const struct sockaddr *)&to->client,
	                          out, sizeof(out), why, sizeof(why))
	            : MOAT_EINVAL;
	if (n > 0) {
		reply_send(srv, to, out, (size_t)n);
		srv->stats.answered++;
		log_it(srv, to, q, NULL, "notify", "rpz NOTIFY accepted", WIRE_NOERROR, false, NULL,
		       -1);
		return;
	}
	int rc = local_answer_send(srv, to, q, NULL, false, WIRE_REFUSED, 0, NULL);
	log_it(srv, to, q, NULL, "notify-refused", why, rc, true, NULL, -1);
}

/* A name policy denied: the agent's deny form, except a class other than IN (REFUSED) and an
 * RPZ NODATA trigger (NOERROR without records, whatever the agent's form). */
static void answer_denied(struct worker *srv, struct reply_to *to, const struct wire_query *q,
                          const struct policy_agent *agent, const struct policy_decision *d)
{
	srv->stats.denied++;
	bool class_deny = d->verdict == POLICY_DENY_CLASS || d->verdict == POLICY_DENY_QTYPE ||
	                  d->verdict == POLICY_DENY_BUDGET; /* REFUSED, whatever the form */
	int rcode =
	    local_answer_send(srv, to, q, agent, !class_deny && !d->nodata,
	                      d->nodata ? WIRE_NOERROR : WIRE_REFUSED, WIRE_EDE_BLOCKED, d->reason);
	struct log_query e = {
	    .client = (const struct sockaddr *)&to->client,
	    .transport = reply_transport(to),
	    .agent = agent->cfg.name,
	    .qname = q->qname,
	    .qtype = q->qtype,
	    .qclass = q->qclass,
	    .decision = policy_verdict_str(d->verdict),
	    .reason = d->reason,
	    .rcode = rcode,
	    .upstream_us = -1,
	    .alert = d->alert,
	    .rule_file = d->rule.file, /* the high-risk pattern that denied it */
	    .rule_line = d->rule.line,
	};
	log_emit(srv, to, &e);
}

/* ------------------------------------------------------------------ forward -- */

/* An allowed question: answered from local data or the cache, or it waits for the upstream
 * (within the caps on questions in flight), then goes through on_answer. */
/* The question and the decision without the unused ends of their fixed arrays (a name is
 * usually 20 of its 255 bytes, a reason 40 of its 160). */
static void keep_question(struct wire_query *dst, const struct wire_query *q)
{
	memcpy(dst, q, offsetof(struct wire_query, qname));
	memcpy(dst->qname, q->qname, q->qname_len);
	memcpy(dst->lname, q->lname, q->qname_len);
}

static void keep_decision(struct policy_decision *dst, const struct policy_decision *d)
{
	memcpy(dst, d, offsetof(struct policy_decision, reason));
	size_t n = strnlen(d->reason, sizeof(d->reason) - 1);
	memcpy(dst->reason, d->reason, n);
	dst->reason[n] = 0;
}

static struct query *query_new(struct worker *srv)
{
	struct query *qr = srv->query_spare;
	if (!qr)
		return malloc(sizeof(*qr));
	srv->query_spare = qr->next_spare;
	srv->nquery_spare--;
	return qr;
}

/* The query will wait (for the upstream, for moat-fw): it takes its own reference to the
 * snapshot, which a reload may replace meanwhile (two atomic operations a hit saved). */
static void query_wait(struct query *qr)
{
	if (!qr->holds_policy)
		policy_ref(qr->policy);
	qr->holds_policy = true;
}

static void forward(struct worker *srv, struct reply_to *to, const struct wire_query *q,
                    const struct policy_agent *agent, const struct policy_decision *d)
{
	struct query *qr = query_new(srv);
	if (!qr) {
		local_answer_send(srv, to, q, agent, false, WIRE_SERVFAIL, 0, NULL);
		return;
	}
	qr->srv = srv;
	qr->policy = srv->policy;
	qr->holds_policy = false;
	qr->agent = agent;
	qr->fwd = forward_pick(&agent->fwd, &srv->policy->fwd, q->lname);
	/* The cache's bucket loads while the local data and the in-flight caps are asked (one
	 * hash, reused by the lookup). */
	fetch_prefetch(srv, qr->fwd, q->lname, q->qtype, q->qclass);
	qr->to = *to;
	reply_hold(&qr->to);
	keep_decision(&qr->decision, d);
	keep_question(&qr->q, q);
	qr->wait = NULL;
	qr->ans = NULL;
	qr->fw_token = 0;
	qr->grant = NULL;
	qr->grant_life = 0;
	qr->holds_slot = false;
	qr->have_passed = false;
	dlist_add(&srv->live_queries, &qr->link);
	/* Local answers (local_data:, hosts:) first: the operator's records, no upstream. */
	struct answer *hit = local_answer_data(srv, srv->policy, q);
	/* Over a cap on questions in flight, only the cache may answer. */
	enum inflight_result cap =
	    srv->inflight && !hit
	        ? inflight_take(srv->inflight, (const struct sockaddr *)&to->client, &qr->slot)
	        : INFLIGHT_OK;
	qr->holds_slot = srv->inflight && !hit && cap == INFLIGHT_OK;
	int rc = hit ? FETCH_HIT
	             : fetch_answer(srv, qr->fwd, q->lname, q->qtype, q->qclass, cap == INFLIGHT_OK,
	                            on_fetched, qr, &hit, &qr->wait);
	if (rc == FETCH_HIT) {
		give_slot(qr);
		qr->ans = hit;
		on_answer(qr);
	} else if (rc == FETCH_BUSY) {
		srv->stats.servfail++;
		srv->stats.inflight_refused++;
		char why[96];
		snprintf(why, sizeof(why), "moat: %s", inflight_result_str(cap));
		int rcode = local_answer_send(srv, to, q, agent, false, WIRE_SERVFAIL,
		                              WIRE_EDE_NOT_READY, why);
		log_it(srv, to, q, agent->cfg.name, policy_audit_word(d, "allow"), why, rcode,
		       false, NULL, -1);
		query_free(qr);
	} else if (rc < 0) {
		int rcode = local_answer_send(srv, to, q, agent, false, WIRE_SERVFAIL, 0, NULL);
		log_it(srv, to, q, agent->cfg.name, policy_audit_word(d, "allow"),
		       "moat: could not reach upstream", rcode, false, NULL, -1);
		query_free(qr);
	} else {
		query_wait(qr);
		srv->stats.forwarded++;
	}
}

static void on_fetched(void *ctx, int status, struct answer *ans)
{
	struct query *qr = ctx;
	struct worker *srv = qr->srv;
	qr->wait = NULL;
	give_slot(qr);
	if (status < 0) {
		srv->stats.servfail++;
		const char *why = status == MOAT_EFORMAT ? "moat: upstream answer was malformed"
		                                         : "moat: no upstream answered in time";
		if (!reply_gone(&qr->to))
			local_answer_send(srv, &qr->to, &qr->q, qr->agent, false, WIRE_SERVFAIL,
			                  WIRE_EDE_NO_REACHABLE_AUTHORITY, why);
		log_query_done(qr, "allow", why, WIRE_SERVFAIL, false, false);
		query_free(qr);
		return;
	}
	ans->refs++;
	qr->ans = ans;
	on_answer(qr);
}

/* The answer is here (fresh, cached or local): check it for this query's agent, grant,
 * release. */
static void on_answer(struct query *qr)
{
	struct worker *srv = qr->srv;
	const char *agent = qr->agent->cfg.name;
	const struct answer *a = qr->ans;
	const struct sockaddr *from =
	    a->cached || a->local ? NULL : (const struct sockaddr *)&a->upstream;

	if (reply_gone(&qr->to)) {
		srv->stats.dropped++;
		log_it(srv, &qr->to, &qr->q, agent, policy_audit_word(&qr->decision, "allow"),
		       "client went away", -1, false, from, a->up_us);
		query_free(qr);
		return;
	}
	struct policy_decision d;
	if (!answer_passes(qr, &d)) {
		srv->stats.denied++;
		int rcode = local_answer_send(srv, &qr->to, &qr->q, qr->agent, true, WIRE_NXDOMAIN,
		                              WIRE_EDE_BLOCKED, d.reason);
		log_it(srv, &qr->to, &qr->q, agent, policy_verdict_str(d.verdict), d.reason, rcode,
		       d.alert, from, a->up_us);
		query_free(qr);
		return;
	}
	if (srv->fw && grant_first(qr))
		return; /* released by on_granted */
	release(qr, UINT32_MAX);
}

/* ------------------------------------------------------------------ filter -- */

struct addr_check {
	const struct policy *policy;
	bool allow_private;
	struct addr_list *collect; /* the passed addresses, kept for the log; NULL: not */
	bool refused_passed;       /* an address refused where the client gets it: why_passed */
	char why[sizeof(((struct policy_decision *)0)->reason)];
	char why_passed[sizeof(((struct policy_decision *)0)->reason)];
};

static int on_log_addr(void *ctx, const uint8_t *addr, size_t len, uint16_t rrtype);

/* One walk, each address checked once. A blocked address anywhere stops it and is the reason;
 * the first refused where the client gets it is the reason only if none is blocked (as a walk
 * over all addresses, then one over the passed, would find). */
static int on_answer_addr(void *ctx, const uint8_t *addr, size_t len, uint16_t rrtype, bool passes)
{
	struct addr_check *c = ctx;
	bool first = !c->refused_passed;
	switch (policy_answer_addr_check(c->policy, c->allow_private, passes, addr, len,
	                                 first ? c->why_passed : c->why, sizeof(c->why))) {
	case POLICY_ADDR_OK:
		break;
	case POLICY_ADDR_REFUSED:
		if (first)
			memcpy(c->why, c->why_passed, sizeof(c->why));
		return 1;
	case POLICY_ADDR_REFUSED_PASSED:
		c->refused_passed = true;
		c->collect = NULL;
		return 0;
	}
	if (passes && c->collect)
		on_log_addr(c->collect, addr, len, rrtype); /* a full list still checks the rest */
	return 0;
}

/* Check everything the upstream said that a client could act on. Returns true if the answer
 * may pass; otherwise fills d with the reason. */
static bool answer_passes(struct query *qr, struct policy_decision *d)
{
	const struct answer *a = qr->ans;
	const struct wire_resp *r = &a->resp;
	if (r->chain_too_long) {
		memset(d, 0, sizeof(*d));
		d->verdict = POLICY_DENY_NOT_ALLOWED;
		snprintf(d->reason, sizeof(d->reason), "moat: CNAME chain loops or is too long");
		return false;
	}
	for (unsigned i = 1; i < r->nchain; i++) {
		if (policy_check_chain(qr->policy, qr->agent, r->chain[i], d) == POLICY_ALLOW)
			continue;
		if (!policy_audit(qr->agent,
		                  d)) /* a strict-chain name: audited like the question */
			return false;
		if (!qr->decision.audit)
			memcpy(qr->decision.reason, d->reason, sizeof(d->reason));
		qr->decision.audit = true;
	}
	/* Private answers pass when the agent or the forward zone that answered allows them. */
	struct addr_check c = {.policy = qr->policy,
	                       .allow_private = qr->agent->cfg.allow_private || a->local ||
	                                        (qr->fwd && qr->fwd->allow_private)};
	if (qr->srv->log) { /* the log's list, without walking the answer again */
		qr->passed.n = 0;
		qr->passed.used = 0;
		c.collect = &qr->passed;
	}
	int rc = wire_resp_each_addr_marked(a->pkt, a->len, r, on_answer_addr, &c);
	if (rc == 0 && c.refused_passed) {
		memcpy(c.why, c.why_passed, sizeof(c.why));
		rc = 1;
	}
	qr->have_passed = rc == 0 && c.collect;
	if (rc == 0)
		return true;
	memset(d, 0, sizeof(*d));
	d->verdict = POLICY_DENY_EMBEDDED;
	d->alert = true;
	if (rc < 0)
		snprintf(d->reason, sizeof(d->reason), "moat: malformed address record in answer");
	else
		memcpy(d->reason, c.why, sizeof(d->reason));
	return false;
}

/* ------------------------------------------------------------------ grant -- */

static int on_grant_addr(void *ctx, const uint8_t *addr, size_t len, uint16_t rrtype)
{
	struct fwproto_grant *g = ctx;
	(void)rrtype;
	for (unsigned i = 0; i < g->naddr; i++)
		if (g->addr[i].family == (len == 4 ? 4 : 6) && !memcmp(g->addr[i].addr, addr, len))
			return 0;
	if (g->naddr >= FWPROTO_MAXADDR)
		return 1;
	struct fwproto_addr *a = &g->addr[g->naddr++];
	memset(a, 0, sizeof(*a));
	a->family = len == 4 ? 4 : 6;
	memcpy(a->addr, addr, len);
	return 0;
}

/* Ask moat-fw to open the answer's addresses before the client sees them. Returns false when
 * the answer carries no address (nothing to grant: release it now). */
static bool grant_first(struct query *qr)
{
	const struct answer *a = qr->ans;
	struct fwproto_grant g;
	memset(&g, 0, sizeof(g));
	if (wire_resp_each_passed_addr(a->pkt, a->len, &a->resp, on_grant_addr, &g) != 0) {
		on_granted(qr, FWPROTO_BADMSG, 0); /* more addresses than one grant carries */
		return true;
	}
	if (g.naddr == 0)
		return false;
	snprintf(g.agent, sizeof(g.agent), "%s", qr->agent->cfg.name);
	/* The allowing rule's ports (none: every port); both lists are sorted and unique. */
	_Static_assert(POLICY_PORTS_MAX <= FWPROTO_MAXPORT, "a rule's ports fit in a grant");
	const struct policy_ports *pp = qr->decision.rule.ports;
	for (unsigned i = 0; pp && i < pp->n && i < FWPROTO_MAXPORT; i++)
		g.port[g.nport++] = (struct fwproto_port){pp->p[i].proto, pp->p[i].port};
	g.lifetime =
	    answer_ttl_cap(a, a->resp.min_ttl > a->resp.age ? a->resp.min_ttl - a->resp.age : 0);
	const struct sockaddr *c = (const struct sockaddr *)&qr->to.client;
	if (c->sa_family == AF_INET) {
		g.client.family = 4;
		memcpy(g.client.addr, &((const struct sockaddr_in *)c)->sin_addr, 4);
	} else if (c->sa_family == AF_INET6) {
		g.client.family = 6;
		memcpy(g.client.addr, &((const struct sockaddr_in6 *)c)->sin6_addr, 16);
	}
	metrics_inc(&qr->srv->metrics->grants_sent);
	qr->grant_t0 = worker_now_us();
	query_wait(qr);
	/* The callback may already have run (channel down); qr is then gone. */
	uint32_t token = fwchan_grant(qr->srv->fw, &g, on_granted, qr);
	if (token)
		qr->fw_token = token;
	return true;
}

static void on_granted(void *ctx, uint16_t status, uint32_t lifetime)
{
	struct query *qr = ctx;
	struct worker *srv = qr->srv;
	qr->fw_token = 0;
	metrics_observe(&srv->metrics->grant, worker_now_us() - qr->grant_t0);
	metrics_inc(status == FWPROTO_OK ? &srv->metrics->grants_acked
	                                 : &srv->metrics->grants_failed);
	qr->grant = fwproto_status_str(status);
	qr->grant_life = lifetime;
	if (reply_gone(&qr->to)) {
		srv->stats.dropped++;
		query_free(qr);
		return;
	}
	if (status == FWPROTO_OK) {
		release(qr, lifetime);
		return;
	}
	if (srv->cfg->fw_fail_open && status == FWPROTO_FAILED) {
		release(qr, UINT32_MAX);
		return;
	}
	char why[128];
	snprintf(why, sizeof(why), "moat: firewall did not confirm the grant (%s)",
	         fwproto_status_str(status));
	srv->stats.servfail++;
	int rcode = local_answer_send(srv, &qr->to, &qr->q, qr->agent, false, WIRE_SERVFAIL,
	                              WIRE_EDE_PROHIBITED, why);
	log_query_done(qr, "allow", why, rcode, status == FWPROTO_DENIED, false);
	query_free(qr);
}

/* ------------------------------------------------------------------ reply -- */

/* The largest answer this client can take over its transport: the one input of the TC
 * decision, which wire_resp_build makes (an answer over it goes out empty with TC=1). */
static size_t reply_limit(const struct reply_to *to, const struct wire_query *q)
{
	if (reply_tcp(to))
		return WIRE_MAXMSG;
	if (!q->edns)
		return WIRE_UDP_MIN;
	return q->edns_size < WIRE_EDNS_SIZE ? q->edns_size : WIRE_EDNS_SIZE;
}

/* Rebuild the checked answer for the client, TTLs capped at ttl_cap, and send it. */
static void release(struct query *qr, uint32_t ttl_cap)
{
	struct worker *srv = qr->srv;
	const struct answer *a = qr->ans;
	static _Thread_local uint8_t out[WIRE_MAXMSG]; /* one answer built at a time per loop */
	size_t limit = reply_limit(&qr->to, &qr->q);
	if (!qr->grant)
		qr->grant = "none"; /* no firewall, or nothing to grant */
	ttl_cap = answer_ttl_cap(a, ttl_cap);
	/* The template makes the same bytes as the rebuild, without walking the answer again. */
	int n = a->tpl_len ? wire_resp_from_template(a->pkt + a->len, a->tpl_len, &a->resp, &qr->q,
	                                             ttl_cap, limit, out, sizeof(out))
	                   : 0;
	if (n <= 0) /* none, or not for this client: the rebuild decides */
		n = wire_resp_build(a->pkt, a->len, &a->resp, &qr->q, ttl_cap, limit, out,
		                    sizeof(out));
	struct policy_decision cap;
	if (n > 0 && exfil_answer_over(qr->agent, out, (size_t)n, &cap)) {
		srv->stats.denied++;
		int rcode = local_answer_send(srv, &qr->to, &qr->q, qr->agent, false, WIRE_REFUSED,
		                              WIRE_EDE_BLOCKED, cap.reason);
		log_query_done(qr, policy_verdict_str(cap.verdict), cap.reason, rcode, false,
		               false);
		query_free(qr);
		return;
	}
	if (n > 0 && a->stale && qr->q.edns) {
		/* EDE 3, Stale Answer; left out (not the answer) if it would not fit. */
		struct wire_ede ede = {WIRE_EDE_STALE, "moat: no upstream answered; stale answer"};
		int m = wire_add_ede(out, (size_t)n, limit, &ede);
		if (m > 0)
			n = m;
	}
	if (n < 0) {
		srv->stats.servfail++;
		int rcode = local_answer_send(srv, &qr->to, &qr->q, qr->agent, false, WIRE_SERVFAIL,
		                              0, NULL);
		log_query_done(qr, "allow", "moat: answer could not be rebuilt", rcode, false,
		               false);
	} else {
		reply_send(srv, &qr->to, out, (size_t)n);
		srv->stats.answered++;
		log_query_done(qr,
		               a->stale    ? "allow-stale"
		               : a->cached ? "allow-cached"
		               : a->local  ? "allow-local"
		                           : "allow",
		               qr->decision.reason[0] ? qr->decision.reason : NULL /* the rule's */,
		               be16_get(out + 2) & WIRE_FLAG_RCODE, false, true);
	}
	query_free(qr);
}

/* ------------------------------------------------------------------ log -- */

static void log_it(struct worker *srv, const struct reply_to *to, const struct wire_query *q,
                   const char *agent, const char *decision, const char *reason, int rcode,
                   bool alert, const struct sockaddr *upstream, int64_t up_us)
{
	struct log_query e = {
	    .client = (const struct sockaddr *)&to->client,
	    .transport = reply_transport(to),
	    .agent = agent,
	    .qname = q->has_question ? q->qname : NULL,
	    .qtype = q->qtype,
	    .qclass = q->qclass,
	    .decision = decision,
	    .reason = reason,
	    .rcode = rcode,
	    .upstream = upstream,
	    .upstream_us = up_us,
	    .alert = alert,
	};
	log_emit(srv, to, &e);
}

static int on_log_addr(void *ctx, const uint8_t *addr, size_t len, uint16_t rrtype)
{
	struct addr_list *l = ctx;
	(void)rrtype;
	if (l->n == LOG_MAXADDR)
		return 1; /* the log lists the first 32 */
	memcpy(l->addr + l->used, addr, len);
	l->len[l->n++] = (uint8_t)len;
	l->used += len;
	return 0;
}

/* The log line of an allowed query once its answer is settled: v2 adds the rule that allowed
 * it, the addresses released (when released) and the grant's outcome. reason NULL: the rule's
 * (an allow by a listed rule, whose reason policy_decide leaves to the rule). */
static void log_query_done(struct query *qr, const char *decision, const char *reason, int rcode,
                           bool alert, bool released)
{
	const struct answer *a = qr->ans; /* NULL: no upstream answered */
	if (!strncmp(decision, "allow", 5))
		decision = policy_audit_word(&qr->decision, decision);
	struct addr_list own, *al = &qr->passed;
	if (!qr->have_passed) { /* not checked with the log on (cannot be, but never wrong) */
		al = &own;
		own.n = 0;
		own.used = 0;
		if (released && a && qr->srv->log)
			wire_resp_each_passed_addr(a->pkt, a->len, &a->resp, on_log_addr, &own);
	}
	struct log_query e = {
	    .client = (const struct sockaddr *)&qr->to.client,
	    .transport = reply_transport(&qr->to),
	    .agent = qr->agent->cfg.name,
	    .qname = qr->q.qname,
	    .qtype = qr->q.qtype,
	    .qclass = qr->q.qclass,
	    .decision = decision,
	    .reason = reason,
	    .rcode = rcode,
	    .upstream = !a || a->cached || a->local ? NULL : (const struct sockaddr *)&a->upstream,
	    .upstream_us = a ? a->up_us : -1,
	    .alert = alert,
	    .rule_file = qr->decision.rule.file,
	    .rule_line = qr->decision.rule.line,
	    .reason_rule = !reason, /* policy_decide left it to the rule */
	    .answer = al->addr,
	    .alen = al->len,
	    .nanswer = released ? al->n : 0,
	    .has_answer = released,
	    .grant = qr->grant,
	    .has_grant_life = qr->grant && !strcmp(qr->grant, "OK"),
	    .grant_life = qr->grant_life,
	};
	log_emit(qr->srv, &qr->to, &e);
}

/* Every log line goes through here, and so is counted (moat/metrics.h); with no log, nothing
 * is formatted. */
static void log_emit(struct worker *srv, const struct reply_to *to, const struct log_query *e)
{
	if (srv->log)
		log_out_query(srv->log, e, uv_now(srv->loop));
	metrics_count_query(srv->metrics, e->agent, e->decision, reply_tcp(to), e->rcode);
}

/* ------------------------------------------------------------------ the end -- */

/* The question no longer waits for an upstream: its in-flight count goes back. */
static void give_slot(struct query *qr)
{
	if (qr->holds_slot)
		inflight_give(qr->srv->inflight, qr->slot);
	qr->holds_slot = false;
}

static void query_free(struct query *qr)
{
	give_slot(qr);
	if (qr->fw_token)
		fwchan_cancel(qr->srv->fw, qr->fw_token);
	if (qr->wait)
		fetch_cancel(qr->wait);
	answer_unref(qr->ans);
	dlist_del(&qr->link);
	reply_release(&qr->to);
	if (qr->holds_policy)
		policy_unref(qr->policy);
	struct worker *srv = qr->srv;
	if (srv->nquery_spare < QUERY_SPARE) {
		qr->next_spare = srv->query_spare;
		srv->query_spare = qr;
		srv->nquery_spare++;
	} else {
		free(qr);
	}
}

void query_free_spares(struct worker *srv)
{
	while (srv->query_spare) {
		struct query *qr = srv->query_spare;
		srv->query_spare = qr->next_spare;
		free(qr);
	}
	srv->nquery_spare = 0;
}

void query_cancel_all(struct worker *srv)
{
	ask_cancel_all(srv); /* held queries of ask mode: not in live_queries yet */
	/* At shutdown: every query still waiting is dropped, and counted so (queries read =
	 * answered + dropped, also when a client kept many waiting). */
	while (!dlist_empty(&srv->live_queries)) {
		srv->stats.dropped++;
		query_free(container_of(srv->live_queries.next, struct query, link));
	}
}
