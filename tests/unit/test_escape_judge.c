/* Unit tests for tools/escape/judge.c: what ldns reads is what moat-escape judges. The replies
 * are written byte by byte here (no moat encoder), so neither side of the check is moatd's own
 * code: header and question checks, the OPT rules, another class, the TTL's top bit, EDE. */
#include <criterion/criterion.h>
#include <string.h>

#include "escape.h"
#include "moat/wire.h"

static struct escape_addr sinks[2] = {{.len = 4}, {.len = 16}};

struct pkt {
	uint8_t b[512];
	size_t n;
};

static void put(struct pkt *p, const void *b, size_t n)
{
	cr_assert(p->n + n <= sizeof(p->b));
	memcpy(p->b + p->n, b, n);
	p->n += n;
}

/* Header (ID 0x1234, QR RD RA, rcode 0, the counts given) and the question x.test/A/IN. */
static void head(struct pkt *p, uint8_t flags_hi, uint8_t qd, uint8_t an, uint8_t ns, uint8_t ar)
{
	const uint8_t h[] = {0x12, 0x34, flags_hi, 0x80, 0, qd, 0, an, 0, ns, 0, ar};
	const uint8_t q[] = {1, 'X', 4, 't', 'e', 's', 't', 0, 0, 1, 0, 1};

	p->n = 0;
	put(p, h, sizeof(h));
	if (qd)
		put(p, q, sizeof(q));
}

/* One record owned by the question name (a pointer to offset 12). */
static void rr(struct pkt *p, uint16_t type, uint16_t cls, uint32_t ttl, const uint8_t *rd,
               uint8_t rdlen)
{
	const uint8_t r[] = {0xc0,
	                     12,
	                     (uint8_t)(type >> 8),
	                     (uint8_t)type,
	                     (uint8_t)(cls >> 8),
	                     (uint8_t)cls,
	                     (uint8_t)(ttl >> 24),
	                     (uint8_t)(ttl >> 16),
	                     (uint8_t)(ttl >> 8),
	                     (uint8_t)ttl,
	                     0,
	                     rdlen};
	put(p, r, sizeof(r));
	put(p, rd, rdlen);
}

static const uint8_t opt_empty[] = {0, 0, 41, 4, 0xd0, 0, 0, 0, 0, 0, 0};
static const uint8_t a_doc[] = {192, 0, 2, 10};
static const uint8_t a_meta[] = {169, 254, 169, 254};

static void judge(const struct pkt *p, struct escape_answer *a)
{
	uint8_t lname[NAME_MAXWIRE];

	cr_assert(name_from_text("x.test", 6, lname) > 0);
	escape_classify(p->b, p->n, 0x1234, lname, WIRE_A, sinks, 2, a);
}

Test(escape_judge, answer_and_case_insensitive_question)
{
	struct pkt p;
	struct escape_answer a;

	head(&p, 0x81, 1, 1, 0, 0);
	rr(&p, WIRE_A, WIRE_CLASS_IN, 300, a_doc, 4);
	judge(&p, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_DATA, "X.test answers x.test");
	cr_expect_eq(a.naddr, 1);
	cr_expect_eq(memcmp(a.addr[0].b, a_doc, 4), 0);
	cr_expect_eq(a.addr_ttl, 300);
}

Test(escape_judge, header_checks)
{
	struct pkt p;
	struct escape_answer a;

	head(&p, 0x01, 1, 0, 0, 0); /* QR clear: a query, not a reply */
	judge(&p, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_MALFORMED, "QR clear");
	head(&p, 0x81 | 0x28, 1, 0, 0, 0); /* opcode 5 (UPDATE) */
	judge(&p, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_MALFORMED, "another opcode");
	head(&p, 0x81, 0, 0, 0, 0);
	judge(&p, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_MALFORMED, "no question");
	head(&p, 0x81, 1, 1, 0, 0); /* the count promises a record that is not there */
	judge(&p, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_MALFORMED, "truncated answer section");
}

Test(escape_judge, opt_rules)
{
	struct pkt p;
	struct escape_answer a;

	head(&p, 0x81, 1, 0, 0, 2);
	put(&p, opt_empty, sizeof(opt_empty));
	put(&p, opt_empty, sizeof(opt_empty));
	judge(&p, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_MALFORMED, "two OPT records");

	head(&p, 0x81, 1, 1, 0, 0);
	put(&p, opt_empty, sizeof(opt_empty));
	judge(&p, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_MALFORMED, "OPT in the answer section");

	/* One OPT and a TSIG: ldns lifts both out of the additional section; still one OPT. */
	const uint8_t tsig[] = {0, 0, 250, 0, 255, 0, 0,  0, 0, 0,    19,   1, 'a', 0, 0,
	                        0, 0, 0,   0, 1,   1, 44, 0, 0, 0x12, 0x34, 0, 0,   0, 0};
	head(&p, 0x81, 1, 0, 0, 2);
	put(&p, opt_empty, sizeof(opt_empty));
	put(&p, tsig, sizeof(tsig));
	judge(&p, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_NODATA, "OPT and TSIG");
}

Test(escape_judge, other_class_and_ttl_top_bit)
{
	struct pkt p;
	struct escape_answer a;

	/* A class-CH "A" holding the metadata address is no answer to an IN question. */
	head(&p, 0x81, 1, 1, 0, 0);
	rr(&p, WIRE_A, 3, 60, a_meta, 4);
	judge(&p, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_NODATA);
	cr_expect_eq(a.naddr, 0);

	head(&p, 0x81, 1, 1, 0, 0);
	rr(&p, WIRE_A, WIRE_CLASS_IN, 0x80000001u, a_doc, 4);
	judge(&p, &a);
	cr_expect_eq(a.addr_ttl, 0, "RFC 2181 8: the top bit set means zero");
}

Test(escape_judge, ede_after_another_option)
{
	struct pkt p;
	struct escape_answer a;
	/* OPT with a padding option (code 12, 2 bytes), then EDE 15 (Blocked). */
	const uint8_t opt[] = {0,  0, 41, 4, 0xd0, 0, 0,  0, 0, 0, 12, 0,
	                       12, 0, 2,  0, 0,    0, 15, 0, 2, 0, 15};

	head(&p, 0x81, 1, 0, 0, 1);
	p.b[3] = 0x83; /* NXDOMAIN */
	put(&p, opt, sizeof(opt));
	judge(&p, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_DENY);
	cr_expect_eq(a.ede, 15);
}
