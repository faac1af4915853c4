/* recommend.c owns the recommended allowlist (rules in moat/recommend.h): grouping the names seen
 * by registrable domain with libpsl, choosing exact lines or one wildcard per group, the ports of
 * each line, and the lint over the result, which takes back any wildcard it warns about. */
#include "moat/recommend.h"

#include <libpsl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/err.h"
#include "moat/iplit.h"
#include "moat/policy_lint.h"
#include "moat/strv.h"

#ifndef MOAT_PSL_FILE
#define MOAT_PSL_FILE "/usr/share/publicsuffix/public_suffix_list.dat"
#endif

#define LABEL "recommended"

/* A name seen, with the registrable domain it groups under. */
struct seen {
	char text[NAME_MAXTEXT]; /* without the trailing dot */
	int base;                /* offset in text of its registrable domain; -1: none (a suffix) */
	struct policy_ports ports;
	bool any_port, highrisk, widen_no;
};

/* The registrable domain of s, or NULL. (An offset, not a pointer: qsort moves entries.) */
static const char *base_of(const struct seen *s)
{
	return s->base < 0 ? NULL : s->text + s->base;
}

static int seen_cmp(const void *a, const void *b)
{
	const struct seen *x = a, *y = b;
	const char *bx = x->base < 0 ? x->text : base_of(x),
	           *by = y->base < 0 ? y->text : base_of(y);
	int c = strcmp(bx, by);
	return c ? c : strcmp(x->text, y->text);
}

static void ports_add(struct recommend_rule *r, const struct seen *s)
{
	if (s->any_port)
		r->any_port = true;
	if (!r->any_port && policy_ports_union(&r->ports, &s->ports) < 0)
		r->any_port = true;
	if (r->any_port)
		r->ports.n = 0;
}

/* The names as text, merged (one entry a name, ports united), with their groups. NULL when out
 * of memory; *n is the count. */
static struct seen *seen_build(const struct recommend_name *v, size_t nv, psl_ctx_t *psl, size_t *n,
                               size_t *skipped)
{
	struct seen *s = calloc(nv ? nv : 1, sizeof(*s));
	if (!s)
		return NULL;
	*n = 0;
	for (size_t i = 0; i < nv; i++) {
		uint8_t a[16];
		size_t alen;
		struct seen *e = &s[*n];
		if (name_to_text(v[i].lname, e->text, sizeof(e->text)) < 1 || !v[i].lname[0] ||
		    iplit_is_literal(v[i].lname, a, &alen)) {
			++*skipped;
			continue;
		}
		size_t l = strlen(e->text);
		if (l && e->text[l - 1] == '.')
			e->text[l - 1] = 0;
		e->ports = v[i].ports;
		e->any_port = v[i].any_port;
		e->highrisk = v[i].highrisk;
		const char *reg = psl ? psl_registrable_domain(psl, e->text) : NULL;
		e->base = reg ? (int)(reg - e->text) : -1;
		++*n;
	}
	qsort(s, *n, sizeof(*s), seen_cmp);
	size_t out = 0; /* merge duplicates */
	for (size_t i = 0; i < *n; i++) {
		if (out && !strcmp(s[out - 1].text, s[i].text)) {
			struct seen *m = &s[out - 1];
			m->highrisk |= s[i].highrisk;
			m->any_port |= s[i].any_port;
			if (!m->any_port && policy_ports_union(&m->ports, &s[i].ports) < 0)
				m->any_port = true;
			continue;
		}
		if (out != i)
			s[out] = s[i];
		out++;
	}
	*n = out;
	return s;
}

static bool highrisk_has(const struct policy_set *hr, const char *text)
{
	uint8_t w[NAME_MAXWIRE];
	return hr && name_from_text(text, strlen(text), w) > 0 && policy_set_match(hr, w, NULL);
}

static struct recommend_rule *rule_new(struct recommendation *r, size_t *cap)
{
	if (r->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		struct recommend_rule *nr = realloc(r->rules, nc * sizeof(*nr));
		if (!nr)
			return NULL;
		r->rules = nr;
		*cap = nc;
	}
	struct recommend_rule *x = &r->rules[r->n++];
	memset(x, 0, sizeof(*x));
	return x;
}

/* The rules of one group s[a..b) (one registrable domain, or one name without one). */
static int group_rules(struct seen *s, size_t a, size_t b, const struct policy_set *hr,
                       unsigned wmin, struct recommendation *r, size_t *cap)
{
	const char *base = base_of(&s[a]);
	size_t below = 0;
	bool tainted = !base || s[a].widen_no || highrisk_has(hr, base);
	for (size_t i = a; i < b; i++) {
		tainted |= s[i].highrisk || highrisk_has(hr, s[i].text);
		below += base && strcmp(s[i].text, base) != 0;
	}
	size_t wild = SIZE_MAX; /* index of the group's wildcard (rule_new may move the array) */
	if (!tainted && below >= wmin) {
		struct recommend_rule *w = rule_new(r, cap);
		if (!w)
			return MOAT_ENOMEM;
		snprintf(w->pattern, sizeof(w->pattern), "*.%s", base);
		w->no_conn = true;
		wild = r->n - 1;
	}
	for (size_t i = a; i < b; i++) {
		if (s[i].highrisk || highrisk_has(hr, s[i].text)) {
			r->skipped++;
			continue;
		}
		struct recommend_rule *x;
		if (wild == SIZE_MAX || !strcmp(s[i].text, base)) {
			if (!(x = rule_new(r, cap)))
				return MOAT_ENOMEM;
			snprintf(x->pattern, sizeof(x->pattern), "%s", s[i].text);
			x->no_conn = true;
		} else {
			x = &r->rules[wild];
		}
		x->covers++;
		if (s[i].ports.n || s[i].any_port)
			x->no_conn = false;
		ports_add(x, &s[i]);
	}
	return 0;
}

