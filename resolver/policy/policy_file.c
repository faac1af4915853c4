/* policy_file.c owns the compiled policy file (format in moat/policy_file.h): writing a pattern
 * set to it, checking and mapping it back as a read-only set that policy.c searches like any
 * other, and the loader hook that picks text or compiled by the file's extension. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moat/err.h"
#include "moat/name.h"
#include "moat/pathfd.h"
#include "moat/policy_file.h"
#include "moat/policy_sig.h"
#include "policy/pset.h"

#define PF_MAGIC POLICY_FILE_MAGIC
#define PF_ENDIAN 0x01020304u
#define PF_HEAD 4096u  /* the header page; sections start after it */
#define PF_BLOCK 4096u /* the unit of verification */
#define PF_BHASH 32u   /* BLAKE2b-256 a block */
#define PF_LOAD_PCT 85 /* slot table fill: 7 bytes a name, ~4 slots a hit probes */
#define PF_PROBE 16    /* slots read at once by a lookup (96 bytes) */

/* A slot: {record offset + 1 (0: empty), meta}, 6 bytes, unaligned. meta: which rules the
 * record holds and 14 bits of the tag, so a probe reads a record only on a likely match
 * (the home slot comes from the tag's high bits: names that probe the same slots differ
 * in their low bits, so the fingerprint tells them apart almost always). */
#define PF_SLOT 6u
#define PF_META_EXACT 0x8000u
#define PF_META_WILD 0x4000u
#define PF_META_FP 0x3FFFu

static inline uint64_t pf_home(uint32_t tag, uint64_t cap)
{
	return ((uint64_t)tag * cap) >> 32;
}

static inline uint32_t pf_slot_rec(const uint8_t *slot)
{
	uint32_t r;
	memcpy(&r, slot, 4);
	return r;
}

static inline uint16_t pf_slot_meta(const uint8_t *slot)
{
	uint16_t m;
	memcpy(&m, slot + 4, 2);
	return m;
}

enum { SEC_SLOTS, SEC_FILTER, SEC_ARENA, SEC_PORTS, SEC_FILES, SEC_HASHES, SEC_N };

struct pfile_header {
	char magic[8];                              /* "MOATPOL\0" */
	uint32_t version, endian, header_len, kind; /* kind: 0 allowlist, 1 high-risk */
	uint64_t file_len, npatterns, used, cap, filter_blocks;
	uint32_t nfiles, nports;
	uint8_t key[crypto_shorthash_KEYBYTES];
	struct {
		uint64_t off, len;
	} sec[SEC_N];
	uint64_t data_off, nblocks; /* blocks of PF_BLOCK over data_off..file_len (last short) */
	uint8_t table_sum[32];      /* BLAKE2b-256 of bytes header_len..data_off (the hashes) */
	uint8_t head_sum[32];       /* BLAKE2b-256 of the bytes of this struct before head_sum */
};
_Static_assert(sizeof(struct pfile_header) == 264, "header layout");

/* What a compiled set knows of its file; lives after the set's files array (one allocation).
 * Offsets are from data_off. */
struct pfile_blocks {
	int fd;               /* owned: slots and records are read through it (pread) */
	const uint8_t *data0; /* the mapping at data_off (the filter, port rules and file names) */
	uint64_t data_off, data_len, nblocks;
	uint64_t cap, slots_off, recs_off, recs_len;
	uint64_t *verified; /* bitmap, atomic: shared by the workers (a race hashes twice) */
	const uint8_t *hash;
	unsigned bad;     /* atomic: damaged blocks met */
	const char *path; /* for the log line */
	struct pslot damaged;
};
_Static_assert(sizeof(struct pslot) == 16, "slot layout");

/* ---- writing ---- */

struct pf_writer {
	FILE *f;
	uint64_t off, data_off;
	crypto_generichash_state block; /* of the block being written */
	uint8_t *hashes;                /* nblocks x PF_BHASH, filled as blocks complete */
};

/* Ends the block being written (a short last one at the end). */
static void w_block_end(struct pf_writer *w)
{
	uint64_t bi = (w->off - w->data_off - 1) / PF_BLOCK;
	crypto_generichash_final(&w->block, w->hashes + bi * PF_BHASH, PF_BHASH);
	crypto_generichash_init(&w->block, NULL, 0, PF_BHASH);
}

static bool w_put(struct pf_writer *w, const void *p, size_t n)
{
	if (!n)
		return true; /* p may be NULL (a set without port rules) */
	if (fwrite(p, 1, n, w->f) != n)
		return false;
	const uint8_t *b = p;
	while (n) {
		size_t room = PF_BLOCK - (size_t)((w->off - w->data_off) % PF_BLOCK);
		size_t k = n < room ? n : room;
		crypto_generichash_update(&w->block, b, k);
		w->off += k;
		b += k;
		n -= k;
		if (k == room)
			w_block_end(w);
	}
	return true;
}

