/* budget.c owns the label budget's accounting (moat/budget.h): one agent's table of names it has
 * sent, its zone accounts with their sliding windows, and the verdict on one name. Pure: no
 * locks (budget_share.c holds them), no clock (the caller passes now). */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "moat/budget.h"
#include "moat/name.h"

#define WAYS 4                 /* slots per bucket: one 64-byte line */
#define SLOTS_START 256u       /* 4 KiB: a benign agent's hour fits many times over */
#define LIVE (BUDGET_RING - 1) /* ticks a seen name stays seen: one window */

struct seen {
	uint64_t fp; /* 0: empty */
	uint32_t tick;
	uint32_t pad;
};

struct zone_acct {
	uint64_t key; /* hash of the zone's wire name; 0: free */
	uint32_t limit, sum, head;
	uint32_t ring[BUDGET_RING]; /* bytes billed in tick t at ring[t % BUDGET_RING] */
	bool spent;                 /* denied since its last charge: the alert is out */
	uint64_t denied, charged;
	uint8_t zone[NAME_MAXWIRE];
};

struct budget_state {
	uint8_t key[crypto_shorthash_KEYBYTES];
	uint64_t epoch_ms;  /* tick 0 */
	uint32_t window_ms; /* the window the ticks are cut for; 0: not yet */
	uint32_t width_ms;  /* one tick */
	struct seen *slots; /* nbuckets * WAYS */
	size_t nbuckets, held;
	struct zone_acct *zones;
	unsigned nzones, capzones;
	struct zone_acct other;
	uint64_t denied, charged, evicted;
};

_Static_assert(crypto_shorthash_KEYBYTES == 16, "budget keys are 16 bytes");

struct budget_state *budget_state_new_key(const uint8_t key[16])
{
	struct budget_state *st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	memcpy(st->key, key, sizeof(st->key));
	st->nbuckets = SLOTS_START / WAYS;
	if (!(st->slots = calloc(SLOTS_START, sizeof(*st->slots)))) {
		free(st);
		return NULL;
	}
	return st;
}

struct budget_state *budget_state_new(void)
{
	uint8_t key[crypto_shorthash_KEYBYTES];
	if (sodium_init() < 0)
		return NULL;
	randombytes_buf(key, sizeof(key));
	struct budget_state *st = budget_state_new_key(key);
	sodium_memzero(key, sizeof(key));
	return st;
}

void budget_state_free(struct budget_state *st)
{
	if (!st)
		return;
	free(st->slots);
	free(st->zones);
	free(st);
}

static uint64_t hash_name(const struct budget_state *st, const uint8_t *lname)
{
	int n = name_wire_len(lname, NAME_MAXWIRE);
	uint64_t h;
	crypto_shorthash((unsigned char *)&h, lname, n > 0 ? (size_t)n : 1, st->key);
	return h ? h : 1; /* 0 marks an empty slot */
}

/* A new window length (a reload changed window_s, or the first question): everything billed
 * was cut for the old ticks, so the state starts over. */
static void restart(struct budget_state *st, uint32_t window_ms, uint64_t now_ms)
{
	memset(st->slots, 0, st->nbuckets * WAYS * sizeof(*st->slots));
	st->held = 0;
	st->nzones = 0;
	memset(&st->other, 0, sizeof(st->other));
	st->window_ms = window_ms;
	st->width_ms = (window_ms + LIVE - 1) / LIVE;
	st->epoch_ms = now_ms;
}

/* now as a tick of st (0 for a clock a little behind another worker's). */
static uint32_t tick_of(const struct budget_state *st, uint64_t now_ms)
{
	if (now_ms <= st->epoch_ms || !st->width_ms)
		return 0;
	uint64_t t = (now_ms - st->epoch_ms) / st->width_ms;
	return t > UINT32_MAX - 2 * BUDGET_RING ? UINT32_MAX - 2 * BUDGET_RING : (uint32_t)t;
}

static bool live(const struct seen *s, uint32_t now)
{
	return s->fp && (s->tick >= now || now - s->tick <= LIVE);
}

static struct seen *bucket(const struct budget_state *st, uint64_t fp, int which)
{
	size_t b = (which ? fp >> 32 : fp) & (st->nbuckets - 1);
	return &st->slots[b * WAYS];
}

static struct seen *seen_find(const struct budget_state *st, uint64_t fp, uint32_t now)
{
	for (int w = 0; w < 2; w++) {
		struct seen *b = bucket(st, fp, w);
		for (int i = 0; i < WAYS; i++)
			if (b[i].fp == fp && live(&b[i], now))
				return &b[i];
	}
	return NULL;
}

/* A free or expired slot of bucket b, or NULL. */
static struct seen *free_in(struct seen *b, uint32_t now)
{
	for (int i = 0; i < WAYS; i++)
		if (!live(&b[i], now))
			return &b[i];
	return NULL;
}

