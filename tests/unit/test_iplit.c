/* Unit tests for IP-literal names: every inet_aton form, IPv6 literals, look-alikes that must
 * stay names, and addresses embedded in names of the nip.io / sslip.io kind. */
#include <criterion/criterion.h>

#include <string.h>

#include "moat/iplit.h"

/* Dotted text to a lower-case wire name. Test names have no escapes; '.' always separates.
 * Kept local so these tests do not depend on name.c. */
static void wire_from(const char *text, uint8_t wire[256])
{
	size_t n = 0, len = strlen(text);
	size_t start = 0;
	if (len == 1 && text[0] == '.')
		len = 0;
	if (len && text[len - 1] == '.')
		len--;
	for (size_t i = 0; i <= len && len; i++) {
		if (i == len || text[i] == '.') {
			size_t l = i - start;
			cr_assert(l > 0 && l < 64, "bad test name %s", text);
			wire[n++] = (uint8_t)l;
			for (size_t k = start; k < i; k++) {
				char c = text[k];
				wire[n++] = (uint8_t)(c >= 'A' && c <= 'Z' ? c + 32 : c);
			}
			start = i + 1;
		}
	}
	wire[n] = 0;
}

static bool literal(const char *text, uint8_t addr[16], size_t *len)
{
	uint8_t wire[256];
	wire_from(text, wire);
	return iplit_is_literal(wire, addr, len);
}

static void expect_v4(const char *text, uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	uint8_t addr[16] = {0};
	size_t len = 0;
	cr_expect(literal(text, addr, &len), "'%s' should be a literal", text);
	cr_expect_eq(len, 4, "'%s' len %zu", text, len);
	uint8_t want[4] = {a, b, c, d};
	cr_expect_arr_eq(addr, want, 4, "'%s' gave %u.%u.%u.%u", text, addr[0], addr[1], addr[2],
	                 addr[3]);
}

static void expect_v6(const char *text, const uint8_t want[16])
{
	uint8_t addr[16] = {0};
	size_t len = 0;
	cr_expect(literal(text, addr, &len), "'%s' should be a literal", text);
	cr_expect_eq(len, 16, "'%s' len %zu", text, len);
	cr_expect_arr_eq(addr, want, 16, "'%s' wrong address", text);
}

static void expect_name(const char *text)
{
	uint8_t addr[16];
	size_t len = 0;
	cr_expect_not(literal(text, addr, &len), "'%s' should not be a literal", text);
}

Test(iplit, dotted_quad)
{
	expect_v4("169.254.169.254", 169, 254, 169, 254);
	expect_v4("169.254.169.254.", 169, 254, 169, 254);
	expect_v4("0.0.0.0", 0, 0, 0, 0);
	expect_v4("255.255.255.255", 255, 255, 255, 255);
	expect_v4("192.0.2.1", 192, 0, 2, 1);
}

Test(iplit, short_forms_fill_the_remaining_bytes)
{
	expect_v4("169.254.43518", 169, 254, 169, 254);
	expect_v4("169.16689662", 169, 254, 169, 254);
	expect_v4("2852039166", 169, 254, 169, 254);
	expect_v4("127.1", 127, 0, 0, 1);
	expect_v4("10.1.258", 10, 1, 1, 2);
	expect_v4("0", 0, 0, 0, 0);
	expect_v4("4294967295", 255, 255, 255, 255);
	expect_v4("1.16777215", 1, 255, 255, 255);
	expect_v4("1.2.65535", 1, 2, 255, 255);
}

Test(iplit, hex_and_octal)
{
	expect_v4("0xa9fea9fe", 169, 254, 169, 254);
	expect_v4("0XA9FEA9FE", 169, 254, 169, 254);
	expect_v4("0251.0376.0251.0376", 169, 254, 169, 254);
	expect_v4("0xa9.254.0251.0376", 169, 254, 169, 254);
	expect_v4("0xa9.0xfe.0xa9fe", 169, 254, 169, 254);
	expect_v4("0177.1", 127, 0, 0, 1);
	expect_v4("0x7f.0.0.0x1", 127, 0, 0, 1);
	expect_v4("00.00.00.00", 0, 0, 0, 0);
	expect_v4("0x0000000000a9.254.169.254", 169, 254, 169, 254);
	expect_v4("025177524776", 169, 254, 169, 254); /* 2852039166 in octal */
	expect_v4("0377.0377.0377.0377", 255, 255, 255, 255);
}

