/* policy.c owns the pattern set (allowlists, high-risk names, RPZ triggers): building it from
 * pattern files, lines or wire names, and matching a name against it. The snapshot that holds
 * the sets and decides with them is policy_decide.c's.
 *
 * A pattern set is an open-addressing hash table keyed by SipHash-2-4 (libsodium
 * crypto_shorthash) of the lower-cased wire name under a random per-set key, so an agent cannot
 * precompute colliding names. One slot per distinct name records whether the exact name and/or
 * everything below it ("*.name") is listed, and where each pattern came from. The ports of a rule
 * that names them live beside the slots, in a table sorted by rule: a slot stays 16 bytes, and
 * only a match in a set that has port rules looks there (a deny never does). A quick filter
 * (pset.h) answers most lookups of absent names before SipHash. */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "moat/bytes.h"
#include "moat/err.h"
#include "moat/idn.h"
#include "moat/name.h"
#include "moat/policy.h"
#include "moat/refcount.h"
#include "moat/strv.h"
#include "policy/pset.h"
#include "moat/pathfd.h"

#define SLOT_EMPTY 0
#define SLOT_NAME(s, sl) ((s)->arena + (sl)->name_off - 1)

/* An empty slot table (on huge pages when large: pset.h). */
static struct pslot *slots_alloc(size_t n)
{
	return pset_huge_calloc(n * sizeof(struct pslot));
}

/* An empty quick filter for a table of cap slots. Ownership: the caller frees (free). */
static uint64_t *quick_alloc(size_t cap)
{
	return calloc(cap / PQUICK_SLOTS, sizeof(uint64_t));
}

struct policy_set *policy_set_new(void)
{
	if (sodium_init() < 0)
		return NULL;
	struct policy_set *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	randombytes_buf(s->key, sizeof(s->key));
	randombytes_buf(&s->quick_seed, sizeof(s->quick_seed));
	s->refs = 1;
	s->depths_known = true; /* empty: no depth listed yet */
	s->cap = 64;
	s->slots = slots_alloc(s->cap);
	s->quick = quick_alloc(s->cap);
	s->quick_mask = s->cap / PQUICK_SLOTS - 1;
	if (!s->slots || !s->quick) {
		free(s->slots);
		free(s->quick);
		free(s);
		return NULL;
	}
	return s;
}

/* The last hold went. The head's count covers the chain: the sets chained to it are its own. */
static void set_destroy(struct policy_set *s)
{
	while (s) {
		struct policy_set *next = s->next;
		if (s->file) {
			s->file->release(s); /* ports and names are in the files allocation */
		} else {
			for (size_t i = 0; i < s->nfiles; i++)
				free(s->files[i]);
			free(s->ports);
			free(s->arena);
			free(s->slots);
			free(s->quick);
		}
		free(s->files);
		free(s);
		s = next;
	}
}

REF_PAIR(policy_set_ref, policy_set_free, struct policy_set, set_destroy)

size_t policy_set_count(const struct policy_set *s)
{
	size_t n = 0;
	for (; s; s = s->next)
		n += s->npatterns;
	return n;
}

void policy_set_chain(struct policy_set *s, struct policy_set *more)
{
	while (s->next)
		s = s->next;
	s->next = more;
}

static uint32_t set_tag(const struct policy_set *s, const uint8_t *name, size_t len)
{
	uint64_t h;
	crypto_shorthash((unsigned char *)&h, name, len, s->key);
	return (uint32_t)(h ^ (h >> 32));
}

/* Byte equality of two lower-cased wire names. Stops at the first difference: wire names are
 * self-delimiting, so it never reads past the end of the stored one. */
static bool wire_same(const uint8_t *a, const uint8_t *b, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (a[i] != b[i])
			return false;
	return true;
}

/* The slot holding name, or the empty slot where it would go (a set built in memory: its table
 * is never full). A compiled set is searched by its file's find. */
static struct pslot *set_find(const struct policy_set *s, const uint8_t *name, size_t len,
                              uint32_t tag)
{
	size_t mask = s->cap - 1;
	for (size_t i = tag & mask;; i = (i + 1) & mask) {
		struct pslot *sl = &s->slots[i];
		if (sl->name_off == SLOT_EMPTY ||
		    (sl->tag == tag && wire_same(SLOT_NAME(s, sl), name, len)))
			return sl;
	}
}

