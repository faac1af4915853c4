/* Unit tests for the client query reader: real queries built with ldns (with and without EDNS)
 * and hand-made malformed ones (header only, responses, opcodes, counts, compression in the
 * question, truncation, OPT records that break RFC 6891, trailing bytes). */
#include <criterion/criterion.h>

#include <ldns/ldns.h>
#include <stdlib.h>
#include <string.h>

#include "moat/err.h"
#include "moat/wire.h"

/* ---- packets built with ldns ---- */

struct qopts {
	const char *name;
	ldns_rr_type type;
	ldns_rr_class rclass;
	uint16_t id;
	uint16_t flags; /* LDNS_RD, LDNS_CD, ... */
	bool edns;
	uint16_t udp_size;
	bool do_bit;
	uint8_t version;
};

static size_t ldns_query(const struct qopts *o, uint8_t *out, size_t cap)
{
	ldns_rdf *name = ldns_dname_new_frm_str(o->name);
	cr_assert_not_null(name, "%s", o->name);
	ldns_pkt *p =
	    ldns_pkt_query_new(name, o->type, o->rclass ? o->rclass : LDNS_RR_CLASS_IN, o->flags);
	cr_assert_not_null(p);
	ldns_pkt_set_id(p, o->id);
	if (o->edns) {
		ldns_pkt_set_edns_udp_size(p, o->udp_size);
		ldns_pkt_set_edns_do(p, o->do_bit);
		ldns_pkt_set_edns_version(p, o->version);
	}
	uint8_t *w = NULL;
	size_t n = 0;
	cr_assert_eq(ldns_pkt2wire(&w, p, &n), LDNS_STATUS_OK);
	cr_assert_leq(n, cap);
	memcpy(out, w, n);
	LDNS_FREE(w);
	ldns_pkt_free(p);
	return n;
}

/* ---- hand-made packets ---- */

struct pkt {
	uint8_t b[1024];
	size_t n;
};

static void put(struct pkt *p, const void *d, size_t n)
{
	cr_assert_leq(p->n + n, sizeof(p->b));
	if (n)
		memcpy(p->b + p->n, d, n);
	p->n += n;
}

static void put16(struct pkt *p, uint16_t v)
{
	uint8_t b[2] = {(uint8_t)(v >> 8), (uint8_t)v};
	put(p, b, 2);
}

static void put32(struct pkt *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p, (uint16_t)v);
}

static void hdr(struct pkt *p, uint16_t id, uint16_t flags, uint16_t qd, uint16_t an, uint16_t ns,
                uint16_t ar)
{
	p->n = 0;
	put16(p, id);
	put16(p, flags);
	put16(p, qd);
	put16(p, an);
	put16(p, ns);
	put16(p, ar);
}

/* "\7example\3com\0" type A class IN */
static void question(struct pkt *p)
{
	put(p, "\7example\3com\0", 13);
	put16(p, WIRE_A);
	put16(p, WIRE_CLASS_IN);
}

/* An OPT record: owner (wire), udp size, ttl word, rdata. */
static void opt(struct pkt *p, const char *owner, size_t olen, uint16_t size, uint32_t ttl,
                const void *rdata, uint16_t rdlen)
{
	put(p, owner, olen);
	put16(p, WIRE_OPT);
	put16(p, size);
	put32(p, ttl);
	put16(p, rdlen);
	put(p, rdata, rdlen);
}

/* ---- good queries ---- */

Test(wire_query, plain_query)
{
	uint8_t b[512];
	struct qopts o = {.name = "WwW.Example.COM.",
	                  .type = LDNS_RR_TYPE_AAAA,
	                  .id = 0xBEEF,
	                  .flags = LDNS_RD | LDNS_CD};
	size_t n = ldns_query(&o, b, sizeof(b));
	struct wire_query q;
	memset(&q, 0x55, sizeof(q));
	cr_assert_eq(wire_query_parse(b, n, &q), WQ_OK);
	cr_expect_eq(q.id, 0xBEEF);
	cr_expect_eq(q.flags, 0x0110);
	cr_expect_eq(q.opcode, 0);
	cr_expect_eq(q.qtype, WIRE_AAAA);
	cr_expect_eq(q.qclass, WIRE_CLASS_IN);
	cr_expect(q.has_question);
	cr_expect_not(q.edns);
	cr_expect_eq(q.edns_size, WIRE_UDP_MIN);
	cr_expect_not(q.edns_do);
	cr_expect_eq(q.edns_version, 0);
	cr_expect_eq(q.qname_len, 17);
	cr_expect_eq(q.question_end, 12 + 17 + 4);
	cr_expect_eq(q.question_end, n);
	cr_expect_arr_eq(q.qname, "\3WwW\7Example\3COM\0", 17, "client case kept");
	cr_expect_arr_eq(q.lname, "\3www\7example\3com\0", 17, "lower-cased for policy");
}

