/* cache.c owns the answer cache: a fixed-size hash table of entries chained through their own
 * links, an LRU list threaded through the same entries, and the byte budget that bounds both.
 * Each entry is one allocation holding its links, its key (wire qname, qtype, qclass, variant) and
 * the upstream packet; the cache owns it from cache_put until eviction, expiry, replacement or
 * cache_free. The table is sized once from max_bytes and never resized, so no put ever pays for
 * a rehash, and every operation (hash, chain walk, unlink, tail eviction) is constant-cost in
 * expectation with no allocation on the lookup path.
 *
 * Why chaining rather than open addressing: the table is never resized, so open addressing would
 * need either tombstones (which pile up under a steady churn of evictions until a rebuild, i.e. a
 * latency spike) or backward-shift deletion (cost proportional to the cluster). Chains with a
 * back-pointer to the previous link (the Linux hlist trick) unlink an entry in O(1) worst case
 * given only the entry, which is exactly what LRU eviction and expiry have in hand. The chain
 * length stays short because the hash is keyed SipHash under a per-cache random key. */
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "moat/bytes.h"
#include "moat/cache.h"
#include "moat/err.h"
#include "moat/name.h"

/* Average entry size (links, key and a typical answer) assumed when sizing the table: one bucket
 * per expected entry keeps the load factor near 1 without spending much of the budget on it. */
#define CACHE_AVG_ENTRY 200
#define CACHE_MIN_BUCKETS 16u
#define CACHE_MAX_BUCKETS ((size_t)1 << 26) /* a 512 MiB table would be a config mistake */

struct cache_entry {
	struct cache_entry *hnext;   /* next in the bucket chain */
	struct cache_entry **hpprev; /* the link that points at us: bucket head or prev's hnext */
	struct cache_entry *newer, *older; /* LRU list; c->newest .. c->oldest */
	uint64_t hash;
	uint64_t inserted_ms, expires_ms;
	size_t size;   /* bytes charged to the budget for this entry: all it holds (cache_reuse) */
	size_t len;    /* packet length */
	size_t keylen; /* the key comes first in data, the packet follows */
	uint8_t data[];
};

struct cache {
	struct cache_entry **buckets;
	size_t mask; /* bucket count - 1; the count is a power of two */
	size_t max_bytes;
	uint32_t min_ttl, max_ttl;
	uint64_t stale_ms; /* expired entries kept this long for cache_get_stale */
	struct cache_entry *newest, *oldest;
	struct cache_stats st; /* st.bytes includes the bucket array */
	uint8_t hkey[crypto_shorthash_KEYBYTES];
	/* The key cache_prefetch hashed last and its hash: the get (and the put after a miss)
	 * that follow reuse it. */
	size_t memo_len; /* 0: none */
	uint64_t memo_hash;
	uint8_t memo_key[CACHE_MAXKEY];
};

/* Fixed-width big-endian fields after the self-delimiting name make the encoding injective,
 * so equal bytes mean equal keys. */
int cache_key(uint8_t *buf, const uint8_t *lname, uint16_t qtype, uint16_t qclass, uint32_t variant)
{
	int n = name_wire_len(lname, NAME_MAXWIRE);
	if (n < 0)
		return MOAT_EINVAL;
	memcpy(buf, lname, (size_t)n);
	be16_put(buf + n, qtype);
	be16_put(buf + n + 2, qclass);
	be32_put(buf + n + 4, variant);
	return n + CACHE_KEYTAIL;
}

static uint64_t cache_hash(const struct cache *c, const uint8_t *key, size_t keylen)
{
	if (keylen == c->memo_len && !memcmp(key, c->memo_key, keylen))
		return c->memo_hash;
	unsigned char out[crypto_shorthash_BYTES];
	uint64_t h;
	crypto_shorthash(out, key, keylen, c->hkey);
	memcpy(&h, out, sizeof(h));
	return h;
}