/* A slot for fp in its two buckets: a free or expired one, else one freed by moving a name of
 * those buckets to its other bucket (one cuckoo step: the table then fills to ~90% before it
 * must grow), else NULL (*oldest: the least recently sent of the 8). */
static struct seen *seen_room(struct budget_state *st, uint64_t fp, uint32_t now,
                              struct seen **oldest)
{
	struct seen *b[2] = {bucket(st, fp, 0), bucket(st, fp, 1)}, *s;
	*oldest = NULL;
	for (int w = 0; w < 2; w++)
		if ((s = free_in(b[w], now)))
			return s;
	for (int w = 0; w < 2; w++)
		for (int i = 0; i < WAYS; i++) {
			struct seen *e = &b[w][i];
			struct seen *alt = bucket(st, e->fp, bucket(st, e->fp, 0) == b[w]);
			if (alt != b[w] && (s = free_in(alt, now))) {
				if (s->fp)
					st->held--; /* an expired name gives way */
				*s = *e;
				e->fp = 0;
				return e;
			}
			if (!*oldest || e->tick < (*oldest)->tick)
				*oldest = e;
		}
	return NULL;
}

/* Twice the buckets, the live names moved over (expired ones dropped). False when there is no
 * memory or the cap is reached: the caller evicts instead. */
static bool seen_grow(struct budget_state *st, uint32_t now)
{
	size_t nslots = st->nbuckets * WAYS;
	if (nslots * 2 > BUDGET_SLOTS_MAX)
		return false;
	struct seen *old = st->slots, *nv = calloc(nslots * 2, sizeof(*nv));
	if (!nv)
		return false;
	st->slots = nv;
	st->nbuckets *= 2;
	st->held = 0;
	for (size_t i = 0; i < nslots; i++) {
		struct seen *o = &old[i], *oldest;
		if (!live(o, now))
			continue;
		struct seen *s = seen_room(st, o->fp, now, &oldest);
		if (!s) {
			st->evicted++; /* both new buckets full: rare enough to drop it */
			continue;
		}
		*s = *o;
		st->held++;
	}
	free(old);
	return true;
}

static void seen_add(struct budget_state *st, uint64_t fp, uint32_t now)
{
	struct seen *oldest, *s = seen_room(st, fp, now, &oldest);
	if (!s && seen_grow(st, now))
		s = seen_room(st, fp, now, &oldest);
	if (!s) {
		s = oldest; /* billed again if it comes back: never a free pass */
		st->evicted++;
	}
	if (!s->fp)
		st->held++;
	*s = (struct seen){.fp = fp, .tick = now};
}

/* ---- zone accounts ---- */

/* The sum of what was billed in the window that ends at tick now, without moving the ring. */
static uint32_t acct_sum_at(const struct zone_acct *z, uint32_t now)
{
	if (now <= z->head)
		return z->sum;
	if (now - z->head >= BUDGET_RING)
		return 0;
	uint32_t sum = z->sum;
	for (uint32_t t = z->head + 1; t <= now; t++)
		sum -= z->ring[t % BUDGET_RING];
	return sum;
}

static void acct_advance(struct zone_acct *z, uint32_t now)
{
	if (now <= z->head)
		return; /* a worker whose clock is a little behind: its charge goes in the newest
		           tick */
	if (now - z->head >= BUDGET_RING) {
		memset(z->ring, 0, sizeof(z->ring));
		z->sum = 0;
	} else {
		for (uint32_t t = z->head + 1; t <= now; t++) {
			z->sum -= z->ring[t % BUDGET_RING];
			z->ring[t % BUDGET_RING] = 0;
		}
	}
	z->head = now;
}

static uint64_t zone_key(const struct budget_state *st, const uint8_t *zone, size_t *len)
{
	int n = name_wire_len(zone, NAME_MAXWIRE);
	*len = n > 0 ? (size_t)n : 1;
	uint64_t h;
	crypto_shorthash((unsigned char *)&h, zone, *len, st->key);
	return h ? h : 1;
}

static struct zone_acct *zone_find(const struct budget_state *st, const uint8_t *zone)
{
	size_t len;
	uint64_t k = zone_key(st, zone, &len);
	for (unsigned i = 0; i < st->nzones; i++)
		if (st->zones[i].key == k && !memcmp(st->zones[i].zone, zone, len))
			return &st->zones[i];
	return NULL;
}

/* The account of zone: its own, a new one, one whose window emptied (it holds nothing a fresh
 * one would not), or the shared one. */
