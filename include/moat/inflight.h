/* Caps on the questions waiting for an upstream: one per client (an IPv4 address or an IPv6
 * /64, as for the rate limit) and one in all, so a client spraying distinct names that the
 * upstream never answers cannot take every socket and every byte from the others. Counters
 * live in a fixed table indexed by SipHash of the client under a random key (clients that
 * share a slot share a cap; nobody can aim at another's slot). Thread-safe without a lock:
 * moatd's workers share one table through atomic counters. */
#ifndef MOAT_INFLIGHT_H
#define MOAT_INFLIGHT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct inflight;

enum inflight_result {
	INFLIGHT_OK = 0,
	INFLIGHT_CLIENT, /* this client has per_client questions waiting */
	INFLIGHT_TOTAL,  /* everyone together has total */
};

/* nslots is rounded up to a power of two. Ownership: caller frees with inflight_free. NULL on
 * allocation failure or a zero cap. */
struct inflight *inflight_new(uint32_t total, uint32_t per_client, size_t nslots);
void inflight_free(struct inflight *t);

/* Count one more question for client. INFLIGHT_OK: *slot says what inflight_give must be
 * given back when the question no longer waits; otherwise nothing was counted. */
enum inflight_result inflight_take(struct inflight *t, const struct sockaddr *client,
                                   uint32_t *slot);
void inflight_give(struct inflight *t, uint32_t slot);

/* Questions waiting now, in all. */
uint32_t inflight_total(struct inflight *t);

const char *inflight_result_str(enum inflight_result r);

#endif
