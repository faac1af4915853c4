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

enum { SEC_SLOTS, SEC_FILTER, SEC_ARENA, SEC_PORTS, SEC_FILES, SEC_N };

struct pfile_header {
	char magic[8];                              /* "MOATPOL\0" */
	uint32_t version, endian, header_len, kind; /* kind: 0 allowlist, 1 high-risk */
	uint64_t file_len, npatterns, used, cap, filter_blocks;
	uint32_t nfiles, nports;
	uint8_t key[crypto_shorthash_KEYBYTES];
	struct {
		uint64_t off, len;
	} sec[SEC_N];
	uint8_t body_sum[32]; /* BLAKE2b-256 of bytes header_len..file_len */
	uint8_t head_sum[32]; /* BLAKE2b-256 of the bytes of this struct before head_sum */
	uint8_t reserved[24];
};
_Static_assert(sizeof(struct pfile_header) == 256, "header layout");
_Static_assert(sizeof(struct pslot) == 16, "slot layout");

bool policy_file_is_compiled(const char *path)
{
	size_t n = strlen(path), e = strlen(POLICY_FILE_EXT);
	return n > e && strcmp(path + n - e, POLICY_FILE_EXT) == 0;
}

/* ---- writing ---- */

struct pf_writer {
	FILE *f;
	uint64_t off;
	crypto_generichash_state body;
};

static bool w_put(struct pf_writer *w, const void *p, size_t n)
{
	if (!n)
		return true; /* p may be NULL (a set without port rules) */
	crypto_generichash_update(&w->body, p, n);
	w->off += n;
	return fwrite(p, 1, n, w->f) == n;
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
	uint64_t lens[SEC_N] = {cap * sizeof(struct pslot), nblocks * PFILTER_BLOCK,
	                        s->arena_len + PF_PAD, s->nports * sizeof(struct pset_ports),
	                        files_len};
	uint64_t aligns[SEC_N] = {4096, 4096, 4096, 8, 8};
	uint64_t off = PF_HEAD;
	for (int i = 0; i < SEC_N; i++) {
		off = align_up(off, aligns[i]);
		h->sec[i].off = off;
		h->sec[i].len = lens[i];
		off += lens[i];
	}
	h->file_len = off;
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
	struct pf_writer w = {.f = fdopen(fd, "w"), .off = PF_HEAD};
	bool ok = w.f && setvbuf(w.f, NULL, _IOFBF, (size_t)1 << 20) == 0 &&
	          fseek(w.f, PF_HEAD, SEEK_SET) == 0;
	crypto_generichash_init(&w.body, NULL, 0, sizeof(h.body_sum));
	ok = ok && pf_body(&w, s, &h, slots, filt) && fflush(w.f) == 0;
	free(slots);
	free(filt);
	crypto_generichash_final(&w.body, h.body_sum, sizeof(h.body_sum));
	crypto_generichash(h.head_sum, sizeof(h.head_sum), (const uint8_t *)&h,
	                   offsetof(struct pfile_header, head_sum), NULL, 0);
	ok = ok && pwrite(fd, &h, sizeof(h), 0) == (ssize_t)sizeof(h) && fsync(fd) == 0;
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

/* The header alone: what it says about itself and the file's size. */
static int pf_check_header(const struct pfile_header *h, uint64_t size, const char *path, char *err,
                           size_t errlen)
{
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
		         "(compile it again with this moatctl)",
		         path, h->version, POLICY_FILE_VERSION);
		return MOAT_EFORMAT;
	}
	crypto_generichash(sum, sizeof(sum), (const uint8_t *)h,
	                   offsetof(struct pfile_header, head_sum), NULL, 0);
	if (sodium_memcmp(sum, h->head_sum, sizeof(sum)) != 0)
		return pf_fail(err, errlen, path, "header checksum mismatch: the file is damaged");
	if (h->file_len != size) {
		snprintf(err, errlen, "%s: %s: the header says %llu bytes, the file has %llu", path,
		         size < h->file_len ? "truncated" : "trailing bytes",
		         (unsigned long long)h->file_len, (unsigned long long)size);
		return MOAT_EFORMAT;
	}
	return 0;
}

