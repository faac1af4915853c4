/* policy.c owns name matching and decisions: the pattern set (allowlists, high-risk names), the
 * choice of agent by client address, and the verdict for a question or a chain name.
 *
 * A pattern set is an open-addressing hash table keyed by SipHash-2-4 (libsodium
 * crypto_shorthash) of the lower-cased wire name under a random per-set key, so an agent cannot
 * precompute colliding names. One slot per distinct name records whether the exact name and/or
 * everything below it ("*.name") is listed, and where each pattern came from. */
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/addrguard.h"
#include "moat/err.h"
#include "moat/iplit.h"
#include "moat/name.h"
#include "moat/policy.h"

struct pslot {
	uint32_t name_off; /* into arena; UINT32_MAX = empty slot */
	uint32_t exact_line;
	uint32_t wild_line;
	uint16_t exact_file;
	uint16_t wild_file;
};

struct policy_set {
	uint8_t key[crypto_shorthash_KEYBYTES];
	uint8_t *arena; /* owned: the wire names, back to back */
	size_t arena_len, arena_cap;
	struct pslot *slots; /* owned; cap is a power of two */
	size_t cap, used, npatterns;
	char **files; /* owned: file names, index = pslot.*_file - 1 */
	size_t nfiles;
};

#define SLOT_EMPTY UINT32_MAX

struct policy_set *policy_set_new(void)
{
	if (sodium_init() < 0)
		return NULL;
	struct policy_set *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	randombytes_buf(s->key, sizeof(s->key));
	s->cap = 64;
	s->slots = malloc(s->cap * sizeof(*s->slots));
	if (!s->slots) {
		free(s);
		return NULL;
	}
	for (size_t i = 0; i < s->cap; i++)
		s->slots[i].name_off = SLOT_EMPTY;
	return s;
}

void policy_set_free(struct policy_set *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->nfiles; i++)
		free(s->files[i]);
	free(s->files);
	free(s->arena);
	free(s->slots);
	free(s);
}

size_t policy_set_count(const struct policy_set *s)
{
	return s->npatterns;
}

