/* Unit tests for the local answers and upstream queries moatd builds: every output is parsed
 * back with ldns and checked field by field (header bits, question echo, OPT and the Extended
 * DNS Error bytes, sinkhole records), plus the type and rcode names. */
#include <criterion/criterion.h>

#include <ldns/ldns.h>
#include <stdlib.h>
#include <string.h>

#include "moat/err.h"
#include "moat/wire.h"

struct qopts {
	const char *name;
	ldns_rr_type type;
	ldns_rr_class rclass;
	uint16_t id;
	uint16_t flags;
	bool edns;
	uint16_t udp_size;
	bool do_bit;
};

/* Build a client query with ldns and read it with wire_query_parse. */
static void client_query(const struct qopts *o, struct wire_query *q)
{
	ldns_rdf *name = ldns_dname_new_frm_str(o->name);
	cr_assert_not_null(name, "%s", o->name);
	ldns_pkt *p =
	    ldns_pkt_query_new(name, o->type, o->rclass ? o->rclass : LDNS_RR_CLASS_IN, o->flags);
	cr_assert_not_null(p);
	ldns_pkt_set_id(p, o->id);
	if (o->edns) {
		ldns_pkt_set_edns_udp_size(p, o->udp_size ? o->udp_size : 4096);
		ldns_pkt_set_edns_do(p, o->do_bit);
	}
	uint8_t *w = NULL;
	size_t n = 0;
	cr_assert_eq(ldns_pkt2wire(&w, p, &n), LDNS_STATUS_OK);
	cr_assert_eq(wire_query_parse(w, n, q), WQ_OK);
	LDNS_FREE(w);
	ldns_pkt_free(p);
}

static ldns_pkt *parse_back(const uint8_t *b, int n)
{
	cr_assert_gt(n, WIRE_HDR, "build returned %d", n);
	ldns_pkt *p = NULL;
	cr_assert_eq(ldns_wire2pkt(&p, b, (size_t)n), LDNS_STATUS_OK,
	             "ldns cannot parse our output");
	return p;
}

/* The owner of the question, as wire bytes, must equal want (case included). */
static void expect_question(ldns_pkt *p, const char *want_wire, size_t wlen, uint16_t type,
                            uint16_t rclass)
{
	cr_assert_eq(ldns_pkt_qdcount(p), 1);
	ldns_rr *qr = ldns_rr_list_rr(ldns_pkt_question(p), 0);
	ldns_rdf *owner = ldns_rr_owner(qr);
	cr_assert_eq(ldns_rdf_size(owner), wlen);
	cr_expect_arr_eq(ldns_rdf_data(owner), want_wire, wlen, "question echoed with client case");
	cr_expect_eq(ldns_rr_get_type(qr), type);
	cr_expect_eq(ldns_rr_get_class(qr), rclass);
}

/* The OPT RDATA of p must be exactly one EDE option with code and text. */
static void expect_ede(ldns_pkt *p, uint16_t code, const char *text, size_t tl)
{
	ldns_rdf *d = ldns_pkt_edns_data(p);
	cr_assert_not_null(d, "no EDNS options");
	uint8_t want[400];
	cr_assert_leq(6 + tl, sizeof(want));
	want[0] = 0;
	want[1] = 15;
	want[2] = (uint8_t)((2 + tl) >> 8);
	want[3] = (uint8_t)(2 + tl);
	want[4] = (uint8_t)(code >> 8);
	want[5] = (uint8_t)code;
	memcpy(want + 6, text, tl);
	cr_assert_eq(ldns_rdf_size(d), 6 + tl);
	cr_expect_arr_eq(ldns_rdf_data(d), want, 6 + tl);
}

