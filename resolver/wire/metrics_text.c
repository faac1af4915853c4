/* metrics_text.c owns the text building both programs' metrics share (moat/metrics_text.h):
 * appending to a fixed buffer that fails whole when full, the HELP/TYPE head of a metric, a
 * metric without labels, and label-value escaping. Pure: no allocation, no I/O. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "moat/err.h"
#include "moat/metrics_text.h"

void metrics_emit(struct metrics_text *t, const char *fmt, ...)
{
	if (t->full)
		return;
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(t->p + t->n, t->cap - t->n, fmt, ap);
	va_end(ap);
	if (k < 0 || (size_t)k >= t->cap - t->n)
		t->full = true;
	else
		t->n += (size_t)k;
}

void metrics_head(struct metrics_text *t, const char *name, const char *type, const char *help)
{
	metrics_emit(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void metrics_scalar(struct metrics_text *t, const char *name, const char *type, const char *help,
                    uint64_t v)
{
	metrics_head(t, name, type, help);
	metrics_emit(t, "%s %llu\n", name, (unsigned long long)v);
}

int metrics_text_len(const struct metrics_text *t)
{
	return t->full ? MOAT_ESPACE : (int)t->n;
}

int metrics_label_escape(const char *s, char *out, size_t cap)
{
	size_t n = 0;
	for (; *s; s++) {
		const char *e = *s == '\\'   ? "\\\\"
		                : *s == '"'  ? "\\\""
		                : *s == '\n' ? "\\n"
		                             : NULL;
		size_t k = e ? 2 : 1;
		if (n + k >= cap)
			return MOAT_ESPACE;
		if (e)
			memcpy(out + n, e, 2);
		else
			out[n] = *s;
		n += k;
	}
	if (n >= cap)
		return MOAT_ESPACE;
	out[n] = 0;
	return (int)n;
}
