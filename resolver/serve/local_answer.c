/* local_answer.c owns the answers moatd gives without an upstream. Local data (moat/local.h)
 * becomes the struct answer the rest of query.c handles: the packet local.c builds is parsed
 * like an upstream's, so the chain and address checks, the firewall grant and the rebuild for
 * the client are the very same code. Errors, denials (the one mapping from an agent's deny form
 * to an rcode) and the RFC 8482 answer to ANY are built here in a stack buffer and sent. */
#include "serve/local_answer.h"

#include <stdlib.h>
#include <string.h>

#include "moat/local.h"

struct answer *local_answer_data(struct worker *srv, const struct policy *p,
                                 const struct wire_query *q)
{
	static _Thread_local uint8_t buf[WIRE_EDNS_SIZE * 4];
	if (!p->local)
		return NULL;
	int n = local_data_answer(p->local, q->lname, q->qtype, q->id, buf, sizeof(buf));
	if (n <= 0)
		return NULL;
	struct answer *a = calloc(1, sizeof(*a));
	if (!a || !(a->pkt = malloc((size_t)n))) {
		free(a);
		return NULL;
	}
	memcpy(a->pkt, buf, (size_t)n);
	a->len = (size_t)n;
	a->refs = 1;
	a->srv = srv;
	a->local = true;
	a->up_us = -1;
	if (wire_resp_parse(a->pkt, a->len, q->id, q->lname, q->qtype, q->qclass, &a->resp) != 0) {
		answer_unref(a);
		return NULL;
	}
	return a;
}

/* What a denial looks like for agent: its rcode, and for a sinkhole the records to give. */
struct deny_answer {
	uint8_t rcode;
	const uint8_t *sink4, *sink6; /* NULL: no record */
	uint32_t ttl;
};

static struct deny_answer deny_answer_of(const struct policy_agent *agent)
{
	switch (agent->cfg.deny) {
	case DENY_REFUSED:
		return (struct deny_answer){WIRE_REFUSED, NULL, NULL, 0};
	case DENY_SINKHOLE:
		return (struct deny_answer){WIRE_NOERROR, agent->cfg.sink4, agent->cfg.sink6,
		                            agent->cfg.sink_ttl};
	case DENY_NXDOMAIN:
		break;
	}
	return (struct deny_answer){WIRE_NXDOMAIN, NULL, NULL, 0};
}

int local_answer_send(struct worker *srv, struct reply_to *to, const struct wire_query *q,
                      const struct policy_agent *agent, bool deny, uint8_t rcode, uint16_t ede_code,
                      const char *reason)
{
	uint8_t out[1024];
	struct wire_ede ede = {ede_code, reason};
	struct deny_answer f = {rcode, NULL, NULL, 0};
	if (deny && agent)
		f = deny_answer_of(agent);
	int n = wire_build_answer(q, f.rcode, ede_code ? &ede : NULL, f.sink4, f.sink6, f.ttl, out,
	                          sizeof(out));
	if (n > 0)
		reply_send(srv, to, out, (size_t)n);
	srv->stats.answered++;
	return f.rcode;
}

int local_answer_any(struct worker *srv, struct reply_to *to, const struct wire_query *q)
{
	uint8_t out[1024];
	int n = wire_build_rfc8482(q, out, sizeof(out));
	if (n > 0)
		reply_send(srv, to, out, (size_t)n);
	srv->stats.answered++;
	return WIRE_NOERROR;
}