Test(wire_query, root_question)
{
	uint8_t b[512];
	struct qopts o = {.name = ".", .type = LDNS_RR_TYPE_NS, .id = 1};
	size_t n = ldns_query(&o, b, sizeof(b));
	struct wire_query q;
	cr_assert_eq(wire_query_parse(b, n, &q), WQ_OK);
	cr_expect_eq(q.qname_len, 1);
	cr_expect_eq(q.lname[0], 0);
	cr_expect_eq(q.qtype, WIRE_NS);
}

Test(wire_query, class_and_type_kept)
{
	uint8_t b[512];
	struct qopts o = {
	    .name = "version.bind.", .type = LDNS_RR_TYPE_TXT, .rclass = LDNS_RR_CLASS_CH, .id = 7};
	size_t n = ldns_query(&o, b, sizeof(b));
	struct wire_query q;
	cr_assert_eq(wire_query_parse(b, n, &q), WQ_OK, "class is policy's business");
	cr_expect_eq(q.qclass, 3);
	cr_expect_eq(q.qtype, WIRE_TXT);
}

Test(wire_query, with_edns)
{
	uint8_t b[512];
	struct qopts o = {.name = "example.com.",
	                  .type = LDNS_RR_TYPE_A,
	                  .id = 9,
	                  .flags = LDNS_RD,
	                  .edns = true,
	                  .udp_size = 4096,
	                  .do_bit = true};
	size_t n = ldns_query(&o, b, sizeof(b));
	struct wire_query q;
	cr_assert_eq(wire_query_parse(b, n, &q), WQ_OK);
	cr_expect(q.edns);
	cr_expect_eq(q.edns_size, 4096);
	cr_expect(q.edns_do);
	cr_expect_eq(q.edns_version, 0);
	cr_expect_eq(q.question_end, 12 + 13 + 4);
	cr_expect_lt(q.question_end, n);

	o.do_bit = false;
	o.udp_size = 1232;
	n = ldns_query(&o, b, sizeof(b));
	cr_assert_eq(wire_query_parse(b, n, &q), WQ_OK);
	cr_expect(q.edns);
	cr_expect_not(q.edns_do);
	cr_expect_eq(q.edns_size, 1232);
}

Test(wire_query, edns_small_size_raised_to_512)
{
	uint8_t b[512];
	struct qopts o = {
	    .name = "example.com.", .type = LDNS_RR_TYPE_A, .id = 9, .edns = true, .udp_size = 100};
	size_t n = ldns_query(&o, b, sizeof(b));
	struct wire_query q;
	cr_assert_eq(wire_query_parse(b, n, &q), WQ_OK);
	cr_expect(q.edns);
	cr_expect_eq(q.edns_size, 512);
}

Test(wire_query, edns_with_options)
{
	struct pkt p;
	hdr(&p, 1, 0x0100, 1, 0, 0, 1);
	question(&p);
	/* a client cookie (10) and padding (12) */
	const uint8_t rd[] = {0, 10, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 12, 0, 0};
	opt(&p, "", 1, 1400, 0, rd, sizeof(rd));
	struct wire_query q;
	cr_assert_eq(wire_query_parse(p.b, p.n, &q), WQ_OK);
	cr_expect(q.edns);
	cr_expect_eq(q.edns_size, 1400);
}

Test(wire_query, other_additional_records_ignored)
{
	struct pkt p;
	hdr(&p, 1, 0, 1, 0, 0, 2);
	question(&p);
	/* an A record in additional (some clients do odd things), then OPT */
	put(&p, "\xc0\x0c", 2);
	put16(&p, WIRE_A);
	put16(&p, WIRE_CLASS_IN);
	put32(&p, 60);
	put16(&p, 4);
	put(&p, "\xc0\x00\x02\x01", 4);
	opt(&p, "", 1, 1232, 0x8000, NULL, 0);
	struct wire_query q;
	cr_assert_eq(wire_query_parse(p.b, p.n, &q), WQ_OK);
	cr_expect(q.edns);
	cr_expect(q.edns_do);
}