Test(iplit, parts_out_of_range)
{
	expect_name("4294967296");
	expect_name("99999999999999999999999");
	expect_name("0x100000000");
	expect_name("256.1.1.1");
	expect_name("1.256.1.1");
	expect_name("1.2.256.1");
	expect_name("1.2.3.256");
	expect_name("1.2.65536");
	expect_name("1.16777216");
	expect_name("0x100.1.1.1");
	expect_name("0400.1.1.1");
}

Test(iplit, look_alikes)
{
	expect_name("1.2.3.4.5");
	expect_name("08.1.1.1");
	expect_name("09");
	expect_name("0x");
	expect_name("0x.1.1.1");
	expect_name("0xg");
	expect_name("1e3");
	expect_name("example.com");
	expect_name("123abc");
	expect_name("1.2.3.4a");
	expect_name("1.2.3.4.example.com");
	expect_name("www.1.2.3.4");
	expect_name("a9fea9fe");
	expect_name("-1");
	expect_name("+1");
	expect_name("1.2.3.-4");
	expect_name("1.2.3.4-");
	expect_name(".");
	expect_name("localhost");
	expect_name("1_2.3.4");
}

Test(iplit, ipv6_literals)
{
	const uint8_t lo[16] = {[15] = 1};
	const uint8_t imds[16] = {0xfd, 0x00, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54};
	const uint8_t mapped[16] = {[10] = 0xff, [11] = 0xff, 169, 254, 169, 254};
	const uint8_t ll[16] = {0xfe, 0x80, [15] = 1};
	const uint8_t zero[16] = {0};
	expect_v6("::1", lo);
	expect_v6("[::1]", lo);
	expect_v6("::", zero);
	expect_v6("fd00:ec2::254", imds);
	expect_v6("[fd00:ec2::254]", imds);
	expect_v6("FD00:EC2::254", imds);
	expect_v6("0:0:0:0:0:0:0:1", lo);
	/* Dotted tail: arrives as several labels and parses once joined. */
	expect_v6("::ffff:169.254.169.254", mapped);
	expect_v6("[::ffff:169.254.169.254]", mapped);
	/* Zones, as getaddrinfo and URLs write them. */
	expect_v6("fe80::1%eth0", ll);
	expect_v6("[fe80::1%25eth0]", ll);
}

Test(iplit, ipv6_look_alikes)
{
	expect_name("::g");
	expect_name("1:2:3:4:5:6:7:8:9");
	expect_name("[::1");
	expect_name("::1]");
	expect_name("[]");
	expect_name("a:b");
	expect_name("foo:bar.example.com");
	expect_name("::1.example.com");
	expect_name("fe80::1%");
	expect_name(":::1");
}

Test(iplit, labels_are_not_split_on_inner_dots)
{
	/* One label "1.2.3.4" (written 1\.2\.3\.4) is a name, not four parts. */
	const uint8_t wire[] = "\x07"
	                       "1.2.3.4";
	uint8_t addr[16];
	size_t len;
	cr_expect_not(iplit_is_literal(wire, addr, &len));
	uint8_t e[4];
	const uint8_t nip[] = "\x07"
	                      "1.2.3.4"
	                      "\x03nip\x02io";
	cr_expect_not(iplit_embedded_v4(nip, e));
}

Test(iplit, bad_wire_is_no_literal)
{
	const uint8_t pointer[] = {0xc0, 0x0c, 0};
	const uint8_t toolong[] = {64, '1', 0};
	uint8_t addr[16];
	size_t len;
	cr_expect_not(iplit_is_literal(pointer, addr, &len));
	cr_expect_not(iplit_is_literal(toolong, addr, &len));
	cr_expect_not(iplit_is_literal(NULL, addr, &len));
}

