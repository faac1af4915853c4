/* Unit tests for the SVCB/HTTPS hint walk: hand-built RDATA, RDATA built by ldns from
 * presentation form, stopping early, and malformed records. */
#include <criterion/criterion.h>

#include <ldns/ldns.h>
#include <string.h>

#include "moat/err.h"
#include "moat/svcb.h"

struct seen {
	size_t n;
	size_t len[16];
	uint8_t addr[16][16];
	int stop_after; /* stop with this many hints seen (0: never) */
};

static int collect(void *ctx, const uint8_t *addr, size_t len)
{
	struct seen *s = ctx;
	cr_assert_lt(s->n, 16);
	cr_assert(len == 4 || len == 16);
	s->len[s->n] = len;
	memcpy(s->addr[s->n], addr, len);
	s->n++;
	if (s->stop_after && s->n == (size_t)s->stop_after)
		return 7;
	return 0;
}

static int walk(const uint8_t *rdata, size_t rdlen, struct seen *s)
{
	memset(s, 0, sizeof(*s));
	return svcb_each_hint(rdata, rdlen, 0, rdlen, collect, s);
}

static const uint8_t v4_good[4] = {192, 0, 2, 1};
static const uint8_t v4_meta[4] = {169, 254, 169, 254};
static const uint8_t v6_doc[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 1};

/* priority 1, target ".", alpn=h2, ipv4hint=192.0.2.1,169.254.169.254, ipv6hint=2001:db8::1 */
static const uint8_t basic[] = {
    0x00, 0x01,                                                         /* priority */
    0x00,                                                               /* target: root */
    0x00, 0x01, 0x00, 0x03, 0x02, 'h',  '2',                            /* alpn */
    0x00, 0x04, 0x00, 0x08, 192,  0,    2,    1,    169, 254, 169, 254, /* ipv4hint */
    0x00, 0x06, 0x00, 0x10, 0x20, 0x01, 0x0d, 0xb8, 0,   0,   0,   0,
    0,    0,    0,    0,    0,    0,    0,    1, /* ipv6hint */
};

Test(svcb, hand_built_hints)
{
	struct seen s;
	cr_assert_eq(walk(basic, sizeof(basic), &s), 0);
	cr_assert_eq(s.n, 3);
	cr_expect_eq(s.len[0], 4);
	cr_expect_arr_eq(s.addr[0], v4_good, 4);
	cr_expect_eq(s.len[1], 4);
	cr_expect_arr_eq(s.addr[1], v4_meta, 4);
	cr_expect_eq(s.len[2], 16);
	cr_expect_arr_eq(s.addr[2], v6_doc, 16);
}

Test(svcb, rdata_inside_a_message)
{
	uint8_t msg[200];
	memset(msg, 0xee, sizeof(msg));
	memcpy(msg + 50, basic, sizeof(basic));
	struct seen s = {0};
	cr_assert_eq(svcb_each_hint(msg, sizeof(msg), 50, sizeof(basic), collect, &s), 0);
	cr_expect_eq(s.n, 3);
	/* The RDATA may end exactly at the end of the message. */
	memset(&s, 0, sizeof(s));
	cr_assert_eq(svcb_each_hint(msg, 50 + sizeof(basic), 50, sizeof(basic), collect, &s), 0);
	cr_expect_eq(s.n, 3);
}

Test(svcb, named_target)
{
	const uint8_t rd[] = {0x00, 0x01, 3,    's', 'v',  'c', 7,   'e', 'x',
	                      'a',  'm',  'p',  'l', 'e',  3,   'c', 'o', 'm',
	                      0,    0,    0x04, 0,   0x04, 10,  0,   0,   1};
	struct seen s;
	cr_assert_eq(walk(rd, sizeof(rd), &s), 0);
	cr_assert_eq(s.n, 1);
	const uint8_t want[4] = {10, 0, 0, 1};
	cr_expect_arr_eq(s.addr[0], want, 4);
}

Test(svcb, compressed_target_is_skipped)
{
	/* A message with "example.com" at offset 0 and RDATA whose target points to it. */
	uint8_t msg[64] = {7, 'e', 'x', 'a', 'm', 'p', 'l', 'e', 3, 'c', 'o', 'm', 0};
	const uint8_t rd[] = {0x00, 0x01, 0xc0, 0x00, 0, 4, 0, 4, 169, 254, 169, 254};
	memcpy(msg + 20, rd, sizeof(rd));
	struct seen s = {0};
	cr_assert_eq(svcb_each_hint(msg, sizeof(msg), 20, sizeof(rd), collect, &s), 0);
	cr_assert_eq(s.n, 1);
	cr_expect_arr_eq(s.addr[0], v4_meta, 4);
	/* A pointer forward (or to itself) is malformed. */
	msg[23] = 30;
	cr_expect_eq(svcb_each_hint(msg, sizeof(msg), 20, sizeof(rd), collect, &s), MOAT_EFORMAT);
	msg[23] = 22;
	cr_expect_eq(svcb_each_hint(msg, sizeof(msg), 20, sizeof(rd), collect, &s), MOAT_EFORMAT);
}