static bool w_pad_to(struct pf_writer *w, uint64_t off)
{
	static const uint8_t zero[4096];
	while (w->off < off) {
		size_t n = off - w->off < sizeof(zero) ? (size_t)(off - w->off) : sizeof(zero);
		if (!w_put(w, zero, n))
			return false;
	}
	return true;
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* The compiled tables (format 3, moat/policy_file.h): the slot table at the smallest size that
 * keeps it PF_LOAD_PCT full at most, the records of the names with rules (a removed RPZ rule
 * leaves none), and the filter over their tags. Ownership: the caller frees t with
 * pf_tables_free when this returns 0. */
struct pf_tables {
	uint8_t *slots, *recs, *filt;
	uint64_t cap, recs_len, used, nblocks;
};

static void pf_tables_free(struct pf_tables *t)
{
	free(t->slots);
	free(t->recs);
	free(t->filt);
}

static int pf_tables(const struct policy_set *s, struct pf_tables *t)
{
	enum { AHEAD = 16 };
	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < s->cap; i++)
		t->used += s->slots[i].name_off && (s->slots[i].exact || s->slots[i].wild);
	t->cap = t->used * 100 / PF_LOAD_PCT + 1; /* one empty slot at least: probes end */
	t->nblocks = (t->used * 10 + 511) / 512;
	t->nblocks = t->nblocks ? t->nblocks : 1;
	uint64_t most = s->arena_len + 8 * t->used; /* each name and its two rules at most */
	if (t->cap > UINT32_MAX)
		return MOAT_ELIMIT;
	t->slots = pset_huge_calloc((size_t)t->cap * PF_SLOT);
	t->recs = malloc(most ? (size_t)most : 1);
	t->filt = pset_huge_calloc((size_t)t->nblocks * PFILTER_BLOCK);
	if (!t->slots || !t->recs || !t->filt) {
		pf_tables_free(t);
		return MOAT_ENOMEM;
	}
	for (size_t i = 0; i < s->cap; i++) {
		/* The name, home slot and filter block of a slot ahead into the cache while this
		 * one is placed: random accesses into large tables, a cache miss each otherwise.
		 * (Here, not in a helper: GCC drops a function of prefetches alone as pure.) */
		const struct pslot *ah = &s->slots[i + AHEAD < s->cap ? i + AHEAD : i];
		if (ah->name_off) {
			__builtin_prefetch(s->arena + ah->name_off - 1);
			__builtin_prefetch(t->slots + pf_home(ah->tag, t->cap) * PF_SLOT, 1);
			__builtin_prefetch(t->filt + pfilter_block(ah->tag, (size_t)t->nblocks) *
			                                 PFILTER_BLOCK,
			                   1);
		}
		const struct pslot *sl = &s->slots[i];
		if (!sl->name_off || (!sl->exact && !sl->wild))
			continue;
		const uint8_t *name = s->arena + sl->name_off - 1;
		if (t->recs_len >= UINT32_MAX - 1 - 8 - NAME_MAXWIRE) {
			pf_tables_free(t);
			return MOAT_ELIMIT; /* record offsets are 32 bits */
		}
		uint32_t rec = (uint32_t)t->recs_len + 1;
		uint16_t meta = (uint16_t)((sl->exact ? PF_META_EXACT : 0) |
		                           (sl->wild ? PF_META_WILD : 0) | (sl->tag & PF_META_FP));
		if (sl->exact)
			memcpy(t->recs + t->recs_len, &sl->exact, 4), t->recs_len += 4;
		if (sl->wild)
			memcpy(t->recs + t->recs_len, &sl->wild, 4), t->recs_len += 4;
		size_t wl = (size_t)name_wire_len(name, NAME_MAXWIRE);
		memcpy(t->recs + t->recs_len, name, wl);
		t->recs_len += wl;
		uint64_t k = pf_home(sl->tag, t->cap);
		while (pf_slot_rec(t->slots + k * PF_SLOT))
			k = k + 1 == t->cap ? 0 : k + 1;
		memcpy(t->slots + k * PF_SLOT, &rec, 4);
		memcpy(t->slots + k * PF_SLOT + 4, &meta, 2);
		pfilter_add(t->filt, (size_t)t->nblocks, sl->tag);
	}
	return 0;
}

