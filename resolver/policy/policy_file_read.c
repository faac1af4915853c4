/* policy_file_read.c owns reading a compiled policy file back (format in moat/policy_file.h,
 * layout in policy/pfile.h) as a read-only set that policy.c searches like any other: the checks
 * at open, the lookups in the file, and noticing that the file changed under moatd.
 *
 * What moatd checked is what it uses. The small sections a lookup uses in place (the filter,
 * the port rules, the file names) are read at open with pread, hashed (unless QUICK) and kept
 * in private memory; the slots and records are read with pread when a lookup needs them, each
 * block hashed before its first use. Nothing is mapped, so a truncated file cannot raise SIGBUS.
 * A block read again later is not hashed again: a lookup that read the file checks afterwards
 * that the descriptor's size and modification time are those of open (a write in place or a
 * truncation changes them before the new bytes can be read; a rename over the path does not
 * touch the open file). A change taints the set: logged once, counted, and every lookup that
 * needs the file fails closed (allowlist: not listed; high-risk: listed) until a reload opens
 * a verified replacement. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h> /* struct iovec */
#include <unistd.h>

#include "moat/err.h"
#include "moat/name.h"
#include "moat/pathfd.h"
#include "moat/policy_file.h"
#include "moat/policy_sig.h"
#include "policy/pfile.h"
#include "policy/pset.h"

/* What a compiled set knows of its file; lives after the set's files array (one allocation).
 * Offsets are from data_off. */
struct pfile_blocks {
	int fd; /* owned: slots and records are read through it (pread) */
	uint64_t data_off, data_len, nblocks;
	uint64_t cap, slots_off, recs_off, recs_len;
	uint64_t *verified; /* bitmap, atomic: shared by the workers (a race hashes twice) */
	const uint8_t *hash;
	uint8_t *filter; /* owned (pset_huge_alloc): the private copy s->filter is */
	uint64_t filter_off, filter_len; /* its section (LAZY: its inner blocks hashed on use) */
	off_t size;                      /* the file as opened: a change of either taints the set */
	struct timespec mtime;
	unsigned bad;     /* atomic: damaged blocks met */
	int tainted;      /* atomic: the file changed since it was opened */
	const char *path; /* for the log line */
	struct pslot damaged;
	struct pfile_header head; /* as checked at open (s->head: policy_file_info) */
};
_Static_assert(sizeof(struct pslot) == 16, "slot layout");

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
	    d == pf_align_up(PF_HEAD + h->sec[SEC_HASHES].len, PF_BLOCK) && d <= h->file_len &&
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

/* Block i against its hash, read through the descriptor (a mapping would put every block a
 * lookup verifies in RSS), or from mem when its bytes are a private copy (the filter's); remembered
 * when good, counted and logged (once) when not. A read error counts as damage: the lookup fails
 * closed. */