Test(build_answer, nxdomain_with_ede)
{
	struct wire_query q;
	struct qopts o = {.name = "WwW.Blocked.Example.",
	                  .type = LDNS_RR_TYPE_A,
	                  .id = 0xA1B2,
	                  .flags = LDNS_RD | LDNS_CD,
	                  .edns = true,
	                  .udp_size = 4096};
	client_query(&o, &q);
	const char *reason = "moat: not on allowlist of agent ci-42";
	struct wire_ede ede = {WIRE_EDE_BLOCKED, reason};
	uint8_t out[512];
	int n = wire_build_answer(&q, WIRE_NXDOMAIN, &ede, NULL, NULL, 0, out, sizeof(out));
	ldns_pkt *p = parse_back(out, n);
	cr_expect_eq(ldns_pkt_id(p), 0xA1B2);
	cr_expect_eq(ldns_pkt_get_rcode(p), LDNS_RCODE_NXDOMAIN);
	cr_expect(ldns_pkt_qr(p));
	cr_expect(ldns_pkt_rd(p));
	cr_expect(ldns_pkt_cd(p));
	cr_expect(ldns_pkt_ra(p));
	cr_expect_not(ldns_pkt_aa(p));
	cr_expect_not(ldns_pkt_tc(p));
	cr_expect_not(ldns_pkt_ad(p));
	cr_expect_eq(ldns_pkt_get_opcode(p), LDNS_PACKET_QUERY);
	cr_expect_eq(ldns_pkt_ancount(p), 0);
	cr_expect_eq(ldns_pkt_nscount(p), 0);
	cr_expect_eq(ldns_pkt_arcount(p), 0, "the OPT only");
	expect_question(p, "\3WwW\7Blocked\7Example\0", 21, LDNS_RR_TYPE_A, LDNS_RR_CLASS_IN);
	cr_assert(ldns_pkt_edns(p), "client sent EDNS: OPT expected");
	cr_expect_eq(ldns_pkt_edns_udp_size(p), WIRE_EDNS_SIZE);
	cr_expect_eq(ldns_pkt_edns_version(p), 0);
	cr_expect_eq(ldns_pkt_edns_extended_rcode(p), 0);
	cr_expect_not(ldns_pkt_edns_do(p));
	expect_ede(p, WIRE_EDE_BLOCKED, reason, strlen(reason));
	/* the raw header: ARCOUNT 1 and the OPT at the end */
	cr_expect_eq(out[10] << 8 | out[11], 1);
	size_t opt_at = 12 + 21 + 4;
	cr_expect_eq(out[opt_at], 0);
	cr_expect_eq(out[opt_at + 1] << 8 | out[opt_at + 2], WIRE_OPT);
	cr_expect_eq((size_t)n, opt_at + 11 + 6 + strlen(reason));
	ldns_pkt_free(p);
}

Test(build_answer, rd_cd_not_set_when_client_did_not)
{
	struct wire_query q;
	struct qopts o = {.name = "example.com.", .type = LDNS_RR_TYPE_A, .id = 1};
	client_query(&o, &q);
	uint8_t out[512];
	int n = wire_build_answer(&q, WIRE_NXDOMAIN, NULL, NULL, NULL, 0, out, sizeof(out));
	ldns_pkt *p = parse_back(out, n);
	cr_expect_not(ldns_pkt_rd(p));
	cr_expect_not(ldns_pkt_cd(p));
	cr_expect(ldns_pkt_ra(p));
	cr_expect(ldns_pkt_qr(p));
	ldns_pkt_free(p);
}

Test(build_answer, no_opt_without_client_edns)
{
	struct wire_query q;
	struct qopts o = {
	    .name = "example.com.", .type = LDNS_RR_TYPE_A, .id = 77, .flags = LDNS_RD};
	client_query(&o, &q);
	struct wire_ede ede = {WIRE_EDE_BLOCKED, "blocked"};
	uint8_t out[512];
	int n = wire_build_answer(&q, WIRE_NXDOMAIN, &ede, NULL, NULL, 0, out, sizeof(out));
	cr_expect_eq(n, 12 + 13 + 4, "header and question only");
	ldns_pkt *p = parse_back(out, n);
	cr_expect_not(ldns_pkt_edns(p));
	cr_expect_eq(ldns_pkt_arcount(p), 0);
	cr_expect_eq(out[10] << 8 | out[11], 0);
	cr_expect_eq(ldns_pkt_get_rcode(p), LDNS_RCODE_NXDOMAIN);
	ldns_pkt_free(p);
}