void cache_prefetch(struct cache *c, const uint8_t *lname, uint16_t qtype, uint16_t qclass,
                    uint32_t variant)
{
	uint8_t key[CACHE_MAXKEY];
	int kl = cache_key(key, lname, qtype, qclass, variant);
	if (kl < 0)
		return;
	c->memo_len = 0;
	uint64_t h = cache_hash(c, key, (size_t)kl);
	__builtin_prefetch(&c->buckets[h & c->mask]);
	memcpy(c->memo_key, key, (size_t)kl);
	c->memo_len = (size_t)kl;
	c->memo_hash = h;
}

uint64_t cache_key_hash(struct cache *c, const uint8_t *lname, uint16_t qtype, uint16_t qclass,
                        uint32_t variant)
{
	uint8_t key[CACHE_MAXKEY];
	int kl = cache_key(key, lname, qtype, qclass, variant);
	return kl < 0 ? 0 : cache_hash(c, key, (size_t)kl);
}

static struct cache_entry *cache_find(const struct cache *c, uint64_t hash, const uint8_t *key,
                                      size_t keylen)
{
	for (struct cache_entry *e = c->buckets[hash & c->mask]; e; e = e->hnext)
		if (e->hash == hash && e->keylen == keylen && memcmp(e->data, key, keylen) == 0)
			return e;
	return NULL;
}

static void cache_lru_unlink(struct cache *c, struct cache_entry *e)
{
	if (e->newer)
		e->newer->older = e->older;
	else
		c->newest = e->older;
	if (e->older)
		e->older->newer = e->newer;
	else
		c->oldest = e->newer;
}

static void cache_lru_push(struct cache *c, struct cache_entry *e)
{
	e->newer = NULL;
	e->older = c->newest;
	if (c->newest)
		c->newest->newer = e;
	else
		c->oldest = e;
	c->newest = e;
}

/* Unlink from both the chain and the LRU list: O(1) whatever the chain length. */
static void cache_unlink(struct cache *c, struct cache_entry *e)
{
	*e->hpprev = e->hnext;
	if (e->hnext)
		e->hnext->hpprev = e->hpprev;
	cache_lru_unlink(c, e);
	c->st.entries--;
	c->st.bytes -= e->size;
}

static void cache_remove(struct cache *c, struct cache_entry *e)
{
	cache_unlink(c, e);
	free(e);
}

/* A full cache evicts an entry for every answer it stores; when the LRU tail is about the size
 * the new entry needs, its memory is taken over instead of freed and allocated again (glibc's
 * malloc and free of those sizes were a sixth of a forwarded query's user time). Charged in
 * full, so the budget still bounds the memory. old: the entry of the same key, about to go (its
 * bytes count as free; it is never taken). NULL: allocate (nothing to evict, the tail's size is
 * not close, or pkt lies in it: a caller may put back the bytes a get lent it). */
#define CACHE_REUSE_SLACK 64 /* bytes an entry may hold beyond what it needs */
static struct cache_entry *cache_reuse(struct cache *c, size_t size, const uint8_t *pkt,
                                       const struct cache_entry *old)
{
	struct cache_entry *v = c->oldest;
	if (!v || v == old || c->st.bytes - (old ? old->size : 0) + size <= c->max_bytes ||
	    v->size < size || v->size - size > CACHE_REUSE_SLACK ||
	    ((uintptr_t)pkt >= (uintptr_t)v && (uintptr_t)pkt < (uintptr_t)v + v->size))
		return NULL;
	cache_unlink(c, v);
	c->st.evictions++;
	return v;
}

