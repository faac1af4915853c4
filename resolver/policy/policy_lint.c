/* policy_lint.c owns the allowlist lint (rules in moat/policy_lint.h): it walks an agent's
 * loaded patterns, asks libpsl whether a wildcard's base is a public suffix, and checks each
 * line against the high-risk list and the agent's own wildcards. Warnings are kept with their
 * file and line and handed out sorted, whatever order the pattern table holds them in. */
#include "moat/policy_lint.h"

#include <libpsl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "moat/bytes.h"
#include "moat/iplit.h"
#include "moat/name.h"
#include "moat/policy.h"
#include "moat/strv.h"

#ifndef MOAT_PSL_FILE
#define MOAT_PSL_FILE "/usr/share/publicsuffix/public_suffix_list.dat"
#endif

/* A list of a million lines with a mistake on each would otherwise keep a million messages. */
#define LINT_KEEP 10000

struct lint_msg {
	size_t file; /* index into policy_lint.files */
	uint32_t line;
	size_t seq; /* order of arrival, so warnings of one line keep theirs */
	char *text; /* owned: the whole "file:line: warning: ..." */
};

struct policy_lint {
	struct lint_msg *msgs;
	size_t n, cap, dropped;
	char **files; /* owned: in the order they were loaded (policy_lint_file) or met */
	size_t nfiles;
	bool sorted;
	psl_ctx_t *psl; /* loaded at the first wildcard; NULL if no list could be read */
	bool psl_tried;
	/* Every name with a public suffix strictly below it ("amazonaws.com" for
	 * "s3.amazonaws.com"), from the same list: a wildcard there covers other owners' names. */
	struct policy_set *psl_parents;
};

struct policy_lint *policy_lint_new(void)
{
	return calloc(1, sizeof(struct policy_lint));
}

void policy_lint_free(struct policy_lint *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++)
		free(l->msgs[i].text);
	free(l->msgs);
	strv_free(&l->files, &l->nfiles);
	if (l->psl && l->psl != psl_builtin())
		psl_free(l->psl);
	policy_set_free(l->psl_parents);
	free(l);
}

/* The index of file in l->files, added if new; SIZE_MAX when out of memory. */
static size_t file_index(struct policy_lint *l, const char *file)
{
	size_t i;
	return strv_intern(&l->files, &l->nfiles, SIZE_MAX, file, &i) ? SIZE_MAX : i;
}

void policy_lint_file(struct policy_lint *l, const char *file)
{
	if (l)
		file_index(l, file);
}

