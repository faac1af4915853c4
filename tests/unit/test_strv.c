/* Unit tests for the list of owned strings (strv_intern). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "moat/err.h"
#include "moat/strv.h"

Test(strv, appends_new_and_finds_old)
{
	char **v = NULL;
	size_t n = 0, i = 99;
	char name[] = "a.txt";
	cr_assert_eq(strv_intern(&v, &n, 8, name, &i), 0);
	cr_expect_eq(i, 0);
	name[0] = 'x'; /* the list holds a copy */
	cr_expect_str_eq(v[0], "a.txt");
	cr_assert_eq(strv_intern(&v, &n, 8, "b.txt", &i), 0);
	cr_expect_eq(i, 1);
	cr_assert_eq(strv_intern(&v, &n, 8, "a.txt", &i), 0);
	cr_expect_eq(i, 0);
	cr_assert_eq(strv_intern(&v, &n, 8, "b.txt", &i), 0);
	cr_expect_eq(i, 1);
	cr_expect_eq(n, 2);
	strv_free(&v, &n);
}

Test(strv, limit_refuses_only_new_strings)
{
	char **v = NULL;
	size_t n = 0, i;
	cr_assert_eq(strv_intern(&v, &n, 2, "a", &i), 0);
	cr_assert_eq(strv_intern(&v, &n, 2, "b", &i), 0);
	cr_expect_eq(strv_intern(&v, &n, 2, "c", &i), MOAT_ELIMIT);
	cr_expect_eq(n, 2);
	cr_expect_eq(strv_intern(&v, &n, 2, "a", &i), 0);
	cr_expect_eq(i, 0);
	strv_free(&v, &n);
}

Test(strv, free_empties_the_list)
{
	char **v = NULL;
	size_t n = 0, i;
	strv_free(&v, &n); /* an empty list too */
	cr_assert_eq(strv_intern(&v, &n, 8, "a", &i), 0);
	strv_free(&v, &n);
	cr_expect_null(v);
	cr_expect_eq(n, 0);
}
