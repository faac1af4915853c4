/* inflight.c owns the caps on questions waiting for an upstream (see moat/inflight.h). */
#include <sodium.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "moat/enumtext.h"
#include "moat/inflight.h"
#include "moat/ratelimit.h"

struct inflight {
	uint32_t max_total, max_client;
	uint8_t hkey[crypto_shorthash_KEYBYTES];
	size_t mask;
	_Atomic uint32_t total;
	_Atomic uint32_t count[];
};

struct inflight *inflight_new(uint32_t total, uint32_t per_client, size_t nslots)
{
	if (!total || !per_client || sodium_init() < 0)
		return NULL;
	size_t n = 16;
	while (n < nslots)
		n *= 2;
	struct inflight *t = calloc(1, sizeof(*t) + n * sizeof(t->count[0]));
	if (!t)
		return NULL;
	t->max_total = total;
	t->max_client = per_client;
	t->mask = n - 1;
	randombytes_buf(t->hkey, sizeof(t->hkey));
	return t;
}

void inflight_free(struct inflight *t)
{
	free(t);
}

enum inflight_result inflight_take(struct inflight *t, const struct sockaddr *client,
                                   uint32_t *slot)
{
	static _Thread_local struct ratelimit_memo last; /* the table lives as long as moatd */
	uint64_t h = ratelimit_client_hash(&last, t, t->hkey, client);
	uint32_t i = (uint32_t)(h & t->mask);
	if (atomic_fetch_add(&t->count[i], 1) >= t->max_client) {
		atomic_fetch_sub(&t->count[i], 1);
		return INFLIGHT_CLIENT;
	}
	if (atomic_fetch_add(&t->total, 1) >= t->max_total) {
		atomic_fetch_sub(&t->total, 1);
		atomic_fetch_sub(&t->count[i], 1);
		return INFLIGHT_TOTAL;
	}
	*slot = i;
	return INFLIGHT_OK;
}

void inflight_give(struct inflight *t, uint32_t slot)
{
	atomic_fetch_sub(&t->count[slot & t->mask], 1);
	atomic_fetch_sub(&t->total, 1);
}

uint32_t inflight_total(struct inflight *t)
{
	return atomic_load(&t->total);
}

static const char *const result_text[] = {
    [INFLIGHT_OK] = "ok",
    [INFLIGHT_CLIENT] = "too many questions in flight for this client",
    [INFLIGHT_TOTAL] = "too many questions in flight",
};

const char *inflight_result_str(enum inflight_result r)
{
	return ENUM_TEXT(result_text, r, "?");
}
