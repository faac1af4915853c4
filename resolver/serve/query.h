/* query.h: the path of one client message through moatd (query.c), from any listener. Loop
 * thread only. */
#ifndef MOAT_QUERY_H
#define MOAT_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct worker;
struct reply_to;

/* Handle one client message. oversized: the datagram was longer than the receive slot and pkt
 * holds its start only; it is answered FORMERR (no real query is that long). to is copied
 * where the query must wait (a forwarded question). */
void query_handle(struct worker *srv, struct reply_to *to, const uint8_t *pkt, size_t len,
                  bool oversized);
/* A question whose name is decided (d, for agent): answered as denied, or forwarded and
 * answered the normal way (filter, grant, reply, log); agent NULL: the client is in no agent's
 * range now (REFUSED). What query_handle does after the decision, and what a held query of ask
 * mode (ask.c) does once a rule decides it. to is copied where the query must wait. */
struct policy_agent;
struct policy_decision;
struct wire_query;
void query_decided(struct worker *srv, struct reply_to *to, const struct wire_query *q,
                   const struct policy_agent *agent, struct policy_decision *d);

/* At shutdown: drop every query still waiting (counted as dropped). */
void query_cancel_all(struct worker *srv);
/* At the end: free the queries kept for reuse. */
void query_free_spares(struct worker *srv);

#endif
