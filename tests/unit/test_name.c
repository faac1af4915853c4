/* Unit tests for wire-form names: parsing presentation text (escapes, limits, empty labels),
 * printing it back, case-insensitive comparison, label-aligned ancestry, label walks and
 * decompression of names inside messages (pointers, loops, truncation). */
#include <criterion/criterion.h>

#include <string.h>

#include "moat/err.h"
#include "moat/name.h"

/* Parse text that must be valid; returns the wire length. */
static int parse(const char *text, uint8_t *wire)
{
	int n = name_from_text(text, strlen(text), wire);
	cr_assert_gt(n, 0, "name_from_text(\"%s\") = %d", text, n);
	return n;
}

static void expect_bad(const char *text)
{
	uint8_t wire[NAME_MAXWIRE];
	cr_expect_eq(name_from_text(text, strlen(text), wire), MOAT_EINVAL, "\"%s\" accepted",
	             text);
}

/* A label of n copies of c followed by a dot, appended to buf. */
static void append_label(char *buf, size_t n, char c)
{
	size_t l = strlen(buf);
	memset(buf + l, c, n);
	buf[l + n] = '.';
	buf[l + n + 1] = 0;
}

Test(name, from_text_simple)
{
	uint8_t w[NAME_MAXWIRE];
	int n = name_from_text("www.Example.COM", 15, w);
	cr_assert_eq(n, 17);
	cr_expect_arr_eq(w, "\3www\7example\3com\0", 17);
}

Test(name, from_text_trailing_dot)
{
	uint8_t a[NAME_MAXWIRE], b[NAME_MAXWIRE];
	int na = parse("example.com.", a);
	int nb = parse("example.com", b);
	cr_assert_eq(na, 13);
	cr_assert_eq(na, nb);
	cr_expect_arr_eq(a, b, (size_t)na);
}

Test(name, from_text_root)
{
	uint8_t w[NAME_MAXWIRE];
	cr_assert_eq(name_from_text(".", 1, w), 1);
	cr_expect_eq(w[0], 0);
}

Test(name, from_text_uses_len_not_nul)
{
	uint8_t w[NAME_MAXWIRE];
	cr_assert_eq(name_from_text("abc.def", 3, w), 5);
	cr_expect_arr_eq(w, "\3abc\0", 5);
}

Test(name, from_text_escapes)
{
	uint8_t w[NAME_MAXWIRE];
	/* \. keeps the dot inside the label */
	int n = parse("a\\.example.com", w);
	cr_assert_eq(n, 15);
	cr_expect_arr_eq(w, "\11a.example\3com\0", 15);
	/* \\ is one backslash */
	n = parse("a\\\\b.com", w);
	cr_assert_eq(n, 9);
	cr_expect_arr_eq(w, "\3a\\b\3com\0", 9);
	/* \DDD is a decimal byte; upper-case letters from escapes are folded too */
	n = parse("\\065\\000\\255x", w);
	cr_assert_eq(n, 6);
	cr_expect_arr_eq(w, "\4a\0\377x\0", 6);
	/* \c for any other character is that character */
	n = parse("a\\-b", w);
	cr_expect_arr_eq(w, "\3a-b\0", 5);
	cr_expect_eq(n, 5);
}

Test(name, from_text_bad_escapes)
{
	expect_bad("a\\");
	expect_bad("a\\25");
	expect_bad("a\\256");
	expect_bad("a\\2a5");
	expect_bad("\\1");
}

Test(name, from_text_empty_labels)
{
	expect_bad("");
	expect_bad("a..b");
	expect_bad(".a");
	expect_bad("..");
	expect_bad("a..");
	expect_bad("..a");
}

Test(name, from_text_label_limits)
{
	char buf[600] = "";
	uint8_t w[NAME_MAXWIRE];
	append_label(buf, 63, 'a');
	strcat(buf, "com");
	cr_expect_eq(name_from_text(buf, strlen(buf), w), 1 + 63 + 1 + 3 + 1);
	buf[0] = 0;
	append_label(buf, 64, 'a');
	strcat(buf, "com");
	expect_bad(buf);
	/* 64 bytes through escapes: still too long */
	buf[0] = 0;
	for (int i = 0; i < 64; i++)
		strcat(buf, "\\097");
	expect_bad(buf);
}

