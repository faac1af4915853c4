/* fetch.h: getting an answer for an allowed question, whoever asks: from the answer cache, by
 * joining an identical question already on its way upstream, or by asking the upstreams. The
 * answer comes back as a reference-counted struct answer, parsed once, which every waiting
 * query checks for its own agent (agents differ in what they may see). Loop thread only. */
#ifndef MOAT_FETCH_H
#define MOAT_FETCH_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "moat/forward.h"
#include "moat/wire.h"

struct worker;

/* An upstream answer, shared by the queries that wait for it. */
struct answer {
	int refs;
	struct worker *srv; /* the worker it belongs to (freed answers go back to its spares) */
	bool cached;        /* served from the cache */
	bool stale;         /* served stale (RFC 8767): no upstream answered */
	bool local;         /* built from local data (local_answer.c): no upstream asked */
	struct sockaddr_storage upstream; /* who answered (zeros for a cache hit) */
	int64_t up_us;                    /* upstream latency; -1 for a cache hit */
	size_t len;
	uint8_t *pkt;          /* owned: the upstream's bytes */
	size_t pkt_cap;        /* pkt's size when from answer_room (0: unknown) */
	size_t tpl_len;        /* the prebuilt answer (wire_resp_template) at pkt + len; 0: none */
	struct wire_resp resp; /* parsed pkt; resp.age = seconds in the cache */
};

void answer_unref(struct answer *a);

/* a->pkt with room for len bytes: the buffer of an earlier answer when large enough (a hit then
 * allocates nothing). NULL: no memory (a->pkt unchanged). */
uint8_t *answer_room(struct answer *a, size_t len);

/* Serve-stale (RFC 8767): a stale answer's TTLs, and the firewall grant for its addresses, are
 * capped at FETCH_STALE_TTL seconds, so clients ask again soon. */
#define FETCH_STALE_TTL 30

/* ttl, or less when a is stale. */
static inline uint32_t answer_ttl_cap(const struct answer *a, uint32_t ttl)
{
	return a->stale && ttl > FETCH_STALE_TTL ? FETCH_STALE_TTL : ttl;
}

enum fetch_result {
	FETCH_HIT = 0,  /* *hit holds a reference the caller owns; no callback */
	FETCH_WAIT = 1, /* cb runs once later, unless fetch_cancel */
	FETCH_BUSY = 2, /* not in the cache and may_wait was false: nothing started */
};

/* status 0: ans is the answer (borrowed: take a reference with ans->refs++ to keep it);
 * otherwise a negative MOAT_* code and ans is NULL. */
typedef void (*fetch_cb)(void *ctx, int status, struct answer *ans);

struct fetch_wait;

/* Find or start the answer for (lname, qtype, qclass) from upstream set (NULL: the global
 * upstreams; a forward zone's set is only read during the call). The DO bit of the upstream
 * query is moatd's own (upstream_dnssec_ok), never the client's: the client's bit would be one
 * more bit a query that reaches the upstream. Returns FETCH_HIT, FETCH_WAIT
 * (with *wait for fetch_cancel), FETCH_BUSY (only when may_wait is false: the caller is over its
 * in-flight cap, and only the cache could answer) or a negative MOAT_* code (nothing will be
 * called). */
int fetch_answer(struct worker *srv, const struct upstream_set *set, const uint8_t *lname,
                 uint16_t qtype, uint16_t qclass, bool may_wait, fetch_cb cb, void *ctx,
                 struct answer **hit, struct fetch_wait **wait);

/* fetch_answer for these will come soon: start loading the cache's bucket (cache_prefetch). */
void fetch_prefetch(struct worker *srv, const struct upstream_set *set, const uint8_t *lname,
                    uint16_t qtype, uint16_t qclass);

/* Stop waiting: cb will not run. The upstream question goes on for the other waiters (or is
 * cancelled when none are left). */
void fetch_cancel(struct fetch_wait *w);

/* Worker start and stop: the in-flight table and a cache of cache_bytes (0: none). */
int fetch_init(struct worker *srv, size_t cache_bytes);
void fetch_cancel_all(struct worker *srv);
void fetch_deinit(struct worker *srv);

#endif