Test(build_answer, refused_do_bit_and_no_ede)
{
	struct wire_query q;
	struct qopts o = {.name = "example.com.",
	                  .type = LDNS_RR_TYPE_MX,
	                  .id = 2,
	                  .flags = LDNS_RD,
	                  .edns = true,
	                  .do_bit = true};
	client_query(&o, &q);
	uint8_t out[512];
	int n = wire_build_answer(&q, WIRE_REFUSED, NULL, NULL, NULL, 0, out, sizeof(out));
	ldns_pkt *p = parse_back(out, n);
	cr_expect_eq(ldns_pkt_get_rcode(p), LDNS_RCODE_REFUSED);
	cr_expect(ldns_pkt_edns(p));
	cr_expect(ldns_pkt_edns_do(p), "DO echoed");
	cr_expect(ldns_pkt_edns_data(p) == NULL || ldns_rdf_size(ldns_pkt_edns_data(p)) == 0);
	cr_expect_eq(n, 12 + 13 + 4 + 11);
	expect_question(p, "\7example\3com\0", 13, LDNS_RR_TYPE_MX, LDNS_RR_CLASS_IN);
	ldns_pkt_free(p);
}

Test(build_answer, ede_without_text_and_long_text)
{
	struct wire_query q;
	struct qopts o = {.name = "example.com.", .type = LDNS_RR_TYPE_A, .id = 2, .edns = true};
	client_query(&o, &q);
	uint8_t out[2048];
	struct wire_ede ede = {WIRE_EDE_PROHIBITED, NULL};
	int n = wire_build_answer(&q, WIRE_REFUSED, &ede, NULL, NULL, 0, out, sizeof(out));
	ldns_pkt *p = parse_back(out, n);
	expect_ede(p, WIRE_EDE_PROHIBITED, "", 0);
	ldns_pkt_free(p);
	/* a long reason is cut (at 300 bytes), never overflowing */
	char longtext[1000];
	memset(longtext, 'x', sizeof(longtext) - 1);
	longtext[sizeof(longtext) - 1] = 0;
	struct wire_ede ede2 = {WIRE_EDE_FILTERED, longtext};
	n = wire_build_answer(&q, WIRE_NXDOMAIN, &ede2, NULL, NULL, 0, out, sizeof(out));
	p = parse_back(out, n);
	expect_ede(p, WIRE_EDE_FILTERED, longtext, 300);
	ldns_pkt_free(p);
}

static void expect_rr(ldns_pkt *p, const char *text)
{
	ldns_rr *want = NULL;
	cr_assert_eq(ldns_rr_new_frm_str(&want, text, 0, NULL, NULL), LDNS_STATUS_OK, "%s", text);
	cr_assert_eq(ldns_pkt_ancount(p), 1);
	ldns_rr *got = ldns_rr_list_rr(ldns_pkt_answer(p), 0);
	cr_expect_eq(ldns_rr_compare(got, want), 0, "%s", text);
	cr_expect_eq(ldns_rr_ttl(got), ldns_rr_ttl(want));
	ldns_rr_free(want);
}

Test(build_answer, sinkhole_records)
{
	const uint8_t s4[4] = {0, 0, 0, 0};
	const uint8_t s6[16] = {0x20, 0x01, 0x0d, 0xb8, [15] = 0x35};
	uint8_t out[512];
	struct wire_query q;
	struct qopts o = {.name = "Evil.Example.",
	                  .type = LDNS_RR_TYPE_A,
	                  .id = 3,
	                  .flags = LDNS_RD,
	                  .edns = true};
	client_query(&o, &q);
	struct wire_ede ede = {WIRE_EDE_BLOCKED, "sinkholed"};
	int n = wire_build_answer(&q, WIRE_NOERROR, &ede, s4, s6, 60, out, sizeof(out));
	ldns_pkt *p = parse_back(out, n);
	cr_expect_eq(ldns_pkt_get_rcode(p), LDNS_RCODE_NOERROR);
	expect_rr(p, "evil.example. 60 IN A 0.0.0.0");
	expect_ede(p, WIRE_EDE_BLOCKED, "sinkholed", 9);
	ldns_pkt_free(p);

	o.type = LDNS_RR_TYPE_AAAA;
	client_query(&o, &q);
	n = wire_build_answer(&q, WIRE_NOERROR, NULL, s4, s6, 3600, out, sizeof(out));
	p = parse_back(out, n);
	expect_rr(p, "evil.example. 3600 IN AAAA 2001:db8::35");
	ldns_pkt_free(p);

	/* no record for other types, nor when no address is configured for the family */
	o.type = LDNS_RR_TYPE_TXT;
	client_query(&o, &q);
	n = wire_build_answer(&q, WIRE_NOERROR, NULL, s4, s6, 60, out, sizeof(out));
	p = parse_back(out, n);
	cr_expect_eq(ldns_pkt_ancount(p), 0);
	ldns_pkt_free(p);
	o.type = LDNS_RR_TYPE_AAAA;
	client_query(&o, &q);
	n = wire_build_answer(&q, WIRE_NOERROR, NULL, s4, NULL, 60, out, sizeof(out));
	p = parse_back(out, n);
	cr_expect_eq(ldns_pkt_ancount(p), 0);
	ldns_pkt_free(p);
	/* class CH: never an IN record */
	o.type = LDNS_RR_TYPE_A;
	o.rclass = LDNS_RR_CLASS_CH;
	client_query(&o, &q);
	n = wire_build_answer(&q, WIRE_REFUSED, NULL, s4, s6, 60, out, sizeof(out));
	p = parse_back(out, n);
	cr_expect_eq(ldns_pkt_ancount(p), 0);
	ldns_pkt_free(p);
}