Test(name, from_text_total_limits)
{
	char buf[600] = "";
	uint8_t w[NAME_MAXWIRE];
	/* 3 * 64 + 62 + 1 = 255: the longest name */
	for (int i = 0; i < 3; i++)
		append_label(buf, 63, 'a');
	append_label(buf, 61, 'b');
	cr_expect_eq(name_from_text(buf, strlen(buf), w), 255);
	buf[strlen(buf) - 1] = 0; /* without the trailing dot too */
	cr_expect_eq(name_from_text(buf, strlen(buf), w), 255);
	cr_expect_eq(name_wire_len(w, NAME_MAXWIRE), 255);
	/* one byte more */
	buf[0] = 0;
	for (int i = 0; i < 3; i++)
		append_label(buf, 63, 'a');
	append_label(buf, 62, 'b');
	expect_bad(buf);
	/* many short labels: 127 * 2 + 1 = 255 fits, 128 do not */
	buf[0] = 0;
	for (int i = 0; i < 127; i++)
		append_label(buf, 1, 'x');
	cr_expect_eq(name_from_text(buf, strlen(buf), w), 255);
	append_label(buf, 1, 'x');
	expect_bad(buf);
}

static void round_trip(const char *text, const char *want)
{
	uint8_t w[NAME_MAXWIRE], w2[NAME_MAXWIRE];
	char out[NAME_MAXTEXT];
	int n = parse(text, w);
	int tl = name_to_text(w, out, sizeof(out));
	cr_assert_eq(tl, (int)strlen(want), "%s: got \"%s\" (%d)", text, out, tl);
	cr_expect_str_eq(out, want);
	int n2 = name_from_text(out, (size_t)tl, w2);
	cr_assert_eq(n2, n, "reparse of %s", out);
	cr_expect_arr_eq(w, w2, (size_t)n);
}

Test(name, to_text_round_trip)
{
	round_trip(".", ".");
	round_trip("Example.COM", "example.com.");
	round_trip("a\\.example.com", "a\\.example.com.");
	round_trip("a\\\\b.com", "a\\\\b.com.");
	round_trip("a\\000b\\255.x", "a\\000b\\255.x.");
	round_trip("sp\\032ace.x", "sp\\032ace.x.");
	round_trip("q\\\"\\;\\(\\)\\@\\$.x", "q\\\"\\;\\(\\)\\@\\$.x.");
	round_trip("\\127\\001.x", "\\127\\001.x.");
}

Test(name, to_text_space)
{
	uint8_t w[NAME_MAXWIRE];
	char out[32];
	parse("abc.de", w);
	cr_expect_eq(name_to_text(w, out, 8), 7);
	cr_expect_str_eq(out, "abc.de.");
	cr_expect_eq(name_to_text(w, out, 7), MOAT_ESPACE);
	cr_expect_eq(name_to_text(w, out, 1), MOAT_ESPACE);
	cr_expect_eq(name_to_text((const uint8_t *)"", out, 2), 1);
	cr_expect_str_eq(out, ".");
	parse("\\001", w);
	cr_expect_eq(name_to_text(w, out, 6), 5);
	cr_expect_eq(name_to_text(w, out, 5), MOAT_ESPACE);
}

Test(name, to_text_longest_fits_maxtext)
{
	/* every byte escaped: 255-byte name of \DDD bytes stays below NAME_MAXTEXT */
	uint8_t w[NAME_MAXWIRE];
	char out[NAME_MAXTEXT];
	size_t o = 0;
	for (int l = 0; l < 4; l++) {
		int n = l < 3 ? 63 : 61;
		w[o++] = (uint8_t)n;
		memset(w + o, 1, (size_t)n);
		o += (size_t)n;
	}
	w[o++] = 0;
	cr_assert_eq(o, 255);
	int tl = name_to_text(w, out, sizeof(out));
	cr_expect_eq(tl, 250 * 4 + 4);
}

Test(name, wire_len)
{
	cr_expect_eq(name_wire_len((const uint8_t *)"\0", 1), 1);
	cr_expect_eq(name_wire_len((const uint8_t *)"\3com\0", 5), 5);
	cr_expect_eq(name_wire_len((const uint8_t *)"\3com\0", 4), MOAT_EFORMAT);
	cr_expect_eq(name_wire_len((const uint8_t *)"\3co", 3), MOAT_EFORMAT);
	cr_expect_eq(name_wire_len((const uint8_t *)"\xc0\x0c", 2), MOAT_EFORMAT);
	cr_expect_eq(name_wire_len((const uint8_t *)"\x40", 1), MOAT_EFORMAT);
	cr_expect_eq(name_wire_len((const uint8_t *)"", 0), MOAT_EFORMAT);
	/* 256 bytes in all is too long */
	uint8_t big[300];
	size_t o = 0;
	for (int l = 0; l < 4; l++) {
		big[o++] = 63;
		memset(big + o, 'a', 63);
		o += 63;
	}
	big[o++] = 0;
	cr_expect_eq(name_wire_len(big, sizeof(big)), MOAT_EFORMAT);
}