Test(svcb, alias_mode_params_are_walked)
{
	const uint8_t rd[] = {0x00, 0x00, 3, 'f', 'o', 'o', 0, 0, 4, 0, 4, 169, 254, 169, 254};
	struct seen s;
	cr_assert_eq(walk(rd, sizeof(rd), &s), 0);
	cr_expect_eq(s.n, 1);
}

Test(svcb, no_params_and_empty_hint)
{
	const uint8_t alias[] = {0x00, 0x00, 3, 'f', 'o', 'o', 0};
	const uint8_t empty[] = {0x00, 0x01, 0, 0, 4, 0, 0, 0, 6, 0, 0};
	struct seen s;
	cr_expect_eq(walk(alias, sizeof(alias), &s), 0);
	cr_expect_eq(s.n, 0);
	cr_expect_eq(walk(empty, sizeof(empty), &s), 0);
	cr_expect_eq(s.n, 0);
}

Test(svcb, callback_stops_the_walk)
{
	struct seen s;
	memset(&s, 0, sizeof(s));
	s.stop_after = 2;
	cr_expect_eq(svcb_each_hint(basic, sizeof(basic), 0, sizeof(basic), collect, &s), 7);
	cr_expect_eq(s.n, 2);
}

Test(svcb, unknown_keys_are_skipped)
{
	const uint8_t rd[] = {0x00, 0x01, 0,    0x00, 0x03, 0x00, 0x02, 0x01, 0xbb, /* port */
	                      0x00, 0x04, 0x00, 0x04, 192,  0,    2,    1,          /* ipv4hint */
	                      0x00, 0x05, 0x00, 0x04, 1,    2,    3,    4,          /* ech */
	                      0xff, 0x00, 0x00, 0x00};
	struct seen s;
	cr_assert_eq(walk(rd, sizeof(rd), &s), 0);
	cr_expect_eq(s.n, 1);
}

/* The RDATA of one RR built by ldns from presentation form, found in its wire form. */
static void ldns_rdata(const char *rr_text, uint8_t **wire, size_t *wlen, size_t *off,
                       size_t *rdlen)
{
	ldns_rr *rr = NULL;
	ldns_status st = ldns_rr_new_frm_str(&rr, rr_text, 0, NULL, NULL);
	cr_assert_eq(st, LDNS_STATUS_OK, "ldns: %s", ldns_get_errorstr_by_id(st));
	st = ldns_rr2wire(wire, rr, LDNS_SECTION_ANSWER, wlen);
	cr_assert_eq(st, LDNS_STATUS_OK);
	/* Owner name, then type, class, TTL (8 bytes) and RDLENGTH (2). */
	size_t owner = ldns_rdf_size(ldns_rr_owner(rr));
	*off = owner + 10;
	*rdlen = (size_t)((*wire)[owner + 8] << 8 | (*wire)[owner + 9]);
	cr_assert_eq(*off + *rdlen, *wlen);
	ldns_rr_free(rr);
}

Test(svcb, ldns_built_https)
{
	uint8_t *wire = NULL;
	size_t wlen, off, rdlen;
	ldns_rdata("x. 60 IN HTTPS 1 . alpn=h2 ipv4hint=192.0.2.1,169.254.169.254 "
	           "ipv6hint=2001:db8::1",
	           &wire, &wlen, &off, &rdlen);
	struct seen s = {0};
	cr_assert_eq(svcb_each_hint(wire, wlen, off, rdlen, collect, &s), 0);
	cr_assert_eq(s.n, 3);
	cr_expect_arr_eq(s.addr[0], v4_good, 4);
	cr_expect_arr_eq(s.addr[1], v4_meta, 4);
	cr_expect_eq(s.len[2], 16);
	cr_expect_arr_eq(s.addr[2], v6_doc, 16);
	/* Cut anywhere inside, the same RDATA is malformed (it never ends inside a param
	 * boundary that happens to fit, because every cut lands in the target or a value). */
	for (size_t cut = 0; cut < rdlen; cut++) {
		memset(&s, 0, sizeof(s));
		int rc = svcb_each_hint(wire, off + cut, off, cut, collect, &s);
		bool boundary = cut == 3 || cut == 10 || cut == 22;
		if (boundary)
			cr_expect_eq(rc, 0, "cut %zu", cut);
		else
			cr_expect_eq(rc, MOAT_EFORMAT, "cut %zu", cut);
		if (rc != 0)
			cr_expect_eq(s.n, 0, "hints seen before the error at cut %zu", cut);
	}
	free(wire);
}

