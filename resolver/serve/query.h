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
/* At shutdown: drop every query still waiting (counted as dropped). */
void query_cancel_all(struct worker *srv);
/* At the end: free the queries kept for reuse. */
void query_free_spares(struct worker *srv);

#endif