Test(name, lower)
{
	uint8_t w[] = "\3WwW\7ExAmPlE\3C@M";
	name_lower(w);
	cr_expect_arr_eq(w, "\3www\7example\3c@m", sizeof(w));
	/* a full 63-byte label of capitals */
	uint8_t v[] = "\x3f"
	              "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
	name_lower(v);
	cr_expect_eq(v[0], 0x3f);
	cr_expect_eq(v[63], 'a');
}

/* Every byte value at every place of a word (the 8-byte path) and of the tail: only 'A'..'Z'
 * change, by 32, and the length bytes stay. */
Test(name, lower_every_byte_every_place)
{
	for (unsigned c = 1; c < 256; c++) {
		for (unsigned at = 1; at <= 11; at++) {
			uint8_t w[14] = {11}; /* one label of 11 bytes: 8 by word, 4 by byte */
			for (unsigned k = 1; k <= 11; k++)
				w[k] = (uint8_t)('0' + k);
			w[at] = (uint8_t)c;
			name_lower(w);
			uint8_t want = c >= 'A' && c <= 'Z' ? (uint8_t)(c + 32) : (uint8_t)c;
			cr_assert_eq(w[at], want, "byte %u at %u became %u", c, at, w[at]);
			cr_assert_eq(w[0], 11);
			cr_assert_eq(w[12], 0);
			for (unsigned k = 1; k <= 11; k++)
				if (k != at)
					cr_assert_eq(w[k], '0' + k);
		}
	}
}

Test(name, equal_and_case)
{
	uint8_t a[NAME_MAXWIRE], b[NAME_MAXWIRE];
	cr_expect(name_equal((const uint8_t *)"\3WWW\7Example\3com",
	                     (const uint8_t *)"\3www\7exAMPLE\3COM"));
	cr_expect_not(name_equal((const uint8_t *)"\3www\3com", (const uint8_t *)"\3wwx\3com"));
	cr_expect_not(name_equal((const uint8_t *)"\3www\3com", (const uint8_t *)"\3www\3co\1m"));
	cr_expect_not(name_equal((const uint8_t *)"\3com", (const uint8_t *)"\3www\3com"));
	cr_expect(name_equal((const uint8_t *)"", (const uint8_t *)""));
	/* the escaped dot is data, not a separator */
	parse("a\\.b.c", a);
	parse("a.b.c", b);
	cr_expect_not(name_equal(a, b));
	/* '[' (0x5b) and '{' are not case variants, nor '@' and '`' */
	cr_expect_not(name_equal((const uint8_t *)"\1[", (const uint8_t *)"\1{"));
	cr_expect_not(name_equal((const uint8_t *)"\1@", (const uint8_t *)"\1`"));
}

Test(name, count_labels_and_parent)
{
	uint8_t w[NAME_MAXWIRE];
	cr_expect_eq(name_count_labels((const uint8_t *)""), 0);
	parse("example.com", w);
	cr_expect_eq(name_count_labels(w), 2);
	parse("a\\.b.example.com", w);
	cr_expect_eq(name_count_labels(w), 3);
	const uint8_t *p = name_parent(w);
	cr_expect_arr_eq(p, "\7example\3com\0", 13);
	p = name_parent(name_parent(p));
	cr_expect_eq(p[0], 0);
	cr_expect_eq(name_parent(p), p, "the root is its own parent");
}

static bool under(const char *child, const char *parent)
{
	uint8_t c[NAME_MAXWIRE], p[NAME_MAXWIRE];
	parse(child, c);
	parse(parent, p);
	return name_is_under(c, p);
}

Test(name, is_under)
{
	cr_expect(under("example.com", "example.com"));
	cr_expect(under("www.example.com", "example.com"));
	cr_expect(under("a.b.c.example.com", "example.com"));
	cr_expect(under("WWW.EXAMPLE.COM", "example.com"));
	cr_expect(under("www.example.com", "."));
	cr_expect(under(".", "."));
	cr_expect_not(under("xexample.com", "example.com"));
	cr_expect_not(under("example.com", "www.example.com"));
	cr_expect_not(under("example.org", "example.com"));
	cr_expect_not(under(".", "com"));
	/* one label "a.example" then "com": not below example.com */
	cr_expect_not(under("a\\.example.com", "example.com"));
	cr_expect(under("a\\.example.com", "com"));
	cr_expect_not(under("www.example.com", "a\\.example.com"));
}

