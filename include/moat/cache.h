/* The answer cache: upstream answers (positive and negative, RFC 2308) kept for their TTL, so a
 * repeated question costs no upstream round trip. It stores opaque bytes: moatd's fetch.c
 * stores the upstream's packet as received together with its parse (wire_resp_pack), and every
 * hit goes through the same address check, firewall grant and rebuild as a fresh answer (per
 * agent: agents differ in what they may see), with TTLs counted down by the entry's age.
 *
 * Keys are (lower-cased wire qname, qtype, qclass, variant), where the variant holds the DO bit
 * (bit 0) and the upstream set that answered (the bits above; 0: the global upstreams, so a
 * forward zone's answers never serve another set's questions), hashed with SipHash-2-4 (libsodium
 * crypto_shorthash) under a random per-cache key, so clients cannot aim collisions. Memory is
 * bounded by max_bytes (entries, keys and table included); when full, the least recently used
 * entry is evicted in O(1), so a full cache costs a miss no more than an empty one.
 * Single-threaded: one cache per worker loop. */
#ifndef MOAT_CACHE_H
#define MOAT_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moat/name.h"

struct cache;

#define CACHE_KEYTAIL 8 /* after the name: qtype, qclass, variant */
#define CACHE_MAXKEY (NAME_MAXWIRE + CACHE_KEYTAIL)

/* The key of (lname, qtype, qclass, variant) as bytes in buf[CACHE_MAXKEY]: what the cache
 * hashes and compares, and what moatd's table of questions in flight hashes too. Returns its
 * length or MOAT_EINVAL for a malformed name. */
int cache_key(uint8_t *buf, const uint8_t *lname, uint16_t qtype, uint16_t qclass,
              uint32_t variant);

struct cache_stats {
	uint64_t hits, misses, inserts, evictions, expired, stale_hits;
	size_t entries, bytes;
};

/* A cache of at most max_bytes. TTLs are clamped to [min_ttl, max_ttl] at insertion (a TTL of 0
 * is not cached at all, whatever min_ttl says: the upstream asked for no caching).
 * Ownership: caller frees with cache_free. NULL on allocation failure. */
struct cache *cache_new(size_t max_bytes, uint32_t min_ttl, uint32_t max_ttl);
void cache_free(struct cache *c);

/* Store a copy of an upstream answer under the key for ttl seconds from now_ms (a monotonic
 * clock in milliseconds); lname is a lower-cased, uncompressed wire name. Any older entry for the
 * same key is dropped, even when the new answer is not stored (the newest answer wins). A TTL of
 * 0 (before or after clamping) stores nothing and returns 0. An answer larger than an eighth of
 * max_bytes is not stored. Evicts least recently used entries to make room. pkt may be bytes
 * that cache_get lent (they are copied before the older entry is freed).
 * Returns 0, MOAT_ELIMIT (not stored), MOAT_EINVAL (malformed lname) or MOAT_ENOMEM. */
int cache_put(struct cache *c, const uint8_t *lname, uint16_t qtype, uint16_t qclass,
              uint32_t variant, const uint8_t *pkt, size_t len, uint32_t ttl, uint64_t now_ms);

/* cache_put for a caller that kept the key's hash (cache_key_hash of the same key, as a table
 * of questions in flight does): the key is not hashed again (~250 instructions a forwarded
 * answer, once later questions have taken cache_prefetch's memo). */
int cache_put_hashed(struct cache *c, uint64_t hash, const uint8_t *lname, uint16_t qtype,
                     uint16_t qclass, uint32_t variant, const uint8_t *pkt, size_t len,
                     uint32_t ttl, uint64_t now_ms);

/* Look a key up at now_ms. On a live hit returns the stored bytes (borrowed: valid until the
 * next cache_put, cache_get or cache_free, since a get may remove an expired entry), their length
 * in *len and the whole seconds since insertion in *age (callers subtract it from every TTL,
 * saturating at 0: min_ttl may have kept an entry longer than its records' TTLs); the entry
 * becomes most recently used. An entry expires at inserted + ttl seconds exactly: it is then
 * counted in expired and misses, NULL is returned, and it is removed unless it is within the
 * stale window (cache_keep_stale). len and age may be NULL. Never allocates. */
const uint8_t *cache_get(struct cache *c, const uint8_t *lname, uint16_t qtype, uint16_t qclass,
                         uint32_t variant, uint64_t now_ms, size_t *len, uint32_t *age);

/* The key will be looked up soon: hash it now and start loading its bucket (a cache of 32 MB
 * has a 2 MiB bucket array, larger than the caches), so the work done meanwhile hides the
 * memory's latency; the next get or put of the key reuses the hash. Changes nothing else. */
void cache_prefetch(struct cache *c, const uint8_t *lname, uint16_t qtype, uint16_t qclass,
                    uint32_t variant);

/* The keyed hash the cache files the key under (the one cache_prefetch computed, when it is that
 * key's), for a table of questions that wants one hash of a question, not two. */
uint64_t cache_key_hash(struct cache *c, const uint8_t *lname, uint16_t qtype, uint16_t qclass,
                        uint32_t variant);

/* Serve-stale (RFC 8767): keep expired entries for seconds more (0, the default: not at all),
 * for cache_get_stale to hand out when the upstreams cannot answer. They still count against
 * max_bytes and leave by LRU eviction like any entry. */
void cache_keep_stale(struct cache *c, uint32_t seconds);

/* The entry for the key if it is live or expired by less than the stale window (counted in
 * stale_hits), else NULL (an entry past the window is removed). Borrowed like cache_get's. */
const uint8_t *cache_get_stale(struct cache *c, const uint8_t *lname, uint16_t qtype,
                               uint16_t qclass, uint32_t variant, uint64_t now_ms, size_t *len);

/* Drop every entry whose name is lname (any type, class, DO bit), or every entry when lname is
 * NULL (moatctl flush). Walks the whole cache: for operators, not for the query path. Returns
 * the number of entries removed. */
size_t cache_flush(struct cache *c, const uint8_t *lname);

/* Counters since cache_new. entries and bytes are current; bytes is what is charged against
 * max_bytes (the bucket array plus every entry's header, key and packet) and never exceeds it. */
void cache_get_stats(const struct cache *c, struct cache_stats *out);

#endif