void policy_lint_add(struct policy_lint *l, const char *file, uint32_t line, const char *fmt, ...)
{
	char body[512], whole[800];
	va_list ap;
	if (!l)
		return;
	if (l->n >= LINT_KEEP) {
		l->dropped++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	snprintf(whole, sizeof(whole), "%s:%u: warning: %s", file, line, body);
	if (grow_one(&l->msgs, &l->cap, l->n, sizeof(*l->msgs), 16))
		return;
	struct lint_msg *m = &l->msgs[l->n];
	if ((m->file = file_index(l, file)) == SIZE_MAX || !(m->text = strdup(whole)))
		return;
	m->line = line;
	m->seq = l->n;
	l->n++;
	l->sorted = false;
}

static void lint_duplicate(void *ctx, const char *file, uint32_t line, const char *what)
{
	policy_lint_add(ctx, file, line, "%s", what);
}

void policy_set_lint_to(struct policy_set *set, struct policy_lint *l)
{
	policy_set_on_duplicate(set, l ? lint_duplicate : NULL, l);
}

static int msg_cmp(const void *a, const void *b)
{
	const struct lint_msg *x = a, *y = b;
	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

size_t policy_lint_count(const struct policy_lint *l)
{
	return l ? l->n + l->dropped : 0;
}

const char *policy_lint_get(struct policy_lint *l, size_t i)
{
	if (!l || i >= l->n)
		return NULL;
	if (!l->sorted) {
		qsort(l->msgs, l->n, sizeof(*l->msgs), msg_cmp);
		l->sorted = true;
	}
	return l->msgs[i].text;
}

void policy_lint_print(struct policy_lint *l, FILE *f, const char *prefix)
{
	for (size_t i = 0; l && i < l->n; i++)
		fprintf(f, "%s%s\n", prefix, policy_lint_get(l, i));
	if (l && l->dropped)
		fprintf(f, "%s... and %zu more warnings\n", prefix, l->dropped);
}

/* The presentation text of a wire name without its trailing dot ("" for the root). */
static void name_text(const uint8_t *wire, char *out, size_t cap)
{
	int n = name_to_text(wire, out, cap);
	if (n > 0 && out[n - 1] == '.')
		out[n - 1] = 0;
}

/* The proper ancestors of every rule of the list (ASCII rules; the others are top-level IDNs,
 * whose parents are the root). libpsl answers "is this a suffix" but cannot list what lies
 * below a name, hence this small set. */
static struct policy_set *load_parents(const char *path)
{
	struct policy_set *set = policy_set_new();
	FILE *f = set ? fopen(path, "re") : NULL;
	char line[512];
	if (!f)
		return set;
	while (fgets(line, sizeof(line), f)) {
		char *r = line;
		r[strcspn(r, " \t\r\n")] = 0;
		if (!*r || (r[0] == '/' && r[1] == '/'))
			continue;
		r += r[0] == '!' ? 1 : r[0] == '*' && r[1] == '.' ? 2 : 0;
		bool ascii = true;
		for (char *c = r; *c; c++)
			ascii &= (unsigned char)*c < 0x80;
		for (char *dot = ascii ? strchr(r, '.') : NULL; dot; dot = strchr(dot + 1, '.'))
			policy_set_add(set, dot + 1, strlen(dot + 1), path, 1);
	}
	fclose(f);
	return set;
}

static bool is_public_suffix(struct policy_lint *l, const char *text)
{
	if (!l->psl_tried) {
		l->psl_tried = true;
		l->psl_parents = load_parents(MOAT_PSL_FILE);
		/* The file has the private section (github.io, herokuapp.com); libpsl's built-in
		 * data is the fallback. */
		l->psl = psl_load_file(MOAT_PSL_FILE);
		if (!l->psl)
			l->psl = (psl_ctx_t *)psl_builtin();
	}
	/* Without the implicit "*" rule: an unlisted top label (".internal", ".test") is no public
	 * suffix anyone can register under. */
	return l->psl && psl_is_public_suffix2(l->psl, text, PSL_TYPE_ANY | PSL_TYPE_NO_STAR_RULE);
}

struct lint_walk {
	struct policy_lint *l;
	const struct policy_set *allow, *highrisk;
};

/* "*" + name as a wire name: matches only through a wildcard on name or above it. */
static bool star_child(const uint8_t *lname, uint8_t *out)
{
	int nl = name_wire_len(lname, NAME_MAXWIRE);
	if (nl < 0 || nl + 2 > NAME_MAXWIRE)
		return false;
	out[0] = 1;
	out[1] = '*';
	memcpy(out + 2, lname, (size_t)nl);
	return true;
}

/* A cheap first look: an IP literal's first label holds only digits, hex digits, 'x', ':' and
 * brackets, which rules out nearly every name of an allowlist. */
static bool maybe_literal(const uint8_t *lname)
{
	for (unsigned i = 1; i <= lname[0]; i++)
		if (!strchr("0123456789abcdefx:[]", lname[i]))
			return false;
	return true;
}

/* The text of a name for a message, made once and only when something is said about it. */
struct lazy_text {
	const uint8_t *lname;
	char txt[NAME_MAXTEXT];
	bool done;
};

static const char *text_of(struct lazy_text *t)
{
	if (!t->done) {
		name_text(t->lname, t->txt, sizeof(t->txt));
		t->done = true;
	}
	return t->txt;
}

static void lint_one(struct lint_walk *w, const uint8_t *lname, const struct policy_rule *r)
{
	struct policy_lint *l = w->l;
	struct lazy_text t; /* txt left unset: this runs once per pattern of large lists */
	t.lname = lname;
	t.done = false;
	uint8_t addr[16], probe[NAME_MAXWIRE];
	size_t alen;
	struct policy_rule o;
	const char *star = r->wildcard ? "*." : "";

	if (!r->wildcard && !*lname)
		policy_lint_add(l, r->file, r->line,
		                "'.' is the root: it allows the root zone's own records only, "
		                "no name below it");
	if (maybe_literal(lname) && iplit_is_literal(lname, addr, &alen))
		policy_lint_add(l, r->file, r->line,
		                "'%s%s' is an IP literal: such queries are always denied, and an "
		                "address needs no DNS",
		                star, text_of(&t));
	if (r->wildcard && *lname && is_public_suffix(l, text_of(&t)))
		policy_lint_add(l, r->file, r->line,
		                "wildcard on the public suffix '%s': anyone can register a name "
		                "under it, so this allows names of strangers",
		                text_of(&t));
	else if (r->wildcard && *lname && l->psl_parents &&
	         policy_set_match(l->psl_parents, lname, NULL))
		policy_lint_add(l, r->file, r->line,
		                "wildcard over '%s', which has public suffixes below it (shared "
		                "hosting where anyone gets a name): this allows names of strangers",
		                text_of(&t));
	if (w->highrisk) {
		const uint8_t *q = lname;
		bool hit = r->wildcard ? star_child(lname, probe) && (q = probe, true) : true;
		if (hit && policy_set_match(w->highrisk, q, &o))
			policy_lint_add(l, r->file, r->line,
			                "'%s%s' is on the high-risk list (%s:%u): it stays denied",
			                star, text_of(&t), o.file, o.line);
	}
	if (*lname && policy_set_match_below(w->allow, lname, &o))
		policy_lint_add(l, r->file, r->line,
		                "'%s%s' is already covered by a wildcard (%s:%u): the line adds "
		                "nothing",
		                star, text_of(&t), o.file, o.line);
}

static void lint_slot(void *ctx, const uint8_t *lname, const struct policy_rule *exact,
                      const struct policy_rule *wild)
{
	if (exact)
		lint_one(ctx, lname, exact);
	if (wild)
		lint_one(ctx, lname, wild);
}

void policy_lint_agent(struct policy_lint *l, const struct policy_set *allow,
                       const struct policy_set *highrisk)
{
	struct lint_walk w = {l, allow, highrisk};
	if (l && allow)
		policy_set_each(allow, lint_slot, &w);
}