/* ---- dropped ---- */

Test(wire_query, short_packet_dropped)
{
	uint8_t b[512];
	struct qopts o = {.name = "example.com.", .type = LDNS_RR_TYPE_A, .id = 0x4242};
	ldns_query(&o, b, sizeof(b));
	struct wire_query q;
	for (size_t n = 0; n < WIRE_HDR; n++) {
		memset(&q, 0x55, sizeof(q));
		cr_expect_eq(wire_query_parse(b, n, &q), WQ_DROP, "len %zu", n);
		cr_expect_not(q.has_question);
		cr_expect_not(q.edns);
	}
}

Test(wire_query, response_dropped)
{
	uint8_t b[512];
	struct qopts o = {.name = "example.com.",
	                  .type = LDNS_RR_TYPE_A,
	                  .id = 0x4242,
	                  .flags = LDNS_QR | LDNS_RD};
	size_t n = ldns_query(&o, b, sizeof(b));
	struct wire_query q;
	cr_expect_eq(wire_query_parse(b, n, &q), WQ_DROP);
	cr_expect_eq(q.id, 0x4242);
	/* a response with a bad opcode too: still dropped, never answered */
	b[2] |= 0x28;
	cr_expect_eq(wire_query_parse(b, n, &q), WQ_DROP);
}

/* ---- not implemented ---- */

Test(wire_query, opcodes_notimp)
{
	uint8_t b[512];
	struct qopts o = {
	    .name = "example.com.", .type = LDNS_RR_TYPE_SOA, .id = 0x1111, .flags = LDNS_RD};
	size_t n = ldns_query(&o, b, sizeof(b));
	static const uint8_t ops[] = {1 /* IQUERY */, 2 /* STATUS */, 4 /* NOTIFY */,
	                              5 /* UPDATE */, 15};
	for (size_t i = 0; i < sizeof(ops); i++) {
		b[2] = (uint8_t)((b[2] & 0x87) | ops[i] << 3);
		struct wire_query q;
		cr_expect_eq(wire_query_parse(b, n, &q), WQ_NOTIMP, "opcode %u", ops[i]);
		cr_expect_eq(q.id, 0x1111);
		cr_expect_eq(q.opcode, ops[i]);
		cr_expect_eq(q.flags & 0x0100, 0x0100, "flags filled for the answer");
	}
}

/* ---- format errors ---- */

Test(wire_query, qdcount_not_one)
{
	struct pkt p;
	struct wire_query q;
	hdr(&p, 5, 0x0100, 0, 0, 0, 0);
	cr_expect_eq(wire_query_parse(p.b, p.n, &q), WQ_FORMERR);
	cr_expect_eq(q.id, 5);
	cr_expect_not(q.has_question);
	hdr(&p, 5, 0x0100, 2, 0, 0, 0);
	question(&p);
	question(&p);
	cr_expect_eq(wire_query_parse(p.b, p.n, &q), WQ_FORMERR);
	/* qdcount 0 with a question behind it */
	hdr(&p, 5, 0x0100, 0, 0, 0, 0);
	question(&p);
	cr_expect_eq(wire_query_parse(p.b, p.n, &q), WQ_FORMERR);
}

Test(wire_query, answer_or_authority_records)
{
	struct pkt p;
	struct wire_query q;
	hdr(&p, 5, 0, 1, 1, 0, 0);
	question(&p);
	cr_expect_eq(wire_query_parse(p.b, p.n, &q), WQ_FORMERR);
	hdr(&p, 5, 0, 1, 0, 1, 0);
	question(&p);
	cr_expect_eq(wire_query_parse(p.b, p.n, &q), WQ_FORMERR);
}