Test(svcb, ldns_built_svcb_alias_with_target)
{
	uint8_t *wire = NULL;
	size_t wlen, off, rdlen;
	ldns_rdata("_dns.resolver.arpa. 60 IN SVCB 1 dns.example.net. alpn=dot port=853 "
	           "ipv6hint=fd00:ec2::254",
	           &wire, &wlen, &off, &rdlen);
	struct seen s = {0};
	cr_assert_eq(svcb_each_hint(wire, wlen, off, rdlen, collect, &s), 0);
	cr_assert_eq(s.n, 1);
	const uint8_t want[16] = {0xfd, 0x00, 0x0e, 0xc2, [14] = 0x02, [15] = 0x54};
	cr_expect_arr_eq(s.addr[0], want, 16);
	free(wire);
}

Test(svcb, malformed)
{
	struct seen s;
	/* Too short for the priority, or the target name. */
	cr_expect_eq(walk(basic, 0, &s), MOAT_EFORMAT);
	cr_expect_eq(walk(basic, 1, &s), MOAT_EFORMAT);
	cr_expect_eq(walk(basic, 2, &s), MOAT_EFORMAT);
	/* Truncated inside a value and inside a param header. */
	cr_expect_eq(walk(basic, sizeof(basic) - 1, &s), MOAT_EFORMAT);
	cr_expect_eq(walk(basic, 5, &s), MOAT_EFORMAT);
	/* Bad hint lengths. */
	const uint8_t v4_len5[] = {0, 1, 0, 0, 4, 0, 5, 1, 2, 3, 4, 5};
	const uint8_t v6_len8[] = {0, 1, 0, 0, 6, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8};
	const uint8_t v4_len3[] = {0, 1, 0, 0, 4, 0, 3, 1, 2, 3};
	cr_expect_eq(walk(v4_len5, sizeof(v4_len5), &s), MOAT_EFORMAT);
	cr_expect_eq(walk(v6_len8, sizeof(v6_len8), &s), MOAT_EFORMAT);
	cr_expect_eq(walk(v4_len3, sizeof(v4_len3), &s), MOAT_EFORMAT);
	/* A length that runs past the RDATA. */
	const uint8_t overrun[] = {0, 1, 0, 0, 4, 0, 8, 1, 2, 3, 4};
	cr_expect_eq(walk(overrun, sizeof(overrun), &s), MOAT_EFORMAT);
	/* Target name running past the RDATA, label types 0x40/0x80, a name over 255 bytes. */
	const uint8_t name_overrun[] = {0, 1, 5, 'a', 'b'};
	const uint8_t label_type[] = {0, 1, 0x41, 0};
	cr_expect_eq(walk(name_overrun, sizeof(name_overrun), &s), MOAT_EFORMAT);
	cr_expect_eq(walk(label_type, sizeof(label_type), &s), MOAT_EFORMAT);
	uint8_t longname[2 + 5 * 64 + 1] = {0, 1};
	for (int i = 0; i < 5; i++)
		longname[2 + i * 64] = 63;
	cr_expect_eq(walk(longname, sizeof(longname), &s), MOAT_EFORMAT);
	/* Keys out of order or repeated (RFC 9460 2.2). */
	const uint8_t order[] = {0, 1, 0, 0, 6, 0, 0, 0, 4, 0, 4, 169, 254, 169, 254};
	const uint8_t twice[] = {0, 1, 0, 0, 4, 0, 4, 1, 1, 1, 1, 0, 4, 0, 4, 169, 254, 169, 254};
	cr_expect_eq(walk(order, sizeof(order), &s), MOAT_EFORMAT);
	cr_expect_eq(walk(twice, sizeof(twice), &s), MOAT_EFORMAT);
	cr_expect_eq(s.n, 0, "no hint is reported from a malformed record");
}

Test(svcb, rdata_outside_the_message)
{
	struct seen s = {0};
	cr_expect_eq(svcb_each_hint(basic, sizeof(basic), 1, sizeof(basic), collect, &s),
	             MOAT_EFORMAT);
	cr_expect_eq(svcb_each_hint(basic, sizeof(basic), sizeof(basic) + 1, 0, collect, &s),
	             MOAT_EFORMAT);
	cr_expect_eq(svcb_each_hint(basic, sizeof(basic), 4, SIZE_MAX, collect, &s), MOAT_EFORMAT);
	cr_expect_eq(s.n, 0);
}