/* Section offsets and the header fields that do not depend on the body's bytes. */
static void pf_layout(const struct policy_set *s, bool highrisk, const struct pf_tables *t,
                      struct pfile_header *h)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, PF_MAGIC, sizeof(PF_MAGIC));
	h->version = POLICY_FILE_VERSION;
	h->endian = PF_ENDIAN;
	h->header_len = PF_HEAD;
	h->kind = highrisk;
	h->npatterns = s->npatterns;
	h->used = t->used;
	h->cap = t->cap;
	h->filter_blocks = t->nblocks;
	h->nfiles = (uint32_t)s->nfiles;
	h->nports = (uint32_t)s->nports;
	memcpy(h->key, s->key, sizeof(h->key));
	uint64_t files_len = 0;
	for (size_t i = 0; i < s->nfiles; i++)
		files_len += strlen(s->files[i]) + 1;
	uint64_t lens[SEC_HASHES] = {t->cap * PF_SLOT, t->nblocks * PFILTER_BLOCK, t->recs_len,
	                             s->nports * sizeof(struct pset_ports), files_len};
	uint64_t aligns[SEC_HASHES] = {4096, 4096, 4096, 8, 8};
	uint64_t off = 0; /* from data_off, which the block table's size fixes */
	for (int i = 0; i < SEC_HASHES; i++) {
		off = align_up(off, aligns[i]);
		h->sec[i].off = off;
		h->sec[i].len = lens[i];
		off += lens[i];
	}
	h->nblocks = (off + PF_BLOCK - 1) / PF_BLOCK;
	h->sec[SEC_HASHES].off = PF_HEAD;
	h->sec[SEC_HASHES].len = h->nblocks * PF_BHASH;
	h->data_off = align_up(PF_HEAD + h->sec[SEC_HASHES].len, PF_BLOCK);
	for (int i = 0; i < SEC_HASHES; i++)
		h->sec[i].off += h->data_off;
	h->file_len = h->data_off + off;
}

static bool pf_body(struct pf_writer *w, const struct policy_set *s, const struct pfile_header *h,
                    const struct pf_tables *t)
{
	bool ok = w_pad_to(w, h->sec[SEC_SLOTS].off) && w_put(w, t->slots, h->sec[SEC_SLOTS].len) &&
	          w_pad_to(w, h->sec[SEC_FILTER].off) &&
	          w_put(w, t->filt, h->sec[SEC_FILTER].len) && w_pad_to(w, h->sec[SEC_ARENA].off) &&
	          w_put(w, t->recs, t->recs_len) && w_pad_to(w, h->sec[SEC_PORTS].off) &&
	          w_put(w, s->ports, h->sec[SEC_PORTS].len) && w_pad_to(w, h->sec[SEC_FILES].off);
	for (size_t i = 0; ok && i < s->nfiles; i++)
		ok = w_put(w, s->files[i], strlen(s->files[i]) + 1);
	return ok && w->off == h->file_len;
}

static int pf_write_fd(int fd, const struct policy_set *s, bool highrisk)
{
	struct pf_tables t;
	struct pfile_header h;
	int rc = pf_tables(s, &t);
	if (rc)
		return rc;
	pf_layout(s, highrisk, &t, &h);
	size_t tlen = (size_t)(h.data_off - PF_HEAD); /* the hashes and zeros up to data_off */
	struct pf_writer w = {.f = fdopen(fd, "w"), .off = h.data_off, .data_off = h.data_off};
	w.hashes = calloc(1, tlen);
	bool ok = w.f && w.hashes && setvbuf(w.f, NULL, _IOFBF, (size_t)1 << 20) == 0 &&
	          fseek(w.f, (long)h.data_off, SEEK_SET) == 0;
	crypto_generichash_init(&w.block, NULL, 0, PF_BHASH);
	ok = ok && pf_body(&w, s, &h, &t) && fflush(w.f) == 0;
	if (ok && (w.off - w.data_off) % PF_BLOCK)
		w_block_end(&w);
	pf_tables_free(&t);
	if (ok)
		crypto_generichash(h.table_sum, sizeof(h.table_sum), w.hashes, tlen, NULL, 0);
	crypto_generichash(h.head_sum, sizeof(h.head_sum), (const uint8_t *)&h,
	                   offsetof(struct pfile_header, head_sum), NULL, 0);
	ok = ok && pwrite(fd, w.hashes, tlen, PF_HEAD) == (ssize_t)tlen &&
	     pwrite(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) && fsync(fd) == 0;
	free(w.hashes);
	if (w.f)
		ok = fclose(w.f) == 0 && ok; /* closes fd */
	else
		close(fd);
	return ok ? 0 : MOAT_EIO;
}

int policy_file_write(const struct policy_set *s, bool highrisk, const char *path, char *err,
                      size_t errlen)
{
	char tmp[4096];
	if (s->map || s->next) {
		snprintf(err, errlen, "%s: only a set built from text files can be compiled", path);
		return MOAT_EINVAL;
	}
	if (sodium_init() < 0)
		return MOAT_ENOMEM;
	snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", path);
	int fd = mkstemp(tmp);
	if (fd < 0) {
		snprintf(err, errlen, "%s: cannot create: %m", tmp);
		return MOAT_EIO;
	}
	int rc = fchmod(fd, 0644) == 0 ? pf_write_fd(fd, s, highrisk) : MOAT_EIO;
	if (!rc && rename(tmp, path) != 0)
		rc = MOAT_EIO;
	if (rc) {
		snprintf(err, errlen, "%s: cannot write: %s", path,
		         rc == MOAT_EIO ? strerror(errno) : moat_strerror(rc));
		unlink(tmp);
	}
	return rc;
}

/* ---- reading ---- */