struct cache *cache_new(size_t max_bytes, uint32_t min_ttl, uint32_t max_ttl)
{
	if (sodium_init() < 0)
		return NULL; /* no randomness for the hash key: refuse rather than hash predictably
		              */
	struct cache *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	size_t want = max_bytes / CACHE_AVG_ENTRY;
	size_t nb = CACHE_MIN_BUCKETS;
	while (nb < want && nb < CACHE_MAX_BUCKETS)
		nb <<= 1;
	c->buckets = calloc(nb, sizeof(*c->buckets));
	if (!c->buckets) {
		free(c);
		return NULL;
	}
	c->mask = nb - 1;
	c->max_bytes = max_bytes;
	c->min_ttl = min_ttl;
	c->max_ttl = max_ttl;
	c->st.bytes = nb * sizeof(*c->buckets);
	randombytes_buf(c->hkey, sizeof(c->hkey));
	return c;
}

void cache_free(struct cache *c)
{
	if (!c)
		return;
	struct cache_entry *e = c->newest;
	while (e) {
		struct cache_entry *next = e->older;
		free(e);
		e = next;
	}
	sodium_memzero(c->hkey, sizeof(c->hkey));
	free(c->buckets);
	free(c);
}

/* Whether an answer may be stored: 1 with *ttl clamped, 0 if it must not be cached (TTL 0, before
 * or after clamping), MOAT_ELIMIT if it is too large. */
static int cache_admit(const struct cache *c, uint32_t *ttl, size_t len, size_t size)
{
	if (*ttl == 0)
		return 0; /* the upstream asked for no caching; not an error */
	if (*ttl < c->min_ttl)
		*ttl = c->min_ttl;
	if (*ttl > c->max_ttl)
		*ttl = c->max_ttl; /* applied last: a max below min wins, it is the safety bound */
	if (*ttl == 0)
		return 0;
	if (len > c->max_bytes / 8)
		return MOAT_ELIMIT;
	size_t table = (c->mask + 1) * sizeof(*c->buckets);
	if (table > c->max_bytes || size > c->max_bytes - table)
		return MOAT_ELIMIT; /* only in a cache too small for its own table */
	return 1;
}

/* cache_put of a key made already, filed under hash (the key's own, or a caller's kept one). */
static int put_key(struct cache *c, uint64_t hash, const uint8_t *key, size_t keylen,
                   const uint8_t *pkt, size_t len, uint32_t ttl, uint64_t now_ms)
{
	size_t size = sizeof(struct cache_entry) + keylen + len;
	int rc = cache_admit(c, &ttl, len, size);
	struct cache_entry *e = NULL, *old = cache_find(c, hash, key, keylen);
	if (rc == 1) {
		/* Copied before the older entry is freed, so a caller may pass back the bytes a
		 * cache_get just lent it. */
		if ((e = cache_reuse(c, size, pkt, old)))
			size = e->size;
		else
			e = malloc(size);
		if (!e) {
			rc = MOAT_ENOMEM;
		} else {
			e->hash = hash;
			e->inserted_ms = now_ms;
			e->expires_ms = now_ms + (uint64_t)ttl * 1000u;
			e->size = size;
			e->len = len;
			e->keylen = keylen;
			memcpy(e->data, key, keylen);
			if (len)
				memcpy(e->data + keylen, pkt, len);
		}
	}

	/* The newest upstream answer supersedes the cached one even when it is not stored itself
	 * (TTL 0, too large, no memory): serving the older answer after that would be going back
	 * on what the upstream last said. */
	if (old)
		cache_remove(c, old);
	if (rc != 1)
		return rc;

	/* Evict from the LRU tail until the new entry fits; each step is O(1), and cache_admit
	 * guarantees the loop ends, at worst with the list empty and the entry fitting. */
	while (c->st.bytes + size > c->max_bytes) {
		cache_remove(c, c->oldest);
		c->st.evictions++;
	}
	struct cache_entry **head = &c->buckets[hash & c->mask];
	e->hnext = *head;
	e->hpprev = head;
	if (*head)
		(*head)->hpprev = &e->hnext;
	*head = e;
	cache_lru_push(c, e);
	c->st.entries++;
	c->st.bytes += size;
	c->st.inserts++;
	return 0;
}