static uint64_t set_hash(const struct policy_set *s, const uint8_t *name, size_t len)
{
	uint64_t h;
	crypto_shorthash((unsigned char *)&h, name, len, s->key);
	return h;
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

/* The slot holding name, or the empty slot where it would go. */
static struct pslot *set_find(const struct policy_set *s, const uint8_t *name, size_t len)
{
	size_t mask = s->cap - 1;
	size_t i = (size_t)set_hash(s, name, len) & mask;
	for (;;) {
		struct pslot *sl = &s->slots[i];
		if (sl->name_off == SLOT_EMPTY)
			return sl;
		if (wire_same(s->arena + sl->name_off, name, len))
			return sl;
		i = (i + 1) & mask;
	}
}

static int set_grow(struct policy_set *s)
{
	size_t ncap = s->cap * 2;
	struct pslot *old = s->slots;
	size_t ocap = s->cap;
	s->slots = malloc(ncap * sizeof(*s->slots));
	if (!s->slots) {
		s->slots = old;
		return MOAT_ENOMEM;
	}
	s->cap = ncap;
	for (size_t i = 0; i < ncap; i++)
		s->slots[i].name_off = SLOT_EMPTY;
	for (size_t i = 0; i < ocap; i++) {
		if (old[i].name_off == SLOT_EMPTY)
			continue;
		const uint8_t *n = s->arena + old[i].name_off;
		*set_find(s, n, (size_t)name_wire_len(n, NAME_MAXWIRE)) = old[i];
	}
	free(old);
	return 0;
}

static int set_file_index(struct policy_set *s, const char *file, uint16_t *idx)
{
	if (s->nfiles && strcmp(s->files[s->nfiles - 1], file) == 0) {
		*idx = (uint16_t)s->nfiles;
		return 0;
	}
	for (size_t i = 0; i < s->nfiles; i++)
		if (strcmp(s->files[i], file) == 0) {
			*idx = (uint16_t)(i + 1);
			return 0;
		}
	if (s->nfiles >= UINT16_MAX - 1)
		return MOAT_ELIMIT;
	char **nf = realloc(s->files, (s->nfiles + 1) * sizeof(*nf));
	if (!nf)
		return MOAT_ENOMEM;
	s->files = nf;
	if (!(s->files[s->nfiles] = strdup(file)))
		return MOAT_ENOMEM;
	*idx = (uint16_t)++s->nfiles;
	return 0;
}

int policy_set_add(struct policy_set *s, const char *pattern, size_t len, const char *file,
		   uint32_t line)
{
	uint8_t wire[NAME_MAXWIRE];
	bool wild = false;

	if (len >= 1 && pattern[0] == '*') {
		if (len < 3 || pattern[1] != '.')
			return MOAT_EINVAL;
		pattern += 2;
		len -= 2;
		wild = true;
		/* "*." would allow every name: that is no allowlist. */
		if (len == 1 && pattern[0] == '.')
			return MOAT_EINVAL;
	}
	int wl = name_from_text(pattern, len, wire);
	if (wl < 0)
		return wl;
	/* A '*' anywhere else is a typo for a wildcard, not a literal label. */
	for (const uint8_t *p = wire; *p; p = name_parent(p))
		if (memchr(p + 1, '*', *p))
			return MOAT_EINVAL;

	uint16_t fidx = 0;
	int rc = set_file_index(s, file ? file : "-", &fidx);
	if (rc)
		return rc;
	if ((s->used + 1) * 4 > s->cap * 3 && (rc = set_grow(s)))
		return rc;
	struct pslot *sl = set_find(s, wire, (size_t)wl);
	if (sl->name_off == SLOT_EMPTY) {
		if (s->arena_len + (size_t)wl > s->arena_cap) {
			size_t ncap = s->arena_cap ? s->arena_cap * 2 : 4096;
			uint8_t *na = realloc(s->arena, ncap);
			if (!na)
				return MOAT_ENOMEM;
			s->arena = na;
			s->arena_cap = ncap;
		}
		if (s->arena_len + (size_t)wl >= SLOT_EMPTY)
			return MOAT_ELIMIT;
		memcpy(s->arena + s->arena_len, wire, (size_t)wl);
		*sl = (struct pslot){.name_off = (uint32_t)s->arena_len};
		s->arena_len += (size_t)wl;
		s->used++;
	}
	if (wild ? sl->wild_line : sl->exact_line)
		return 0; /* listed twice: the first place explains it */
	if (wild) {
		sl->wild_line = line ? line : 1;
		sl->wild_file = fidx;
	} else {
		sl->exact_line = line ? line : 1;
		sl->exact_file = fidx;
	}
	s->npatterns++;
	return 0;
}

int policy_set_load_file(struct policy_set *s, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %m", path);
		return MOAT_EIO;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	uint32_t lineno = 0;
	int rc = 0;
	while ((n = getline(&line, &cap, f)) >= 0) {
		lineno++;
		size_t b = 0, e = (size_t)n;
		for (size_t i = 0; i < e; i++)
			if (line[i] == '#' && (i == 0 || line[i - 1] != '\\')) {
				e = i;
				break;
			}
		while (b < e && (line[b] == ' ' || line[b] == '\t'))
			b++;
		while (e > b && (line[e - 1] == ' ' || line[e - 1] == '\t' || line[e - 1] == '\n' ||
				 line[e - 1] == '\r'))
			e--;
		if (b == e)
			continue;
		for (size_t i = b; i < e; i++)
			if (line[i] == ' ' || line[i] == '\t') {
				snprintf(err, errlen, "%s:%u: one pattern per line, found '%.*s'", path,
					 lineno, (int)(e - b), line + b);
				rc = MOAT_EINVAL;
				goto out;
			}
		rc = policy_set_add(s, line + b, e - b, path, lineno);
		if (rc == MOAT_EINVAL) {
			snprintf(err, errlen,
				 "%s:%u: bad pattern '%.*s' (expected name or *.name: labels of 1-63 "
				 "bytes, 255 in all, '*' only as the whole first label)",
				 path, lineno, (int)(e - b), line + b);
			goto out;
		} else if (rc) {
			snprintf(err, errlen, "%s:%u: %s", path, lineno, moat_strerror(rc));
			goto out;
		}
	}
	if (ferror(f)) {
		snprintf(err, errlen, "%s: read error", path);
		rc = MOAT_EIO;
	}
out:
	free(line);
	fclose(f);
	return rc;
}

static const struct pslot *set_lookup(const struct policy_set *s, const uint8_t *name)
{
	const struct pslot *sl = set_find(s, name, (size_t)name_wire_len(name, NAME_MAXWIRE));
	return sl->name_off == SLOT_EMPTY ? NULL : sl;
}

bool policy_set_match(const struct policy_set *s, const uint8_t *lname, struct policy_rule *rule)
{
	const struct pslot *sl = set_lookup(s, lname);
	if (sl && sl->exact_line) {
		if (rule)
			*rule = (struct policy_rule){s->files[sl->exact_file - 1], sl->exact_line, false};
		return true;
	}
	for (const uint8_t *p = lname; *p;) {
		p = name_parent(p);
		sl = set_lookup(s, p);
		if (sl && sl->wild_line) {
			if (rule)
				*rule = (struct policy_rule){s->files[sl->wild_file - 1], sl->wild_line,
							     true};
			return true;
		}
	}
	if (rule)
		*rule = (struct policy_rule){0};
	return false;
}

struct policy *policy_ref(struct policy *p)
{
	p->refs++;
	return p;
}

void policy_unref(struct policy *p)
{
	if (!p || --p->refs > 0)
		return;
	for (size_t i = 0; i < p->nagents; i++) {
		free(p->agents[i].clients);
		policy_set_free(p->agents[i].allow);
	}
	free(p->agents);
	policy_set_free(p->highrisk);
	addrguard_free(p->guard);
	free(p);
}

const struct policy_agent *policy_agent_for(const struct policy *p, const struct sockaddr *client)
{
	const struct policy_agent *best = NULL;
	int best_bits = -1;
	for (size_t i = 0; i < p->nagents; i++)
		for (size_t k = 0; k < p->agents[i].nclients; k++) {
			const struct cidr *c = &p->agents[i].clients[k];
			if (c->bits > best_bits && config_cidr_contains(c, client)) {
				best = &p->agents[i];
				best_bits = c->bits;
			}
		}
	return best;
}

static bool class_blocks(enum addr_class cls, const struct policy_agent *agent)
{
	return cls == ADDR_ALWAYS || (cls == ADDR_PRIVATE && !agent->cfg.allow_private);
}

/* The checks that apply to every name moat would send upstream, in order of severity. */
static enum policy_verdict check_name(const struct policy *p, const struct policy_agent *agent,
				      const uint8_t *lname, struct policy_decision *out)
{
	uint8_t addr[16];
	size_t alen;
	char txt[64];

	if (iplit_is_literal(lname, addr, &alen)) {
		out->verdict = POLICY_DENY_IPLITERAL;
		out->alert = class_blocks(addrguard_check(p->guard, addr, alen), agent);
		snprintf(out->reason, sizeof(out->reason), "moat: query name is the IP literal %s",
			 addrguard_format(addr, alen, txt, sizeof(txt)));
		return out->verdict;
	}
	if (p->highrisk && policy_set_match(p->highrisk, lname, &out->rule)) {
		out->verdict = POLICY_DENY_HIGHRISK;
		out->alert = true;
		snprintf(out->reason, sizeof(out->reason), "moat: high-risk name (%s:%u)",
			 out->rule.file, out->rule.line);
		return out->verdict;
	}
	if (iplit_embedded_v4(lname, addr) && class_blocks(addrguard_check(p->guard, addr, 4), agent)) {
		out->verdict = POLICY_DENY_EMBEDDED;
		out->alert = true;
		snprintf(out->reason, sizeof(out->reason), "moat: name embeds the address %s",
			 addrguard_format(addr, 4, txt, sizeof(txt)));
		return out->verdict;
	}
	return POLICY_ALLOW;
}

void policy_decide(const struct policy *p, const struct policy_agent *agent, const uint8_t *lname,
		   uint16_t qclass, struct policy_decision *out)
{
	memset(out, 0, sizeof(*out));
	if (qclass != 1 /* IN */) {
		out->verdict = POLICY_DENY_CLASS;
		snprintf(out->reason, sizeof(out->reason), "moat: class %u is not served", qclass);
		return;
	}
	if (check_name(p, agent, lname, out) != POLICY_ALLOW)
		return;
	if (policy_set_match(agent->allow, lname, &out->rule)) {
		out->verdict = POLICY_ALLOW;
		snprintf(out->reason, sizeof(out->reason), "allowed by %s:%u", out->rule.file,
			 out->rule.line);
		return;
	}
	out->verdict = POLICY_DENY_NOT_ALLOWED;
	snprintf(out->reason, sizeof(out->reason), "moat: not on allowlist of agent %s",
		 agent->cfg.name);
}

enum policy_verdict policy_check_chain(const struct policy *p, const struct policy_agent *agent,
				       const uint8_t *lname, struct policy_decision *out)
{
	memset(out, 0, sizeof(*out));
	if (check_name(p, agent, lname, out) != POLICY_ALLOW)
		return out->verdict;
	bool listed = policy_set_match(agent->allow, lname, &out->rule);
	if (agent->cfg.strict_chain && !listed) {
		char txt[NAME_MAXTEXT];
		name_to_text(lname, txt, sizeof(txt));
		out->verdict = POLICY_DENY_NOT_ALLOWED;
		snprintf(out->reason, sizeof(out->reason),
			 "moat: chain name %.80s not on allowlist of agent %s (strict-chain)", txt,
			 agent->cfg.name);
		return out->verdict;
	}
	out->verdict = POLICY_ALLOW;
	return POLICY_ALLOW;
}

const char *policy_verdict_str(enum policy_verdict v)
{
	switch (v) {
	case POLICY_ALLOW:
		return "allow";
	case POLICY_DENY_NOT_ALLOWED:
		return "deny-not-allowed";
	case POLICY_DENY_HIGHRISK:
		return "deny-high-risk";
	case POLICY_DENY_IPLITERAL:
		return "deny-ip-literal";
	case POLICY_DENY_EMBEDDED:
		return "deny-embedded-address";
	case POLICY_DENY_CLASS:
		return "deny-class";
	}
	return "unknown";
}