/* Rehash into a table of ncap slots (a power of two), with a quick filter its size. */
static int set_resize(struct policy_set *s, size_t ncap)
{
	struct pslot *old = s->slots;
	uint64_t *quick = quick_alloc(ncap);
	size_t ocap = s->cap;
	s->slots = quick ? slots_alloc(ncap) : NULL;
	if (!s->slots) {
		s->slots = old;
		free(quick);
		return MOAT_ENOMEM;
	}
	free(s->quick);
	s->quick = quick;
	s->quick_mask = ncap / PQUICK_SLOTS - 1;
	s->cap = ncap;
	size_t mask = ncap - 1;
	for (size_t i = 0; i < ocap; i++) {
		if (old[i].name_off == SLOT_EMPTY)
			continue;
		size_t k = old[i].tag & mask; /* names are distinct: the first empty slot is it */
		while (s->slots[k].name_off != SLOT_EMPTY)
			k = (k + 1) & mask;
		s->slots[k] = old[i];
		const uint8_t *name = SLOT_NAME(s, &old[i]);
		pquick_add(quick, s->quick_mask, s->quick_seed, name,
		           (size_t)name_wire_len(name, NAME_MAXWIRE));
	}
	free(old);
	return 0;
}

static int set_grow(struct policy_set *s)
{
	return set_resize(s, s->cap * 2);
}

/* The rule-file number of file (1-based: 0 in a rule means none), added if new. */
static int set_file_index(struct policy_set *s, const char *file, uint16_t *idx)
{
	size_t i;
	int rc = strv_intern(&s->files, &s->nfiles, RULE_FILES_MAX, file, &i);
	if (!rc)
		*idx = (uint16_t)(i + 1);
	return rc;
}

/* A '*' anywhere but as the whole first label of a pattern is a typo for a wildcard, not a
 * literal label. */
static bool star_inside(const uint8_t *wire)
{
	for (const uint8_t *p = wire; *p; p = name_parent(p))
		if (memchr(p + 1, '*', *p))
			return true;
	return false;
}

/* Check a pattern and turn it into a lower-cased wire name. Returns the wire length or
 * MOAT_EINVAL. */
static int pattern_parse(const char *pattern, size_t len, uint8_t *wire, bool *wild)
{
	*wild = false;
	if (len >= 1 && pattern[0] == '*') {
		if (len < 3 || pattern[1] != '.')
			return MOAT_EINVAL;
		pattern += 2;
		len -= 2;
		*wild = true;
		/* "*." would allow every name: that is no allowlist. */
		if (len == 1 && pattern[0] == '.')
			return MOAT_EINVAL;
	}
	int wl = name_from_text(pattern, len, wire);
	if (wl < 0)
		return wl;
	return star_inside(wire) ? MOAT_EINVAL : wl;
}

void policy_set_forbid_ports(struct policy_set *s)
{
	s->no_ports = true;
}