static int pf_fail(char *err, size_t errlen, const char *path, const char *why)
{
	snprintf(err, errlen, "%s: %s", path, why);
	return MOAT_EFORMAT;
}

/* The header page alone: what it says about itself and the file's size. */
static int pf_check_header(const uint8_t *page, uint64_t size, const char *path, char *err,
                           size_t errlen)
{
	const struct pfile_header *h = (const void *)page;
	uint8_t sum[32];
	if (memcmp(h->magic, PF_MAGIC, sizeof(PF_MAGIC)) != 0)
		return pf_fail(err, errlen, path,
		               "not a compiled moat policy (bad magic; make one with moatctl "
		               "compile)");
	if (h->endian != PF_ENDIAN)
		return pf_fail(err, errlen, path, "compiled on a machine of another byte order");
	if (h->version != POLICY_FILE_VERSION) {
		snprintf(err, errlen,
		         "%s: compiled policy format version %u; this moatd reads version %u "
		         "(recompile it with this moatctl compile)",
		         path, h->version, POLICY_FILE_VERSION);
		return MOAT_EFORMAT;
	}
	crypto_generichash(sum, sizeof(sum), page, offsetof(struct pfile_header, head_sum), NULL,
	                   0);
	bool zeros = true; /* the rest of the page: covered by no hash, so it must be empty */
	for (size_t i = sizeof(*h); i < PF_HEAD; i++)
		zeros = zeros && !page[i];
	if (sodium_memcmp(sum, h->head_sum, sizeof(sum)) != 0 || !zeros)
		return pf_fail(err, errlen, path, "header checksum mismatch: the file is damaged");
	if (h->file_len != size) {
		snprintf(err, errlen, "%s: %s: the header says %llu bytes, the file has %llu", path,
		         size < h->file_len ? "truncated" : "trailing bytes",
		         (unsigned long long)h->file_len, (unsigned long long)size);
		return MOAT_EFORMAT;
	}
	return 0;
}

/* The section table: the block table right after the header, every other section inside the
 * blocks it covers and of the size its counts imply. */
static int pf_check_sections(const struct pfile_header *h, const char *path, char *err,
                             size_t errlen)
{
	const uint64_t d = h->data_off;
	bool blocks_ok =
	    h->sec[SEC_HASHES].off == PF_HEAD && d % PF_BLOCK == 0 &&
	    h->nblocks < ((uint64_t)1 << 40) && h->sec[SEC_HASHES].len == h->nblocks * PF_BHASH &&
	    d == align_up(PF_HEAD + h->sec[SEC_HASHES].len, PF_BLOCK) && d <= h->file_len &&
	    h->nblocks == (h->file_len - d + PF_BLOCK - 1) / PF_BLOCK;
	if (!blocks_ok)
		return pf_fail(err, errlen, path,
		               "bad block table: its size does not match the file");
	for (int i = 0; i < SEC_HASHES; i++)
		if (h->sec[i].off < d || h->sec[i].off > h->file_len ||
		    h->sec[i].len > h->file_len - h->sec[i].off || h->sec[i].off % 8)
			return pf_fail(err, errlen, path,
			               "bad section table: a section lies outside");
	bool cap_ok = h->cap >= 1 && h->cap <= UINT32_MAX;
	if (h->header_len != PF_HEAD || h->kind > 1 || !cap_ok || h->used >= h->cap ||
	    h->sec[SEC_SLOTS].len != h->cap * PF_SLOT || h->filter_blocks < 1 ||
	    h->filter_blocks >= ((uint64_t)1 << 32) ||
	    h->sec[SEC_FILTER].len != h->filter_blocks * PFILTER_BLOCK ||
	    h->sec[SEC_ARENA].len >= UINT32_MAX ||
	    h->sec[SEC_PORTS].len != (uint64_t)h->nports * sizeof(struct pset_ports) ||
	    h->nfiles > RULE_FILES_MAX - 1)
		return pf_fail(err, errlen, path, "bad section table: sizes do not add up");
	return 0;
}

/* Checks of a block that failed its hash, in every compiled set of the process. */
static uint64_t damaged_total;

uint64_t policy_file_damaged_total(void)
{
	return __atomic_load_n(&damaged_total, __ATOMIC_RELAXED);
}

/* Block i against its hash, read through the descriptor (hashing through the mapping would
 * put every block a lookup verifies in RSS); remembered when good, counted and logged (once)
 * when not. A read error counts as damage: the lookup fails closed. */
