/* report.c owns what moat-escape prints: the table for people (rows appear as tests finish,
 * since test 8 may wait minutes), TAP and JSON for CI, and the one summary line every format
 * carries: "moat-escape: N of M held", then what escaped, whether the control failed and what
 * did not run. A test that did not run is not counted as held: a run that skipped one cannot
 * claim to have held everything. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "escape.h"

const char *escape_outcome_str(enum escape_outcome o)
{
	static const char *const names[] = {
	    [ESCAPE_HELD] = "blocked",
	    [ESCAPE_ESCAPED] = "ESCAPED",
	    [ESCAPE_WORKS] = "works",
	    [ESCAPE_FAILED] = "FAILED",
	};
	/* Anything else (not run, unset) reads "not run". */
	return (unsigned)o < sizeof(names) / sizeof(names[0]) ? names[o] : "not run";
}

/* Lower case for JSON, where nobody reads shouting. */
static const char *escape_outcome_json(enum escape_outcome o)
{
	switch (o) {
	case ESCAPE_ESCAPED:
		return "escaped";
	case ESCAPE_FAILED:
		return "failed";
	default:
		return escape_outcome_str(o);
	}
}

void escape_appendf(char *buf, size_t cap, const char *fmt, ...)
{
	size_t n = strnlen(buf, cap);
	va_list ap;

	if (n + 1 >= cap)
		return;
	if (n > 0) {
		snprintf(buf + n, cap - n, "; ");
		n = strnlen(buf, cap);
	}
	va_start(ap, fmt);
	vsnprintf(buf + n, cap - n, fmt, ap);
	va_end(ap);
}

static bool escape_counts_held(enum escape_outcome o)
{
	return o == ESCAPE_HELD || o == ESCAPE_WORKS;
}

bool escape_all_held(const struct escape_result *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (r[i].outcome != ESCAPE_UNSET && !escape_counts_held(r[i].outcome))
			return false;
	return n > 0;
}

/* "; LABEL: 5 (why), 6 (why)" for every result with outcome o. */
static size_t escape_summary_part(const struct escape_result *r, size_t n, enum escape_outcome o,
                                  const char *label, char *out, size_t cap, size_t len)
{
	bool first = true;

	for (size_t i = 0; i < n && len < cap; i++) {
		if (r[i].outcome != o)
			continue;
		int w;
		if (o == ESCAPE_FAILED) /* the control: one test, no number needed */
			w = snprintf(out + len, cap - len, "; %s (%s)", label, r[i].reason);
		else if (first)
			w = snprintf(out + len, cap - len, "; %s: %d (%s)", label, r[i].id,
			             r[i].reason);
		else
			w = snprintf(out + len, cap - len, ", %d (%s)", r[i].id, r[i].reason);
		first = false;
		if (w > 0)
			len += (size_t)w;
	}
	return len < cap ? len : cap - 1;
}

void escape_summary(const struct escape_result *r, size_t n, char *out, size_t cap)
{
	size_t held = 0, total = 0, len;

	for (size_t i = 0; i < n; i++) {
		held += escape_counts_held(r[i].outcome);
		total += r[i].outcome != ESCAPE_UNSET;
	}
	int w = snprintf(out, cap, "moat-escape: %zu of %zu held", held, total);
	len = w > 0 && (size_t)w < cap ? (size_t)w : cap - 1;
	len = escape_summary_part(r, n, ESCAPE_ESCAPED, "escaped", out, cap, len);
	len = escape_summary_part(r, n, ESCAPE_FAILED, "control failed", out, cap, len);
	escape_summary_part(r, n, ESCAPE_NOTRUN, "not run", out, cap, len);
}

void escape_json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p == '\n')
			fputs("\\n", f);
		else if (*p < 0x20 || *p >= 0x7f)
			fprintf(f, "\\u%04x",
			        *p); /* our texts are ASCII; anything else is escaped */
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

void escape_report_begin(FILE *f, enum escape_format fmt, const struct escape_cfg *c)
{
	char at[80];

	escape_sa_str((const struct sockaddr *)&c->resolver, true, at, sizeof(at));
	if (fmt == ESCAPE_FMT_TABLE) {
		fprintf(
		    f,
		    "escape tests against resolver %s (probe timeout %u ms, worst case %llu s)\n",
		    at, c->timeout_ms,
		    (unsigned long long)((escape_worst_case_ms(c) + 999) / 1000));
		fprintf(f, "%3s  %-29s  %-7s  %-7s  %s\n", "#", "test", "expect", "result",
		        "detail");
	} else if (fmt == ESCAPE_FMT_TAP) {
		fprintf(f, "TAP version 13\n1..%d\n# resolver %s, probe timeout %u ms\n",
		        escape_ntests(c), at, c->timeout_ms);
	}
	fflush(f);
}

void escape_report_row(FILE *f, enum escape_format fmt, const struct escape_result *r)
{
	if (r->outcome == ESCAPE_UNSET)
		return;
	if (fmt == ESCAPE_FMT_TABLE) {
		fprintf(f, "%3d  %-29s  %-7s  %-7s  %s\n", r->id, r->name, r->expect,
		        escape_outcome_str(r->outcome), r->detail);
	} else if (fmt == ESCAPE_FMT_TAP) {
		/* A test that did not run is "not ok", not "ok # SKIP": CI must not turn green
		 * on a run that exits 1 because it could not claim every test. */
		fprintf(f, "%s %d - %s: %s\n", escape_counts_held(r->outcome) ? "ok" : "not ok",
		        r->id, r->name, escape_outcome_str(r->outcome));
		if (r->reason[0])
			fprintf(f, "#   %s\n", r->reason);
		if (r->detail[0])
			fprintf(f, "#   %s\n", r->detail);
	}
	fflush(f);
}

void escape_report_end(FILE *f, enum escape_format fmt, const struct escape_result *r, size_t n)
{
	char sum[2048];

	escape_summary(r, n, sum, sizeof(sum));
	if (fmt == ESCAPE_FMT_TABLE) {
		fprintf(f, "%s\n", sum);
	} else if (fmt == ESCAPE_FMT_TAP) {
		fprintf(f, "# %s\n", sum);
	} else {
		size_t held = 0, total = 0;
		fputs("{\"results\":[", f);
		for (size_t i = 0; i < n; i++) {
			if (r[i].outcome == ESCAPE_UNSET)
				continue;
			if (escape_counts_held(r[i].outcome))
				held++;
			fprintf(f, "%s\n {\"id\":%d,\"test\":", total++ ? "," : "", r[i].id);
			escape_json_str(f, r[i].name);
			fprintf(f, ",\"expect\":\"%s\",\"result\":\"%s\",\"held\":%s,\"reason\":",
			        r[i].expect, escape_outcome_json(r[i].outcome),
			        escape_counts_held(r[i].outcome) ? "true" : "false");
			escape_json_str(f, r[i].reason);
			fputs(",\"detail\":", f);
			escape_json_str(f, r[i].detail);
			fputc('}', f);
		}
		fprintf(f, "\n],\"held\":%zu,\"total\":%zu,\"ok\":%s,\"summary\":", held, total,
		        escape_all_held(r, n) ? "true" : "false");
		escape_json_str(f, sum);
		fputs("}\n", f);
	}
	fflush(f);
}
