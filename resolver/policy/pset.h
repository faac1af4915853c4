/* pset.h: the layout of a pattern set, private to policy.c (which builds and searches it) and
 * policy_file.c (which writes it to a compiled file and opens it back). Both forms share this
 * struct and policy.c's lookup; a compiled set has no slots or arena in memory: its filter, port
 * rules and file names are private copies made at open, and its slots and records are read
 * from the file (struct pset_file's find), so a lookup costs no resident memory. */
#ifndef MOAT_PSET_H
#define MOAT_PSET_H

#include <sodium.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <stddef.h>
#include <stdint.h>

#include "moat/policy.h"

/* 16 bytes a name. The tag (32 bits of the name's SipHash) picks the home slot and is compared
 * before the name itself, so a probe rarely touches the name arena (a cache miss each), and the
 * table grows without hashing or reading a single name again. A rule is packed as
 * file index (8 bits, 1-based) and line (24 bits); 0 means "not listed". */
struct pslot {
	uint32_t name_off; /* into arena, plus one; 0 = empty slot (so calloc makes empty tables) */
	uint32_t tag;
	uint32_t exact; /* rule of "name" */
	uint32_t wild;  /* rule of "*.name" */
};

#define RULE_LINE_MAX 0xFFFFFFu
#define RULE_FILES_MAX 255
#define RULE(file, line)                                                                           \
	((uint32_t)(file) << 24 | ((line) > RULE_LINE_MAX ? RULE_LINE_MAX : (line)))
#define RULE_FILE(r) ((r) >> 24)
#define RULE_LINE(r) ((r)&RULE_LINE_MAX)

struct pset_ports {
	uint32_t rule;
	struct policy_ports ports;
};

struct policy_set {
	int refs;              /* atomic: snapshots share sets (a runtime agent edit) */
	policy_set_dup_fn dup; /* policy_set_on_duplicate; NULL: duplicates pass silently */
	void *dup_ctx;
	policy_set_err_fn bad; /* policy_set_on_error; NULL: the first bad line stops a load */
	void *bad_ctx;
	uint8_t key[crypto_shorthash_KEYBYTES];
	uint8_t *arena; /* owned (compiled: NULL): the wire names, back to back */
	size_t arena_len, arena_cap;
	struct pslot *slots; /* owned (compiled: NULL); cap is a power of two (compiled: any) */
	size_t cap, used, npatterns;
	char **files; /* owned: file names, index = pslot.*_file - 1 (compiled: one allocation
	               * with the names and struct pfile_blocks) */
	size_t nfiles;
	struct pset_ports *ports; /* owned (compiled: in blocks' allocation), sorted by rule */
	size_t nports, ports_cap;
	bool no_ports; /* policy_set_forbid_ports */
	/* Compiled form only (policy_file_read.c): the file's header as checked, and a blocked
	 * Bloom filter over the tags that answers most misses without touching the slots (so a
	 * deny touches one line of a small array and never the file). NULL filter: none (in
	 * memory). Both are private copies: nothing of a compiled set is mapped. */
	const void *head; /* compiled form (in blocks' allocation); NULL: built in memory */
	const uint8_t *filter;
	size_t filter_blocks;
	struct pfile_blocks *blocks;  /* compiled form: which 4 KiB blocks are verified (in the
	                               * files allocation, freed with it); NULL in memory */
	const struct pset_file *file; /* compiled form: its reads (policy_file.c); NULL in memory */
	struct policy_set *next; /* owned: more sets matched after this one (high-risk chain) */
	/* Built in memory only: the label counts (bit d: d labels, bit 63: 63 or more) of the
	 * names listed exactly and with "*." (kept when a rule goes: only ever too many). A match
	 * looks up only the suffixes of those lengths: a deny of a.b.c is one hash, not four.
	 * depths_known false (a compiled set): every suffix is looked up. */
	bool depths_known;
	uint64_t exact_depths, wild_depths;
	/* Built in memory only: the quick filter (below) over the slots' names, a word per
	 * PQUICK_SLOTS slots (owned; NULL: none, every lookup hashes), and its seed. */
	uint64_t *quick;
	size_t quick_mask;
	uint64_t quick_seed;
};

/* Large tables (slots, names, the compiled tables) sit on transparent huge pages: they are
 * reached at random, and with 4 KiB pages nearly every access would also miss the TLB. */
#define PSET_HUGE ((size_t)2 << 20)

/* Map the pages under [p, p+n) now, all in one call, not one fault at a time as they are first
 * written (a hint: kernels before 5.14 say EINVAL, and the faults happen as before). */
static inline void pset_populate(void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p & ~((uintptr_t)sysconf(_SC_PAGESIZE) - 1); /* 4 KiB or not */
	madvise((void *)a, (uintptr_t)p + n - a, MADV_POPULATE_WRITE);
}

/* Ask for huge pages under the whole 2 MiB pages of [p, p+n) (a hint: without it all works). */
static inline void pset_huge_hint(void *p, size_t n)
{
	uintptr_t a = ((uintptr_t)p + PSET_HUGE - 1) & ~(uintptr_t)(PSET_HUGE - 1);
	uintptr_t e = ((uintptr_t)p + n) & ~(uintptr_t)(PSET_HUGE - 1);
	if (n >= 2 * PSET_HUGE && e > a)
		madvise((void *)a, e - a, MADV_HUGEPAGE);
}

/* n bytes, not zeroed, on huge pages when large. Ownership: the caller frees (free). */
static inline void *pset_huge_alloc(size_t n)
{
	if (n < ((size_t)4 << 20))
		return malloc(n ? n : 1);
	void *p = NULL;
	if (posix_memalign(&p, PSET_HUGE, n) != 0)
		return NULL;
	pset_huge_hint(p, n);
	pset_populate(p, n);
	return p;
}