static bool pf_block_check(const struct policy_set *s, uint64_t i)
{
	struct pfile_blocks *b = s->blocks;
	uint8_t sum[PF_BHASH], buf[PF_BLOCK];
	uint64_t off = i * PF_BLOCK;
	size_t n = b->data_len - off < PF_BLOCK ? (size_t)(b->data_len - off) : PF_BLOCK;
	if (pread(b->fd, buf, n, (off_t)(b->data_off + off)) == (ssize_t)n) {
		crypto_generichash(sum, sizeof(sum), buf, n, NULL, 0);
		if (sodium_memcmp(sum, b->hash + i * PF_BHASH, sizeof(sum)) == 0) {
			__atomic_fetch_or(&b->verified[i / 64], (uint64_t)1 << (i % 64),
			                  __ATOMIC_RELEASE);
			return true;
		}
	}
	__atomic_fetch_add(&damaged_total, 1, __ATOMIC_RELAXED);
	if (__atomic_fetch_add(&b->bad, 1, __ATOMIC_RELAXED) == 0)
		fprintf(stderr,
		        "moatd: %s: block %llu does not match its hash: the file is damaged; "
		        "lookups that need it fail closed (%s)\n",
		        b->path, (unsigned long long)i,
		        b->damaged.exact ? "listed: high-risk" : "not listed");
	return false;
}

/* Every block under [off, off+n) of the data verified (hashing those used the first time). */
static bool pf_verified(const struct policy_set *s, uint64_t off, size_t n)
{
	const struct pfile_blocks *b = s->blocks;
	uint64_t last = (off + (n ? n : 1) - 1) / PF_BLOCK;
	if (last >= b->nblocks)
		last = b->nblocks - 1;
	for (uint64_t i = off / PF_BLOCK; i <= last; i++)
		if (!(__atomic_load_n(&b->verified[i / 64], __ATOMIC_ACQUIRE) &
		      ((uint64_t)1 << (i % 64))) &&
		    !pf_block_check(s, i))
			return false;
	return true;
}

static bool pfile_use(const struct policy_set *s, const void *p, size_t n)
{
	return pf_verified(s, (uint64_t)((const uint8_t *)p - s->blocks->data0), n);
}

/* n bytes of the data at off into buf, verified. False: outside the data, a damaged block or
 * a read error. */
static bool pf_read(const struct policy_set *s, uint64_t off, void *buf, size_t n)
{
	const struct pfile_blocks *b = s->blocks;
	return off <= b->data_len && n <= b->data_len - off && pf_verified(s, off, n) &&
	       pread(b->fd, buf, n, (off_t)(b->data_off + off)) == (ssize_t)n;
}

/* The record at rec (slot value: offset + 1) if it holds name: its rules into out. A record
 * reaching past the records section (only a damaged or hostile file has one) never matches. */
static int pf_record_is(const struct policy_set *s, uint32_t rec, uint16_t meta,
                        const uint8_t *name, size_t len, struct pslot *out)
{
	const struct pfile_blocks *b = s->blocks;
	uint8_t buf[8 + NAME_MAXWIRE];
	size_t nr = 4u * (!!(meta & PF_META_EXACT) + !!(meta & PF_META_WILD));
	if ((uint64_t)rec - 1 + nr + len > b->recs_len)
		return 0;
	if (!pf_read(s, b->recs_off + rec - 1, buf, nr + len))
		return -1;
	if (memcmp(buf + nr, name, len) != 0)
		return 0;
	*out = (struct pslot){.name_off = rec};
	if (meta & PF_META_EXACT)
		memcpy(&out->exact, buf, 4);
	if (meta & PF_META_WILD)
		memcpy(&out->wild, buf + nr - 4, 4);
	return 1;
}

static const struct pslot *pfile_find(const struct policy_set *s, const uint8_t *name, size_t len,
                                      uint32_t tag, struct pslot *out)
{
	const struct pfile_blocks *b = s->blocks;
	uint8_t buf[PF_PROBE * PF_SLOT];
	uint64_t i = pf_home(tag, b->cap);
	for (uint64_t seen = 0; seen < b->cap;) {
		size_t k = b->cap - i < PF_PROBE ? (size_t)(b->cap - i) : PF_PROBE;
		if (!pf_read(s, b->slots_off + i * PF_SLOT, buf, k * PF_SLOT))
			return &b->damaged;
		for (size_t j = 0; j < k; j++) {
			uint32_t rec = pf_slot_rec(buf + j * PF_SLOT);
			uint16_t meta = pf_slot_meta(buf + j * PF_SLOT);
			if (!rec)
				return NULL;
			if ((meta & PF_META_FP) != (tag & PF_META_FP))
				continue;
			int is = pf_record_is(s, rec, meta, name, len, out);
			if (is)
				return is > 0 ? out : &b->damaged;
		}
		seen += k;
		i = i + k == b->cap ? 0 : i + k;
	}
	return NULL; /* a full table: only a damaged file has one */
}

