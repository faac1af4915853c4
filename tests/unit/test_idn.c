/* Unit tests for names as users write them (idn.c): U-labels and mixed case become A-labels,
 * A-labels are checked, plain ASCII passes untouched, and URLs, ports, control bytes, NUL and
 * invalid international names are refused with a hint. Also the allowlist loader's use of it:
 * exact file:line errors, a BOM, and a UTF-8 line that matches the A-label a stub sends. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moat/err.h"
#include "moat/idn.h"
#include "moat/name.h"
#include "moat/policy.h"

static int conv(const char *in, size_t len, char *out, char *why)
{
	return idn_from_user(in, len, out, IDN_MAXTEXT, why, 200);
}

static void expect_ascii(const char *in, const char *want)
{
	char out[IDN_MAXTEXT], why[200] = "";
	int n = conv(in, strlen(in), out, why);
	cr_assert_gt(n, 0, "%s: %d %s", in, n, why);
	cr_expect_str_eq(out, want, "%s", in);
	cr_expect_eq((size_t)n, strlen(want));
}

static void expect_refused(const char *in, size_t len, const char *why_part)
{
	char out[IDN_MAXTEXT], why[200] = "";
	cr_expect_eq(conv(in, len, out, why), MOAT_EINVAL, "%s accepted", in);
	cr_expect_not_null(strstr(why, why_part), "%s: why \"%s\", want \"%s\"", in, why, why_part);
}

Test(idn, u_labels_become_a_labels)
{
	expect_ascii("bücher.example", "xn--bcher-kva.example");
	expect_ascii("*.bücher.example", "*.xn--bcher-kva.example");
	expect_ascii("bücher.example.", "xn--bcher-kva.example.");
	expect_ascii("faß.de", "xn--fa-hia.de");           /* non-transitional: ß stays */
	expect_ascii("ｅｘａｍｐｌｅ.com", "example.com"); /* UTS #46 maps full-width forms */
}

Test(idn, mixed_case)
{
	expect_ascii("Bücher.EXAMPLE", "xn--bcher-kva.example");
	expect_ascii("BÜCHER.example", "xn--bcher-kva.example");
	expect_ascii("XN--BCHER-KVA.example", "xn--bcher-kva.example");
}

Test(idn, a_labels_checked)
{
	expect_ascii("xn--bcher-kva.example", "xn--bcher-kva.example");
	expect_refused("xn--zz.example", 14, "invalid international name");
	expect_refused("www.xn--bcher-kva-.example", 26, "invalid international name");
	expect_refused("xn--a.example", 13, "invalid international name");
}

Test(idn, invalid_u_labels)
{
	expect_refused("\xe2\x80\x93.com", 5, "invalid international name"); /* en dash */
	expect_refused("\xe2\x98\x83.com", 7, "invalid international name"); /* a snowman */
	expect_refused("\xef\xbf\xbd.com", 7, "invalid international name"); /* U+FFFD */
}

Test(idn, plain_ascii_untouched)
{
	char out[IDN_MAXTEXT], why[200];
	const char *ok[] = {"example.com", "*.Example.COM", "_dmarc.example.com", "a\\.b.example",
	                    ".",           "::1",           "[2001:db8::1]"};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		cr_expect_eq(conv(ok[i], strlen(ok[i]), out, why), 0, "%s", ok[i]);
}

Test(idn, not_host_names)
{
	expect_refused("https://example.com/path", 24,
	               "a URL, not a name; write the host name only: example.com");
	expect_refused("http://user@www.example.org:8080/", 33, "host name only: www.example.org");
	expect_refused("example.com/path", 16, "host name only: example.com");
	expect_refused("example.com:443", 15,
	               "a port or ':' in the name; write the host name only: example.com");
	expect_refused("a\x01"
	               "b.com",
	               6, "control byte 0x01");
	expect_refused("a\x7f"
	               "b.com",
	               6, "control byte 0x7f");
	expect_refused("ab\0c.com", 8, "NUL byte");
	expect_refused("b\xc3\xbc"
	               "cher\\.x.example",
	               16, "escapes");
}