/* Index of rule in the port table, or of where it would go. */
static size_t ports_pos(const struct policy_set *s, uint32_t rule)
{
	size_t lo = 0, hi = s->nports;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (s->ports[mid].rule < rule)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static struct policy_ports *ports_find(const struct policy_set *s, uint32_t rule)
{
	size_t i = ports_pos(s, rule);
	return i < s->nports && s->ports[i].rule == rule ? &s->ports[i].ports : NULL;
}

/* Record the ports of a new rule (rules mostly arrive in file and line order: an append). */
static int ports_add(struct policy_set *s, uint32_t rule, const struct policy_ports *pp)
{
	if (grow_one(&s->ports, &s->ports_cap, s->nports, sizeof(*s->ports), 16))
		return MOAT_ENOMEM;
	size_t i = ports_pos(s, rule);
	memmove(&s->ports[i + 1], &s->ports[i], (s->nports - i) * sizeof(s->ports[0]));
	s->ports[i] = (struct pset_ports){.rule = rule, .ports = *pp};
	s->nports++;
	return 0;
}

/* A pattern listed again: its rule opens the union of both lines' ports (any port if either
 * line names none). */
static int ports_merge(struct policy_set *s, uint32_t rule, const struct policy_ports *pp)
{
	size_t i = ports_pos(s, rule);
	if (i >= s->nports || s->ports[i].rule != rule)
		return 0; /* already any port */
	if (pp)
		return policy_ports_union(&s->ports[i].ports, pp);
	memmove(&s->ports[i], &s->ports[i + 1], (s->nports - i - 1) * sizeof(s->ports[0]));
	s->nports--;
	return 0;
}

/* Room for bytes more in the name arena: exactly that much when a load has counted what it adds,
 * otherwise (one name at a time) by doubling, so adding names one by one stays linear. */
static int arena_room(struct policy_set *s, size_t bytes, bool exact)
{
	size_t need = s->arena_len + bytes;
	if (exact && need > s->arena_cap) {
		uint8_t *na = realloc(s->arena, need);
		if (!na)
			return MOAT_ENOMEM;
		s->arena = na;
		s->arena_cap = need;
		pset_huge_hint(na, need); /* compiling reads the names at random */
	}
	while (need > s->arena_cap)
		if (grow_one(&s->arena, &s->arena_cap, s->arena_cap, 1, 4096))
			return MOAT_ENOMEM;
	return 0;
}

/* Bit of a name of d labels in a set's depth masks. */
static inline uint64_t depth_bit(unsigned d)
{
	return 1ull << (d < 63 ? d : 63);
}

static unsigned name_depth(const uint8_t *n)
{
	unsigned d = 0;
	for (; *n; n += *n + 1)
		d++;
	return d;
}

static int set_insert(struct policy_set *s, const uint8_t *wire, size_t wl, uint32_t tag, bool wild,
                      uint16_t fidx, uint32_t line, const struct policy_ports *pp)
{
	int rc;
	*(wild ? &s->wild_depths : &s->exact_depths) |= depth_bit(name_depth(wire));
	if ((s->used + 1) * 4 > s->cap * 3 && (rc = set_grow(s)))
		return rc;
	struct pslot *sl = set_find(s, wire, wl, tag);
	if (sl->name_off == SLOT_EMPTY) {
		if ((rc = arena_room(s, wl, false)))
			return rc;
		if (s->arena_len + wl >= UINT32_MAX)
			return MOAT_ELIMIT;
		memcpy(s->arena + s->arena_len, wire, wl);
		*sl = (struct pslot){.name_off = (uint32_t)s->arena_len + 1, .tag = tag};
		s->arena_len += wl;
		s->used++;
		pquick_add(s->quick, s->quick_mask, s->quick_seed, wire, wl);
	}
	if (wild ? sl->wild : sl->exact) {
		/* listed twice: the first place explains it; the ports of both lines are merged */
		uint32_t first = wild ? sl->wild : sl->exact;
		if (s->dup) {
			char msg[600];
			snprintf(msg, sizeof(msg),
			         pp ? "duplicate of %s:%u: its ports are added to that line's"
			            : "duplicate of %s:%u: the line adds nothing",
			         s->files[RULE_FILE(first) - 1], RULE_LINE(first));
			s->dup(s->dup_ctx, s->files[fidx - 1], line, msg);
		}
		return ports_merge(s, first, pp);
	}
	uint32_t rule = RULE(fidx, line ? line : 1);
	if (pp && (rc = ports_add(s, rule, pp)))
		return rc;
	if (wild)
		sl->wild = rule;
	else
		sl->exact = rule;
	s->npatterns++;
	return 0;
}

/* A pattern as the user wrote it (UTF-8, A-labels) made ready for pattern_parse: *p and *len
 * then point at buf[IDN_MAXTEXT] when it had to be converted. */
static int user_pattern(const char **p, size_t *len, char *buf, char *why, size_t whylen)
{
	int n = idn_from_user(*p, *len, buf, IDN_MAXTEXT, why, whylen);
	if (n > 0) {
		*p = buf;
		*len = (size_t)n;
	}
	return n < 0 ? n : 0;
}

int policy_set_add(struct policy_set *s, const char *pattern, size_t len, const char *file,
                   uint32_t line)
{
	uint8_t wire[NAME_MAXWIRE];
	char conv[IDN_MAXTEXT], why[160];
	bool wild;
	if (s->head || user_pattern(&pattern, &len, conv, why, sizeof(why)) < 0)
		return MOAT_EINVAL; /* a compiled set is read-only */
	int wl = pattern_parse(pattern, len, wire, &wild);
	if (wl < 0)
		return wl;
	return policy_set_add_wire(s, wire, wild, file, line);
}

int policy_set_add_wire(struct policy_set *s, const uint8_t *lname, bool wild, const char *file,
                        uint32_t line)
{
	int wl = name_wire_len(lname, NAME_MAXWIRE);
	if (s->head || wl < 0 || (wild && wl == 1))
		return MOAT_EINVAL; /* read-only (compiled), or "*." would match every name */
	if (star_inside(lname))
		return MOAT_EINVAL;
	uint16_t fidx = 0;
	int rc = set_file_index(s, file ? file : "-", &fidx);
	if (rc)
		return rc;
	return set_insert(s, lname, (size_t)wl, set_tag(s, lname, (size_t)wl), wild, fidx, line,
	                  NULL);
}

/* The slot stays (its name still leads probes to the names placed after it); only the rule
 * goes, so a lookup that lands there finds nothing listed. */
int policy_set_remove_wire(struct policy_set *s, const uint8_t *lname, bool wild)
{
	int wl = name_wire_len(lname, NAME_MAXWIRE);
	if (s->head || wl < 0)
		return MOAT_EINVAL; /* a compiled set is read-only */
	struct pslot *sl = set_find(s, lname, (size_t)wl, set_tag(s, lname, (size_t)wl));
	uint32_t *r = wild ? &sl->wild : &sl->exact;
	if (sl->name_off == SLOT_EMPTY || !*r)
		return MOAT_ENOENT;
	ports_merge(s, *r, NULL); /* drops its port entry, if any */
	*r = 0;
	s->npatterns--;
	return 0;
}

bool policy_set_has_wire(const struct policy_set *s, const uint8_t *lname, bool wild)
{
	int wl = name_wire_len(lname, NAME_MAXWIRE);
	if (wl < 0)
		return false;
	struct pslot buf;
	uint32_t tag = set_tag(s, lname, (size_t)wl);
	const struct pslot *sl = s->file ? s->file->find(s, lname, (size_t)wl, tag, &buf)
	                                 : set_find(s, lname, (size_t)wl, tag);
	return sl && sl->name_off != SLOT_EMPTY && (wild ? sl->wild : sl->exact);
}

struct policy_set *policy_set_clone(const struct policy_set *o)
{
	if (o->head || o->next)
		return NULL; /* one in-memory segment only (RPZ sets are never compiled or chained)
		              */
	struct policy_set *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	*s = *o;
	s->refs = 1;
	s->dup = NULL;
	s->arena = NULL;
	s->files = NULL;
	s->ports = NULL;
	s->quick = NULL;
	s->nfiles = s->nports = s->ports_cap = 0;
	if (!(s->slots = slots_alloc(o->cap)) || !(s->quick = quick_alloc(o->cap)) ||
	    (o->arena_cap && !(s->arena = malloc(o->arena_cap))) ||
	    (o->nports && !(s->ports = malloc(o->nports * sizeof(*s->ports)))) ||
	    (o->nfiles && !(s->files = calloc(o->nfiles, sizeof(*s->files))))) {
		policy_set_free(s);
		return NULL;
	}
	memcpy(s->slots, o->slots, o->cap * sizeof(*s->slots));
	memcpy(s->quick, o->quick, o->cap / PQUICK_SLOTS * sizeof(*s->quick));
	if (o->arena_len)
		memcpy(s->arena, o->arena, o->arena_len);
	if (o->nports)
		memcpy(s->ports, o->ports, o->nports * sizeof(*s->ports));
	s->nports = s->ports_cap = o->nports;
	for (; s->nfiles < o->nfiles; s->nfiles++)
		if (!(s->files[s->nfiles] = strdup(o->files[s->nfiles]))) {
			policy_set_free(s);
			return NULL;
		}
	return s;
}

/* Make room for n more names and bytes more arena at once: loading a large file then touches
 * each page of the table and the arena once instead of at every doubling. */
static int set_reserve(struct policy_set *s, size_t n, size_t bytes)
{
	size_t ncap = s->cap;
	while ((s->used + n) * 4 > ncap * 3)
		ncap *= 2;
	if (ncap != s->cap) {
		int rc = set_resize(s, ncap);
		if (rc)
			return rc;
	}
	return arena_room(s, bytes, true);
}

/* Names parsed from a file wait here in small batches: each one's home slot is prefetched when
 * it is parsed and written when the batch is full, so the cache misses of a batch overlap
 * instead of being paid one after another (they dominate loading a large list). */
#define LOAD_BATCH 16
struct load_name {
	uint8_t wire[NAME_MAXWIRE];
	uint8_t wl;
	bool wild;
	bool has_ports;
	uint32_t tag, line;
	struct policy_ports ports;
};

struct load_batch {
	unsigned n;
	uint16_t fidx;
	struct load_name e[LOAD_BATCH];
};

static int batch_flush(struct policy_set *s, struct load_batch *b)
{
	int rc = 0;
	for (unsigned i = 0; i < b->n && !rc; i++)
		rc = set_insert(s, b->e[i].wire, b->e[i].wl, b->e[i].tag, b->e[i].wild, b->fidx,
		                b->e[i].line, b->e[i].has_ports ? &b->e[i].ports : NULL);
	b->n = 0;
	return rc;
}

/* The ports after a line's pattern (none: any port) into q. */
static int load_ports(const struct policy_set *s, struct load_name *q, const char *text, size_t n,
                      const char *path, uint32_t lineno, char *err, size_t errlen)
{
	char why[128];
	q->has_ports = n > 0;
	if (!n)
		return 0;
	if (s->no_ports) {
		snprintf(err, errlen, "%s:%u: ports have no meaning here, found '%.*s'", path,
		         lineno, (int)n, text);
		return MOAT_EINVAL;
	}
	if (lineno > RULE_LINE_MAX) {
		snprintf(err, errlen, "%s:%u: ports only on the first %u lines", path, lineno,
		         RULE_LINE_MAX);
		return MOAT_ELIMIT;
	}
	int rc = policy_ports_parse(text, n, &q->ports, why, sizeof(why));
	if (rc)
		snprintf(err, errlen, "%s:%u: %s", path, lineno, why);
	return rc;
}

/* "example.com:443", what a URL or a client's config would say: the hint is the rule's own
 * form, "example.com tcp/443" (idn.c's message, for names anywhere, only names the host). */
static bool glued_port(const struct policy_set *s, const char *p, size_t n, const char *path,
                       uint32_t lineno, char *err, size_t errlen)
{
	const char *colon = memchr(p, ':', n);
	size_t host = colon ? (size_t)(colon - p) : 0, digits = colon ? n - host - 1 : 0;
	if (!colon || s->no_ports || !host || !digits || digits > 5 ||
	    strspn(colon + 1, "0123456789") < digits || colon[1] == '0' || atoi(colon + 1) > 65535)
		return false;
	char quoted[80];
	idn_quote(p, n, quoted, sizeof(quoted));
	snprintf(err, errlen,
	         "%s:%u: bad pattern '%s': a port glued to the name; ports follow it after a "
	         "blank: %.*s tcp/%.*s",
	         path, lineno, quoted, (int)host, p, (int)digits, colon + 1);
	return true;
}

/* One line of a pattern file: strip the comment and blanks, queue what is left. */
static int load_line(struct policy_set *s, struct load_batch *bt, const char *line, size_t n,
                     const char *path, uint32_t lineno, char *err, size_t errlen)
{
	size_t b = 0, e = n;
	for (size_t i = 0; i < e; i++)
		if (line[i] == '#' && (i == 0 || line[i - 1] != '\\')) {
			e = i;
			break;
		}
	while (b < e && (line[b] == ' ' || line[b] == '\t'))
		b++;
	while (e > b && (line[e - 1] == ' ' || line[e - 1] == '\t' || line[e - 1] == '\r'))
		e--;
	if (b == e)
		return 0;
	size_t pe = b; /* the pattern ends at the first blank; ports may follow */
	while (pe < e && line[pe] != ' ' && line[pe] != '\t')
		pe++;
	struct load_name *q = &bt->e[bt->n];
	int rc = load_ports(s, q, line + pe, e - pe, path, lineno, err, errlen);
	if (rc)
		return rc;
	char conv[IDN_MAXTEXT], why[160], quoted[80];
	const char *pat = line + b;
	size_t plen = pe - b;
	if (glued_port(s, pat, plen, path, lineno, err, errlen))
		return MOAT_EINVAL;
	if (user_pattern(&pat, &plen, conv, why, sizeof(why)) < 0) {
		idn_quote(line + b, pe - b, quoted, sizeof(quoted));
		snprintf(err, errlen, "%s:%u: bad pattern '%s': %s", path, lineno, quoted, why);
		return MOAT_EINVAL;
	}
	int wl = pattern_parse(pat, plen, q->wire, &q->wild);
	if (wl < 0) {
		idn_quote(line + b, pe - b, quoted, sizeof(quoted));
		snprintf(err, errlen,
		         "%s:%u: bad pattern '%s' (expected name or *.name: labels of 1-63 "
		         "bytes, 255 in all, '*' only as the whole first label)",
		         path, lineno, quoted);
		return wl;
	}
	q->wl = (uint8_t)wl;
	q->line = lineno;
	q->tag = set_tag(s, q->wire, (size_t)wl);
	__builtin_prefetch(&s->slots[q->tag & (s->cap - 1)], 1);
	if (++bt->n < LOAD_BATCH)
		return 0;
	rc = batch_flush(s, bt);
	if (rc)
		snprintf(err, errlen, "%s:%u: %s", path, lineno, moat_strerror(rc));
	return rc;
}

/* A line's error: handed to the set's collector (and the load goes on), or it stops the load. */
static int line_error(struct policy_set *s, int rc, const char *err)
{
	if (!rc || !s->bad || rc == MOAT_ENOMEM)
		return rc;
	s->bad(s->bad_ctx, err);
	return 0;
}

int policy_set_load_file(struct policy_set *s, const char *path, char *err, size_t errlen)
{
	if (s->head) {
		snprintf(err, errlen, "%s: a compiled set is read-only", path);
		return MOAT_EINVAL;
	}
	FILE *f = pathfd_fopen(path); /* also after the privilege drop */
	struct stat st;
	if (!f || fstat(fileno(f), &st) < 0) {
		snprintf(err, errlen, "%s: cannot open: %m", path);
		if (f)
			fclose(f);
		return MOAT_EIO;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		fclose(f);
		return MOAT_EIO;
	}
	/* First pass: count lines. Each holds at most one name, and a wire name is one byte
	 * longer than its text at most, which bounds what the file can add. */
	static _Thread_local char block[1 << 16];
	size_t lines = 1, got;
	while ((got = fread(block, 1, sizeof(block), f)) > 0)
		for (const char *p = block; (p = memchr(p, '\n', got - (size_t)(p - block))); p++)
			lines++;
	int rc = set_reserve(s, lines, (size_t)st.st_size + lines);
	if (rc) {
		snprintf(err, errlen, "%s: %s", path, moat_strerror(rc));
		fclose(f);
		return rc;
	}
	static _Thread_local struct load_batch bt;
	bt.n = 0;
	if ((rc = set_file_index(s, path, &bt.fidx))) {
		snprintf(err, errlen, "%s: %s", path, moat_strerror(rc));
		fclose(f);
		return rc;
	}
	rewind(f);
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	uint32_t lineno = 0;
	while (!rc && (n = getline(&line, &cap, f)) >= 0) {
		if (n > 0 && line[n - 1] == '\n')
			n--;
		/* A byte-order mark (editors on some systems write one) is not part of the name. */
		size_t bom = lineno == 0 && n >= 3 && !memcmp(line, "\xef\xbb\xbf", 3) ? 3 : 0;
		rc = load_line(s, &bt, line + bom, (size_t)n - bom, path, ++lineno, err, errlen);
		rc = line_error(s, rc, err);
	}
	if (!rc && (rc = batch_flush(s, &bt)))
		snprintf(err, errlen, "%s:%u: %s", path, lineno, moat_strerror(rc));
	if (!rc && ferror(f)) {
		snprintf(err, errlen, "%s: read error", path);
		rc = MOAT_EIO;
	}
	free(line);
	fclose(f);
	return rc;
}

int policy_set_load_lines(struct policy_set *s, const char *const *lines, size_t n,
                          const char *label, char *err, size_t errlen)
{
	size_t bytes = n;
	for (size_t i = 0; i < n; i++)
		bytes += strlen(lines[i]);
	static _Thread_local struct load_batch bt;
	bt.n = 0;
	int rc = set_reserve(s, n, bytes);
	if (!rc)
		rc = set_file_index(s, label, &bt.fidx);
	if (rc) {
		snprintf(err, errlen, "%s: %s", label, moat_strerror(rc));
		return rc;
	}
	for (size_t i = 0; i < n && !rc; i++)
		rc = line_error(s,
		                load_line(s, &bt, lines[i], strlen(lines[i]), label,
		                          (uint32_t)i + 1, err, errlen),
		                err);
	if (!rc && (rc = batch_flush(s, &bt)))
		snprintf(err, errlen, "%s: %s", label, moat_strerror(rc));
	return rc;
}

void policy_set_on_duplicate(struct policy_set *s, policy_set_dup_fn fn, void *ctx)
{
	s->dup = fn;
	s->dup_ctx = ctx;
}

void policy_set_on_error(struct policy_set *s, policy_set_err_fn fn, void *ctx)
{
	s->bad = fn;
	s->bad_ctx = ctx;
}

/* The explanation of a rule of s. A file index past the set's files (only a damaged compiled file
 * has one) reads "?". */
static struct policy_rule rule_of(const struct policy_set *s, uint32_t r, bool wild,
                                  const uint8_t *at)
{
	uint32_t f = RULE_FILE(r);
	return (struct policy_rule){f && f <= s->nfiles ? s->files[f - 1] : "?", RULE_LINE(r), wild,
	                            s->nports ? ports_find(s, r) : NULL, at};
}

struct each_ctx {
	const struct policy_set *s;
	policy_set_each_cb cb;
	void *ctx;
};

static void each_one(void *arg, const uint8_t *name, uint32_t exact, uint32_t wild)
{
	const struct each_ctx *e = arg;
	if (!exact && !wild)
		return; /* all its rules removed (RPZ) */
	struct policy_rule ex = {0}, wi = {0};
	if (exact)
		ex = rule_of(e->s, exact, false, name);
	if (wild)
		wi = rule_of(e->s, wild, true, name);
	e->cb(e->ctx, name, exact ? &ex : NULL, wild ? &wi : NULL);
}

void policy_set_each(const struct policy_set *s, policy_set_each_cb cb, void *ctx)
{
	for (; s; s = s->next) {
		struct each_ctx e = {s, cb, ctx};
		if (s->file) { /* compiled: read and verified block by block */
			s->file->each(s, each_one, &e);
			continue;
		}
		for (size_t i = 0; i < s->cap; i++)
			if (s->slots[i].name_off != SLOT_EMPTY)
				each_one(&e, SLOT_NAME(s, &s->slots[i]), s->slots[i].exact,
				         s->slots[i].wild);
	}
}

/* The tag policy_set_prefetch computed last on this thread, with what it is a function of
 * (the set's key and the name, compared: never the set's address, which a freed set's successor
 * may reuse). */
static _Thread_local struct {
	size_t len; /* 0: none */
	uint32_t tag;
	uint8_t key[crypto_shorthash_KEYBYTES];
	uint8_t name[NAME_MAXWIRE];
} tag_memo;

bool policy_name_of(const uint8_t *lname, struct policy_name *n)
{
	/* One walk for both (each set asked would walk the name twice). */
	unsigned d = 0;
	size_t o = 0;
	for (;;) {
		if (o >= NAME_MAXWIRE || lname[o] > 63)
			return false;
		if (!lname[o])
			break;
		o += 1u + lname[o];
		d++;
	}
	*n = (struct policy_name){lname, o + 1, d};
	return true;
}

void policy_set_prefetch(const struct policy_set *s, const uint8_t *lname)
{
	struct policy_name n;
	if (policy_name_of(lname, &n))
		policy_set_prefetch_name(s, &n);
}

void policy_set_prefetch_name(const struct policy_set *s, const struct policy_name *n)
{
	if (!s || !s->used || s->file || !s->depths_known ||
	    !(s->exact_depths & depth_bit(n->depth)))
		return; /* compiled, or no exact name this long: nothing to look up there */
	const uint8_t *lname = n->lname;
	size_t len = n->len;
	if (s->quick) /* only loaded here, not read: a deny waited for it */
		__builtin_prefetch(
		    &s->quick[pquick_hash(lname, len, s->quick_seed) & s->quick_mask]);
	uint32_t tag = set_tag(s, lname, len);
	__builtin_prefetch(&s->slots[tag & (s->cap - 1)]);
	tag_memo.len = len;
	tag_memo.tag = tag;
	memcpy(tag_memo.key, s->key, sizeof(tag_memo.key));
	memcpy(tag_memo.name, lname, len);
}

/* The slot of name (len bytes in wire form) in s, or NULL. buf: where a compiled set's slot is
 * read into. The caller passes len: a match walks the name once, not once a lookup. */
static const struct pslot *set_lookup(const struct policy_set *s, const uint8_t *name, size_t len,
                                      struct pslot *buf)
{
	if (!s->used)
		return NULL; /* an empty set (an agent whose lists are all compiled): no hashing */
	if (!pquick_maybe(s, name, len))
		return NULL; /* never added: no SipHash, no slot */
	uint32_t tag = tag_memo.len == len && !memcmp(tag_memo.name, name, len) &&
	                       !memcmp(tag_memo.key, s->key, sizeof(s->key))
	                   ? tag_memo.tag
	                   : set_tag(s, name, len);
	/* A compiled set asks its filter itself (it checks the filter's block first). */
	if (s->filter && !s->file && !pfilter_maybe(s->filter, s->filter_blocks, tag))
		return NULL;
	const struct pslot *sl =
	    s->file ? s->file->find(s, name, len, tag, buf) : set_find(s, name, len, tag);
	return !sl || sl->name_off == SLOT_EMPTY ? NULL : sl;
}

/* depth: lname's label count; len: its wire length. */
static bool match_below_one(const struct policy_set *s, const uint8_t *lname, unsigned depth,
                            size_t len, struct policy_rule *rule)
{
	const struct pslot *sl;
	struct pslot buf;
	for (const uint8_t *p = lname; *p;) {
		len -= 1u + *p;
		p = name_parent(p);
		if (s->depths_known && !(s->wild_depths & depth_bit(--depth)))
			continue; /* no "*." pattern of this length: nothing to hash */
		sl = set_lookup(s, p, len, &buf);
		if (sl && sl->wild) {
			if (rule)
				*rule = rule_of(s, sl->wild, true, p);
			return true;
		}
	}
	if (rule)
		*rule = (struct policy_rule){0};
	return false;
}

bool policy_set_match(const struct policy_set *s, const uint8_t *lname, struct policy_rule *rule)
{
	struct policy_name n;
	if (policy_name_of(lname, &n))
		return policy_set_match_name(s, &n, rule);
	if (rule) /* an unreadable name matches nothing */
		*rule = (struct policy_rule){0};
	return false;
}

bool policy_set_match_name(const struct policy_set *s, const struct policy_name *n,
                           struct policy_rule *rule)
{
	for (; s; s = s->next) {
		struct pslot buf;
		const struct pslot *sl = !s->depths_known || (s->exact_depths & depth_bit(n->depth))
		                             ? set_lookup(s, n->lname, n->len, &buf)
		                             : NULL;
		if (sl && sl->exact) {
			if (rule)
				*rule = rule_of(s, sl->exact, false, n->lname);
			return true;
		}
		if (match_below_one(s, n->lname, n->depth, n->len, rule))
			return true;
	}
	return false;
}

bool policy_set_match_below(const struct policy_set *s, const uint8_t *lname,
                            struct policy_rule *rule)
{
	struct policy_name n;
	if (!policy_name_of(lname, &n)) {
		if (rule)
			*rule = (struct policy_rule){0};
		return false;
	}
	for (; s; s = s->next)
		if (match_below_one(s, lname, n.depth, n.len, rule))
			return true;
	return false;
}