static void expect_embedded(const char *text, uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
	uint8_t wire[256], addr[4] = {0};
	wire_from(text, wire);
	cr_expect(iplit_embedded_v4(wire, addr), "'%s' should embed an address", text);
	uint8_t want[4] = {a, b, c, d};
	cr_expect_arr_eq(addr, want, 4, "'%s' gave %u.%u.%u.%u", text, addr[0], addr[1], addr[2],
	                 addr[3]);
}

static void expect_no_embedded(const char *text)
{
	uint8_t wire[256], addr[4];
	wire_from(text, wire);
	cr_expect_not(iplit_embedded_v4(wire, addr), "'%s' should embed nothing", text);
}

Test(iplit, embedded_forms)
{
	expect_embedded("app.10.0.0.1.nip.io", 10, 0, 0, 1);
	expect_embedded("10.0.0.1.nip.io", 10, 0, 0, 1);
	expect_embedded("app.169.254.169.254.sslip.io", 169, 254, 169, 254);
	expect_embedded("169-254-169-254.nip.io", 169, 254, 169, 254);
	expect_embedded("10-0-0-1.sslip.io", 10, 0, 0, 1);
	expect_embedded("app-10-0-0-1.sslip.io", 10, 0, 0, 1);
	expect_embedded("my-app-10-0-0-1.sslip.io", 10, 0, 0, 1);
	expect_embedded("10-0-0-1-app.sslip.io", 10, 0, 0, 1);
	expect_embedded("0a000001.nip.io", 10, 0, 0, 1);
	expect_embedded("a9fea9fe.nip.io", 169, 254, 169, 254);
	expect_embedded("A9FEA9FE.nip.io", 169, 254, 169, 254);
	expect_embedded("10.0-0.1.sslip.io", 10, 0, 0, 1);
	expect_embedded("010.000.0.01.nip.io", 10, 0, 0, 1);
	expect_embedded("127.0.0.1", 127, 0, 0, 1);
	/* The leftmost address wins, as the services answer with it. */
	expect_embedded("1.10.0.0.1.nip.io", 1, 10, 0, 0);
	expect_embedded("1234.5.6.7.8.example", 5, 6, 7, 8);
	expect_embedded("x.192.0.2.1.10-0-0-1.example", 192, 0, 2, 1);
	/* Any 8-hex-digit label decodes; the guard then decides if the address matters. */
	expect_embedded("deadbeef.example.com", 222, 173, 190, 239);
	expect_embedded("x.a9fea9fe-y.10-0-0-1.example", 10, 0, 0, 1); /* dashed hex: no */
}

Test(iplit, embedded_look_alikes)
{
	expect_no_embedded("example.com");
	expect_no_embedded("1.2.3.nip.io");
	expect_no_embedded("256.0.0.1.nip.io");
	expect_no_embedded("10.0.0.256.nip.io");
	expect_no_embedded("10-0-0-1x.nip.io");
	expect_no_embedded("x10-0-0-1.nip.io");
	expect_no_embedded("10_0_0_1.nip.io");
	expect_no_embedded("0a00001.nip.io");
	expect_no_embedded("0a0000011.nip.io");
	expect_no_embedded("0x0a000001.nip.io");
	expect_no_embedded("1234.5.6.7");
	expect_no_embedded("10.0.0.1000.nip.io");
	expect_no_embedded("v1.2.3.example");
	expect_no_embedded("ga000001.nip.io");
	/* Hex only as a whole label: hashes that end a label are names, not addresses (one in
	 * seven would fall in a blocked range and be denied). */
	expect_no_embedded("app-a9fea9fe.nip.io");
	expect_no_embedded("assets-e386fb85.s3.amazonaws.com");
	expect_no_embedded("e386fb85-assets.s3.amazonaws.com");
	expect_no_embedded(".");
}