Test(build_answer, formerr_without_question)
{
	uint8_t pkt[12] = {0x12, 0x34, 0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0};
	struct wire_query q;
	cr_assert_eq(wire_query_parse(pkt, sizeof(pkt), &q), WQ_FORMERR);
	uint8_t out[512];
	int n = wire_build_answer(&q, WIRE_FORMERR, NULL, NULL, NULL, 0, out, sizeof(out));
	cr_assert_eq(n, 12);
	ldns_pkt *p = NULL;
	cr_assert_eq(ldns_wire2pkt(&p, out, (size_t)n), LDNS_STATUS_OK);
	cr_expect_eq(ldns_pkt_id(p), 0x1234);
	cr_expect_eq(ldns_pkt_get_rcode(p), LDNS_RCODE_FORMERR);
	cr_expect_eq(ldns_pkt_qdcount(p), 0);
	cr_expect(ldns_pkt_qr(p));
	cr_expect(ldns_pkt_rd(p));
	ldns_pkt_free(p);
}

Test(build_answer, notimp_keeps_opcode)
{
	uint8_t pkt[] = {0x00, 0x09, 0x28, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 1, 'a', 0, 0, 6, 0, 1};
	struct wire_query q;
	cr_assert_eq(wire_query_parse(pkt, sizeof(pkt), &q), WQ_NOTIMP);
	uint8_t out[512];
	int n = wire_build_answer(&q, WIRE_NOTIMP, NULL, NULL, NULL, 0, out, sizeof(out));
	cr_assert_geq(n, 12);
	ldns_pkt *p = NULL;
	cr_assert_eq(ldns_wire2pkt(&p, out, (size_t)n), LDNS_STATUS_OK);
	cr_expect_eq(ldns_pkt_get_opcode(p), LDNS_PACKET_UPDATE);
	cr_expect_eq(ldns_pkt_get_rcode(p), LDNS_RCODE_NOTIMPL);
	cr_expect_eq(ldns_pkt_id(p), 9);
	ldns_pkt_free(p);
}

Test(build_answer, badvers_extended_rcode)
{
	struct wire_query q;
	struct qopts o = {.name = "example.com.", .type = LDNS_RR_TYPE_A, .id = 2, .edns = true};
	client_query(&o, &q);
	uint8_t out[512];
	int n = wire_build_answer(&q, WIRE_BADVERS, NULL, NULL, NULL, 0, out, sizeof(out));
	ldns_pkt *p = parse_back(out, n);
	cr_expect_eq(ldns_pkt_get_rcode(p), 0, "low 4 bits of 16");
	cr_expect_eq(ldns_pkt_edns_extended_rcode(p), 1, "high 8 bits of 16");
	ldns_pkt_free(p);
}

Test(build_answer, too_small_buffer)
{
	struct wire_query q;
	struct qopts o = {.name = "example.com.", .type = LDNS_RR_TYPE_A, .id = 2, .edns = true};
	client_query(&o, &q);
	uint8_t out[512];
	struct wire_ede ede = {WIRE_EDE_BLOCKED, "blocked"};
	const uint8_t s4[4] = {0};
	int full = wire_build_answer(&q, WIRE_NOERROR, &ede, s4, NULL, 5, out, sizeof(out));
	cr_assert_gt(full, 0);
	for (int cap = 0; cap < full; cap++) {
		memset(out, 0xEE, sizeof(out));
		cr_expect_eq(
		    wire_build_answer(&q, WIRE_NOERROR, &ede, s4, NULL, 5, out, (size_t)cap),
		    MOAT_ESPACE, "cap %d", cap);
		cr_expect_eq(out[cap], 0xEE, "nothing written past cap %d", cap);
	}
	cr_expect_eq(wire_build_answer(&q, WIRE_NOERROR, &ede, s4, NULL, 5, out, (size_t)full),
	             full);
}