int recommend_line(const struct recommend_rule *r, char *out, size_t cap)
{
	int n = snprintf(out, cap, "%s", r->pattern);
	if (r->ports.n && n > 0 && (size_t)n + 1 < cap) {
		out[n++] = ' ';
		int k = policy_ports_format(&r->ports, out + n, cap - (size_t)n);
		n = k < 0 ? n - 1 : n + k;
		out[n] = 0;
	}
	return n;
}

static int rule_cmp(const void *a, const void *b)
{
	return strcmp(((const struct recommend_rule *)a)->pattern,
	              ((const struct recommend_rule *)b)->pattern);
}

/* Lint the rules as the lines of a file; the warnings into r->lint. Returns the index of the
 * first wildcard rule warned about (SIZE_MAX: none), or MOAT_ENOMEM through *rc. */
static size_t lint_rules(struct recommendation *r, const struct policy_set *hr, int *rc)
{
	char **lines = calloc(r->n ? r->n : 1, sizeof(char *)), err[512];
	struct policy_set *set = policy_set_new();
	struct policy_lint *lint = policy_lint_new();
	size_t wild = SIZE_MAX;
	*rc = lines && set && lint ? 0 : MOAT_ENOMEM;
	for (size_t i = 0; !*rc && i < r->n; i++) {
		char t[NAME_MAXTEXT + 128];
		recommend_line(&r->rules[i], t, sizeof(t));
		*rc = (lines[i] = strdup(t)) ? 0 : MOAT_ENOMEM;
	}
	if (!*rc) {
		policy_set_lint_to(set, lint);
		policy_lint_file(lint, LABEL);
		/* The lines are the builder's own: a load error would be a bug, not input. */
		*rc = policy_set_load_lines(set, (const char *const *)lines, r->n, LABEL, err,
		                            sizeof(err));
		policy_set_lint_to(set, NULL);
	}
	if (!*rc)
		policy_lint_agent(lint, set, hr);
	strv_free(&r->lint, &r->nlint);
	for (size_t i = 0; !*rc && i < policy_lint_count(lint); i++) {
		const char *w = policy_lint_get(lint, i);
		unsigned long line = strtoul(w + sizeof(LABEL), NULL, 10);
		if (line >= 1 && line <= r->n && r->rules[line - 1].pattern[0] == '*' &&
		    wild == SIZE_MAX)
			wild = line - 1;
		*rc = config_strv_push(&r->lint, &r->nlint, w);
	}
	if (lines)
		for (size_t i = 0; i < r->n; i++)
			free(lines[i]);
	free(lines);
	policy_set_free(set);
	policy_lint_free(lint);
	return wild;
}

/* Rules for every group of s, sorted. */
static int build_rules(struct seen *s, size_t n, const struct policy_set *hr, unsigned wmin,
                       struct recommendation *out)
{
	size_t cap = 0;
	int rc = 0;
	free(out->rules);
	out->rules = NULL;
	out->n = 0;
	out->skipped = 0;
	for (size_t a = 0, b; !rc && a < n; a = b) {
		for (b = a + 1; b < n && base_of(&s[a]) && base_of(&s[b]) &&
		                !strcmp(base_of(&s[a]), base_of(&s[b]));
		     b++)
			;
		rc = group_rules(s, a, b, hr, wmin, out, &cap);
	}
	if (out->n)
		qsort(out->rules, out->n, sizeof(*out->rules), rule_cmp);
	return rc;
}

int recommend_build(const struct recommend_name *v, size_t nv, const struct policy_set *highrisk,
                    unsigned wildcard_min, struct recommendation *out)
{
	memset(out, 0, sizeof(*out));
	psl_ctx_t *psl = psl_load_file(MOAT_PSL_FILE);
	psl_ctx_t *use = psl ? psl : (psl_ctx_t *)psl_builtin();
	size_t n = 0, skipped = 0;
	struct seen *s = seen_build(v, nv, use, &n, &skipped);
	if (psl)
		psl_free(psl);
	if (!s)
		return MOAT_ENOMEM;
	unsigned wmin = wildcard_min ? wildcard_min : RECOMMEND_WILDCARD_MIN;
	int rc = build_rules(s, n, highrisk, wmin, out);
	/* A wildcard the lint warns about goes back to exact lines; a few rounds at most (each
	 * takes one group back). */
	for (unsigned round = 0; !rc && round < 64; round++) {
		size_t w = lint_rules(out, highrisk, &rc);
		if (rc || w == SIZE_MAX)
			break;
		const char *base = out->rules[w].pattern + 2;
		for (size_t i = 0; i < n; i++)
			if (base_of(&s[i]) && !strcmp(base_of(&s[i]), base))
				s[i].widen_no = true;
		rc = build_rules(s, n, highrisk, wmin, out);
	}
	out->skipped += skipped;
	free(s);
	if (rc)
		recommend_free(out);
	return rc;
}

void recommend_free(struct recommendation *r)
{
	free(r->rules);
	strv_free(&r->lint, &r->nlint);
	memset(r, 0, sizeof(*r));
}