static bool has_addr(uint8_t (*a)[4], size_t n, uint8_t w, uint8_t x, uint8_t y, uint8_t z)
{
	for (size_t i = 0; i < n; i++)
		if (a[i][0] == w && a[i][1] == x && a[i][2] == y && a[i][3] == z)
			return true;
	return false;
}

/* Every window is read, overlapping ones too ("2-3-4.127" in the name below): a service's
 * pattern or a client may take any of them, so policy checks them all. */
Test(iplit, every_embedded_address)
{
	uint8_t wire[256], a[IPLIT_EMBEDDED_MAX][4];
	wire_from("1-2-3-4.127-0-0-1.example.com", wire);
	size_t n = iplit_embedded_v4_all(wire, a, IPLIT_EMBEDDED_MAX);
	cr_assert_geq(n, 2);
	cr_expect_arr_eq(a[0], ((uint8_t[]){1, 2, 3, 4}), 4, "leftmost first");
	cr_expect(has_addr(a, n, 127, 0, 0, 1), "the second address is found too");
	cr_expect_eq(iplit_embedded_v4_all(wire, a, 1), 1, "max is kept");
	wire_from("www.example.com", wire);
	cr_expect_eq(iplit_embedded_v4_all(wire, a, IPLIT_EMBEDDED_MAX), 0);
}

/* Names without three digit-separator-digit places take the one-pass scan (no quad is
 * possible there); the answer must be the full scan's: every whole 8-hex-digit label, left to
 * right, and the quads where there are enough separators. */
static size_t embedded(const char *text, uint8_t (*a)[4], size_t max)
{
	uint8_t wire[256];
	wire_from(text, wire);
	return iplit_embedded_v4_all(wire, a, max);
}

Test(iplit, hex_labels_without_a_quad)
{
	uint8_t a[IPLIT_EMBEDDED_MAX][4];
	cr_assert_eq(embedded("deadbeef.a9fea9fe.example", a, IPLIT_EMBEDDED_MAX), 2);
	cr_expect_arr_eq(a[0], ((uint8_t[]){0xde, 0xad, 0xbe, 0xef}), 4, "left to right");
	cr_expect_arr_eq(a[1], ((uint8_t[]){169, 254, 169, 254}), 4);
	cr_expect_eq(embedded("deadbeef.a9fea9fe.example", a, 1), 1, "max is kept");
	cr_expect_eq(embedded("1-2-3.a9fea9fe.example", a, IPLIT_EMBEDDED_MAX), 1,
	             "two separators between digits: no quad, the hex label still counts");
	cr_expect_arr_eq(a[0], ((uint8_t[]){169, 254, 169, 254}), 4);
	cr_expect_eq(embedded("d0000000.bench.test", a, IPLIT_EMBEDDED_MAX), 1);
	cr_expect_arr_eq(a[0], ((uint8_t[]){0xd0, 0, 0, 0}), 4);
	cr_expect_eq(embedded("a9fea9fe0.x-a9fea9fe.example", a, IPLIT_EMBEDDED_MAX), 0,
	             "nine digits, or hex after a dash: no label of its own");
	cr_expect_eq(embedded("1-.2.3.4x.example", a, IPLIT_EMBEDDED_MAX), 0);
}

Test(iplit, quads_across_labels_and_dashes)
{
	uint8_t a[IPLIT_EMBEDDED_MAX][4];
	/* The three places may be label boundaries, dashes, or both. */
	cr_assert_eq(embedded("a9fea9fe.10.0-0.1.example", a, IPLIT_EMBEDDED_MAX), 2);
	cr_expect_arr_eq(a[0], ((uint8_t[]){169, 254, 169, 254}), 4, "the hex label is leftmost");
	cr_expect_arr_eq(a[1], ((uint8_t[]){10, 0, 0, 1}), 4);
	cr_assert_eq(embedded("x.169.254.169.254.nip.io", a, IPLIT_EMBEDDED_MAX), 1);
	cr_expect_arr_eq(a[0], ((uint8_t[]){169, 254, 169, 254}), 4);
	cr_assert_eq(embedded("app-127-0-0-1.sslip.io", a, IPLIT_EMBEDDED_MAX), 1);
	cr_expect_arr_eq(a[0], ((uint8_t[]){127, 0, 0, 1}), 4);
}