/* ---- upstream queries ---- */

Test(build_query, one_question_rd_opt)
{
	uint8_t out[512];
	int n = wire_build_query(0xCAFE, (const uint8_t *)"\3www\7example\3com", WIRE_AAAA,
	                         WIRE_CLASS_IN, false, out, sizeof(out));
	ldns_pkt *p = parse_back(out, n);
	cr_expect_eq(ldns_pkt_id(p), 0xCAFE);
	cr_expect_not(ldns_pkt_qr(p));
	cr_expect(ldns_pkt_rd(p));
	cr_expect_not(ldns_pkt_cd(p));
	cr_expect_not(ldns_pkt_ad(p));
	cr_expect_not(ldns_pkt_aa(p));
	cr_expect_eq(ldns_pkt_get_opcode(p), LDNS_PACKET_QUERY);
	cr_expect_eq(ldns_pkt_get_rcode(p), 0);
	expect_question(p, "\3www\7example\3com\0", 17, LDNS_RR_TYPE_AAAA, LDNS_RR_CLASS_IN);
	cr_expect_eq(ldns_pkt_ancount(p), 0);
	cr_expect_eq(ldns_pkt_nscount(p), 0);
	cr_expect_eq(ldns_pkt_arcount(p), 0, "nothing but the OPT");
	cr_assert(ldns_pkt_edns(p));
	cr_expect_eq(ldns_pkt_edns_udp_size(p), WIRE_EDNS_SIZE);
	cr_expect_not(ldns_pkt_edns_do(p));
	cr_expect_eq(ldns_pkt_edns_version(p), 0);
	cr_expect(ldns_pkt_edns_data(p) == NULL || ldns_rdf_size(ldns_pkt_edns_data(p)) == 0);
	cr_expect_eq(n, 12 + 17 + 4 + 11);
	/* the raw flags word: RD only */
	cr_expect_eq(out[2], 0x01);
	cr_expect_eq(out[3], 0x00);
	cr_expect_eq(out[10] << 8 | out[11], 1);
	ldns_pkt_free(p);
}

Test(build_query, dnssec_ok)
{
	uint8_t out[512];
	int n = wire_build_query(1, (const uint8_t *)"\7example\3com", WIRE_DNAME, WIRE_CLASS_IN,
	                         true, out, sizeof(out));
	ldns_pkt *p = parse_back(out, n);
	cr_expect(ldns_pkt_edns_do(p));
	/* the Z bits other than DO stay zero */
	cr_expect_eq(out[n - 4], 0x80);
	cr_expect_eq(out[n - 3], 0x00);
	ldns_pkt_free(p);
}

Test(build_query, root_and_errors)
{
	uint8_t out[512];
	int n = wire_build_query(1, (const uint8_t *)"", WIRE_NS, WIRE_CLASS_IN, false, out,
	                         sizeof(out));
	ldns_pkt *p = parse_back(out, n);
	expect_question(p, "", 1, LDNS_RR_TYPE_NS, LDNS_RR_CLASS_IN);
	ldns_pkt_free(p);
	cr_expect_eq(wire_build_query(1, (const uint8_t *)"\3www\7example\3com", WIRE_A,
	                              WIRE_CLASS_IN, false, out, 12 + 17 + 4 + 10),
	             MOAT_ESPACE);
	cr_expect_eq(wire_build_query(1, (const uint8_t *)"\3www\7example\3com", WIRE_A,
	                              WIRE_CLASS_IN, false, out, 20),
	             MOAT_ESPACE);
	cr_expect_lt(wire_build_query(1, (const uint8_t *)"\xc0\x0c", WIRE_A, WIRE_CLASS_IN, false,
	                              out, sizeof(out)),
	             0);
}