static struct zone_acct *zone_get(struct budget_state *st, const uint8_t *zone, uint32_t now)
{
	struct zone_acct *z = zone_find(st, zone);
	if (z)
		return z;
	if (st->nzones == st->capzones && st->capzones < BUDGET_ZONES) {
		unsigned cap = st->capzones ? st->capzones * 2 : 4;
		struct zone_acct *nv = realloc(st->zones, cap * sizeof(*nv));
		if (nv) {
			st->zones = nv;
			st->capzones = cap;
		}
	}
	if (st->nzones < st->capzones)
		z = &st->zones[st->nzones++];
	for (unsigned i = 0; i < st->nzones && !z; i++)
		if (acct_sum_at(&st->zones[i], now) == 0)
			z = &st->zones[i];
	if (!z)
		return &st->other;
	size_t len;
	memset(z, 0, sizeof(*z));
	z->key = zone_key(st, zone, &len);
	memcpy(z->zone, zone, len);
	z->head = now;
	return z;
}

/* ---- the verdict ---- */

static uint32_t charge_of(const struct budget_ask *a)
{
	return a->zone > a->lname ? (uint32_t)(a->zone - a->lname) : 0;
}

void budget_account(struct budget_state *st, const struct budget_ask *a, struct budget_verdict *out)
{
	memset(out, 0, sizeof(*out));
	out->limit = a->limit;
	if (st->window_ms != a->window_ms)
		restart(st, a->window_ms, a->now_ms);
	uint32_t now = tick_of(st, a->now_ms);
	uint64_t fp = hash_name(st, a->lname);
	struct seen *s = seen_find(st, fp, now);
	uint32_t charge = charge_of(a);
	if (s || !charge) {
		if (s && s->tick < now)
			s->tick = now;
		out->result = BUDGET_SEEN;
		return;
	}
	struct zone_acct *z = zone_get(st, a->zone, now);
	out->other = z == &st->other;
	acct_advance(z, now);
	z->limit = a->limit;
	out->charge = charge;
	if (charge > a->limit || z->sum > a->limit - charge) {
		out->result = BUDGET_DENIED;
		out->used = z->sum;
		out->first_deny = !z->spent;
		z->spent = true;
		z->denied++;
		st->denied++;
		return;
	}
	z->ring[z->head % BUDGET_RING] += charge;
	z->sum += charge;
	z->charged += charge;
	z->spent = false;
	st->charged += charge;
	seen_add(st, fp, now);
	out->result = BUDGET_CHARGED;
	out->used = z->sum;
}

void budget_peek(const struct budget_state *st, const struct budget_ask *a,
                 struct budget_verdict *out)
{
	memset(out, 0, sizeof(*out));
	out->limit = a->limit;
	out->charge = charge_of(a);
	bool fresh = !st || st->window_ms != a->window_ms;
	uint32_t now = fresh ? 0 : tick_of(st, a->now_ms);
	if (!out->charge || (!fresh && seen_find(st, hash_name(st, a->lname), now))) {
		out->charge = 0;
		out->result = BUDGET_SEEN;
		if (!fresh) {
			const struct zone_acct *z = zone_find(st, a->zone);
			out->used = z ? acct_sum_at(z, now) : 0;
		}
		return;
	}
	const struct zone_acct *z = fresh ? NULL : zone_find(st, a->zone);
	out->used = z ? acct_sum_at(z, now) : 0;
	bool fits = out->charge <= a->limit && out->used <= a->limit - out->charge;
	out->result = fits ? BUDGET_CHARGED : BUDGET_DENIED;
	if (fits)
		out->used += out->charge;
}

void budget_state_info(const struct budget_state *st, struct budget_info *out)
{
	memset(out, 0, sizeof(*out));
	if (!st)
		return;
	out->names = st->held;
	out->slots = st->nbuckets * WAYS;
	out->mem_bytes = sizeof(*st) + out->slots * sizeof(struct seen) +
	                 st->capzones * sizeof(struct zone_acct);
	out->zones = st->nzones;
	out->window_ms = st->window_ms;
	out->denied = st->denied;
	out->charged = st->charged;
	out->evicted = st->evicted;
}

void budget_state_each_zone(const struct budget_state *st, uint64_t now_ms, budget_zone_cb cb,
                            void *ctx)
{
	if (!st)
		return;
	uint32_t now = tick_of(st, now_ms);
	for (unsigned i = 0; i <= st->nzones; i++) {
		const struct zone_acct *z = i < st->nzones ? &st->zones[i] : &st->other;
		if (i == st->nzones && !z->denied && !z->charged)
			break; /* the shared account, never used */
		struct budget_zone_info zi = {
		    .zone = i < st->nzones ? z->zone : NULL,
		    .used = acct_sum_at(z, now),
		    .limit = z->limit,
		    .denied = z->denied,
		    .charged = z->charged,
		};
		cb(ctx, &zi);
	}
}

uint32_t budget_limit(const struct config_agent *a, const uint8_t *zone)
{
	for (size_t i = 0; i < a->budget.nzones; i++)
		if (name_equal(a->budget.zones[i].zone, zone))
			return a->budget.zones[i].bytes;
	return a->budget.bytes;
}