Test(wire_query, compression_pointer_in_question)
{
	struct pkt p;
	struct wire_query q;
	hdr(&p, 5, 0, 1, 0, 0, 0);
	put(&p, "\3www\xc0\x00", 6);
	put16(&p, WIRE_A);
	put16(&p, WIRE_CLASS_IN);
	cr_expect_eq(wire_query_parse(p.b, p.n, &q), WQ_FORMERR);
	hdr(&p, 5, 0, 1, 0, 0, 0);
	put(&p, "\xc0\x0c", 2);
	put16(&p, WIRE_A);
	put16(&p, WIRE_CLASS_IN);
	cr_expect_eq(wire_query_parse(p.b, p.n, &q), WQ_FORMERR);
	/* the other reserved label types too */
	hdr(&p, 5, 0, 1, 0, 0, 0);
	put(&p,
	    "\x41"
	    "a\0",
	    3);
	put16(&p, WIRE_A);
	put16(&p, WIRE_CLASS_IN);
	cr_expect_eq(wire_query_parse(p.b, p.n, &q), WQ_FORMERR);
}

Test(wire_query, truncated_question)
{
	uint8_t b[512];
	struct qopts o = {.name = "www.example.com.", .type = LDNS_RR_TYPE_A, .id = 3};
	size_t n = ldns_query(&o, b, sizeof(b));
	struct wire_query q;
	cr_assert_eq(wire_query_parse(b, n, &q), WQ_OK);
	for (size_t l = WIRE_HDR; l < n; l++) {
		memset(&q, 0x55, sizeof(q));
		cr_expect_eq(wire_query_parse(b, l, &q), WQ_FORMERR, "len %zu", l);
		cr_expect_eq(q.id, 3);
		cr_expect_not(q.has_question, "len %zu", l);
	}
}

Test(wire_query, too_long_question_name)
{
	struct pkt p;
	struct wire_query q;
	hdr(&p, 5, 0, 1, 0, 0, 0);
	uint8_t lab[64];
	lab[0] = 63;
	memset(lab + 1, 'a', 63);
	for (int i = 0; i < 4; i++)
		put(&p, lab, 64);
	put(&p, "", 1);
	put16(&p, WIRE_A);
	put16(&p, WIRE_CLASS_IN);
	cr_expect_eq(wire_query_parse(p.b, p.n, &q), WQ_FORMERR);
}

Test(wire_query, two_opt_records)
{
	struct pkt p;
	struct wire_query q;
	hdr(&p, 5, 0, 1, 0, 0, 2);
	question(&p);
	opt(&p, "", 1, 1232, 0, NULL, 0);
	opt(&p, "", 1, 1232, 0, NULL, 0);
	cr_expect_eq(wire_query_parse(p.b, p.n, &q), WQ_FORMERR);
	cr_expect(q.has_question, "the question is there for the FORMERR answer");
}

Test(wire_query, opt_owner_not_root)
{
	struct pkt p;
	struct wire_query q;
	hdr(&p, 5, 0, 1, 0, 0, 1);
	question(&p);
	opt(&p, "\3com\0", 5, 1232, 0, NULL, 0);
	cr_expect_eq(wire_query_parse(p.b, p.n, &q), WQ_FORMERR);
	/* a pointer to the question's name is not the root either */
	hdr(&p, 5, 0, 1, 0, 0, 1);
	question(&p);
	opt(&p, "\xc0\x0c", 2, 1232, 0, NULL, 0);
	cr_expect_eq(wire_query_parse(p.b, p.n, &q), WQ_FORMERR);
}

Test(wire_query, opt_options_overrun)
{
	struct pkt p;
	struct wire_query q;
	/* option says 10 bytes, 4 are there */
	const uint8_t rd1[] = {0, 10, 0, 10, 1, 2, 3, 4};
	hdr(&p, 5, 0, 1, 0, 0, 1);
	question(&p);
	opt(&p, "", 1, 1232, 0, rd1, sizeof(rd1));
	cr_expect_eq(wire_query_parse(p.b, p.n, &q), WQ_FORMERR);
	/* half an option header */
	const uint8_t rd2[] = {0, 10, 0, 0, 0, 12};
	hdr(&p, 5, 0, 1, 0, 0, 1);
	question(&p);
	opt(&p, "", 1, 1232, 0, rd2, sizeof(rd2));
	cr_expect_eq(wire_query_parse(p.b, p.n, &q), WQ_FORMERR);
	/* RDLENGTH beyond the packet */
	hdr(&p, 5, 0, 1, 0, 0, 1);
	question(&p);
	opt(&p, "", 1, 1232, 0, rd1, sizeof(rd1));
	p.b[p.n - sizeof(rd1) - 1] = 20;
	cr_expect_eq(wire_query_parse(p.b, p.n, &q), WQ_FORMERR);
	/* arcount says 1, nothing there */
	hdr(&p, 5, 0, 1, 0, 0, 1);
	question(&p);
	cr_expect_eq(wire_query_parse(p.b, p.n, &q), WQ_FORMERR);
	/* OPT cut inside its fixed fields */
	hdr(&p, 5, 0, 1, 0, 0, 1);
	question(&p);
	opt(&p, "", 1, 1232, 0, NULL, 0);
	cr_expect_eq(wire_query_parse(p.b, p.n - 3, &q), WQ_FORMERR);
}