static void pfile_each(const struct policy_set *s, pfile_each_fn fn, void *arg)
{
	const struct pfile_blocks *b = s->blocks;
	enum { CHUNK = 512 };
	uint8_t buf[CHUNK * PF_SLOT], rb[8 + NAME_MAXWIRE];
	for (uint64_t i = 0; i < b->cap; i += CHUNK) {
		size_t k = b->cap - i < CHUNK ? (size_t)(b->cap - i) : CHUNK;
		if (!pf_read(s, b->slots_off + i * PF_SLOT, buf, k * PF_SLOT))
			continue; /* a damaged block: its names are not listed here */
		for (size_t j = 0; j < k; j++) {
			uint32_t rec = pf_slot_rec(buf + j * PF_SLOT), r[2] = {0, 0};
			uint16_t meta = pf_slot_meta(buf + j * PF_SLOT);
			size_t nr = 4u * (!!(meta & PF_META_EXACT) + !!(meta & PF_META_WILD));
			if (!rec || rec - 1 >= b->recs_len)
				continue;
			size_t n = b->recs_len - (rec - 1) < sizeof(rb)
			               ? (size_t)(b->recs_len - (rec - 1))
			               : sizeof(rb);
			if (n <= nr || !pf_read(s, b->recs_off + rec - 1, rb, n) ||
			    name_wire_len(rb + nr, n - nr) < 0)
				continue; /* damaged */
			if (meta & PF_META_EXACT)
				memcpy(&r[0], rb, 4);
			if (meta & PF_META_WILD)
				memcpy(&r[1], rb + nr - 4, 4);
			fn(arg, rb + nr, r[0], r[1]);
		}
	}
}

static void pfile_release(struct policy_set *s)
{
	munmap(s->map, s->map_len);
	if (s->blocks && s->blocks->fd >= 0)
		close(s->blocks->fd);
}

static struct pslot *pfile_damaged(const struct policy_set *s)
{
	return &s->blocks->damaged;
}

/* How policy.c reads a compiled set (policy/pset.h). */
static const struct pset_file pfile_reads = {
    .use = pfile_use,
    .damaged = pfile_damaged,
    .find = pfile_find,
    .each = pfile_each,
    .release = pfile_release,
};

/* The small sections, read whatever the mode: the names of the source files and the port rules
 * (what a match hands to the firewall). Their blocks are verified here (unless QUICK): they are
 * used through pointers into the mapping. */
static int pf_check_small(const struct policy_set *s, const struct pfile_header *h,
                          const char *path, char *err, size_t errlen)
{
	const uint8_t *m = s->map;
	if (!pfile_use(s, m + h->sec[SEC_PORTS].off, h->sec[SEC_PORTS].len) ||
	    !pfile_use(s, m + h->sec[SEC_FILES].off, h->sec[SEC_FILES].len))
		return pf_fail(err, errlen, path,
		               "body checksum mismatch: a block of the port rules or file names "
		               "does not match its hash (the file is damaged or was changed after "
		               "it was compiled)");
	const char *f = (const char *)m + h->sec[SEC_FILES].off;
	const char *end = f + h->sec[SEC_FILES].len;
	for (size_t i = 0; i < h->nfiles; i++) {
		const char *nul = memchr(f, 0, (size_t)(end - f));
		if (!nul)
			return pf_fail(err, errlen, path, "bad file name section");
		s->files[i] = (char *)f;
		f = nul + 1;
	}
	for (size_t i = 0; i < s->nports; i++) {
		const struct pset_ports *pp = &s->ports[i];
		bool ok = pp->ports.n >= 1 && pp->ports.n <= POLICY_PORTS_MAX &&
		          (!i || s->ports[i - 1].rule < pp->rule);
		for (unsigned k = 0; ok && k < pp->ports.n; k++)
			ok = (pp->ports.p[k].proto == POLICY_PROTO_TCP ||
			      pp->ports.p[k].proto == POLICY_PROTO_UDP) &&
			     pp->ports.p[k].port != 0;
		if (!ok)
			return pf_fail(err, errlen, path, "bad port rule section");
	}
	return 0;
}

/* One allocation, freed with the set's files array: the file name pointers (one more: the
 * rule a damaged block answers with in a high-risk list), struct pfile_blocks, the bitmap, the
 * block table and the path. */
static int pf_blocks_alloc(struct policy_set *s, const struct pfile_header *h, const char *path)
{
	size_t nf = h->nfiles + 1, words = (size_t)((h->nblocks + 63) / 64);
	size_t tlen = (size_t)(h->data_off - PF_HEAD), plen = strlen(path) + 1;
	size_t size = nf * sizeof(char *) + sizeof(struct pfile_blocks) + words * 8 + tlen +
	              2 * plen + sizeof(" (damaged block)");
	uint8_t *m = calloc(1, size);
	if (!m)
		return MOAT_ENOMEM;
	s->files = (char **)m;
	struct pfile_blocks *b = (struct pfile_blocks *)(m + nf * sizeof(char *));
	b->verified = (uint64_t *)(b + 1);
	b->hash = (const uint8_t *)(b->verified + words);
	char *p = (char *)b->hash + tlen;
	memcpy(p, path, plen);
	b->path = p;
	s->files[h->nfiles] = p + plen;
	snprintf(p + plen, plen + sizeof(" (damaged block)"), "%s (damaged block)", path);
	s->blocks = b;
	s->file = &pfile_reads;
	return 0;
}
/* FULL: every data block hashed now, read with pread (not through a mapping, which would put
 * the whole file in RSS), against the block table. */
