/* Unit tests for moat-fw's table metrics (tools/fw/metrics.c, fwmetrics_render_table): nft's
 * text listing of table inet moat becomes set-element gauges (empty sets, one-line and
 * multi-line element lists, elements with timeouts) and drop counters by chain and reason
 * (same chain and reason summed, a rule without a match is "any", accept rules and rules in
 * sets are not counted), and a buffer too small is MOAT_ESPACE. */
#include <criterion/criterion.h>

#include <string.h>

#include "metrics.h"
#include "moat/err.h"

static const char table[] =
    "table inet moat {\n"
    "\tset allow4 {\n"
    "\t\ttype ipv4_addr\n"
    "\t\tflags timeout\n"
    "\t\telements = { 192.0.2.80 timeout 5m2s expires 5m1s, 192.0.2.82 timeout 5m2s "
    "expires 5m1s }\n"
    "\t}\n"
    "\tset allow6 {\n"
    "\t\ttype ipv6_addr\n"
    "\t\tflags timeout\n"
    "\t}\n"
    "\tset deny4 {\n"
    "\t\ttype ipv4_addr\n"
    "\t\tflags interval\n"
    "\t\telements = { 0.0.0.0/8, 10.0.0.0/8,\n"
    "\t\t\t     127.0.0.0/8, 169.254.0.0/16 }\n"
    "\t}\n"
    "\tchain output {\n"
    "\t\ttype filter hook output priority filter; policy drop;\n"
    "\t\tip daddr 0.0.0.0/8 counter packets 1 bytes 60 drop\n"
    "\t\toif \"lo\" accept\n"
    "\t\tip daddr @deny4 counter packets 2 bytes 120 drop\n"
    "\t\tip daddr @allow4 counter packets 9 bytes 900 accept\n"
    "\t\tcounter packets 3 bytes 180 drop\n"
    "\t}\n"
    "\tchain input {\n"
    "\t\ttype filter hook input priority filter; policy drop;\n"
    "\t\tcounter packets 4 bytes 240 drop\n"
    "\t\tcounter packets 5 bytes 300 drop\n"
    "\t}\n"
    "}\n";

Test(fwmetrics, sets_and_drops)
{
	char out[8192];
	int n = fwmetrics_render_table(table, out, sizeof(out));
	cr_assert_gt(n, 0);
	cr_assert_eq((size_t)n, strlen(out));
	cr_assert(strstr(out, "moatfw_set_elements{set=\"allow4\"} 2\n"), "%s", out);
	cr_assert(strstr(out, "moatfw_set_elements{set=\"allow6\"} 0\n"), "%s", out);
	cr_assert(strstr(out, "moatfw_set_elements{set=\"deny4\"} 4\n"), "%s", out);
	cr_assert(strstr(out, "moatfw_dropped_packets_total{chain=\"output\",reason=\"ip daddr "
	                      "0.0.0.0/8\"} 1\n"),
	          "%s", out);
	cr_assert(strstr(out, "moatfw_dropped_packets_total{chain=\"output\",reason=\"ip daddr "
	                      "@deny4\"} 2\n"),
	          "%s", out);
	cr_assert(strstr(out, "moatfw_dropped_packets_total{chain=\"output\",reason=\"any\"} 3\n"),
	          "%s", out);
	cr_assert(strstr(out, "moatfw_dropped_packets_total{chain=\"input\",reason=\"any\"} 9\n"),
	          "%s", out);
	cr_assert(strstr(out, "moatfw_dropped_bytes_total{chain=\"input\",reason=\"any\"} 540\n"),
	          "%s", out);
	cr_assert_null(strstr(out, "@allow4"), "an accept rule was counted: %s", out);
	cr_assert_null(strstr(out, "moatfw_set_elements{set=\"output\""), "%s", out);
}

Test(fwmetrics, quotes_escaped)
{
	char out[4096];
	cr_assert_gt(fwmetrics_render_table("table inet moat {\n\tchain forward {\n\t\tiifname "
	                                    "\"s0\" counter packets 7 bytes 70 drop\n\t}\n}\n",
	                                    out, sizeof(out)),
	             0);
	cr_assert(strstr(out, "{chain=\"forward\",reason=\"iifname \\\"s0\\\"\"} 7\n"), "%s", out);
}

Test(fwmetrics, too_small)
{
	char out[64];
	cr_assert_eq(fwmetrics_render_table(table, out, sizeof(out)), MOAT_ESPACE);
}
