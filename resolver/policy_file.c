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
#include "policy_set.h"

#define PF_MAGIC "MOATPOL"
#define PF_ENDIAN 0x01020304u
#define PF_HEAD 4096u       /* the header page; sections start after it */
#define PF_PAD NAME_MAXWIRE /* zero bytes after the arena: comparisons stay in the mapping */
#define PF_BLOCK 4096u      /* the unit of verification: one page, what a lookup faults in */
#define PF_BHASH 32u        /* BLAKE2b-256 a block */

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

/* What a mapped set knows of its blocks; lives after the set's files array (one allocation). */
struct pfile_blocks {
	const uint8_t *data0; /* the mapping at data_off */
	uint64_t data_len, nblocks;
	uint64_t *verified; /* bitmap, atomic: shared by the workers (a race hashes twice) */
	const uint8_t *hash;
	unsigned bad;     /* atomic: damaged blocks met */
	const char *path; /* for the log line */
	struct pslot damaged;
};
_Static_assert(sizeof(struct pslot) == 16, "slot layout");

bool policy_file_is_compiled(const char *path)
{
	size_t n = strlen(path), e = strlen(POLICY_FILE_EXT);
	return n > e && strcmp(path + n - e, POLICY_FILE_EXT) == 0;
}

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

/* The slot table rebuilt at the smallest size that keeps it 3/4 full at most (a set loaded from
 * files is sized for its line count), and the filter over its tags. Ownership: caller frees. */
static int pf_tables(const struct policy_set *s, struct pslot **slots, size_t *cap, uint8_t **filt,
                     size_t *nblocks)
{
	size_t c = 64;
	while (s->used * 4 > c * 3)
		c *= 2;
	size_t nb = (s->used * 10 + 511) / 512;
	nb = nb ? nb : 1;
	*slots = calloc(c, sizeof(struct pslot));
	*filt = calloc(nb, PFILTER_BLOCK);
	if (!*slots || !*filt) {
		free(*slots);
		free(*filt);
		return MOAT_ENOMEM;
	}
	for (size_t i = 0; i < s->cap; i++) {
		const struct pslot *sl = &s->slots[i];
		if (sl->name_off == 0)
			continue;
		size_t k = sl->tag & (c - 1);
		while ((*slots)[k].name_off)
			k = (k + 1) & (c - 1);
		(*slots)[k] = *sl;
		pfilter_add(*filt, nb, sl->tag);
	}
	*cap = c;
	*nblocks = nb;
	return 0;
}

/* Section offsets and the header fields that do not depend on the body's bytes. */
static void pf_layout(const struct policy_set *s, bool highrisk, size_t cap, size_t nblocks,
                      struct pfile_header *h)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, PF_MAGIC, sizeof(PF_MAGIC));
	h->version = POLICY_FILE_VERSION;
	h->endian = PF_ENDIAN;
	h->header_len = PF_HEAD;
	h->kind = highrisk;
	h->npatterns = s->npatterns;
	h->used = s->used;
	h->cap = cap;
	h->filter_blocks = nblocks;
	h->nfiles = (uint32_t)s->nfiles;
	h->nports = (uint32_t)s->nports;
	memcpy(h->key, s->key, sizeof(h->key));
	uint64_t files_len = 0;
	for (size_t i = 0; i < s->nfiles; i++)
		files_len += strlen(s->files[i]) + 1;
	uint64_t lens[SEC_HASHES] = {cap * sizeof(struct pslot), nblocks * PFILTER_BLOCK,
	                             s->arena_len + PF_PAD, s->nports * sizeof(struct pset_ports),
	                             files_len};
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
                    const struct pslot *slots, const uint8_t *filt)
{
	static const uint8_t zero[PF_PAD];
	bool ok = w_pad_to(w, h->sec[SEC_SLOTS].off) && w_put(w, slots, h->sec[SEC_SLOTS].len) &&
	          w_pad_to(w, h->sec[SEC_FILTER].off) && w_put(w, filt, h->sec[SEC_FILTER].len) &&
	          w_pad_to(w, h->sec[SEC_ARENA].off) && w_put(w, s->arena, s->arena_len) &&
	          w_put(w, zero, PF_PAD) && w_pad_to(w, h->sec[SEC_PORTS].off) &&
	          w_put(w, s->ports, h->sec[SEC_PORTS].len) && w_pad_to(w, h->sec[SEC_FILES].off);
	for (size_t i = 0; ok && i < s->nfiles; i++)
		ok = w_put(w, s->files[i], strlen(s->files[i]) + 1);
	return ok && w->off == h->file_len;
}