static int pf_check_all(int fd, const struct pfile_header *h, const uint8_t *table,
                        const char *path, char *err, size_t errlen)
{
	enum { CHUNK = 256 };
	uint8_t *buf = malloc((size_t)CHUNK * PF_BLOCK), sum[PF_BHASH];
	if (!buf)
		return MOAT_ENOMEM;
	int rc = 0;
	for (uint64_t i = 0; !rc && i < h->nblocks; i += CHUNK) {
		uint64_t off = h->data_off + i * PF_BLOCK;
		size_t want = h->file_len - off < (uint64_t)CHUNK * PF_BLOCK
		                  ? (size_t)(h->file_len - off)
		                  : (size_t)CHUNK * PF_BLOCK;
		if (pread(fd, buf, want, (off_t)off) != (ssize_t)want) {
			rc = pf_fail(err, errlen, path, "read error");
			break;
		}
		for (size_t k = 0; !rc && k * PF_BLOCK < want; k++) {
			size_t n = want - k * PF_BLOCK < PF_BLOCK ? want - k * PF_BLOCK : PF_BLOCK;
			crypto_generichash(sum, sizeof(sum), buf + k * PF_BLOCK, n, NULL, 0);
			if (sodium_memcmp(sum, table + (i + k) * PF_BHASH, sizeof(sum)) != 0) {
				snprintf(
				    err, errlen,
				    "%s: body checksum mismatch: block %llu does not match its "
				    "hash (the file is damaged or was changed after it was "
				    "compiled)",
				    path, (unsigned long long)(i + k));
				rc = MOAT_EFORMAT;
			}
		}
	}
	free(buf);
	return rc;
}

/* The block table into the set's allocation, against the header's sum. */
static int pf_read_table(int fd, const struct pfile_header *h, uint8_t *table, const char *path,
                         char *err, size_t errlen)
{
	size_t tlen = (size_t)(h->data_off - PF_HEAD);
	uint8_t sum[32];
	if (pread(fd, table, tlen, PF_HEAD) != (ssize_t)tlen)
		return pf_fail(err, errlen, path, "truncated: the block table is short");
	crypto_generichash(sum, sizeof(sum), table, tlen, NULL, 0);
	if (sodium_memcmp(sum, h->table_sum, sizeof(sum)) != 0)
		return pf_fail(err, errlen, path,
		               "block table checksum mismatch: the file is damaged");
	return 0;
}

/* The set over a mapping whose header page and section table were checked; table: the block
 * table as read (tlen bytes, its sum checked). */
static int pf_set(int fd, void *map, size_t len, const struct pfile_header *h, bool highrisk,
                  enum policy_file_verify mode, struct policy_set **out, const char *path,
                  char *err, size_t errlen)
{
	struct policy_set *s = calloc(1, sizeof(*s));
	if (!s || pf_blocks_alloc(s, h, path)) {
		free(s);
		munmap(map, len);
		snprintf(err, errlen, "%s: out of memory", path);
		return MOAT_ENOMEM;
	}
	s->refs = 1;
	uint8_t *m = map;
	s->map = map;
	s->map_len = len;
	memcpy(s->key, h->key, sizeof(s->key));
	s->cap = (size_t)h->cap; /* slots and records: read with pread (struct pset_file's find) */
	s->used = (size_t)h->used;
	s->npatterns = (size_t)h->npatterns;
	s->filter = m + h->sec[SEC_FILTER].off;
	s->filter_blocks = (size_t)h->filter_blocks;
	s->arena_len = (size_t)h->sec[SEC_ARENA].len;
	s->ports = (struct pset_ports *)(m + h->sec[SEC_PORTS].off);
	s->nports = h->nports;
	s->nfiles = h->nfiles + 1; /* the last: what a damaged block answers with */
	s->no_ports = true;
	struct pfile_blocks *b = s->blocks;
	b->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	b->data0 = m + h->data_off;
	b->data_off = h->data_off;
	b->data_len = h->file_len - h->data_off;
	b->nblocks = h->nblocks;
	b->cap = h->cap;
	b->slots_off = h->sec[SEC_SLOTS].off - h->data_off;
	b->recs_off = h->sec[SEC_ARENA].off - h->data_off;
	b->recs_len = h->sec[SEC_ARENA].len;
	b->damaged = (struct pslot){.name_off = 1,
	                            .exact = highrisk ? RULE(s->nfiles, 0) : 0,
	                            .wild = highrisk ? RULE(s->nfiles, 0) : 0};
	/* FULL was hashed at open, QUICK trusts the body: all blocks count as verified. */
	if (mode != POLICY_VERIFY_LAZY)
		memset(b->verified, 0xff, (size_t)((h->nblocks + 63) / 64) * 8);
	int rc = b->fd < 0 ? pf_fail(err, errlen, path, "cannot keep the file open")
	                   : pf_read_table(fd, h, (uint8_t *)b->hash, path, err, errlen);
	if (!rc && mode == POLICY_VERIFY_FULL)
		rc = pf_check_all(fd, h, b->hash, path, err, errlen);
	if (!rc)
		rc = pf_check_small(s, h, path, err, errlen);
	if (!rc && highrisk && s->nports)
		rc = pf_fail(err, errlen, path,
		             "has port rules (compiled as an allowlist): not a high-risk list");
	if (rc) {
		policy_set_free(s);
		return rc;
	}
	/* Lookups land anywhere: no read-ahead, so only the pages they touch are read. */
	madvise(m + h->data_off, (size_t)(h->file_len - h->data_off), MADV_RANDOM);
	*out = s;
	return 0;
}

