/* ratelimit.c owns the per-client token buckets (see moat/ratelimit.h). Tokens are kept in
 * thousandths so that refills of less than one query a millisecond are not lost to rounding. */
#include <netinet/in.h>
#include <pthread.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "moat/ratelimit.h"

/* A bucket is shared by every client whose hash lands on it: it keeps no owner, so a new
 * client arriving never refills it (two colliding clients taking turns used to get a full
 * burst each time: unlimited). */
struct bucket {
	uint64_t last_ms; /* last refill; 0: never used */
	uint64_t milli;   /* tokens x 1000 */
};

struct ratelimit {
	pthread_mutex_t lock; /* workers share one table: a client's budget is the same on all */
	bool shared;          /* false: one thread takes tokens, the lock is not needed */
	uint64_t limited;     /* queries refused a token, ever (read with relaxed loads) */
	uint8_t hkey[crypto_shorthash_KEYBYTES];
	uint64_t rate;  /* tokens x 1000 per millisecond = qps */
	uint64_t burst; /* tokens x 1000 */
	size_t mask;
	struct bucket b[];
};

struct ratelimit *ratelimit_new(uint32_t qps, uint32_t burst, size_t nbuckets)
{
	if (qps == 0 || sodium_init() < 0)
		return NULL;
	size_t n = 16;
	while (n < nbuckets)
		n *= 2;
	struct ratelimit *rl = calloc(1, sizeof(*rl) + n * sizeof(struct bucket));
	if (!rl)
		return NULL;
	randombytes_buf(rl->hkey, sizeof(rl->hkey));
	rl->rate = qps;
	rl->burst = (uint64_t)(burst ? burst : qps) * 1000;
	rl->mask = n - 1;
	rl->shared = true;
	pthread_mutex_init(&rl->lock, NULL);
	return rl;
}

void ratelimit_share(struct ratelimit *rl, unsigned nthreads)
{
	if (rl)
		rl->shared = nthreads > 1;
}

void ratelimit_free(struct ratelimit *rl)
{
	if (rl)
		pthread_mutex_destroy(&rl->lock);
	free(rl);
}

uint64_t ratelimit_limited(struct ratelimit *rl)
{
	return __atomic_load_n(&rl->limited, __ATOMIC_RELAXED);
}

void ratelimit_client_id(const struct sockaddr *client, uint8_t id[RATELIMIT_CLIENT_ID])
{
	memset(id, 0, RATELIMIT_CLIENT_ID);
	if (client->sa_family == AF_INET) {
		id[0] = 4;
		memcpy(id + 1, &((const struct sockaddr_in *)client)->sin_addr, 4);
	} else if (client->sa_family == AF_INET6) {
		id[0] = 6;
		memcpy(id + 1, &((const struct sockaddr_in6 *)client)->sin6_addr, 8); /* the /64 */
	}
}

uint64_t ratelimit_client_hash(struct ratelimit_memo *m, const void *table, const uint8_t *key,
                               const struct sockaddr *client)
{
	uint8_t id[RATELIMIT_CLIENT_ID];
	ratelimit_client_id(client, id);
	if (m->table != table || memcmp(m->id, id, sizeof(id)) != 0) {
		crypto_shorthash((unsigned char *)&m->h, id, sizeof(id), key);
		m->table = table;
		memcpy(m->id, id, sizeof(id));
	}
	return m->h;
}

bool ratelimit_allow(struct ratelimit *rl, const struct sockaddr *client, uint64_t now_ms)
{
	static _Thread_local struct ratelimit_memo last; /* the table is never replaced */
	uint64_t h = ratelimit_client_hash(&last, rl, rl->hkey, client);
	struct bucket *b = &rl->b[h & rl->mask];
	bool ok = false;
	if (rl->shared)
		pthread_mutex_lock(&rl->lock);
	if (b->last_ms == 0) {
		/* A bucket nobody used yet starts with a full burst. */
		b->last_ms = now_ms ? now_ms : 1;
		b->milli = rl->burst;
	} else if (now_ms > b->last_ms) {
		uint64_t add = (now_ms - b->last_ms) * rl->rate;
		b->milli = b->milli + add > rl->burst ? rl->burst : b->milli + add;
		b->last_ms = now_ms;
	}
	if (b->milli >= 1000) {
		b->milli -= 1000;
		ok = true;
	} else { /* one writer at a time (the lock, or the only thread); any thread reads */
		__atomic_store_n(&rl->limited, rl->limited + 1, __ATOMIC_RELAXED);
	}
	if (rl->shared)
		pthread_mutex_unlock(&rl->lock);
	return ok;
}