int cache_put(struct cache *c, const uint8_t *lname, uint16_t qtype, uint16_t qclass,
              uint32_t variant, const uint8_t *pkt, size_t len, uint32_t ttl, uint64_t now_ms)
{
	uint8_t key[CACHE_MAXKEY];
	int kl = cache_key(key, lname, qtype, qclass, variant);
	return kl < 0 ? kl
	              : put_key(c, cache_hash(c, key, (size_t)kl), key, (size_t)kl, pkt, len, ttl,
	                        now_ms);
}

int cache_put_hashed(struct cache *c, uint64_t hash, const uint8_t *lname, uint16_t qtype,
                     uint16_t qclass, uint32_t variant, const uint8_t *pkt, size_t len,
                     uint32_t ttl, uint64_t now_ms)
{
	uint8_t key[CACHE_MAXKEY];
	int kl = cache_key(key, lname, qtype, qclass, variant);
	return kl < 0 ? kl : put_key(c, hash, key, (size_t)kl, pkt, len, ttl, now_ms);
}

const uint8_t *cache_get(struct cache *c, const uint8_t *lname, uint16_t qtype, uint16_t qclass,
                         uint32_t variant, uint64_t now_ms, size_t *len, uint32_t *age)
{
	uint8_t key[CACHE_MAXKEY];
	int kl = cache_key(key, lname, qtype, qclass, variant);
	if (kl < 0) {
		c->st.misses++;
		return NULL;
	}
	uint64_t hash = cache_hash(c, key, (size_t)kl);
	struct cache_entry *e = cache_find(c, hash, key, (size_t)kl);
	if (!e) {
		c->st.misses++;
		return NULL;
	}
	if (now_ms >= e->expires_ms) {
		/* Removed now rather than left for LRU eviction (the memory is better spent on the
		 * fresh answer the caller is about to fetch and put), unless it may still be served
		 * stale should that fetch fail. */
		if (now_ms - e->expires_ms >= c->stale_ms)
			cache_remove(c, e);
		c->st.expired++;
		c->st.misses++;
		return NULL;
	}
	cache_lru_unlink(c, e);
	cache_lru_push(c, e);
	c->st.hits++;
	if (len)
		*len = e->len;
	if (age) /* a clock that stepped back reads as age 0, never as a huge unsigned age */
		*age = now_ms > e->inserted_ms ? (uint32_t)((now_ms - e->inserted_ms) / 1000u) : 0;
	return e->data + e->keylen;
}

void cache_keep_stale(struct cache *c, uint32_t seconds)
{
	c->stale_ms = (uint64_t)seconds * 1000u;
}

const uint8_t *cache_get_stale(struct cache *c, const uint8_t *lname, uint16_t qtype,
                               uint16_t qclass, uint32_t variant, uint64_t now_ms, size_t *len)
{
	uint8_t key[CACHE_MAXKEY];
	int kl = cache_key(key, lname, qtype, qclass, variant);
	if (kl < 0)
		return NULL;
	struct cache_entry *e = cache_find(c, cache_hash(c, key, (size_t)kl), key, (size_t)kl);
	if (!e)
		return NULL;
	if (now_ms >= e->expires_ms && now_ms - e->expires_ms >= c->stale_ms) {
		cache_remove(c, e);
		return NULL;
	}
	c->st.stale_hits++;
	if (len)
		*len = e->len;
	return e->data + e->keylen;
}

void cache_get_stats(const struct cache *c, struct cache_stats *out)
{
	*out = c->st;
}

size_t cache_flush(struct cache *c, const uint8_t *lname)
{
	size_t n = 0;
	int nl = lname ? name_wire_len(lname, NAME_MAXWIRE) : 0;
	if (nl < 0)
		return 0;
	for (struct cache_entry *e = c->newest, *next; e; e = next) {
		next = e->older;
		/* The key starts with the name, lower-cased like lname. */
		if (!lname || (e->keylen == (size_t)nl + CACHE_KEYTAIL &&
		               !memcmp(e->data, lname, (size_t)nl))) {
			cache_remove(c, e);
			n++;
		}
	}
	return n;
}