/* ---- name_unpack ---- */

Test(unpack, plain_name_keeps_case)
{
	const uint8_t msg[] = "\0\0\3WwW\7Example\3com\0\xff";
	size_t off = 2;
	uint8_t out[NAME_MAXWIRE];
	cr_assert_eq(name_unpack(msg, sizeof(msg) - 1, &off, out), 17);
	cr_expect_arr_eq(out, "\3WwW\7Example\3com\0", 17);
	cr_expect_eq(off, 19);
}

Test(unpack, compression_pointer)
{
	/* 0: "example.com", 13: "www" + pointer to 0, 19: pointer to 13, 21: end */
	const uint8_t msg[] = "\7example\3com\0"
	                      "\3www\xc0\x00"
	                      "\xc0\x0d";
	size_t len = sizeof(msg) - 1;
	uint8_t out[NAME_MAXWIRE];
	size_t off = 13;
	cr_assert_eq(name_unpack(msg, len, &off, out), 17);
	cr_expect_arr_eq(out, "\3www\7example\3com\0", 17);
	cr_expect_eq(off, 19, "moved past the first pointer only");
	off = 19;
	cr_assert_eq(name_unpack(msg, len, &off, out), 17);
	cr_expect_arr_eq(out, "\3www\7example\3com\0", 17);
	cr_expect_eq(off, 21);
	/* a pointer to the root */
	const uint8_t m2[] = "\0\xc0\x00";
	off = 1;
	cr_assert_eq(name_unpack(m2, 3, &off, out), 1);
	cr_expect_eq(off, 3);
}

Test(unpack, forward_pointer_rejected)
{
	const uint8_t msg[] = "\3www\xc0\x06\7example\3com\0";
	size_t off = 0;
	uint8_t out[NAME_MAXWIRE];
	cr_expect_eq(name_unpack(msg, sizeof(msg) - 1, &off, out), MOAT_EFORMAT);
	cr_expect_eq(off, 0, "offset untouched on error");
}

Test(unpack, self_pointer_rejected)
{
	const uint8_t msg[] = "\xc0\x00";
	size_t off = 0;
	uint8_t out[NAME_MAXWIRE];
	cr_expect_eq(name_unpack(msg, 2, &off, out), MOAT_EFORMAT);
}

Test(unpack, pointer_loop_rejected)
{
	/* 0: "a" then pointer back to 0: a.a.a.a... ends by length or jump bound */
	const uint8_t msg[] = "\1a\xc0\x00";
	size_t off = 0;
	uint8_t out[NAME_MAXWIRE];
	cr_expect_eq(name_unpack(msg, 4, &off, out), MOAT_EFORMAT);
	/* two pointers pointing at each other: 0 -> 2 is forward, so 2 -> 0 -> 2 */
	const uint8_t m2[] = "\xc0\x02\xc0\x00";
	off = 2;
	cr_expect_eq(name_unpack(m2, 4, &off, out), MOAT_EFORMAT);
	/* a chain of pointers only: each goes backwards, the jump bound ends it */
	uint8_t m3[400];
	m3[0] = 0;
	for (int i = 0; i < 100; i++) {
		m3[1 + 2 * i] = 0xC0;
		m3[2 + 2 * i] = (uint8_t)(i == 0 ? 0 : 2 * i - 1);
	}
	off = 1 + 2 * 40;
	cr_expect_eq(name_unpack(m3, 201, &off, out), 1, "41 jumps are fine");
	off = 1 + 2 * 99;
	cr_expect_eq(name_unpack(m3, 201, &off, out), MOAT_EFORMAT, "100 jumps are too many");
}

Test(unpack, truncated)
{
	uint8_t out[NAME_MAXWIRE];
	const uint8_t msg[] = "\7example\3com\0";
	for (size_t l = 0; l < 13; l++) {
		size_t off = 0;
		cr_expect_eq(name_unpack(msg, l, &off, out), MOAT_EFORMAT, "len %zu", l);
	}
	/* pointer cut in half */
	const uint8_t m2[] = "\0\xc0";
	size_t off = 1;
	cr_expect_eq(name_unpack(m2, 2, &off, out), MOAT_EFORMAT);
	/* pointer beyond the message (but backwards is impossible then: still rejected) */
	const uint8_t m3[] = "\3www\xc0\x02";
	off = 0;
	cr_expect_eq(name_unpack(m3, 6, &off, out), MOAT_EFORMAT);
}