Test(build_query, append_opt_bumps_arcount)
{
	uint8_t out[128] = {0, 1, 0x81, 0x80, 0, 0, 0, 0, 0, 0, 0, 2};
	struct wire_ede ede = {WIRE_EDE_NOT_READY, "hi"};
	int n = wire_append_opt(out, 12, sizeof(out), 4000, true, 3, &ede);
	cr_assert_eq(n, 12 + 11 + 6 + 2);
	cr_expect_eq(out[11], 3);
	const uint8_t want[] = {0, 0, 41, 0x0f, 0xa0, 3, 0,  0x80, 0,  0,
	                        8, 0, 15, 0,    4,    0, 14, 'h',  'i'};
	cr_expect_arr_eq(out + 12, want, sizeof(want));
	cr_expect_eq(wire_append_opt(out, 12, 12 + 11 + 6 + 1, 4000, true, 3, &ede), MOAT_ESPACE);
	cr_expect_eq(out[11], 3, "ARCOUNT untouched on error");
}

/* An EDE added to the empty OPT record that ends an answer (serve-stale's "Stale Answer"). */
Test(build_query, add_ede_to_trailing_opt)
{
	uint8_t out[128] = {0, 1, 0x81, 0x80, 0, 0, 0, 0, 0, 0, 0, 0};
	int n = wire_append_opt(out, 12, sizeof(out), 1232, false, 0, NULL);
	cr_assert_eq(n, 12 + 11);
	struct wire_ede ede = {WIRE_EDE_STALE, "old"};
	cr_expect_eq(wire_add_ede(out, (size_t)n, (size_t)n + 8, &ede), MOAT_ESPACE);
	cr_expect_eq(out[12 + 10], 0, "RDLENGTH untouched on error");
	int m = wire_add_ede(out, (size_t)n, sizeof(out), &ede);
	cr_assert_eq(m, n + 4 + 2 + 3);
	ldns_pkt *p = parse_back(out, m);
	expect_ede(p, WIRE_EDE_STALE, "old", 3);
	ldns_pkt_free(p);
	/* Only once, and only on an empty trailing OPT. */
	cr_expect_eq(wire_add_ede(out, (size_t)m, sizeof(out), &ede), MOAT_EINVAL);
	uint8_t bare[12] = {0, 1, 0x81, 0x80};
	cr_expect_eq(wire_add_ede(bare, sizeof(bare), sizeof(bare), &ede), MOAT_EINVAL);
}

/* ---- names of types and rcodes ---- */

Test(strings, type_str)
{
	char buf[16];
	cr_expect_str_eq(wire_type_str(1, buf, sizeof(buf)), "A");
	cr_expect_str_eq(wire_type_str(28, buf, sizeof(buf)), "AAAA");
	cr_expect_str_eq(wire_type_str(5, buf, sizeof(buf)), "CNAME");
	cr_expect_str_eq(wire_type_str(65, buf, sizeof(buf)), "HTTPS");
	cr_expect_str_eq(wire_type_str(64, buf, sizeof(buf)), "SVCB");
	cr_expect_str_eq(wire_type_str(255, buf, sizeof(buf)), "ANY");
	cr_expect_str_eq(wire_type_str(257, buf, sizeof(buf)), "CAA");
	cr_expect_str_eq(wire_type_str(123, buf, sizeof(buf)), "TYPE123");
	cr_expect_str_eq(wire_type_str(0, buf, sizeof(buf)), "TYPE0");
	cr_expect_str_eq(wire_type_str(65535, buf, sizeof(buf)), "TYPE65535");
	char small[4];
	cr_expect_str_eq(wire_type_str(65535, small, sizeof(small)), "TYP");
	cr_expect_eq(wire_type_str(1, buf, sizeof(buf)), buf);
}

Test(strings, rcode_str)
{
	cr_expect_str_eq(wire_rcode_str(0), "NOERROR");
	cr_expect_str_eq(wire_rcode_str(1), "FORMERR");
	cr_expect_str_eq(wire_rcode_str(2), "SERVFAIL");
	cr_expect_str_eq(wire_rcode_str(3), "NXDOMAIN");
	cr_expect_str_eq(wire_rcode_str(4), "NOTIMP");
	cr_expect_str_eq(wire_rcode_str(5), "REFUSED");
	cr_expect_str_eq(wire_rcode_str(10), "NOTZONE");
	cr_expect_str_eq(wire_rcode_str(16), "BADVERS");
	cr_expect_str_eq(wire_rcode_str(11), "RCODE?");
	cr_expect_str_eq(wire_rcode_str(255), "RCODE?");
}
