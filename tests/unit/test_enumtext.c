/* Unit tests for the code-to-text tables (enumtext.h) and the *_str functions built on them. */
#include <criterion/criterion.h>
#include <limits.h>

#include "moat/enumtext.h"
#include "moat/err.h"
#include "moat/inflight.h"
#include "moat/policy.h"

Test(enumtext, holes_and_out_of_range_are_unknown)
{
	static const char *const t[] = {[0] = "zero", [2] = "two"};
	cr_expect_str_eq(ENUM_TEXT(t, 0, "?"), "zero");
	cr_expect_str_eq(ENUM_TEXT(t, 1, "?"), "?");
	cr_expect_str_eq(ENUM_TEXT(t, 2, "?"), "two");
	cr_expect_str_eq(ENUM_TEXT(t, 3, "?"), "?");
	cr_expect_str_eq(ENUM_TEXT(t, -1, "?"), "?");
}

Test(enumtext, moat_strerror_every_code)
{
	cr_expect_str_eq(moat_strerror(MOAT_OK), "ok");
	cr_expect_str_eq(moat_strerror(MOAT_ENOMEM), "out of memory");
	cr_expect_str_eq(moat_strerror(MOAT_EINVAL), "invalid input");
	cr_expect_str_eq(moat_strerror(MOAT_EFORMAT), "malformed DNS message");
	cr_expect_str_eq(moat_strerror(MOAT_ESPACE), "buffer too small");
	cr_expect_str_eq(moat_strerror(MOAT_ENOENT), "not found");
	cr_expect_str_eq(moat_strerror(MOAT_EIO), "input/output error");
	cr_expect_str_eq(moat_strerror(MOAT_ELIMIT), "limit exceeded");
	cr_expect_str_eq(moat_strerror(MOAT_EMISMATCH), "answer does not match the query");
	cr_expect_str_eq(moat_strerror(1), "unknown error");
	cr_expect_str_eq(moat_strerror(-9), "unknown error");
	cr_expect_str_eq(moat_strerror(INT_MIN), "unknown error");
}

Test(enumtext, inflight_and_verdict_out_of_range)
{
	cr_expect_str_eq(inflight_result_str(INFLIGHT_TOTAL), "too many questions in flight");
	cr_expect_str_eq(inflight_result_str((enum inflight_result)99), "?");
	cr_expect_str_eq(policy_verdict_str(POLICY_DENY_CLASS), "deny-class");
	cr_expect_str_eq(policy_verdict_str((enum policy_verdict)99), "unknown");
}
