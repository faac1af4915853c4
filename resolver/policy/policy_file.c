/* policy_file.c owns writing the compiled policy file (format in moat/policy_file.h, layout in
 * policy/pfile.h) from a pattern set, and the loader hook that picks text or compiled by the
 * file's extension. Reading it back is policy_file_read.c's. */
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moat/err.h"
#include "moat/name.h"
#include "moat/policy_file.h"
#include "policy/pfile.h"
#include "policy/pset.h"

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
		off = pf_align_up(off, aligns[i]);
		h->sec[i].off = off;
		h->sec[i].len = lens[i];
		off += lens[i];
	}
	h->nblocks = (off + PF_BLOCK - 1) / PF_BLOCK;
	h->sec[SEC_HASHES].off = PF_HEAD;
	h->sec[SEC_HASHES].len = h->nblocks * PF_BHASH;
	h->data_off = pf_align_up(PF_HEAD + h->sec[SEC_HASHES].len, PF_BLOCK);
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
	if (s->head || s->next) {
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