static bool pf_block_check(const struct policy_set *s, uint64_t i, const uint8_t *mem)
{
	struct pfile_blocks *b = s->blocks;
	uint8_t sum[PF_BHASH], buf[PF_BLOCK];
	uint64_t off = i * PF_BLOCK;
	size_t n = b->data_len - off < PF_BLOCK ? (size_t)(b->data_len - off) : PF_BLOCK;
	if (mem || pread(b->fd, buf, n, (off_t)(b->data_off + off)) == (ssize_t)n) {
		crypto_generichash(sum, sizeof(sum), mem ? mem : buf, n, NULL, 0);
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

static bool pf_is_verified(const struct pfile_blocks *b, uint64_t i)
{
	return __atomic_load_n(&b->verified[i / 64], __ATOMIC_ACQUIRE) & ((uint64_t)1 << (i % 64));
}

/* Every block under [off, off+n) of the data verified (hashing those used the first time). */
static bool pf_verified(const struct policy_set *s, uint64_t off, size_t n)
{
	const struct pfile_blocks *b = s->blocks;
	uint64_t last = (off + (n ? n : 1) - 1) / PF_BLOCK;
	if (last >= b->nblocks)
		last = b->nblocks - 1;
	for (uint64_t i = off / PF_BLOCK; i <= last; i++)
		if (!pf_is_verified(b, i) && !pf_block_check(s, i, NULL))
			return false;
	return true;
}

/* Sets whose file changed under them, in the whole process. */
static uint64_t tainted_total;

uint64_t policy_file_tainted_total(void)
{
	return __atomic_load_n(&tainted_total, __ATOMIC_RELAXED);
}

/* Whether the file is as it was opened: size and modification time of the descriptor. Called
 * after the reads of a lookup: the kernel updates both before a write's bytes can be read (and
 * before a truncation drops pages), so a read that saw new bytes is followed by a check that
 * sees the change. The first change taints the set for good (logged once, counted). */
static bool pf_unchanged(const struct policy_set *s)
{
	struct pfile_blocks *b = s->blocks;
	struct stat st;
	if (__atomic_load_n(&b->tainted, __ATOMIC_ACQUIRE))
		return false;
	if (fstat(b->fd, &st) == 0 && st.st_size == b->size &&
	    st.st_mtim.tv_sec == b->mtime.tv_sec && st.st_mtim.tv_nsec == b->mtime.tv_nsec)
		return true;
	if (__atomic_exchange_n(&b->tainted, 1, __ATOMIC_ACQ_REL) == 0) {
		__atomic_fetch_add(&tainted_total, 1, __ATOMIC_RELAXED);
		fprintf(stderr,
		        "moatd: %s: the file changed after moatd opened it (written in place or "
		        "truncated): lookups that need it fail closed (%s) until a reload opens a "
		        "verified replacement; replace compiled files by rename (moatctl compile "
		        "does)\n",
		        b->path, b->damaged.exact ? "listed: high-risk" : "not listed");
	}
	return false;
}

/* n bytes of the data at off into buf, verified. False: outside the data, a damaged block or
 * a read error. The caller checks pf_unchanged after its reads. */
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

/* The probe itself: out, NULL (not in the file) or damaged's slot. */
static const struct pslot *pf_probe(const struct policy_set *s, const uint8_t *name, size_t len,
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

/* Only the filter's maybe comes here (policy.c): a deny the filter answers never reads the
 * file. Whatever the probe read, it counts only if the file is still the one opened. */
static const struct pslot *pfile_find(const struct policy_set *s, const uint8_t *name, size_t len,
                                      uint32_t tag, struct pslot *out)
{
	struct pfile_blocks *b = s->blocks;
	/* The filter's block, hashed from the private copy on its first use (LAZY: open hashed only
	 * the blocks the filter shares with its neighbours, 14 MB of a 10M-name start's 17). The
	 * copy is moatd's own: what it rules out still answers after the file changed. */
	uint64_t at =
	    b->filter_off + (uint64_t)pfilter_block(tag, s->filter_blocks) * PFILTER_BLOCK;
	uint64_t i = at / PF_BLOCK, bs = i * PF_BLOCK;
	bool inner = bs >= b->filter_off && bs + PF_BLOCK <= b->filter_off + b->filter_len;
	if (!pf_is_verified(b, i) &&
	    (!inner || !pf_block_check(s, i, b->filter + (bs - b->filter_off))))
		return &b->damaged; /* not inner: checked at open, so never here */
	if (!pfilter_maybe(s->filter, s->filter_blocks, tag))
		return NULL;
	if (__atomic_load_n(&b->tainted, __ATOMIC_ACQUIRE))
		return &b->damaged;
	const struct pslot *r = pf_probe(s, name, len, tag, out);
	return pf_unchanged(s) ? r : &s->blocks->damaged;
}

static void pfile_each(const struct policy_set *s, pfile_each_fn fn, void *arg)
{
	const struct pfile_blocks *b = s->blocks;
	enum { CHUNK = 512 };
	uint8_t buf[CHUNK * PF_SLOT], rb[8 + NAME_MAXWIRE];
	for (uint64_t i = 0; i < b->cap && pf_unchanged(s); i += CHUNK) {
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
			    name_wire_len(rb + nr, n - nr) < 0 || !pf_unchanged(s))
				continue; /* damaged, or changed since */
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
	if (!s->blocks)
		return;
	free(s->blocks->filter);
	if (s->blocks->fd >= 0)
		close(s->blocks->fd);
}

/* How policy.c reads a compiled set (policy/pset.h). */
static const struct pset_file pfile_reads = {
    .find = pfile_find,
    .each = pfile_each,
    .release = pfile_release,
};

/* The BLAKE2b sum of data block [bs, be) of a chunk pf_copy read (the chunk at boff): its bytes
 * of [lo, hi) in dst (dst holds the data from off on), those before lo in edge[0] (from boff),
 * those after hi in edge[1] (from hi). */
struct pf_chunk {
	uint64_t boff, off, lo, hi;
	const uint8_t *dst, *edge[2];
};
static void pf_block_sum(const struct pf_chunk *c, uint64_t bs, uint64_t be, uint8_t sum[PF_BHASH])
{
	crypto_generichash_state st;
	crypto_generichash_init(&st, NULL, 0, PF_BHASH);
	uint64_t a = bs > c->lo ? bs : c->lo, z = be < c->hi ? be : c->hi;
	if (bs < c->lo)
		crypto_generichash_update(&st, c->edge[0] + (bs - c->boff),
		                          (be < c->lo ? be : c->lo) - bs);
	if (a < z)
		crypto_generichash_update(&st, c->dst + (a - c->off), z - a);
	if (be > c->hi) {
		uint64_t t = bs > c->hi ? bs : c->hi;
		crypto_generichash_update(&st, c->edge[1] + (t - c->hi), be - t);
	}
	crypto_generichash_final(&st, sum, PF_BHASH);
}

/* What pf_copy hashes: nothing (QUICK), every block, or only the blocks the section shares with
 * bytes outside it (the others are checked from dst when first used: the filter's, LAZY). */
enum pf_check { PF_CHECK_NONE, PF_CHECK_ALL, PF_CHECK_EDGES };

/* Bytes [off, off+len) of the data (off from data_off) into dst (NULL: only checked), read with
 * pread whole blocks at a time, straight into dst: only the bytes of the first and last block
 * outside the section go elsewhere (a 14 MB filter was read into a buffer and copied, 14% of a
 * 10M-name start). With check, each block is hashed against the table where it was read (and
 * marked verified); a mismatch fails the whole copy, so what is kept is what was checked. */
static int pf_copy(const struct policy_set *s, uint64_t off, uint64_t len, uint8_t *dst,
                   enum pf_check check, char *err, size_t errlen)
{
	enum { CHUNK = 256 };
	struct pfile_blocks *b = s->blocks;
	uint8_t sum[PF_BHASH], edge[2][PF_BLOCK], *buf = NULL;
	if (!len)
		return 0;
	if (!dst && !(buf = malloc((size_t)CHUNK * PF_BLOCK)))
		return MOAT_ENOMEM;
	/* The blocks that hold the section, no more (a chunk past its end was read and hashed). */
	uint64_t end = pf_align_up(off + len, PF_BLOCK);
	if (end > b->data_len)
		end = b->data_len;
	int rc = 0;
	size_t want;
	for (uint64_t boff = off / PF_BLOCK * PF_BLOCK; !rc && boff < end; boff += want) {
		want = end - boff < (uint64_t)CHUNK * PF_BLOCK ? (size_t)(end - boff)
		                                               : (size_t)CHUNK * PF_BLOCK;
		/* Without dst, the chunk goes whole into buf: buf is dst from boff on (off is 0 and
		 * len the data's then: no edges). */
		struct pf_chunk c = {.boff = boff, .off = dst ? off : boff, .dst = dst ? dst : buf};
		c.lo = boff > off ? boff : off;
		c.hi = boff + want < off + len ? boff + want : off + len;
		c.edge[0] = edge[0];
		c.edge[1] = edge[1];
		struct iovec iov[3];
		int n = 0;
		if (c.lo > boff)
			iov[n++] = (struct iovec){edge[0], (size_t)(c.lo - boff)};
		iov[n++] = (struct iovec){(uint8_t *)c.dst + (c.lo - c.off), (size_t)(c.hi - c.lo)};
		if (boff + want > c.hi)
			iov[n++] = (struct iovec){edge[1], (size_t)(boff + want - c.hi)};
		/* One pread a piece: moatd's seccomp filter allows pread64, not preadv (a reload
		 * reads here after the filter is on). */
		off_t at = (off_t)(b->data_off + boff);
		for (int k = 0; k < n && !rc; at += (off_t)iov[k].iov_len, k++)
			if (pread(b->fd, iov[k].iov_base, iov[k].iov_len, at) !=
			    (ssize_t)iov[k].iov_len)
				rc = pf_fail(err, errlen, b->path, "read error (truncated?)");
		if (rc)
			break;
		for (uint64_t bs = boff; check && !rc && bs < boff + want; bs += PF_BLOCK) {
			uint64_t i = bs / PF_BLOCK,
			         be = bs + PF_BLOCK < boff + want ? bs + PF_BLOCK : boff + want;
			if (check == PF_CHECK_EDGES && bs >= off && be <= off + len)
				continue; /* wholly the section's: hashed from dst on first use */
			pf_block_sum(&c, bs, be, sum);
			if (sodium_memcmp(sum, b->hash + i * PF_BHASH, sizeof(sum)) != 0) {
				snprintf(
				    err, errlen,
				    "%s: body checksum mismatch: block %llu does not match its "
				    "hash (the file is damaged or was changed after it was "
				    "compiled)",
				    b->path, (unsigned long long)i);
				rc = MOAT_EFORMAT;
			} else {
				__atomic_fetch_or(&b->verified[i / 64], (uint64_t)1 << (i % 64),
				                  __ATOMIC_RELEASE);
			}
		}
	}
	free(buf);
	return rc;
}

/* The sections used in place, into private memory (checked unless QUICK): the filter, the port
 * rules and the names of the source files (what a match explains itself with). */
static int pf_copy_small(struct policy_set *s, const struct pfile_header *h,
                         enum policy_file_verify mode, uint8_t *files, const char *path, char *err,
                         size_t errlen)
{
	struct pfile_blocks *b = s->blocks;
	const uint64_t d = h->data_off;
	/* Not zeroed: pf_copy writes all of it, or the set is freed. */
	if (!(b->filter = pset_huge_alloc((size_t)h->sec[SEC_FILTER].len))) {
		snprintf(err, errlen, "%s: out of memory", path);
		return MOAT_ENOMEM;
	}
	s->filter = b->filter;
	b->filter_off = h->sec[SEC_FILTER].off - d;
	b->filter_len = h->sec[SEC_FILTER].len;
	enum pf_check check = mode == POLICY_VERIFY_QUICK ? PF_CHECK_NONE : PF_CHECK_ALL;
	int rc = pf_copy(s, b->filter_off, b->filter_len, b->filter,
	                 mode == POLICY_VERIFY_LAZY ? PF_CHECK_EDGES : check, err, errlen);
	if (!rc)
		rc = pf_copy(s, h->sec[SEC_PORTS].off - d, h->sec[SEC_PORTS].len,
		             (uint8_t *)s->ports, check, err, errlen);
	if (!rc)
		rc = pf_copy(s, h->sec[SEC_FILES].off - d, h->sec[SEC_FILES].len, files, check, err,
		             errlen);
	if (rc)
		return rc;
	const char *f = (const char *)files, *end = f + h->sec[SEC_FILES].len;
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
 * port rules, the block table, the file names and the path. *files: where the names go. */
static int pf_blocks_alloc(struct policy_set *s, const struct pfile_header *h, const char *path,
                           uint8_t **files)
{
	size_t nf = h->nfiles + 1, words = (size_t)((h->nblocks + 63) / 64);
	size_t tlen = (size_t)(h->data_off - PF_HEAD), plen = strlen(path) + 1;
	size_t plen8 = (size_t)pf_align_up(h->sec[SEC_PORTS].len, 8);
	size_t size = nf * sizeof(char *) + sizeof(struct pfile_blocks) + words * 8 + plen8 + tlen +
	              (size_t)h->sec[SEC_FILES].len + 2 * plen + sizeof(" (damaged block)");
	uint8_t *m = calloc(1, size);
	if (!m)
		return MOAT_ENOMEM;
	s->files = (char **)m;
	struct pfile_blocks *b = (struct pfile_blocks *)(m + nf * sizeof(char *));
	b->fd = -1;
	b->verified = (uint64_t *)(b + 1);
	s->ports = (struct pset_ports *)(b->verified + words);
	b->hash = (const uint8_t *)s->ports + plen8;
	*files = (uint8_t *)b->hash + tlen;
	char *p = (char *)*files + h->sec[SEC_FILES].len;
	memcpy(p, path, plen);
	b->path = p;
	s->files[h->nfiles] = p + plen;
	snprintf(p + plen, plen + sizeof(" (damaged block)"), "%s (damaged block)", path);
	b->head = *h;
	s->head = &b->head;
	s->blocks = b;
	s->file = &pfile_reads;
	return 0;
}

/* The block table into the set's allocation, against the header's sum. */
static int pf_read_table(int fd, const struct pfile_header *h, uint8_t *table, const char *path,
                         char *err, size_t errlen)
{
	size_t tlen = (size_t)(h->data_off - PF_HEAD);
	uint8_t sum[32];
	pset_populate(table, tlen);
	if (pread(fd, table, tlen, PF_HEAD) != (ssize_t)tlen)
		return pf_fail(err, errlen, path, "truncated: the block table is short");
	crypto_generichash(sum, sizeof(sum), table, tlen, NULL, 0);
	if (sodium_memcmp(sum, h->table_sum, sizeof(sum)) != 0)
		return pf_fail(err, errlen, path,
		               "block table checksum mismatch: the file is damaged");
	return 0;
}

/* The fields of s and its blocks that come from the checked header and the file's status. */
static void pf_fill(struct policy_set *s, int fd, const struct stat *st,
                    const struct pfile_header *h, bool highrisk)
{
	struct pfile_blocks *b = s->blocks;
	s->refs = 1;
	memcpy(s->key, h->key, sizeof(s->key));
	s->cap = (size_t)h->cap; /* slots and records: read with pread (struct pset_file's find) */
	s->used = (size_t)h->used;
	s->npatterns = (size_t)h->npatterns;
	s->filter_blocks = (size_t)h->filter_blocks;
	s->arena_len = (size_t)h->sec[SEC_ARENA].len;
	s->nports = h->nports;
	s->nfiles = h->nfiles + 1; /* the last: what a damaged block answers with */
	s->no_ports = true;
	b->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	b->size = st->st_size;
	b->mtime = st->st_mtim;
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
}

/* The set of a file whose header page and section table were checked (st: its status then). */
static int pf_set(int fd, const struct stat *st, const struct pfile_header *h, bool highrisk,
                  enum policy_file_verify mode, struct policy_set **out, const char *path,
                  char *err, size_t errlen)
{
	uint8_t *files = NULL;
	struct policy_set *s = calloc(1, sizeof(*s));
	if (!s || pf_blocks_alloc(s, h, path, &files)) {
		free(s);
		snprintf(err, errlen, "%s: out of memory", path);
		return MOAT_ENOMEM;
	}
	pf_fill(s, fd, st, h, highrisk);
	struct pfile_blocks *b = s->blocks;
	/* FULL is hashed here whole, QUICK trusts the body: all blocks count as verified. */
	if (mode != POLICY_VERIFY_LAZY)
		memset(b->verified, 0xff, (size_t)((h->nblocks + 63) / 64) * 8);
	int rc = b->fd < 0 ? pf_fail(err, errlen, path, "cannot keep the file open")
	                   : pf_read_table(fd, h, (uint8_t *)b->hash, path, err, errlen);
	if (!rc && mode == POLICY_VERIFY_FULL)
		rc = pf_copy(s, 0, b->data_len, NULL, PF_CHECK_ALL, err, errlen);
	if (!rc)
		rc = pf_copy_small(s, h, mode, files, path, err, errlen);
	if (!rc && highrisk && s->nports)
		rc = pf_fail(err, errlen, path,
		             "has port rules (compiled as an allowlist): not a high-risk list");
	if (!rc && !pf_unchanged(s))
		rc = pf_fail(err, errlen, path, "the file changed while it was read");
	if (rc) {
		policy_set_free(s);
		return rc;
	}
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
	return pf_set(fd, &st, h, highrisk, mode, out, path, err, errlen);
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
	fclose(f); /* the set keeps a descriptor of its own */
	return rc;
}

int policy_file_info(const struct policy_set *s, struct policy_file_info *info)
{
	if (!s->head)
		return MOAT_EINVAL;
	const struct pfile_header *h = s->head;
	*info = (struct policy_file_info){
	    .version = h->version,
	    .highrisk = h->kind == 1,
	    .file_len = h->file_len,
	    .names = h->used,
	    .patterns = h->npatterns,
	    .slots = h->cap,
	    .arena_len = s->arena_len,
	    .nports = h->nports,
	    .nfiles = h->nfiles,
	    .blocks = h->nblocks,
	    .bad_blocks = __atomic_load_n(&s->blocks->bad, __ATOMIC_RELAXED),
	    .tainted = __atomic_load_n(&s->blocks->tainted, __ATOMIC_RELAXED) != 0};
	return 0;
}