/* The section table: every section inside the file and of the size its counts imply. */
static int pf_check_sections(const struct pfile_header *h, const char *path, char *err,
                             size_t errlen)
{
	for (int i = 0; i < SEC_N; i++)
		if (h->sec[i].off < PF_HEAD || h->sec[i].off > h->file_len ||
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
	    h->nfiles > RULE_FILES_MAX)
		return pf_fail(err, errlen, path, "bad section table: sizes do not add up");
	return 0;
}

/* The small sections, read whatever the mode: the names of the source files, the port rules
 * (what a match hands to the firewall), the arena's zero tail. */
static int pf_check_small(const struct policy_set *s, const struct pfile_header *h,
                          const char *path, char *err, size_t errlen)
{
	const uint8_t *m = s->map;
	for (size_t i = 0; i < PF_PAD; i++)
		if (s->arena[s->arena_len + i])
			return pf_fail(err, errlen, path, "bad arena: its zero tail is missing");
	const char *f = (const char *)m + h->sec[SEC_FILES].off;
	const char *end = f + h->sec[SEC_FILES].len;
	for (size_t i = 0; i < s->nfiles; i++) {
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

/* The set over a mapping whose header was checked. */
static int pf_set(void *map, size_t len, const struct pfile_header *h, bool highrisk,
                  struct policy_set **out, const char *path, char *err, size_t errlen)
{
	struct policy_set *s = calloc(1, sizeof(*s));
	if (!s || !(s->files = calloc(h->nfiles ? h->nfiles : 1, sizeof(char *)))) {
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
	s->nfiles = h->nfiles;
	s->no_ports = true;
	int rc = pf_check_small(s, h, path, err, errlen);
	if (!rc && highrisk && s->nports)
		rc = pf_fail(err, errlen, path,
		             "has port rules (compiled as an allowlist): not a high-risk list");
	if (rc) {
		policy_set_free(s);
		return rc;
	}
	/* Lookups land anywhere: no read-ahead, so only the pages they touch are read. */
	madvise(m + h->sec[SEC_SLOTS].off, (size_t)(h->sec[SEC_FILES].off - h->sec[SEC_SLOTS].off),
	        MADV_RANDOM);
	*out = s;
	return 0;
}

static int pf_open_fd(int fd, const char *path, bool highrisk, enum policy_file_verify mode,
                      const uint8_t *pubkey, struct policy_set **out, char *err, size_t errlen)
{
	struct stat st;
	struct pfile_header h;
	uint8_t sum[32];
	int rc;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		return MOAT_EIO;
	}
	if ((uint64_t)st.st_size < PF_HEAD || pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
		return pf_fail(err, errlen, path,
		               "truncated or not a compiled moat policy (shorter than its header)");
	if ((rc = pf_check_header(&h, (uint64_t)st.st_size, path, err, errlen)) ||
	    (rc = pf_check_sections(&h, path, err, errlen)))
		return rc;
	if (pubkey)
		rc = policy_sig_verify_fd(fd, path, pubkey, err, errlen); /* covers every byte */
	else if (mode == POLICY_VERIFY_FULL &&
	         policy_sig_hash_fd(fd, PF_HEAD, h.file_len - PF_HEAD, NULL, sum, sizeof(sum)))
		rc = pf_fail(err, errlen, path, "read error");
	else if (mode == POLICY_VERIFY_FULL && sodium_memcmp(sum, h.body_sum, sizeof(sum)) != 0)
		rc = pf_fail(err, errlen, path,
		             "body checksum mismatch: the file is damaged or was changed after "
		             "it was compiled");
	/* Out of the page cache what nobody maps (a hint): cached, the file sits in large
	 * folios, and this kernel maps a cached large folio whole on a fault, so one lookup
	 * would put 2 MiB in RSS. Read from disk on demand, a lookup maps the 4 KiB page it
	 * touches (MADV_RANDOM: no read-ahead). Pages other processes map stay. */
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	if (rc)
		return rc;
	void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		snprintf(err, errlen, "%s: cannot map: %m", path);
		return MOAT_EIO;
	}
	return pf_set(map, (size_t)st.st_size, &h, highrisk, out, path, err, errlen);
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
	                                  .nfiles = h->nfiles};
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
	int rc = policy_file_open(
	    path, highrisk, cfg->policy_verify_quick ? POLICY_VERIFY_QUICK : POLICY_VERIFY_FULL, pk,
	    &m, err, errlen);
	if (rc == 0)
		policy_set_chain(set, m);
	return rc;
}
