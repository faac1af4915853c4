/* Unit tests for the stack of freed blocks a worker reuses (spare.h). Blocks given beyond the
 * bound must be freed, not kept or lost: the ASan build's leak check sees a lost one. */
#include <criterion/criterion.h>

#include "moat/spare.h"

Test(spare, a_given_block_is_the_next_taken)
{
	struct spare s = {.n = 0};
	void *a = spare_take(&s, 48), *b = spare_take(&s, 48);
	cr_assert(a && b && a != b);
	spare_give(&s, a);
	spare_give(&s, b);
	cr_expect_eq(s.n, 2);
	cr_expect_eq(spare_take(&s, 48), b, "last given, first taken");
	cr_expect_eq(spare_take(&s, 48), a);
	cr_expect_eq(s.n, 0);
	free(a);
	free(b);
}

Test(spare, keeps_at_most_spare_max_and_frees_the_rest)
{
	struct spare s = {.n = 0};
	for (int i = 0; i < SPARE_MAX + 5; i++)
		spare_give(&s, malloc(32));
	cr_expect_eq(s.n, SPARE_MAX);
	spare_give(&s, NULL); /* ignored, not kept */
	cr_expect_eq(s.n, SPARE_MAX);
	cr_expect_not_null(s.blk[SPARE_MAX - 1]);
	spare_drop(&s);
	cr_expect_eq(s.n, 0);
	void *c = spare_take(&s, 32); /* empty again: a new block */
	cr_expect_not_null(c);
	free(c);
}