Test(unpack, reserved_label_types)
{
	uint8_t out[NAME_MAXWIRE];
	size_t off = 0;
	cr_expect_eq(name_unpack((const uint8_t *)"\x40\0", 2, &off, out), MOAT_EFORMAT);
	off = 0;
	cr_expect_eq(name_unpack((const uint8_t *)"\x80\0", 2, &off, out), MOAT_EFORMAT);
}

Test(unpack, longest_name)
{
	/* a 255-byte name, as name_from_text and name_wire_len accept it */
	uint8_t msg[300], out[NAME_MAXWIRE];
	size_t o = 0;
	for (int l = 0; l < 4; l++) {
		int n = l < 3 ? 63 : 61;
		msg[o++] = (uint8_t)n;
		memset(msg + o, 'a', (size_t)n);
		o += (size_t)n;
	}
	msg[o++] = 0;
	cr_assert_eq(o, 255);
	cr_assert_eq(name_wire_len(msg, o), 255);
	size_t off = 0;
	cr_expect_eq(name_unpack(msg, o, &off, out), 255);
	cr_expect_eq(off, 255);
	cr_expect_arr_eq(out, msg, 255);
	/* 256 bytes: too long, also when reached through a pointer */
	o = 0;
	msg[o++] = 62;
	memset(msg + o, 'b', 62);
	o += 62;
	msg[o++] = 0; /* 64 bytes: "bbb...b." at 0 */
	size_t start = o;
	for (int l = 0; l < 3; l++) {
		msg[o++] = 63;
		memset(msg + o, 'a', 63);
		o += 63;
	}
	msg[o++] = 0xC0;
	msg[o++] = 0;
	off = start;
	cr_expect_eq(name_unpack(msg, o, &off, out), MOAT_EFORMAT, "3*64 + 64 = 256 bytes");
	msg[0] = 61; /* now 3*64 + 62 + 1 = 255, but label 61 must be followed by root at 62 */
	msg[62] = 0;
	off = start;
	cr_expect_eq(name_unpack(msg, o, &off, out), 255);
}

/* name_skip_msg is name_unpack_msg without the copy: the same result and the same new offset
 * from every start and every cut of a message with pointers, loops, a pointer into the header
 * and reserved label types. */
Test(unpack, skip_agrees_with_unpack_msg)
{
	static const uint8_t msg[] = "\x12\x34\x81\x80\0\1\0\1\0\0\0\0" /* header */
	                             "\7example\3com\0"                 /* 12 */
	                             "\3www\xc0\x0c"                    /* 25 */
	                             "\xc0\x19"                         /* 31 */
	                             "\1a\xc0\x21"                      /* 33: a loop */
	                             "\xc0\x02"                         /* 37: into the header */
	                             "\x40\0\x80\0\3ab";                /* reserved, cut */
	size_t len = sizeof(msg) - 1;
	uint8_t out[NAME_MAXWIRE];
	for (size_t cut = 0; cut <= len; cut++)
		for (size_t start = 0; start <= cut; start++) {
			size_t o1 = start, o2 = start;
			int a = name_unpack_msg(msg, cut, &o1, out);
			int b = name_skip_msg(msg, cut, &o2);
			cr_assert_eq(a, b, "start %zu cut %zu: %d, skip %d", start, cut, a, b);
			cr_assert_eq(o1, o2, "start %zu cut %zu: offset", start, cut);
		}
}

/* The question's shortcut: lname written out in full, in any case, is found with its length;
 * another name, a pointer and every cut are not (the caller then unpacks). */
Test(unpack, match_plain)
{
	static const uint8_t msg[] = "\0\0\3WwW\7Example\3com\0"
	                             "\3www\xc0\x02";
	const uint8_t *lname = (const uint8_t *)"\3www\7example\3com";
	size_t len = sizeof(msg) - 1;
	cr_expect_eq(name_match_plain(msg, len, 2, lname), 17);
	cr_expect_eq(name_match_plain(msg, len, 19, lname), 0, "a pointer: unpack it");
	cr_expect_eq(name_match_plain(msg, len, 2, (const uint8_t *)"\3www\7example\3org"), 0);
	cr_expect_eq(name_match_plain(msg, len, 2, (const uint8_t *)"\3www\7example"), 0,
	             "a longer name in the message");
	for (size_t cut = 0; cut < 19; cut++)
		cr_expect_eq(name_match_plain(msg, cut, 2, lname), 0, "cut %zu", cut);
}
