/* metrics_text.h: building Prometheus text format 0.0.4 (and moatd's JSON stats) into a
 * caller's fixed buffer, shared by moatd's counters (metrics.c) and moat-fw's (tools/fw/
 * metrics.c). The buffer is never overrun: once a piece does not fit, the text is marked full,
 * later pieces are ignored and the render fails as a whole (no half a scrape). Pure. */
#ifndef MOAT_METRICS_TEXT_H
#define MOAT_METRICS_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct metrics_text {
	char *p;
	size_t n, cap; /* bytes written (p stays NUL-terminated), bytes of p */
	bool full;     /* a piece did not fit */
};

/* Write into buf (cap bytes; cap 0 is full from the start). */
static inline struct metrics_text metrics_text_on(char *buf, size_t cap)
{
	return (struct metrics_text){buf, 0, cap, cap == 0};
}

/* Append printf-style text. */
void metrics_emit(struct metrics_text *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* "# HELP name help\n# TYPE name type\n". */
void metrics_head(struct metrics_text *t, const char *name, const char *type, const char *help);

/* A metric without labels: its head, then "name v\n". */
void metrics_scalar(struct metrics_text *t, const char *name, const char *type, const char *help,
                    uint64_t v);

/* The length written, or MOAT_ESPACE when something did not fit. */
int metrics_text_len(const struct metrics_text *t);

/* Escape s as a Prometheus label value (\\, \", \n) into out. Returns length or MOAT_ESPACE. */
int metrics_label_escape(const char *s, char *out, size_t cap);

#endif
