/* Unit tests for how a pattern set grows (resolver/policy.c): a set loaded from a few short lines
 * has an arena sized exactly for them, and names added one by one afterwards must still fit. */
#include <criterion/criterion.h>
#include <string.h>

#include "moat/name.h"
#include "moat/policy.h"

Test(policy_grow, long_names_after_an_exact_load)
{
	struct policy_set *s = policy_set_new();
	cr_assert_not_null(s);
	const char *lines[] = {"a"};
	char err[256];
	cr_assert_eq(policy_set_load_lines(s, lines, 1, "test", err, sizeof(err)), 0, "%s", err);
	/* Names near the 255-byte limit, many times the arena the load reserved. */
	char text[NAME_MAXTEXT];
	uint8_t wire[NAME_MAXWIRE];
	for (int i = 0; i < 40; i++) {
		int n = 0;
		for (int l = 0; l < 3; l++)
			n += snprintf(text + n, sizeof(text) - (size_t)n, "%02d%061d.", i, l);
		snprintf(text + n, sizeof(text) - (size_t)n, "example");
		cr_assert_gt(name_from_text(text, strlen(text), wire), 200);
		cr_assert_eq(policy_set_add_wire(s, wire, false, "test", (uint32_t)i + 2), 0);
	}
	cr_expect_eq(policy_set_count(s), 41);
	cr_expect(policy_set_match(s, wire, NULL));
	uint8_t a[NAME_MAXWIRE];
	cr_assert_gt(name_from_text("a", 1, a), 0);
	cr_expect(policy_set_match(s, a, NULL));
	policy_set_free(s);
}
