/* Per-client rate limiting: a token bucket per client (an IPv4 address, or an IPv6 /64, since
 * one host can hold a whole /64), so one noisy or hostile client cannot take the resolver from
 * the others. Buckets live in a fixed table indexed by SipHash of the client under a random key:
 * no allocation per client, bounded memory, and clients cannot aim collisions (a collision only
 * makes two clients share one budget, never gives either a fresh one). Thread-safe once shared:
 * moatd's workers share one table behind a mutex (uncontended ~20 ns a query), which a table
 * used by one thread does without (ratelimit_share). */
#ifndef MOAT_RATELIMIT_H
#define MOAT_RATELIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct ratelimit;

/* qps queries a second on average, bursts of up to burst. nbuckets is rounded up to a power of
 * two. Ownership: caller frees with ratelimit_free. NULL on allocation failure or qps == 0. */
struct ratelimit *ratelimit_new(uint32_t qps, uint32_t burst, size_t nbuckets);
void ratelimit_free(struct ratelimit *rl);

/* How many threads take tokens from rl (call before any does): with one, ratelimit_allow takes
 * no lock. A new table counts as shared. ratelimit_limited may be read from any thread. */
void ratelimit_share(struct ratelimit *rl, unsigned nthreads);

/* Take one token for client at now_ms (a monotonic clock). False: over the limit. */
bool ratelimit_allow(struct ratelimit *rl, const struct sockaddr *client, uint64_t now_ms);

/* The identity of a client for per-client limits: family and the IPv4 address or the IPv6 /64
 * (one host can hold a whole /64). Writes RATELIMIT_CLIENT_ID bytes. */
#define RATELIMIT_CLIENT_ID 9
void ratelimit_client_id(const struct sockaddr *client, uint8_t id[RATELIMIT_CLIENT_ID]);

/* The last client a per-client table hashed, and its hash: one sandbox asks many times in a
 * row. Each table keeps one per thread (two tables sharing one would push each other out). */
struct ratelimit_memo {
	const void *table; /* lives as long as moatd: a kept hash stays its table's */
	uint8_t id[RATELIMIT_CLIENT_ID];
	uint64_t h;
};

/* SipHash of client's id under key (crypto_shorthash_KEYBYTES bytes) for table, from m when it
 * holds that client's. */
uint64_t ratelimit_client_hash(struct ratelimit_memo *m, const void *table, const uint8_t *key,
                               const struct sockaddr *client);

/* Queries refused a token since ratelimit_new (for the periodic report). */
uint64_t ratelimit_limited(struct ratelimit *rl);

#endif