static int pf_write_fd(int fd, const struct policy_set *s, bool highrisk)
{
	struct pslot *slots;
	uint8_t *filt;
	size_t cap, nblocks;
	struct pfile_header h;
	int rc = pf_tables(s, &slots, &cap, &filt, &nblocks);
	if (rc)
		return rc;
	pf_layout(s, highrisk, cap, nblocks, &h);
	size_t tlen = (size_t)(h.data_off - PF_HEAD); /* the hashes and zeros up to data_off */
	struct pf_writer w = {.f = fdopen(fd, "w"), .off = h.data_off, .data_off = h.data_off};
	w.hashes = calloc(1, tlen);
	bool ok = w.f && w.hashes && setvbuf(w.f, NULL, _IOFBF, (size_t)1 << 20) == 0 &&
	          fseek(w.f, (long)h.data_off, SEEK_SET) == 0;
	crypto_generichash_init(&w.block, NULL, 0, PF_BHASH);
	ok = ok && pf_body(&w, s, &h, slots, filt) && fflush(w.f) == 0;
	if (ok && (w.off - w.data_off) % PF_BLOCK)
		w_block_end(&w);
	free(slots);
	free(filt);
	if (ok)
		crypto_generichash(h.table_sum, sizeof(h.table_sum), w.hashes, tlen, NULL, 0);
	crypto_generichash(h.head_sum, sizeof(h.head_sum), (const uint8_t *)&h,
	                   offsetof(struct pfile_header, head_sum), NULL, 0);
	ok = ok && pwrite(fd, w.hashes, tlen, PF_HEAD) == (ssize_t)tlen &&
	     pwrite(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) && fsync(fd) == 0;
	free(w.hashes);
	/* Out of the page cache once on disk (see pf_open_fd: cached large folios are mapped
	 * whole). A hint: without it the file works the same, at a larger RSS. */
	if (ok)
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
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
	bool cap_ok = h->cap >= 1 && h->cap <= ((uint64_t)1 << 32) && !(h->cap & (h->cap - 1));
	if (h->header_len != PF_HEAD || h->kind > 1 || !cap_ok || h->used >= h->cap ||
	    h->sec[SEC_SLOTS].len != h->cap * sizeof(struct pslot) || h->filter_blocks < 1 ||
	    h->filter_blocks >= ((uint64_t)1 << 32) ||
	    h->sec[SEC_FILTER].len != h->filter_blocks * PFILTER_BLOCK ||
	    h->sec[SEC_ARENA].len < PF_PAD ||
	    h->sec[SEC_ARENA].len > UINT32_MAX + (uint64_t)PF_PAD ||
	    h->sec[SEC_PORTS].len != (uint64_t)h->nports * sizeof(struct pset_ports) ||
	    h->nfiles > RULE_FILES_MAX - 1)
		return pf_fail(err, errlen, path, "bad section table: sizes do not add up");
	return 0;
}

/* Block i against its hash; remembered when good, counted and logged (once) when not. */
static bool pf_block_check(const struct policy_set *s, uint64_t i)
{
	struct pfile_blocks *b = s->blocks;
	uint8_t sum[PF_BHASH];
	uint64_t off = i * PF_BLOCK;
	size_t n = b->data_len - off < PF_BLOCK ? (size_t)(b->data_len - off) : PF_BLOCK;
	crypto_generichash(sum, sizeof(sum), b->data0 + off, n, NULL, 0);
	if (sodium_memcmp(sum, b->hash + i * PF_BHASH, sizeof(sum)) == 0) {
		__atomic_fetch_or(&b->verified[i / 64], (uint64_t)1 << (i % 64), __ATOMIC_RELEASE);
		return true;
	}
	if (__atomic_fetch_add(&b->bad, 1, __ATOMIC_RELAXED) == 0)
		fprintf(stderr,
		        "moatd: %s: block %llu does not match its hash: the file is damaged; "
		        "lookups that need it fail closed (%s)\n",
		        b->path, (unsigned long long)i,
		        b->damaged.exact ? "listed: high-risk" : "not listed");
	return false;
}