Test(idn, quote)
{
	char q[80];
	idn_quote("a\x01"
	          "b\xc3\xbc",
	          5, q, sizeof(q));
	cr_expect_str_eq(q, "a?b??");
}

/* ---- the allowlist loader ---- */

static char *write_tmp(const char *content, size_t len)
{
	char *path = strdup("/tmp/moat-test-idn-XXXXXX");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, content, len), (ssize_t)len);
	close(fd);
	return path;
}

static void expect_line_error(const char *content, size_t len, unsigned line, const char *what)
{
	char *path = write_tmp(content, len);
	struct policy_set *s = policy_set_new();
	char err[512] = "", want[300];
	cr_expect_eq(policy_set_load_file(s, path, err, sizeof(err)), MOAT_EINVAL);
	snprintf(want, sizeof(want), "%s:%u: bad pattern", path, line);
	cr_expect_eq(strncmp(err, want, strlen(want)), 0, "err \"%s\", want \"%s\"", err, want);
	cr_expect_not_null(strstr(err, what), "err \"%s\", want \"%s\"", err, what);
	policy_set_free(s);
	unlink(path);
	free(path);
}

Test(idn_load, errors_name_file_and_line)
{
	const char url[] = "ok.example\nhttps://example.com/path\n";
	expect_line_error(url, sizeof(url) - 1, 2, "write the host name only: example.com");
	/* In an allowlist a glued port is answered with the rule's own form (policy.c). */
	const char port[] = "a.example\nb.example\nexample.com:443\n";
	expect_line_error(port, sizeof(port) - 1, 3, "after a blank: example.com tcp/443");
	const char ctl[] = "a\x02"
	                   "b.example\n";
	expect_line_error(ctl, sizeof(ctl) - 1, 1, "control byte 0x02");
	const char nul[] = "x.example\nab\0cd.example\n";
	expect_line_error(nul, sizeof(nul) - 1, 2, "NUL byte");
	const char bad[] = "\n\nxn--zz.example\n";
	expect_line_error(bad, sizeof(bad) - 1, 3, "invalid international name");
}

Test(idn_load, utf8_line_matches_a_label_and_bom_skipped)
{
	/* The first name has an escape: converted with its BOM it would be refused. */
	const char text[] = "\xef\xbb\xbf"
	                    "first\\.x.example\n"
	                    "B\xc3\xbc"
	                    "cher.example\n"
	                    "*.m\xc3\xbc"
	                    "nchen.example\n";
	char *path = write_tmp(text, sizeof(text) - 1);
	struct policy_set *s = policy_set_new();
	char err[512] = "";
	cr_assert_eq(policy_set_load_file(s, path, err, sizeof(err)), 0, "%s", err);
	uint8_t w[NAME_MAXWIRE];
	struct policy_rule r;
	cr_assert_gt(name_from_text("first\\.x.example", 16, w), 0);
	cr_expect(policy_set_match(s, w, &r), "the line after a BOM matches");
	cr_assert_gt(name_from_text("xn--bcher-kva.example", 21, w), 0);
	cr_expect(policy_set_match(s, w, &r));
	cr_expect_eq(r.line, 2);
	cr_assert_gt(name_from_text("www.xn--mnchen-3ya.example", 26, w), 0);
	cr_expect(policy_set_match(s, w, &r));
	cr_expect_eq(r.line, 3);
	cr_expect(policy_set_add(s, "k\xc3\xb6ln.example", 13, "x", 1) == 0);
	cr_assert_gt(name_from_text("xn--kln-sna.example", 19, w), 0);
	cr_expect(policy_set_match(s, w, NULL));
	policy_set_free(s);
	unlink(path);
	free(path);
}