Test(wire_query, edns_version_1_badvers)
{
	uint8_t b[512];
	struct qopts o = {.name = "Example.com.",
	                  .type = LDNS_RR_TYPE_A,
	                  .id = 0x7777,
	                  .edns = true,
	                  .udp_size = 4096,
	                  .version = 1};
	size_t n = ldns_query(&o, b, sizeof(b));
	struct wire_query q;
	cr_expect_eq(wire_query_parse(b, n, &q), WQ_BADVERS);
	cr_expect(q.edns);
	cr_expect_eq(q.edns_version, 1);
	cr_expect(q.has_question);
	cr_expect_eq(q.id, 0x7777);
	cr_expect_arr_eq(q.qname, "\7Example\3com\0", 13);
	/* a malformed packet with a bad version is a FORMERR first */
	b[n++] = 0;
	cr_expect_eq(wire_query_parse(b, n, &q), WQ_FORMERR);
}

Test(wire_query, trailing_garbage)
{
	uint8_t b[512];
	struct qopts o = {.name = "example.com.", .type = LDNS_RR_TYPE_A, .id = 3};
	size_t n = ldns_query(&o, b, sizeof(b));
	b[n] = 0;
	struct wire_query q;
	cr_expect_eq(wire_query_parse(b, n + 1, &q), WQ_FORMERR);
	o.edns = true;
	o.udp_size = 1232;
	n = ldns_query(&o, b, sizeof(b));
	memcpy(b + n, "junk", 4);
	cr_expect_eq(wire_query_parse(b, n + 4, &q), WQ_FORMERR);
}

Test(wire_query, reparse_clears_previous_state)
{
	uint8_t b[512];
	struct qopts o = {.name = "example.com.",
	                  .type = LDNS_RR_TYPE_A,
	                  .id = 3,
	                  .edns = true,
	                  .udp_size = 4096,
	                  .do_bit = true};
	size_t n = ldns_query(&o, b, sizeof(b));
	struct wire_query q;
	cr_assert_eq(wire_query_parse(b, n, &q), WQ_OK);
	cr_assert(q.edns);
	struct qopts o2 = {.name = "x.", .type = LDNS_RR_TYPE_A, .id = 4};
	n = ldns_query(&o2, b, sizeof(b));
	cr_assert_eq(wire_query_parse(b, n, &q), WQ_OK);
	cr_expect_not(q.edns);
	cr_expect_not(q.edns_do);
	cr_expect_eq(q.edns_size, 512);
	cr_assert_eq(wire_query_parse(b, 5, &q), WQ_DROP);
	cr_expect_not(q.has_question);
	cr_expect_eq(q.qname[0], 0);
	cr_expect_eq(q.lname[0], 0);
}

/* Issue 12: meta types are answered locally, never forwarded; ordinary and ANY types are not
 * meta (ANY has its own local answer, RFC 8482). */
Test(wire_query, meta_qtypes)
{
	static const uint16_t meta[] = {41, 249, 250, 251, 252, 253, 254};
	for (size_t i = 0; i < sizeof(meta) / sizeof(meta[0]); i++)
		cr_expect(wire_qtype_is_meta(meta[i]), "type %u is meta", meta[i]);
	static const uint16_t plain[] = {1, 5, 16, 28, 33, 39, 64, 65, 248, 255, 256, 65535};
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
		cr_expect_not(wire_qtype_is_meta(plain[i]), "type %u is not meta", plain[i]);
}