bool pfile_use(const struct policy_set *s, const void *p, size_t n)
{
	const struct pfile_blocks *b = s->blocks;
	uint64_t off = (uint64_t)((const uint8_t *)p - b->data0);
	uint64_t last = (off + (n ? n : 1) - 1) / PF_BLOCK;
	if (last >= b->nblocks)
		last = b->nblocks - 1; /* the arena's zero tail is the file's end */
	for (uint64_t i = off / PF_BLOCK; i <= last; i++)
		if (!(__atomic_load_n(&b->verified[i / 64], __ATOMIC_ACQUIRE) &
		      ((uint64_t)1 << (i % 64))) &&
		    !pf_block_check(s, i))
			return false;
	return true;
}

struct pslot *pfile_damaged(const struct policy_set *s)
{
	return &s->blocks->damaged;
}

/* The small sections, read whatever the mode: the names of the source files, the port rules
 * (what a match hands to the firewall), the arena's zero tail. Their blocks are verified here
 * (unless QUICK): they are used through pointers into the mapping. */
static int pf_check_small(const struct policy_set *s, const struct pfile_header *h,
                          const char *path, char *err, size_t errlen)
{
	const uint8_t *m = s->map;
	if (!pfile_use(s, m + h->sec[SEC_PORTS].off, h->sec[SEC_PORTS].len) ||
	    !pfile_use(s, m + h->sec[SEC_FILES].off, h->sec[SEC_FILES].len) ||
	    !pfile_use(s, s->arena + s->arena_len, PF_PAD))
		return pf_fail(err, errlen, path,
		               "body checksum mismatch: a block of the port rules or file names "
		               "does not match its hash (the file is damaged or was changed after "
		               "it was compiled)");
	for (size_t i = 0; i < PF_PAD; i++)
		if (s->arena[s->arena_len + i])
			return pf_fail(err, errlen, path, "bad arena: its zero tail is missing");
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
	s->slots = (struct pslot *)(m + h->sec[SEC_SLOTS].off);
	s->cap = (size_t)h->cap;
	s->used = (size_t)h->used;
	s->npatterns = (size_t)h->npatterns;
	s->filter = m + h->sec[SEC_FILTER].off;
	s->filter_blocks = (size_t)h->filter_blocks;
	s->arena = m + h->sec[SEC_ARENA].off;
	s->arena_len = s->arena_cap = (size_t)(h->sec[SEC_ARENA].len - PF_PAD);
	s->ports = (struct pset_ports *)(m + h->sec[SEC_PORTS].off);
	s->nports = h->nports;
	s->nfiles = h->nfiles + 1; /* the last: what a damaged block answers with */
	s->no_ports = true;
	struct pfile_blocks *b = s->blocks;
	b->data0 = m + h->data_off;
	b->data_len = h->file_len - h->data_off;
	b->nblocks = h->nblocks;
	b->damaged = (struct pslot){.name_off = 1,
	                            .exact = highrisk ? RULE(s->nfiles, 0) : 0,
	                            .wild = highrisk ? RULE(s->nfiles, 0) : 0};
	/* FULL was hashed at open, QUICK trusts the body: all blocks count as verified. */
	if (mode != POLICY_VERIFY_LAZY)
		memset(b->verified, 0xff, (size_t)((h->nblocks + 63) / 64) * 8);
	int rc = pf_read_table(fd, h, (uint8_t *)b->hash, path, err, errlen);
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
	/* Out of the page cache what nobody maps (a hint): cached, the file sits in large
	 * folios, and this kernel maps a cached large folio whole on a fault, so one lookup
	 * would put 2 MiB in RSS. Read from disk on demand, a lookup maps the 4 KiB page it
	 * touches (MADV_RANDOM: no read-ahead). Pages other processes map stay. */
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
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
