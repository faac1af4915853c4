/* Unit tests for the shared Prometheus text builder (resolver/metrics_text.c): the HELP/TYPE head
 * and a metric without labels in the exact format both programs' scrapes are checked against, a
 * buffer that fills up fails the whole text (later pieces ignored, MOAT_ESPACE) and never
 * overruns, a zero-size buffer is full from the start, and label values are escaped. */
#include <criterion/criterion.h>

#include <string.h>

#include "moat/err.h"
#include "moat/metrics_text.h"

Test(metrics_text, head_and_scalar)
{
	char buf[256];
	struct metrics_text t = metrics_text_on(buf, sizeof(buf));
	metrics_scalar(&t, "x_total", "counter", "Things.", 42);
	metrics_emit(&t, "y{a=\"%s\"} %d\n", "b", 1);
	const char want[] = "# HELP x_total Things.\n# TYPE x_total counter\nx_total 42\n"
	                    "y{a=\"b\"} 1\n";
	cr_assert_eq(metrics_text_len(&t), (int)strlen(want));
	cr_assert_str_eq(buf, want);
}

Test(metrics_text, full_fails_whole)
{
	char buf[32];
	memset(buf, 'Z', sizeof(buf));
	struct metrics_text t = metrics_text_on(buf, 16);
	metrics_emit(&t, "0123456789\n");
	cr_assert_eq(metrics_text_len(&t), 11);
	metrics_emit(&t, "0123456789\n"); /* does not fit in the 5 bytes left */
	metrics_emit(&t, "a");            /* would fit, but the text is already lost */
	cr_assert_eq(metrics_text_len(&t), MOAT_ESPACE);
	cr_assert_eq(t.n, 11);
	for (size_t i = 16; i < sizeof(buf); i++)
		cr_assert_eq(buf[i], 'Z', "byte %zu past the buffer was written", i);
}

Test(metrics_text, empty_buffer)
{
	struct metrics_text t = metrics_text_on(NULL, 0);
	metrics_head(&t, "x", "gauge", "X.");
	cr_assert_eq(metrics_text_len(&t), MOAT_ESPACE);
}

Test(metrics_text, label_escape)
{
	char out[16];
	cr_assert_eq(metrics_label_escape("a\"b\\c\nd", out, sizeof(out)), 10);
	cr_assert_str_eq(out, "a\\\"b\\\\c\\nd");
	cr_assert_eq(metrics_label_escape("abcd", out, 4), MOAT_ESPACE);
}