/* n zeroed bytes, on huge pages when large. Ownership: the caller frees (free). */
static inline void *pset_huge_calloc(size_t n)
{
	if (n < ((size_t)4 << 20))
		return calloc(1, n ? n : 1);
	void *p = pset_huge_alloc(n);
	if (p)
		memset(p, 0, n);
	return p;
}

/* The filter: 64-byte blocks, one per name picked from the tag, 7 bits set in it. About 10 bits
 * a name give ~1% false positives (a false positive only costs the slot probe). */
#define PFILTER_BLOCK 64
#define PFILTER_K 7

static inline uint64_t pfilter_mix(uint32_t tag)
{
	uint64_t h = (uint64_t)tag * 0x9E3779B97F4A7C15ull;
	return (h ^ (h >> 29)) * 0xBF58476D1CE4E5B9ull;
}

static inline size_t pfilter_block(uint32_t tag, size_t nblocks)
{
	uint64_t h = (uint64_t)tag * 0x9E3779B97F4A7C15ull;
	return (size_t)(((h >> 32) * (uint64_t)nblocks) >> 32);
}

static inline bool pfilter_maybe(const uint8_t *f, size_t nblocks, uint32_t tag)
{
	const uint8_t *b = f + pfilter_block(tag, nblocks) * PFILTER_BLOCK;
	uint64_t m = pfilter_mix(tag);
	for (int k = 0; k < PFILTER_K; k++, m >>= 9)
		if (!(b[(m & 511) >> 3] & (1u << (m & 7))))
			return false;
	return true;
}

static inline void pfilter_add(uint8_t *f, size_t nblocks, uint32_t tag)
{
	uint8_t *b = f + pfilter_block(tag, nblocks) * PFILTER_BLOCK;
	uint64_t m = pfilter_mix(tag);
	for (int k = 0; k < PFILTER_K; k++, m >>= 9)
		b[(m & 511) >> 3] |= (uint8_t)(1u << (m & 7));
}

/* The quick filter of a set built in memory: most lookups are of names that are not there (every
 * deny asks the high-risk list and the allowlist, each for the name and some of its suffixes), and
 * SipHash of a name is ~190 instructions. A seeded multiply-xor hash of the wire name (a few
 * instructions a word) picks one 64-bit word and two bits in it; a bit clear means the name was
 * never added. It never says "not here" for a name that is: a lookup it lets by still compares
 * SipHash tags and the name, so names crafted to pass it cost only what every lookup cost before
 * it. A word per 4 slots (at most 3 names: 21 bits or more a name) lets ~1-2% of absent names by.
 */
#define PQUICK_SLOTS 4

static inline uint64_t pquick_hash(const uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t h = seed ^ ((uint64_t)len * 0x9E3779B97F4A7C15ull), v;
	size_t n = len;
	for (; n >= 8; p += 8, n -= 8) {
		memcpy(&v, p, 8);
		h = (h ^ v) * 0xBF58476D1CE4E5B9ull;
		h ^= h >> 31;
	}
	if (n) {
		v = 0;
		if (len >= 8) /* the last 8 bytes, overlapping the words above */
			memcpy(&v, p + n - 8, 8);
		else
			for (size_t i = 0; i < n; i++)
				v |= (uint64_t)p[i] << (8 * i);
		h = (h ^ v) * 0x94D049BB133111EBull;
	}
	h ^= h >> 32;
	h *= 0xD6E8FEB86659FD93ull;
	return h ^ h >> 29;
}

static inline uint64_t pquick_bits(uint64_t h)
{
	return 1ull << (h >> 52 & 63) | 1ull << (h >> 58);
}

/* False only when name (lower-cased wire, len bytes) is in no slot of s. */
static inline bool pquick_maybe(const struct policy_set *s, const uint8_t *name, size_t len)
{
	if (!s->quick)
		return true;
	uint64_t h = pquick_hash(name, len, s->quick_seed), m = pquick_bits(h);
	return (s->quick[h & s->quick_mask] & m) == m;
}

static inline void pquick_add(uint64_t *quick, size_t mask, uint64_t seed, const uint8_t *name,
                              size_t len)
{
	uint64_t h = pquick_hash(name, len, seed);
	quick[h & mask] |= pquick_bits(h);
}

/* fn for each name of a compiled set with its rules (0: none); name points into a buffer valid
 * during the call. */
typedef void (*pfile_each_fn)(void *arg, const uint8_t *name, uint32_t exact, uint32_t wild);

/* How policy.c reads a compiled set: policy_file_read.c fills this in when it opens one, so the
 * search code stays the same for both forms without knowing the file's layout. */
struct pset_file {
	/* The rules of name (lower-cased wire, len bytes, tag its set_tag), read from the file
	 * into out (only exact and wild mean anything; name_off is nonzero). Returns out, NULL
	 * when name is not in the file, or the slot that fails closed (no rule in an allowlist:
	 * not listed; both in a high-risk list: listed) when a block it needed is damaged or the
	 * file changed since it was opened. */
	const struct pslot *(*find)(const struct policy_set *s, const uint8_t *name, size_t len,
	                            uint32_t tag, struct pslot *out);
	/* fn for each name of the file, in slot order; names in damaged blocks are skipped. */
	void (*each)(const struct policy_set *s, pfile_each_fn fn, void *arg);
	/* Free the filter and close the descriptor (policy_set_free's part). */
	void (*release)(struct policy_set *s);
};

#endif