static int pf_open_fd(int fd, const char *path, bool highrisk, enum policy_file_verify mode,
                      const uint8_t *pubkey, struct policy_set **out, char *err, size_t errlen)
{
	struct stat st;
	static _Thread_local uint8_t page[PF_HEAD];
	const struct pfile_header *h = (const void *)page;
	int rc;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		return MOAT_EIO;
	}
	if ((uint64_t)st.st_size < PF_HEAD || pread(fd, page, PF_HEAD, 0) != (ssize_t)PF_HEAD)
		return pf_fail(err, errlen, path,
		               "truncated or not a compiled moat policy (shorter than its header)");
	if ((rc = pf_check_header(page, (uint64_t)st.st_size, path, err, errlen)) ||
	    (rc = pf_check_sections(h, path, err, errlen)))
		return rc;
	/* The signature covers the header page (the bytes checked above and used below); through
	 * it the block table (checked against table_sum in pf_set) and every block, as long as
	 * each is hashed before use: so with a key the body is never trusted (QUICK runs LAZY). */
	_Static_assert(PF_HEAD == POLICY_SIG_HEAD, "a header signature covers the header page");
	if (pubkey && (rc = policy_sig_verify_head(page, path, pubkey, err, errlen)))
		return rc;
	if (pubkey && mode == POLICY_VERIFY_QUICK)
		mode = POLICY_VERIFY_LAZY;
	void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		snprintf(err, errlen, "%s: cannot map: %m", path);
		return MOAT_EIO;
	}
	rc = pf_set(fd, map, (size_t)st.st_size, h, highrisk, mode, out, path, err, errlen);
	return rc;
}

int policy_file_open(const char *path, bool highrisk, enum policy_file_verify mode,
                     const uint8_t *pubkey, struct policy_set **out, char *err, size_t errlen)
{
	if (sodium_init() < 0)
		return MOAT_ENOMEM;
	FILE *f = pathfd_fopen(path); /* also after the privilege drop (moat/pathfd.h) */
	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %m", path);
		return MOAT_EIO;
	}
	int rc = pf_open_fd(fileno(f), path, highrisk, mode, pubkey, out, err, errlen);
	fclose(f); /* the mapping keeps the file */
	return rc;
}

int policy_file_info(const struct policy_set *s, struct policy_file_info *info)
{
	if (!s->map)
		return MOAT_EINVAL;
	const struct pfile_header *h = s->map;
	*info = (struct policy_file_info){.version = h->version,
	                                  .highrisk = h->kind == 1,
	                                  .file_len = h->file_len,
	                                  .names = h->used,
	                                  .patterns = h->npatterns,
	                                  .slots = h->cap,
	                                  .arena_len = s->arena_len,
	                                  .nports = h->nports,
	                                  .nfiles = h->nfiles,
	                                  .blocks = h->nblocks,
	                                  .bad_blocks =
	                                      __atomic_load_n(&s->blocks->bad, __ATOMIC_RELAXED)};
	return 0;
}

/* ---- the loader hook ---- */

int policy_source_load(const struct config *cfg, struct policy_set *set, const char *path,
                       bool highrisk, char *err, size_t errlen)
{
	const uint8_t *pk = cfg->has_policy_pubkey ? cfg->policy_pubkey : NULL;
	if (!policy_file_is_compiled(path)) {
		bool shipped = highrisk && cfg->nhighrisk && cfg->highrisk_files[0] == path;
		if (pk && !shipped) {
			snprintf(
			    err, errlen,
			    "%s: policy_pubkey is set: only signed compiled files (%s) are "
			    "loaded; compile and sign this list (moatctl compile, moatctl sign)",
			    path, POLICY_FILE_EXT);
			return MOAT_EINVAL;
		}
		return policy_set_load_file(set, path, err, errlen);
	}
	struct policy_set *m = NULL;
	int rc = policy_file_open(path, highrisk,
	                          cfg->policy_verify_quick  ? POLICY_VERIFY_QUICK
	                          : cfg->policy_verify_full ? POLICY_VERIFY_FULL
	                                                    : POLICY_VERIFY_LAZY,
	                          pk, &m, err, errlen);
	if (rc == 0)
		policy_set_chain(set, m);
	return rc;
}
