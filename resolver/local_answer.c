/* local_answer.c turns local data (moat/local.h) into the struct answer the rest of query.c
 * handles: the packet local.c builds is parsed like an upstream's, so the chain and address
 * checks, the firewall grant and the rebuild for the client are the very same code. */
#include "local_answer.h"

#include <stdlib.h>
#include <string.h>

#include "moat/local.h"

struct answer *local_answer(struct worker *srv, const struct policy *p, const struct wire_query *q)
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