/* The reference for the scan's shortcut: every start of the joined text (the name's start, or
 * after '.' or '-') read as four decimal octets, or at a label's start as 8 hex digits. */
static size_t ref_octet(const char *s, uint8_t *out)
{
	unsigned v = 0;
	size_t i = 0;
	while (i < 3 && s[i] >= '0' && s[i] <= '9')
		v = v * 10 + (unsigned)(s[i++] - '0');
	if (i == 0 || (s[i] >= '0' && s[i] <= '9') || v > 255)
		return 0;
	*out = (uint8_t)v;
	return i;
}

static bool ref_quad(const char *s, uint8_t a[4])
{
	size_t i = 0;
	for (int k = 0; k < 4; k++) {
		if (k && s[i] != '.' && s[i] != '-')
			return false;
		i += k ? 1 : 0;
		size_t n = ref_octet(s + i, &a[k]);
		if (!n)
			return false;
		i += n;
	}
	return !s[i] || s[i] == '.' || s[i] == '-';
}

static bool ref_hex8(const char *s, uint8_t a[4])
{
	for (int i = 0; i < 8; i++)
		if (!strchr("0123456789abcdef", s[i]) || !s[i])
			return false;
	if (s[8] && s[8] != '.')
		return false;
	for (int i = 0; i < 4; i++) {
		char h[3] = {s[2 * i], s[2 * i + 1], 0};
		a[i] = (uint8_t)strtoul(h, NULL, 16);
	}
	return true;
}

static size_t ref_embedded(const char *t, uint8_t (*a)[4], size_t max)
{
	size_t found = 0, n = strlen(t);
	for (size_t i = 0; i < n && found < max; i++) {
		if (i && t[i - 1] != '.' && t[i - 1] != '-')
			continue;
		if (ref_quad(t + i, a[found]) ||
		    ((!i || t[i - 1] == '.') && ref_hex8(t + i, a[found])))
			found++;
	}
	return found;
}

/* Random names of digits, dashes, hex and other letters, 1 to 5 labels: the one-pass scan's
 * shortcut (no three digit-separator-digit places: only whole hex labels) never misses what
 * reading every start finds. Fails if the scan miscounts a place (tried: a label boundary that
 * does not count as a separator loses "1.2.3.4"). */
Test(iplit, scan_agrees_with_every_start)
{
	static const char alphabet[] = "0123456789--abfx";
	uint32_t seed = 12345;
	for (int round = 0; round < 200000; round++) {
		char text[128];
		size_t n = 0;
		seed = seed * 1103515245u + 12345u;
		unsigned labels = 1 + (seed >> 16) % 5;
		for (unsigned l = 0; l < labels; l++) {
			seed = seed * 1103515245u + 12345u;
			unsigned len = 1 + (seed >> 16) % 9;
			if (l)
				text[n++] = '.';
			for (unsigned k = 0; k < len; k++) {
				seed = seed * 1103515245u + 12345u;
				text[n++] = alphabet[(seed >> 16) % (sizeof(alphabet) - 1)];
			}
		}
		text[n] = 0;
		uint8_t got[IPLIT_EMBEDDED_MAX][4], want[IPLIT_EMBEDDED_MAX][4];
		size_t g = embedded(text, got, IPLIT_EMBEDDED_MAX);
		size_t w = ref_embedded(text, want, IPLIT_EMBEDDED_MAX);
		cr_assert_eq(g, w, "%s: %zu addresses, the reference %zu", text, g, w);
		for (size_t i = 0; i < g; i++)
			cr_assert_arr_eq(got[i], want[i], 4, "%s: address %zu", text, i);
	}
}
