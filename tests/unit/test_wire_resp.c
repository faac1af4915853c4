/* Unit tests for upstream answers: the checks that tie an answer to our query, malformed
 * answers, the CNAME/DNAME chain (loops, length), TTLs, the address walk (A, AAAA and
 * SVCB/HTTPS hints in every section) and the rebuilt answer for the client, which is parsed
 * back with ldns and compared record by record. Upstream answers are built with ldns (which
 * compresses names) or by hand where ldns would refuse. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <ldns/ldns.h>
#include <stdlib.h>
#include <string.h>

#include "moat/err.h"
#include "moat/name.h"
#include "moat/wire.h"

#define MAXRRS 40

/* ---- upstream answers with ldns ---- */

struct rspec {
	uint16_t id;
	const char *qname; /* also the question text, e.g. "www.example.com." */
	ldns_rr_type qtype;
	ldns_rr_class qclass;
	uint16_t flags; /* extra header bits: LDNS_AA, LDNS_AD, LDNS_TC, LDNS_CD */
	ldns_pkt_rcode rcode;
	const char *an[MAXRRS], *ns[MAXRRS], *ar[MAXRRS];
	bool edns;
	bool not_qr;
};

static ldns_rr *rr_from(const char *text)
{
	ldns_rr *rr = NULL;
	ldns_status st = ldns_rr_new_frm_str(&rr, text, 3600, NULL, NULL);
	cr_assert_eq(st, LDNS_STATUS_OK, "ldns: %s: %s", text, ldns_get_errorstr_by_id(st));
	return rr;
}

static void push_all(ldns_pkt *p, ldns_pkt_section sec, const char *const *list)
{
	for (int i = 0; i < MAXRRS && list[i]; i++)
		cr_assert(ldns_pkt_push_rr(p, sec, rr_from(list[i])));
}

static size_t make_resp(const struct rspec *s, uint8_t *out, size_t cap)
{
	ldns_pkt *p = ldns_pkt_new();
	cr_assert_not_null(p);
	ldns_pkt_set_id(p, s->id);
	ldns_pkt_set_qr(p, !s->not_qr);
	ldns_pkt_set_rd(p, true);
	ldns_pkt_set_ra(p, true);
	ldns_pkt_set_aa(p, (s->flags & LDNS_AA) != 0);
	ldns_pkt_set_ad(p, (s->flags & LDNS_AD) != 0);
	ldns_pkt_set_tc(p, (s->flags & LDNS_TC) != 0);
	ldns_pkt_set_cd(p, (s->flags & LDNS_CD) != 0);
	ldns_pkt_set_rcode(p, (uint8_t)s->rcode);
	ldns_rr *q = ldns_rr_new();
	ldns_rr_set_owner(q, ldns_dname_new_frm_str(s->qname));
	ldns_rr_set_type(q, s->qtype);
	ldns_rr_set_class(q, s->qclass ? s->qclass : LDNS_RR_CLASS_IN);
	ldns_rr_set_question(q, true);
	cr_assert(ldns_pkt_push_rr(p, LDNS_SECTION_QUESTION, q));
	push_all(p, LDNS_SECTION_ANSWER, s->an);
	push_all(p, LDNS_SECTION_AUTHORITY, s->ns);
	push_all(p, LDNS_SECTION_ADDITIONAL, s->ar);
	if (s->edns)
		ldns_pkt_set_edns_udp_size(p, 1232);
	uint8_t *w = NULL;
	size_t n = 0;
	cr_assert_eq(ldns_pkt2wire(&w, p, &n), LDNS_STATUS_OK);
	cr_assert_leq(n, cap);
	memcpy(out, w, n);
	LDNS_FREE(w);
	ldns_pkt_free(p);
	return n;
}

/* Lower-cased wire form of a name (rotating buffers). */
static const uint8_t *W(const char *text)
{
	static uint8_t bufs[4][NAME_MAXWIRE];
	static int next;
	uint8_t *b = bufs[next++ & 3];
	cr_assert_gt(name_from_text(text, strlen(text), b), 0, "%s", text);
	return b;
}

static int parse(const uint8_t *b, size_t n, const struct rspec *s, struct wire_resp *r)
{
	return wire_resp_parse(b, n, s->id, W(s->qname), (uint16_t)s->qtype,
	                       (uint16_t)(s->qclass ? s->qclass : LDNS_RR_CLASS_IN), r);
}

/* A client query for name/type read by wire_query_parse. */
static void client_query(const char *name, ldns_rr_type type, uint16_t id, uint16_t flags,
                         bool edns, bool do_bit, struct wire_query *q)
{
	ldns_pkt *p =
	    ldns_pkt_query_new(ldns_dname_new_frm_str(name), type, LDNS_RR_CLASS_IN, flags);
	cr_assert_not_null(p);
	ldns_pkt_set_id(p, id);
	if (edns) {
		ldns_pkt_set_edns_udp_size(p, 4096);
		ldns_pkt_set_edns_do(p, do_bit);
	}
	uint8_t *w = NULL;
	size_t n = 0;
	cr_assert_eq(ldns_pkt2wire(&w, p, &n), LDNS_STATUS_OK);
	cr_assert_eq(wire_query_parse(w, n, q), WQ_OK);
	LDNS_FREE(w);
	ldns_pkt_free(p);
}

/* ---- hand-made packets ---- */

struct pkt {
	uint8_t b[16384];
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

/* Header and the question "example.com. A IN" (the name is at offset 12). */
static void hand_start(struct pkt *p, uint16_t id, uint16_t an, uint16_t ns, uint16_t ar)
{
	p->n = 0;
	put16(p, id);
	put16(p, 0x8180);
	put16(p, 1);
	put16(p, an);
	put16(p, ns);
	put16(p, ar);
	put(p, "\7example\3com\0", 13);
	put16(p, WIRE_A);
	put16(p, WIRE_CLASS_IN);
}

static void hand_rr(struct pkt *p, const void *owner, size_t olen, uint16_t type, uint16_t cls,
                    uint32_t ttl, const void *rdata, uint16_t rdlen)
{
	put(p, owner, olen);
	put16(p, type);
	put16(p, cls);
	put32(p, ttl);
	put16(p, rdlen);
	put(p, rdata, rdlen);
}

/* ---- parse: is it ours? ---- */

static const struct rspec basic = {
    .id = 0x1234,
    .qname = "www.example.com.",
    .qtype = LDNS_RR_TYPE_A,
    .an = {"www.example.com. 300 IN A 192.0.2.1"},
};

Test(resp_parse, basic_answer)
{
	uint8_t b[4096];
	size_t n = make_resp(&basic, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &basic, &r), 0);
	cr_expect_eq(r.id, 0x1234);
	cr_expect_eq(r.rcode, 0);
	cr_expect_eq(r.nrr, 1);
	cr_expect_eq(r.counts[0], 1);
	cr_expect_eq(r.rr[0].type, WIRE_A);
	cr_expect_eq(r.rr[0].rclass, WIRE_CLASS_IN);
	cr_expect_eq(r.rr[0].ttl, 300);
	cr_expect_eq(r.rr[0].rdlen, 4);
	cr_expect_eq(r.rr[0].section, WIRE_SEC_AN);
	cr_expect_arr_eq(b + r.rr[0].rdata_off, "\xc0\x00\x02\x01", 4);
	cr_expect_eq(r.nchain, 1);
	cr_expect_arr_eq(r.chain[0], "\3www\7example\3com\0", 17);
	cr_expect_not(r.chain_too_long);
	cr_expect_eq(r.min_ttl, 300);
	cr_expect_eq(r.neg_ttl, UINT32_MAX);
	cr_expect_not(r.has_opt);
}

Test(resp_parse, wrong_id_mismatch)
{
	uint8_t b[4096];
	size_t n = make_resp(&basic, b, sizeof(b));
	struct wire_resp r;
	cr_expect_eq(wire_resp_parse(b, n, 0x1235, W("www.example.com"), WIRE_A, 1, &r),
	             MOAT_EMISMATCH);
}

Test(resp_parse, not_a_response_mismatch)
{
	struct rspec s = basic;
	s.not_qr = true;
	uint8_t b[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_expect_eq(parse(b, n, &s, &r), MOAT_EMISMATCH);
	/* an opcode other than QUERY is no answer to our query either */
	n = make_resp(&basic, b, sizeof(b));
	b[2] |= 0x10;
	cr_expect_eq(parse(b, n, &basic, &r), MOAT_EMISMATCH);
}

Test(resp_parse, different_question_mismatch)
{
	uint8_t b[4096];
	size_t n = make_resp(&basic, b, sizeof(b));
	struct wire_resp r;
	cr_expect_eq(wire_resp_parse(b, n, 0x1234, W("www.example.org"), WIRE_A, 1, &r),
	             MOAT_EMISMATCH);
	cr_expect_eq(wire_resp_parse(b, n, 0x1234, W("example.com"), WIRE_A, 1, &r),
	             MOAT_EMISMATCH);
	cr_expect_eq(wire_resp_parse(b, n, 0x1234, W("www.example.com"), WIRE_AAAA, 1, &r),
	             MOAT_EMISMATCH);
	cr_expect_eq(wire_resp_parse(b, n, 0x1234, W("www.example.com"), WIRE_A, 3, &r),
	             MOAT_EMISMATCH);
	cr_expect_eq(wire_resp_parse(b, n, 0x1234, W("www.example.com"), WIRE_A, 1, &r), 0);
}

Test(resp_parse, question_count_and_header)
{
	uint8_t b[4096];
	size_t n = make_resp(&basic, b, sizeof(b));
	struct wire_resp r;
	cr_expect_eq(parse(b, 11, &basic, &r), MOAT_EMISMATCH);
	cr_expect_eq(parse(b, 12 + 10, &basic, &r), MOAT_EMISMATCH, "question cut");
	b[5] = 0;
	cr_expect_eq(parse(b, n, &basic, &r), MOAT_EMISMATCH, "no question");
	b[5] = 2;
	cr_expect_eq(parse(b, n, &basic, &r), MOAT_EMISMATCH, "two questions");
}

Test(resp_parse, question_case_accepted)
{
	struct rspec s = basic;
	s.qname = "WWW.Example.COM.";
	s.an[0] = "WWW.Example.COM. 300 IN A 192.0.2.1";
	uint8_t b[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(wire_resp_parse(b, n, 0x1234, W("www.example.com"), WIRE_A, 1, &r), 0);
	cr_expect_arr_eq(r.chain[0], "\3www\7example\3com\0", 17);
	cr_expect_eq(r.min_ttl, 300, "the answer record is on the chain whatever its case");
}

Test(resp_parse, truncated_records_eformat)
{
	struct rspec s = basic;
	s.an[1] = "www.example.com. 300 IN A 192.0.2.2";
	s.ns[0] = "example.com. 300 IN NS ns1.example.com.";
	s.ar[0] = "ns1.example.com. 300 IN A 192.0.2.53";
	s.edns = true;
	uint8_t b[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	size_t qend = 12 + 17 + 4;
	for (size_t l = qend; l < n; l++)
		cr_expect_eq(parse(b, l, &s, &r), MOAT_EFORMAT, "len %zu", l);
	for (size_t l = 12; l < qend; l++)
		cr_expect_eq(parse(b, l, &s, &r), MOAT_EMISMATCH, "len %zu", l);
}

Test(resp_parse, trailing_bytes_eformat)
{
	uint8_t b[4096];
	size_t n = make_resp(&basic, b, sizeof(b));
	b[n] = 0;
	struct wire_resp r;
	cr_expect_eq(parse(b, n + 1, &basic, &r), MOAT_EFORMAT);
	/* a count one too high is a truncated record */
	n = make_resp(&basic, b, sizeof(b));
	b[7] = 2;
	cr_expect_eq(parse(b, n, &basic, &r), MOAT_EFORMAT);
}

Test(resp_parse, bad_names_and_counts)
{
	struct pkt p;
	struct wire_resp r;
	/* a forward compression pointer in an owner */
	hand_start(&p, 1, 1, 0, 0);
	hand_rr(&p, "\xc0\x30", 2, WIRE_A, 1, 60, "\1\2\3\4", 4);
	cr_expect_eq(wire_resp_parse(p.b, p.n, 1, W("example.com"), WIRE_A, 1, &r), MOAT_EFORMAT);
	/* more records than WIRE_MAXRR */
	hand_start(&p, 1, WIRE_MAXRR, 1, 0);
	for (int i = 0; i < WIRE_MAXRR + 1; i++)
		hand_rr(&p, "\xc0\x0c", 2, WIRE_A, 1, 60, "\1\2\3\4", 4);
	cr_expect_eq(wire_resp_parse(p.b, p.n, 1, W("example.com"), WIRE_A, 1, &r), MOAT_EFORMAT);
	/* exactly WIRE_MAXRR is fine */
	hand_start(&p, 1, WIRE_MAXRR, 0, 0);
	for (int i = 0; i < WIRE_MAXRR; i++)
		hand_rr(&p, "\xc0\x0c", 2, WIRE_A, 1, 60, "\1\2\3\4", 4);
	cr_expect_eq(wire_resp_parse(p.b, p.n, 1, W("example.com"), WIRE_A, 1, &r), 0);
	cr_expect_eq(r.nrr, WIRE_MAXRR);
}

Test(resp_parse, opt_records)
{
	struct pkt p;
	struct wire_resp r;
	/* OPT in the answer section */
	hand_start(&p, 1, 1, 0, 0);
	hand_rr(&p, "", 1, WIRE_OPT, 1232, 0, NULL, 0);
	cr_expect_eq(wire_resp_parse(p.b, p.n, 1, W("example.com"), WIRE_A, 1, &r), MOAT_EFORMAT);
	/* two OPTs */
	hand_start(&p, 1, 0, 0, 2);
	hand_rr(&p, "", 1, WIRE_OPT, 1232, 0, NULL, 0);
	hand_rr(&p, "", 1, WIRE_OPT, 1232, 0, NULL, 0);
	cr_expect_eq(wire_resp_parse(p.b, p.n, 1, W("example.com"), WIRE_A, 1, &r), MOAT_EFORMAT);
	/* OPT owned by a name */
	hand_start(&p, 1, 0, 0, 1);
	hand_rr(&p, "\xc0\x0c", 2, WIRE_OPT, 1232, 0, NULL, 0);
	cr_expect_eq(wire_resp_parse(p.b, p.n, 1, W("example.com"), WIRE_A, 1, &r), MOAT_EFORMAT);
	/* one good OPT with an extended rcode: noted, not kept as a record */
	hand_start(&p, 1, 0, 0, 1);
	hand_rr(&p, "", 1, WIRE_OPT, 1232, 0x01000000, NULL, 0);
	cr_assert_eq(wire_resp_parse(p.b, p.n, 1, W("example.com"), WIRE_A, 1, &r), 0);
	cr_expect(r.has_opt);
	cr_expect_eq(r.ext_rcode, 1);
	cr_expect_eq(r.nrr, 0);
}

Test(resp_parse, ttl_top_bit_is_zero)
{
	struct pkt p;
	struct wire_resp r;
	hand_start(&p, 1, 1, 0, 0);
	hand_rr(&p, "\xc0\x0c", 2, WIRE_A, 1, 0x80000001u, "\1\2\3\4", 4);
	cr_assert_eq(wire_resp_parse(p.b, p.n, 1, W("example.com"), WIRE_A, 1, &r), 0);
	cr_expect_eq(r.rr[0].ttl, 0);
	cr_expect_eq(r.min_ttl, 0);
}

/* ---- the chain ---- */

Test(resp_chain, cname_chain)
{
	struct rspec s = {
	    .id = 7,
	    .qname = "alias.example.com.",
	    .qtype = LDNS_RR_TYPE_A,
	    .an = {"alias.example.com. 600 IN CNAME WWW.example.com.",
	           "www.example.com. 120 IN A 192.0.2.1", "other.example. 5 IN A 192.0.2.99"},
	};
	uint8_t b[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	cr_assert_eq(r.nchain, 2);
	cr_expect_arr_eq(r.chain[0], "\5alias\7example\3com\0", 19);
	cr_expect_arr_eq(r.chain[1], "\3www\7example\3com\0", 17, "lower-cased");
	cr_expect_not(r.chain_too_long);
	cr_expect_eq(r.min_ttl, 120, "the unrelated record's TTL does not count");
	cr_expect_eq(r.ndname, 0);
}

Test(resp_chain, cname_question_type_not_followed)
{
	struct rspec s = {
	    .id = 7,
	    .qname = "alias.example.com.",
	    .qtype = LDNS_RR_TYPE_CNAME,
	    .an = {"alias.example.com. 600 IN CNAME www.example.com."},
	};
	uint8_t b[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	cr_expect_eq(r.nchain, 1);
	cr_expect_eq(r.min_ttl, 600);
}

Test(resp_chain, cname_order_does_not_matter)
{
	struct rspec s = {
	    .id = 7,
	    .qname = "a.example.",
	    .qtype = LDNS_RR_TYPE_AAAA,
	    .an = {"c.example. 60 IN AAAA 2001:db8::1", "b.example. 60 IN CNAME c.example.",
	           "a.example. 60 IN CNAME b.example."},
	};
	uint8_t b[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	cr_assert_eq(r.nchain, 3);
	cr_expect(name_equal(r.chain[2], W("c.example")));
}

Test(resp_chain, dname_substitution)
{
	struct rspec s = {
	    .id = 7,
	    .qname = "a.b.example.com.",
	    .qtype = LDNS_RR_TYPE_A,
	    .an = {"example.com. 300 IN DNAME Example.NET.", "a.b.example.net. 60 IN A 192.0.2.7"},
	};
	uint8_t b[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	cr_assert_eq(r.nchain, 2);
	cr_expect_arr_eq(r.chain[1], "\1a\1b\7example\3net\0", 17);
	cr_assert_eq(r.ndname, 1);
	cr_expect_arr_eq(r.dname_owner[0], "\7example\3com\0", 13);
	cr_expect_eq(r.min_ttl, 60);
	cr_expect_not(r.chain_too_long);
}

Test(resp_chain, dname_not_for_its_own_owner)
{
	struct rspec s = {
	    .id = 7,
	    .qname = "example.com.",
	    .qtype = LDNS_RR_TYPE_A,
	    .an = {"example.com. 300 IN DNAME example.net.", "example.com. 60 IN A 192.0.2.7"},
	};
	uint8_t b[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	cr_expect_eq(r.nchain, 1);
	cr_expect_eq(r.ndname, 0);
}

Test(resp_chain, dname_with_synthesized_cname)
{
	/* what servers send (RFC 6672 3.4): the DNAME, the synthesized CNAME and the target */
	struct rspec s = {
	    .id = 7,
	    .qname = "www.example.com.",
	    .qtype = LDNS_RR_TYPE_A,
	    .an = {"example.com. 300 IN DNAME example.net.",
	           "www.example.com. 300 IN CNAME www.example.net.",
	           "www.example.net. 60 IN A 192.0.2.7"},
	};
	uint8_t b[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	cr_assert_eq(r.nchain, 2);
	cr_expect(name_equal(r.chain[1], W("www.example.net")));
	cr_expect_eq(r.ndname, 1, "the DNAME that made the CNAME passes too");
	cr_expect_not(r.chain_too_long);
}

Test(resp_chain, loop_detected)
{
	struct rspec s = {
	    .id = 7,
	    .qname = "a.example.",
	    .qtype = LDNS_RR_TYPE_A,
	    .an = {"a.example. 60 IN CNAME b.example.", "b.example. 60 IN CNAME a.example."},
	};
	uint8_t b[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	cr_expect(r.chain_too_long);
	cr_expect_eq(r.nchain, 2);
	/* a CNAME to itself */
	struct rspec s2 = {
	    .id = 7,
	    .qname = "a.example.",
	    .qtype = LDNS_RR_TYPE_A,
	    .an = {"a.example. 60 IN CNAME A.example."},
	};
	n = make_resp(&s2, b, sizeof(b));
	cr_assert_eq(parse(b, n, &s2, &r), 0);
	cr_expect(r.chain_too_long);
	cr_expect_eq(r.nchain, 1);
}

Test(resp_chain, dname_loop_ends)
{
	/* every substitution makes a new, longer name: the length bound ends it */
	struct rspec s = {
	    .id = 7,
	    .qname = "x.example.com.",
	    .qtype = LDNS_RR_TYPE_A,
	    .an = {"example.com. 60 IN DNAME d.example.com."},
	};
	uint8_t b[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	cr_expect(r.chain_too_long);
	cr_expect_leq(r.nchain, WIRE_MAXCHAIN + 1);
}

/* A chain of nsteps CNAMEs: c0.example -> c1.example -> ... */
static void cname_chain(int nsteps, struct wire_resp *r)
{
	static char texts[40][80];
	struct rspec s = {.id = 7, .qname = "c0.example.", .qtype = LDNS_RR_TYPE_A};
	cr_assert_lt(nsteps, 39);
	for (int i = 0; i < nsteps; i++) {
		snprintf(texts[i], sizeof(texts[i]), "c%d.example. 60 IN CNAME c%d.example.", i,
		         i + 1);
		s.an[i] = texts[i];
	}
	snprintf(texts[nsteps], sizeof(texts[nsteps]), "c%d.example. 60 IN A 192.0.2.1", nsteps);
	s.an[nsteps] = texts[nsteps];
	uint8_t b[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	cr_assert_eq(parse(b, n, &s, r), 0);
}

Test(resp_chain, chain_length_limit)
{
	struct wire_resp r;
	cname_chain(WIRE_MAXCHAIN, &r);
	cr_expect_not(r.chain_too_long, "WIRE_MAXCHAIN steps are followed");
	cr_expect_eq(r.nchain, WIRE_MAXCHAIN + 1);
	cname_chain(WIRE_MAXCHAIN + 1, &r);
	cr_expect(r.chain_too_long);
	cr_expect_eq(r.nchain, WIRE_MAXCHAIN + 1);
}

Test(resp_chain, negative_ttl_from_soa)
{
	struct rspec s = {
	    .id = 7,
	    .qname = "nx.example.com.",
	    .qtype = LDNS_RR_TYPE_A,
	    .rcode = LDNS_RCODE_NXDOMAIN,
	    .ns = {"example.com. 900 IN SOA ns1.example.com. host.example.com. 1 7200 900 "
	           "1209600 300"},
	};
	uint8_t b[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	cr_expect_eq(r.rcode, 3);
	cr_expect_eq(r.neg_ttl, 300, "MINIMUM below the SOA TTL");
	cr_expect_eq(r.min_ttl, UINT32_MAX);
	s.ns[0] = "example.com. 60 IN SOA ns1.example.com. host.example.com. 1 7200 900 1209600 "
	          "3600";
	n = make_resp(&s, b, sizeof(b));
	cr_assert_eq(parse(b, n, &s, &r), 0);
	cr_expect_eq(r.neg_ttl, 60, "SOA TTL below MINIMUM");
	/* an SOA in the answer section is not the negative TTL */
	struct rspec s2 = {
	    .id = 7,
	    .qname = "example.com.",
	    .qtype = LDNS_RR_TYPE_SOA,
	    .an = {"example.com. 60 IN SOA ns1.example.com. host.example.com. 1 7200 900 1209600 "
	           "30"},
	};
	n = make_resp(&s2, b, sizeof(b));
	cr_assert_eq(parse(b, n, &s2, &r), 0);
	cr_expect_eq(r.neg_ttl, UINT32_MAX);
	cr_expect_eq(r.min_ttl, 60);
}

/* ---- addresses ---- */

struct seen {
	int n;
	uint8_t addr[16][16];
	size_t len[16];
	uint16_t type[16];
	int stop_at; /* return 1 at this call (1-based), 0: never */
};

static int collect(void *ctx, const uint8_t *addr, size_t len, uint16_t rrtype)
{
	struct seen *s = ctx;
	cr_assert_lt(s->n, 16);
	memcpy(s->addr[s->n], addr, len);
	s->len[s->n] = len;
	s->type[s->n] = rrtype;
	s->n++;
	return s->n == s->stop_at ? 42 : 0;
}

static bool saw(const struct seen *s, const char *text, uint16_t type)
{
	uint8_t a[16];
	size_t len = 4;
	if (inet_pton(AF_INET, text, a) != 1) {
		cr_assert_eq(inet_pton(AF_INET6, text, a), 1);
		len = 16;
	}
	for (int i = 0; i < s->n; i++)
		if (s->len[i] == len && s->type[i] == type && memcmp(s->addr[i], a, len) == 0)
			return true;
	return false;
}

Test(resp_addr, every_section_and_hints)
{
	struct rspec s = {
	    .id = 9,
	    .qname = "x.example.",
	    .qtype = LDNS_RR_TYPE_HTTPS,
	    .an = {"x.example. 60 IN HTTPS 1 . alpn=h2 ipv4hint=192.0.2.1",
	           "unrelated.example. 60 IN A 10.0.0.1"},
	    .ns = {"example. 60 IN AAAA 2001:db8::2"},
	    .ar = {"x.example. 60 IN HTTPS 2 . ipv4hint=192.0.2.3,192.0.2.4 ipv6hint=2001:db8::5",
	           "ns.example. 60 IN A 169.254.169.254", "ns.example. 60 CH A 127.0.0.1",
	           "ns.example. 60 IN TXT \"1.2.3.4\""},
	    .edns = true,
	};
	uint8_t b[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	struct seen seen = {0};
	cr_assert_eq(wire_resp_each_addr(b, n, &r, collect, &seen), 0);
	cr_expect_eq(seen.n, 7);
	cr_expect(saw(&seen, "192.0.2.1", WIRE_HTTPS));
	cr_expect(saw(&seen, "10.0.0.1", WIRE_A));
	cr_expect(saw(&seen, "2001:db8::2", WIRE_AAAA));
	cr_expect(saw(&seen, "192.0.2.3", WIRE_HTTPS));
	cr_expect(saw(&seen, "192.0.2.4", WIRE_HTTPS));
	cr_expect(saw(&seen, "2001:db8::5", WIRE_HTTPS));
	cr_expect(saw(&seen, "169.254.169.254", WIRE_A));
	cr_expect_not(saw(&seen, "127.0.0.1", WIRE_A), "a class-CH record is dropped at parse");
}

/* Regression (issue 12): records of another class than the question's passed unchecked, so a
 * class-CH "A" of 16 bytes or "AAAA" of 4 (not address-sized for its type, so not looked at)
 * holding 169.254.169.254 reached the client. They are dropped before any other check. */
Test(resp_addr, other_class_dropped_before_any_check)
{
	struct pkt p;
	struct wire_resp r;
	static const uint8_t md16[16] = {169, 254, 169, 254, 169, 254, 169, 254,
	                                 169, 254, 169, 254, 169, 254, 169, 254};
	hand_start(&p, 1, 3, 0, 0);
	hand_rr(&p, "\xc0\x0c", 2, WIRE_A, 3, 60, md16, 16);                    /* CH A, 16 bytes */
	hand_rr(&p, "\xc0\x0c", 2, WIRE_AAAA, 3, 60, md16, 4);                  /* CH AAAA, 4 */
	hand_rr(&p, "\xc0\x0c", 2, WIRE_A, WIRE_CLASS_IN, 60, "\xc0\0\2\1", 4); /* IN A */
	cr_assert_eq(wire_resp_parse(p.b, p.n, 1, W("example.com"), WIRE_A, 1, &r), 0);
	cr_expect_eq(r.nrr, 1, "only the class-IN record is kept");
	struct seen seen = {0};
	cr_expect_eq(wire_resp_each_addr(p.b, p.n, &r, collect, &seen), 0);
	cr_expect_eq(seen.n, 1);
	cr_expect(saw(&seen, "192.0.2.1", WIRE_A));
	struct wire_query q;
	client_query("example.com.", LDNS_RR_TYPE_A, 1, 0, false, false, &q);
	uint8_t out[1024];
	int n = wire_resp_build(p.b, p.n, &r, &q, UINT32_MAX, sizeof(out), out, sizeof(out));
	cr_assert_gt(n, 0);
	cr_expect_eq(out[6] << 8 | out[7], 1, "one answer record for the client");
	cr_expect_null(memmem(out, (size_t)n, "\xa9\xfe\xa9\xfe", 4),
	               "169.254.x reached the client");
}

/* What the firewall grants: only addresses the client will see (answer records on the chain,
 * hints included), none from records the rebuild drops. */
Test(resp_addr, passed_only)
{
	struct rspec s = {
	    .id = 9,
	    .qname = "x.example.",
	    .qtype = LDNS_RR_TYPE_HTTPS,
	    .an = {"x.example. 60 IN CNAME y.example.",
	           "y.example. 60 IN HTTPS 1 . alpn=h2 ipv4hint=192.0.2.1 ipv6hint=2001:db8::1",
	           "unrelated.example. 60 IN A 192.0.2.99"},
	    .ns = {"example. 60 IN AAAA 2001:db8::2"},
	    .ar = {"y.example. 60 IN A 192.0.2.7"},
	};
	uint8_t b[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	struct seen seen = {0};
	cr_assert_eq(wire_resp_each_passed_addr(b, n, &r, collect, &seen), 0);
	cr_expect_eq(seen.n, 2);
	cr_expect(saw(&seen, "192.0.2.1", WIRE_HTTPS), "a hint on the chain is granted");
	cr_expect(saw(&seen, "2001:db8::1", WIRE_HTTPS));
	cr_expect_not(saw(&seen, "192.0.2.99", WIRE_A), "an unrelated owner is never handed out");
	cr_expect_not(saw(&seen, "192.0.2.7", WIRE_A), "additional records are never handed out");
}

Test(resp_addr, svcb_hints_and_stop)
{
	struct rspec s = {
	    .id = 9,
	    .qname = "_dns.x.example.",
	    .qtype = LDNS_RR_TYPE_SVCB,
	    .an = {"_dns.x.example. 60 IN SVCB 1 dns.example. alpn=dot ipv6hint=2001:db8::53,::1"},
	};
	uint8_t b[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	struct seen seen = {0};
	cr_assert_eq(wire_resp_each_addr(b, n, &r, collect, &seen), 0);
	cr_expect_eq(seen.n, 2);
	cr_expect(saw(&seen, "::1", WIRE_SVCB));
	struct seen stop = {.stop_at = 1};
	cr_expect_eq(wire_resp_each_addr(b, n, &r, collect, &stop), 42);
	cr_expect_eq(stop.n, 1);
}

Test(resp_addr, stop_on_nonzero)
{
	struct rspec s = {
	    .id = 9,
	    .qname = "x.example.",
	    .qtype = LDNS_RR_TYPE_A,
	    .an = {"x.example. 60 IN A 192.0.2.1", "x.example. 60 IN A 192.0.2.2",
	           "x.example. 60 IN A 192.0.2.3"},
	};
	uint8_t b[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	struct seen seen = {.stop_at = 2};
	cr_expect_eq(wire_resp_each_addr(b, n, &r, collect, &seen), 42);
	cr_expect_eq(seen.n, 2);
}

Test(resp_addr, bad_lengths)
{
	struct pkt p;
	struct wire_resp r;
	struct seen seen = {0};
	hand_start(&p, 1, 1, 0, 0);
	hand_rr(&p, "\xc0\x0c", 2, WIRE_A, WIRE_CLASS_IN, 60, "\1\2\3\4\5", 5);
	cr_assert_eq(wire_resp_parse(p.b, p.n, 1, W("example.com"), WIRE_A, 1, &r), 0);
	cr_expect_eq(wire_resp_each_addr(p.b, p.n, &r, collect, &seen), MOAT_EFORMAT);
	/* AAAA of 4 bytes in additional */
	hand_start(&p, 1, 0, 0, 1);
	hand_rr(&p, "\xc0\x0c", 2, WIRE_AAAA, WIRE_CLASS_IN, 60, "\1\2\3\4", 4);
	cr_assert_eq(wire_resp_parse(p.b, p.n, 1, W("example.com"), WIRE_A, 1, &r), 0);
	cr_expect_eq(wire_resp_each_addr(p.b, p.n, &r, collect, &seen), MOAT_EFORMAT);
	/* another class with another size is not an address */
	hand_start(&p, 1, 1, 0, 0);
	hand_rr(&p, "\xc0\x0c", 2, WIRE_A, 3, 60, "\1\2\3\4\5", 5);
	cr_assert_eq(wire_resp_parse(p.b, p.n, 1, W("example.com"), WIRE_A, 1, &r), 0);
	cr_expect_eq(wire_resp_each_addr(p.b, p.n, &r, collect, &seen), 0);
	cr_expect_eq(seen.n, 0);
	/* a malformed HTTPS record: a hint of 5 bytes */
	const uint8_t https[] = {0, 1, 0, 0, 4, 0, 5, 1, 2, 3, 4, 5};
	hand_start(&p, 1, 1, 0, 0);
	hand_rr(&p, "\xc0\x0c", 2, WIRE_HTTPS, WIRE_CLASS_IN, 60, https, sizeof(https));
	cr_assert_eq(wire_resp_parse(p.b, p.n, 1, W("example.com"), WIRE_A, 1, &r), 0);
	cr_expect_eq(wire_resp_each_addr(p.b, p.n, &r, collect, &seen), MOAT_EFORMAT);
}

Test(resp_addr, hand_made_https_hints)
{
	/* HTTPS RDATA by hand: priority 1, target ".", alpn=h2, ipv4hint=192.0.2.1 */
	const uint8_t https[] = {0, 1, 0, 0, 1, 0, 3, 2, 'h', '2', 0, 4, 0, 4, 192, 0, 2, 1};
	struct pkt p;
	struct wire_resp r;
	hand_start(&p, 1, 0, 0, 1);
	hand_rr(&p, "\xc0\x0c", 2, WIRE_HTTPS, WIRE_CLASS_IN, 60, https, sizeof(https));
	cr_assert_eq(wire_resp_parse(p.b, p.n, 1, W("example.com"), WIRE_A, 1, &r), 0);
	struct seen seen = {0};
	cr_assert_eq(wire_resp_each_addr(p.b, p.n, &r, collect, &seen), 0);
	cr_expect_eq(seen.n, 1);
	cr_expect(saw(&seen, "192.0.2.1", WIRE_HTTPS));
}

/* ---- rebuilding for the client ---- */

/* Parse out[0..n) with ldns and compare one section with the expected records. */
static void expect_section(ldns_pkt *p, ldns_pkt_section sec, const char *const *want)
{
	ldns_rr_list *got = ldns_pkt_get_section_clone(p, sec);
	size_t nwant = 0;
	while (nwant < MAXRRS && want[nwant])
		nwant++;
	size_t ngot = got ? ldns_rr_list_rr_count(got) : 0;
	cr_assert_eq(ngot, nwant, "section %d: %zu records, want %zu", (int)sec, ngot, nwant);
	for (size_t i = 0; i < nwant; i++) {
		ldns_rr *w = rr_from(want[i]);
		ldns_rr *g = ldns_rr_list_rr(got, i);
		char *gs = ldns_rr2str(g);
		cr_expect_eq(ldns_rr_compare(g, w), 0, "got %s want %s", gs, want[i]);
		cr_expect_eq(ldns_rr_ttl(g), ldns_rr_ttl(w), "TTL of %s", gs);
		free(gs);
		ldns_rr_free(w);
	}
	ldns_rr_list_deep_free(got);
}

static ldns_pkt *parse_out(const uint8_t *out, int n)
{
	cr_assert_gt(n, WIRE_HDR, "build returned %d", n);
	ldns_pkt *p = NULL;
	cr_assert_eq(ldns_wire2pkt(&p, out, (size_t)n), LDNS_STATUS_OK, "ldns cannot parse it");
	return p;
}

static const struct rspec mixed = {
    .id = 0x5555,
    .qname = "www.example.com.",
    .qtype = LDNS_RR_TYPE_A,
    .flags = LDNS_AA | LDNS_AD,
    .an = {"unrelated.example.net. 60 IN A 192.0.2.66",
           "www.example.com. 86400 IN CNAME cdn.example.net.", "cdn.example.net. 30 IN A 192.0.2.1",
           "cdn.example.net. 30 IN A 192.0.2.2", "evil.example.com. 60 IN CNAME cdn.example.net."},
    .ns = {"example.net. 3600 IN NS ns1.example.net.",
           "example.net. 7200 IN SOA ns1.example.net. hostmaster.example.net. 2024010101 7200 "
           "900 1209600 300"},
    .ar = {"ns1.example.net. 3600 IN A 192.0.2.53", "cdn.example.net. 30 IN AAAA 2001:db8::1"},
    .edns = true,
};

Test(resp_build, filters_sections)
{
	uint8_t b[4096], out[4096];
	size_t n = make_resp(&mixed, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &mixed, &r), 0);
	struct wire_query q;
	client_query("WWW.Example.COM.", LDNS_RR_TYPE_A, 0x9999, LDNS_RD | LDNS_CD, true, false,
	             &q);
	int len = wire_resp_build(b, n, &r, &q, 3600, 4096, out, sizeof(out));
	ldns_pkt *p = parse_out(out, len);
	cr_expect_eq(ldns_pkt_id(p), 0x9999, "the client's ID");
	cr_expect(ldns_pkt_qr(p));
	cr_expect(ldns_pkt_ra(p));
	cr_expect(ldns_pkt_rd(p));
	cr_expect(ldns_pkt_cd(p));
	cr_expect_not(ldns_pkt_aa(p), "AA cleared");
	cr_expect_not(ldns_pkt_tc(p));
	cr_expect_not(ldns_pkt_ad(p), "no AD for a client that did not ask");
	cr_expect_eq(ldns_pkt_get_rcode(p), 0);
	cr_assert_eq(ldns_pkt_qdcount(p), 1);
	ldns_rdf *qn = ldns_rr_owner(ldns_rr_list_rr(ldns_pkt_question(p), 0));
	cr_expect_arr_eq(ldns_rdf_data(qn), "\3WWW\7Example\3COM\0", 17, "client's case");
	const char *an[] = {"www.example.com. 3600 IN CNAME cdn.example.net.",
	                    "cdn.example.net. 30 IN A 192.0.2.1",
	                    "cdn.example.net. 30 IN A 192.0.2.2", NULL};
	expect_section(p, LDNS_SECTION_ANSWER, an);
	const char *ns[] = {"example.net. 3600 IN SOA ns1.example.net. hostmaster.example.net. "
	                    "2024010101 7200 900 1209600 300",
	                    NULL};
	expect_section(p, LDNS_SECTION_AUTHORITY, ns);
	const char *ar[] = {NULL};
	expect_section(p, LDNS_SECTION_ADDITIONAL, ar);
	cr_expect(ldns_pkt_edns(p), "client sent EDNS");
	cr_expect_eq(ldns_pkt_edns_udp_size(p), WIRE_EDNS_SIZE);
	cr_expect_eq(out[10] << 8 | out[11], 1, "ARCOUNT: our OPT only");
	ldns_pkt_free(p);
}

Test(resp_build, no_opt_without_client_edns)
{
	uint8_t b[4096], out[4096];
	size_t n = make_resp(&mixed, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &mixed, &r), 0);
	struct wire_query q;
	client_query("www.example.com.", LDNS_RR_TYPE_A, 1, LDNS_RD, false, false, &q);
	int len = wire_resp_build(b, n, &r, &q, 3600, 65535, out, sizeof(out));
	ldns_pkt *p = parse_out(out, len);
	cr_expect_not(ldns_pkt_edns(p));
	cr_expect_eq(out[10] << 8 | out[11], 0);
	cr_expect_eq(ldns_pkt_ancount(p), 3);
	ldns_pkt_free(p);
}

Test(resp_build, ad_only_when_asked)
{
	uint8_t b[4096], out[4096];
	size_t n = make_resp(&mixed, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &mixed, &r), 0);
	struct wire_query q;
	client_query("www.example.com.", LDNS_RR_TYPE_A, 1, LDNS_RD, true, true, &q);
	int len = wire_resp_build(b, n, &r, &q, 3600, 65535, out, sizeof(out));
	ldns_pkt *p = parse_out(out, len);
	cr_expect(ldns_pkt_ad(p), "DO client gets AD");
	cr_expect(ldns_pkt_edns_do(p));
	ldns_pkt_free(p);
	client_query("www.example.com.", LDNS_RR_TYPE_A, 1, LDNS_RD | LDNS_AD, false, false, &q);
	len = wire_resp_build(b, n, &r, &q, 3600, 65535, out, sizeof(out));
	p = parse_out(out, len);
	cr_expect(ldns_pkt_ad(p), "AD client gets AD");
	ldns_pkt_free(p);
}

Test(resp_build, truncated_when_too_big)
{
	struct rspec s = {
	    .id = 3, .qname = "big.example.", .qtype = LDNS_RR_TYPE_TXT, .edns = true};
	static char texts[30][300];
	for (int i = 0; i < 30; i++) {
		char blob[201];
		memset(blob, 'a' + i % 26, 200);
		blob[200] = 0;
		snprintf(texts[i], sizeof(texts[i]), "big.example. 60 IN TXT \"%s\"", blob);
		s.an[i] = texts[i];
	}
	uint8_t b[16384], out[16384];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	struct wire_query q;
	client_query("big.example.", LDNS_RR_TYPE_TXT, 77, LDNS_RD, true, false, &q);
	int len = wire_resp_build(b, n, &r, &q, 3600, 1232, out, sizeof(out));
	ldns_pkt *p = parse_out(out, len);
	cr_expect(ldns_pkt_tc(p));
	cr_expect_eq(ldns_pkt_ancount(p), 0);
	cr_expect_eq(ldns_pkt_nscount(p), 0);
	cr_expect_eq(ldns_pkt_qdcount(p), 1);
	cr_expect_eq(ldns_pkt_id(p), 77);
	cr_expect(ldns_pkt_edns(p));
	cr_expect_leq(len, 1232);
	ldns_pkt_free(p);
	/* over TCP it fits */
	len = wire_resp_build(b, n, &r, &q, 3600, 65535, out, sizeof(out));
	p = parse_out(out, len);
	cr_expect_not(ldns_pkt_tc(p));
	cr_expect_eq(ldns_pkt_ancount(p), 30);
	cr_expect_gt(len, 6000);
	ldns_pkt_free(p);
	/* the limit counts our OPT: exactly the full size fits, one byte less does not */
	int full = len;
	len = wire_resp_build(b, n, &r, &q, 3600, (size_t)full, out, sizeof(out));
	cr_expect_eq(len, full);
	len = wire_resp_build(b, n, &r, &q, 3600, (size_t)full - 1, out, sizeof(out));
	p = parse_out(out, len);
	cr_expect(ldns_pkt_tc(p));
	ldns_pkt_free(p);
	/* a client without EDNS, at 512 */
	client_query("big.example.", LDNS_RR_TYPE_TXT, 78, LDNS_RD, false, false, &q);
	len = wire_resp_build(b, n, &r, &q, 3600, 512, out, sizeof(out));
	p = parse_out(out, len);
	cr_expect(ldns_pkt_tc(p));
	cr_expect_not(ldns_pkt_edns(p));
	ldns_pkt_free(p);
}

Test(resp_build, buffer_too_small)
{
	uint8_t b[4096], out[4096];
	size_t n = make_resp(&mixed, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &mixed, &r), 0);
	struct wire_query q;
	client_query("www.example.com.", LDNS_RR_TYPE_A, 1, LDNS_RD, true, false, &q);
	/* even the question does not fit: an error, not a header claiming a question */
	for (size_t cap = 0; cap < 12 + 17 + 4 + 11; cap++) {
		memset(out, 0xEE, sizeof(out));
		int len = wire_resp_build(b, n, &r, &q, 3600, 65535, out, cap);
		cr_expect_eq(len, MOAT_ESPACE, "cap %zu gave %d", cap, len);
		cr_expect_eq(out[cap], 0xEE, "nothing written past cap %zu", cap);
	}
	/* the records do not fit the buffer: TC with the question */
	int len = wire_resp_build(b, n, &r, &q, 3600, 65535, out, 12 + 17 + 4 + 11 + 20);
	ldns_pkt *p = parse_out(out, len);
	cr_expect(ldns_pkt_tc(p));
	cr_expect_eq(ldns_pkt_ancount(p), 0);
	ldns_pkt_free(p);
}

Test(resp_build, negative_answer)
{
	struct rspec s = {
	    .id = 7,
	    .qname = "nx.example.com.",
	    .qtype = LDNS_RR_TYPE_A,
	    .rcode = LDNS_RCODE_NXDOMAIN,
	    .ns = {"example.com. 900 IN SOA ns1.example.com. host.example.com. 1 7200 900 "
	           "1209600 300",
	           "example.com. 900 IN NS ns1.example.com.",
	           "a.example.com. 300 IN NSEC z.example.com. A RRSIG NSEC",
	           "a.example.com. 300 IN RRSIG NSEC 13 3 300 20300101000000 20200101000000 12345 "
	           "example.com. AAAA"},
	    .ar = {"ns1.example.com. 900 IN A 192.0.2.53"},
	    .edns = true,
	};
	uint8_t b[4096], out[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	struct wire_query q;
	client_query("nx.example.com.", LDNS_RR_TYPE_A, 1, LDNS_RD, true, true, &q);
	int len = wire_resp_build(b, n, &r, &q, 600, 65535, out, sizeof(out));
	ldns_pkt *p = parse_out(out, len);
	cr_expect_eq(ldns_pkt_get_rcode(p), LDNS_RCODE_NXDOMAIN);
	const char *an[] = {NULL};
	expect_section(p, LDNS_SECTION_ANSWER, an);
	const char *ns[] = {"example.com. 600 IN SOA ns1.example.com. host.example.com. 1 7200 900 "
	                    "1209600 300",
	                    "a.example.com. 300 IN NSEC z.example.com. A RRSIG NSEC",
	                    "a.example.com. 300 IN RRSIG NSEC 13 3 300 20300101000000 "
	                    "20200101000000 12345 example.com. AAAA",
	                    NULL};
	expect_section(p, LDNS_SECTION_AUTHORITY, ns);
	cr_expect_eq(ldns_pkt_arcount(p), 0);
	ldns_pkt_free(p);
}

Test(resp_build, rdata_names_recompressed)
{
	struct rspec s = {
	    .id = 7,
	    .qname = "example.com.",
	    .qtype = LDNS_RR_TYPE_MX,
	    .an = {"example.com. 300 IN MX 10 mail.example.com.",
	           "example.com. 300 IN MX 20 mail2.Example.com.",
	           "example.com. 300 IN MX 30 mx.other.example."},
	};
	uint8_t b[4096], out[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	struct wire_query q;
	client_query("example.com.", LDNS_RR_TYPE_MX, 1, LDNS_RD, false, false, &q);
	int len = wire_resp_build(b, n, &r, &q, 3600, 65535, out, sizeof(out));
	ldns_pkt *p = parse_out(out, len);
	expect_section(p, LDNS_SECTION_ANSWER, s.an);
	ldns_pkt_free(p);
}

Test(resp_build, pointers_into_dropped_records)
{
	/* ldns compresses later names against the first, unrelated record; dropping it must not
	 * leave pointers to bytes the client never gets */
	struct rspec s = {
	    .id = 7,
	    .qname = "q.example.",
	    .qtype = LDNS_RR_TYPE_CNAME,
	    .an = {"deep.sub.zone.example. 60 IN A 192.0.2.9",
	           "q.example. 60 IN CNAME x.deep.sub.zone.example."},
	    .ns = {"sub.zone.example. 60 IN NS ns.deep.sub.zone.example.",
	           "zone.example. 60 IN SOA ns.deep.sub.zone.example. h.sub.zone.example. 1 2 3 4 "
	           "5"},
	};
	uint8_t b[4096], out[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	struct wire_query q;
	client_query("q.example.", LDNS_RR_TYPE_CNAME, 1, LDNS_RD, false, false, &q);
	int len = wire_resp_build(b, n, &r, &q, 3600, 65535, out, sizeof(out));
	ldns_pkt *p = parse_out(out, len);
	const char *an[] = {"q.example. 60 IN CNAME x.deep.sub.zone.example.", NULL};
	expect_section(p, LDNS_SECTION_ANSWER, an);
	const char *ns[] = {"zone.example. 60 IN SOA ns.deep.sub.zone.example. "
	                    "h.sub.zone.example. 1 2 3 4 5",
	                    NULL};
	expect_section(p, LDNS_SECTION_AUTHORITY, ns);
	ldns_pkt_free(p);
}

Test(resp_build, dname_records_pass)
{
	struct rspec s = {
	    .id = 7,
	    .qname = "www.example.com.",
	    .qtype = LDNS_RR_TYPE_A,
	    .an = {"example.com. 300 IN DNAME example.net.",
	           "www.example.com. 300 IN CNAME www.example.net.",
	           "www.example.net. 60 IN A 192.0.2.7", "other.example.com. 60 IN A 192.0.2.8"},
	};
	uint8_t b[4096], out[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	struct wire_query q;
	client_query("www.example.com.", LDNS_RR_TYPE_A, 1, LDNS_RD, false, false, &q);
	int len = wire_resp_build(b, n, &r, &q, 3600, 65535, out, sizeof(out));
	ldns_pkt *p = parse_out(out, len);
	const char *an[] = {"example.com. 300 IN DNAME example.net.",
	                    "www.example.com. 300 IN CNAME www.example.net.",
	                    "www.example.net. 60 IN A 192.0.2.7", NULL};
	expect_section(p, LDNS_SECTION_ANSWER, an);
	ldns_pkt_free(p);
}

Test(resp_build, other_types_copied)
{
	struct rspec s = {
	    .id = 7,
	    .qname = "x.example.",
	    .qtype = LDNS_RR_TYPE_HTTPS,
	    .an = {"x.example. 60 IN HTTPS 1 . alpn=h2 ipv4hint=192.0.2.1"},
	};
	uint8_t b[4096], out[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	struct wire_query q;
	client_query("x.example.", LDNS_RR_TYPE_HTTPS, 1, LDNS_RD, false, false, &q);
	int len = wire_resp_build(b, n, &r, &q, 3600, 65535, out, sizeof(out));
	ldns_pkt *p = parse_out(out, len);
	expect_section(p, LDNS_SECTION_ANSWER, s.an);
	ldns_pkt_free(p);
}

Test(resp_build, compression_saves_space)
{
	struct rspec s = {
	    .id = 7,
	    .qname = "a-rather-long-label.some-subdomain.example-domain.example.",
	    .qtype = LDNS_RR_TYPE_A,
	};
	static char texts[10][200];
	for (int i = 0; i < 10; i++) {
		snprintf(texts[i], sizeof(texts[i]),
		         "a-rather-long-label.some-subdomain.example-domain.example. 60 IN A "
		         "192.0.2.%d",
		         i + 1);
		s.an[i] = texts[i];
	}
	uint8_t b[4096], out[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	struct wire_query q;
	client_query(s.qname, LDNS_RR_TYPE_A, 1, LDNS_RD, false, false, &q);
	int len = wire_resp_build(b, n, &r, &q, 3600, 65535, out, sizeof(out));
	ldns_pkt *p = parse_out(out, len);
	expect_section(p, LDNS_SECTION_ANSWER, s.an);
	/* uncompressed: header, question, 10 * (name + 10 + 4) */
	size_t uncompressed = 12 + q.qname_len + 4 + 10 * ((size_t)q.qname_len + 14);
	cr_expect_eq((size_t)len, 12 + q.qname_len + 4 + 10 * (2 + 14),
	             "each owner is a pointer to the question: %d vs %zu", len, uncompressed);
	cr_expect_lt((size_t)len, uncompressed);
	ldns_pkt_free(p);
}

Test(resp_build, suffix_compression_across_names)
{
	/* CNAME targets share suffixes with earlier names; the output must be smaller than the
	 * sum of uncompressed records and still equal record by record */
	struct rspec s = {
	    .id = 7,
	    .qname = "www.example.com.",
	    .qtype = LDNS_RR_TYPE_A,
	    .an = {"www.example.com. 60 IN CNAME edge.cdn.example.com.",
	           "edge.cdn.example.com. 60 IN CNAME node1.edge.cdn.example.com.",
	           "node1.edge.cdn.example.com. 60 IN A 192.0.2.1"},
	    .ns = {"example.com. 60 IN SOA ns.example.com. host.edge.cdn.example.com. 1 2 3 4 5"},
	};
	uint8_t b[4096], out[4096];
	size_t n = make_resp(&s, b, sizeof(b));
	struct wire_resp r;
	cr_assert_eq(parse(b, n, &s, &r), 0);
	struct wire_query q;
	client_query("www.example.com.", LDNS_RR_TYPE_A, 1, LDNS_RD, false, false, &q);
	int len = wire_resp_build(b, n, &r, &q, 3600, 65535, out, sizeof(out));
	ldns_pkt *p = parse_out(out, len);
	expect_section(p, LDNS_SECTION_ANSWER, s.an);
	expect_section(p, LDNS_SECTION_AUTHORITY, s.ns);
	size_t uncompressed = 12 + 17 + 4;
	for (int i = 0; s.an[i]; i++) {
		ldns_rr *rr = rr_from(s.an[i]);
		uncompressed += ldns_rr_uncompressed_size(rr);
		ldns_rr_free(rr);
	}
	ldns_rr *rr = rr_from(s.ns[0]);
	uncompressed += ldns_rr_uncompressed_size(rr);
	ldns_rr_free(rr);
	cr_expect_lt((size_t)len, uncompressed - 60, "%d vs %zu", len, uncompressed);
	cr_expect_leq((size_t)len, n + 0, "no bigger than ldns's own compression (%d vs %zu)", len,
	              n);
	ldns_pkt_free(p);
}

/* ---- the packed parse kept in the cache ---- */

static void expect_same_parse(const struct wire_resp *a, const struct wire_resp *b)
{
	cr_expect_eq(a->id, b->id);
	cr_expect_eq(a->flags, b->flags);
	cr_expect_eq(a->rcode, b->rcode);
	cr_expect_arr_eq(a->counts, b->counts, sizeof(a->counts));
	cr_assert_eq(a->nrr, b->nrr);
	cr_expect_arr_eq(a->rr, b->rr, a->nrr * sizeof(a->rr[0]));
	cr_expect_eq(a->has_opt, b->has_opt);
	cr_expect_eq(a->ext_rcode, b->ext_rcode);
	cr_assert_eq(a->nchain, b->nchain);
	for (unsigned i = 0; i < a->nchain; i++)
		cr_expect(name_equal(a->chain[i], b->chain[i]), "chain[%u]", i);
	cr_expect_eq(a->chain_too_long, b->chain_too_long);
	cr_expect_eq(a->min_ttl, b->min_ttl);
	cr_expect_eq(a->neg_ttl, b->neg_ttl);
	cr_assert_eq(a->ndname, b->ndname);
	for (unsigned i = 0; i < a->ndname; i++)
		cr_expect(name_equal(a->dname_owner[i], b->dname_owner[i]), "dname_owner[%u]", i);
}

/* pack then unpack gives the parse back, and the rebuilt answer is byte for byte the same. */
static void roundtrip(const struct rspec *spec)
{
	static uint8_t pkt[4096], packed[WIRE_RESP_PACKED_MAX], o1[4096], o2[4096];
	static struct wire_resp r, back;
	size_t len = make_resp(spec, pkt, sizeof(pkt));
	cr_assert_eq(parse(pkt, len, spec, &r), 0);
	int n = wire_resp_pack(&r, packed, sizeof(packed));
	cr_assert_gt(n, 0);
	memset(&back, 0xa5, sizeof(back));
	cr_assert_eq(wire_resp_unpack(packed, (size_t)n, &back), 0);
	expect_same_parse(&r, &back);
	cr_expect_eq(back.age, 0);

	struct wire_query q;
	client_query(spec->qname, spec->qtype, 7, LDNS_RD, true, false, &q);
	int a = wire_resp_build(pkt, len, &r, &q, 300, 4096, o1, sizeof(o1));
	int b = wire_resp_build(pkt, len, &back, &q, 300, 4096, o2, sizeof(o2));
	cr_assert_gt(a, 0);
	cr_assert_eq(a, b);
	cr_expect_arr_eq(o1, o2, (size_t)a);

	/* Every cut of the packed form is refused, never read past. */
	for (int cut = 0; cut < n; cut++)
		cr_expect_eq(wire_resp_unpack(packed, (size_t)cut, &back), MOAT_EFORMAT, "cut %d",
		             cut);
}

Test(resp_pack, roundtrips)
{
	roundtrip(&basic);
	roundtrip(&mixed);
	struct rspec dname = {
	    .id = 7,
	    .qname = "a.b.example.com.",
	    .qtype = LDNS_RR_TYPE_A,
	    .an = {"example.com. 300 IN DNAME Example.NET.", "a.b.example.net. 60 IN A 192.0.2.7"},
	};
	roundtrip(&dname);
	struct rspec nx = {
	    .id = 7,
	    .qname = "nope.example.com.",
	    .qtype = LDNS_RR_TYPE_AAAA,
	    .rcode = LDNS_RCODE_NXDOMAIN,
	    .ns = {"example.com. 300 IN SOA ns.example.com. h.example.com. 1 2 3 4 120"},
	};
	roundtrip(&nx);
	static char texts[WIRE_MAXCHAIN + 4][80];
	struct rspec longc = {.id = 7, .qname = "c0.example.", .qtype = LDNS_RR_TYPE_A};
	for (int i = 0; i < WIRE_MAXCHAIN + 3; i++) {
		snprintf(texts[i], sizeof(texts[i]), "c%d.example. 60 IN CNAME c%d.example.", i,
		         i + 1);
		longc.an[i] = texts[i];
	}
	roundtrip(&longc); /* too long: the flag and the chain so far must survive */
}

Test(resp_pack, too_small_buffer)
{
	static uint8_t b[4096], packed[16];
	static struct wire_resp r;
	size_t n = make_resp(&basic, b, sizeof(b));
	cr_assert_eq(parse(b, n, &basic, &r), 0);
	cr_expect_eq(wire_resp_pack(&r, packed, sizeof(packed)), MOAT_ESPACE);
}

/* The parse marks what the client gets (answer records on the chain) once, for the builder and
 * the address walks: the unrelated owner and the CNAME off the chain are not marked, nor is
 * anything outside the answer section. */
Test(resp_chain, passes_marks_the_answer_records_on_the_chain)
{
	static uint8_t pkt[4096];
	static struct wire_resp r;
	size_t len = make_resp(&mixed, pkt, sizeof(pkt));
	cr_assert_eq(parse(pkt, len, &mixed, &r), 0);
	static const bool want[] = {false, true,  true, true, false, /* answer */
	                            false, false,                    /* authority */
	                            false, false};                   /* additional */
	cr_assert_eq(r.nrr, sizeof(want) / sizeof(want[0]));
	for (unsigned i = 0; i < r.nrr; i++)
		cr_expect_eq(r.rr[i].passes, want[i], "record %u (section %u)", i, r.rr[i].section);
}

/* ---- the prebuilt answer ---- */

/* The question text with its letters' case flipped by mask, bit i for letter i. */
static void recase(const char *in, unsigned mask, char *out)
{
	unsigned k = 0;
	for (; *in; in++, out++) {
		char c = *in;
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))
			c = (mask >> (k++ % 32)) & 1 ? (char)(c ^ 0x20) : c;
		*out = c;
	}
	*out = 0;
}

/* For spec's answer, the template's bytes are the rebuild's for every client: case, ID, RD, CD
 * and AD bits, EDNS with and without DO, the answer's age, the TTL cap and the size limit (0
 * from the template exactly where the rebuild truncates). Returns how many clients it served. */
static int template_same_as_rebuild(const struct rspec *spec)
{
	static uint8_t pkt[4096], tpl[WIRE_TEMPLATE_MAX], o1[8192], o2[8192];
	static struct wire_resp r;
	size_t len = make_resp(spec, pkt, sizeof(pkt));
	cr_assert_eq(parse(pkt, len, spec, &r), 0);
	int tl = wire_resp_template(pkt, len, &r, W(spec->qname), (uint16_t)spec->qtype,
	                            LDNS_RR_CLASS_IN, tpl, sizeof(tpl));
	cr_assert_gt(tl, 0, "%s: no template (%d)", spec->qname, tl);
	static const uint16_t flags[] = {0, LDNS_RD, LDNS_RD | LDNS_CD, LDNS_AD, LDNS_RD | LDNS_AD};
	static const uint32_t ages[] = {0, 10, 299, 100000}, caps[] = {UINT32_MAX, 3600, 5, 0};
	static const size_t limits[] = {WIRE_UDP_MIN, 100, 60, WIRE_EDNS_SIZE, WIRE_MAXMSG};
	int served = 0;
	for (unsigned v = 0; v < 3 * 5 * 4 * 4 * 5 * 3; v++) {
		unsigned x = v;
		unsigned ecase = x % 3, fi = (x /= 3) % 5, ai = (x /= 5) % 4, ci = (x /= 4) % 4,
		         li = (x /= 4) % 5, casei = (x / 5) % 3;
		char name[NAME_MAXTEXT];
		recase(spec->qname, casei == 0 ? 0 : casei == 1 ? ~0u : 0x5a5a5a5au, name);
		struct wire_query q;
		client_query(name, spec->qtype, (uint16_t)(v * 2654435761u), flags[fi], ecase > 0,
		             ecase == 2, &q);
		r.age = ages[ai];
		int a = wire_resp_build(pkt, len, &r, &q, caps[ci], limits[li], o1, sizeof(o1));
		int b = wire_resp_from_template(tpl, (size_t)tl, &r, &q, caps[ci], limits[li], o2,
		                                sizeof(o2));
		cr_assert_gt(a, 0);
		if (b == 0) {
			cr_expect(o1[2] & 0x02,
			          "%s (case %s, variant %u): the template declined an "
			          "answer the rebuild did not truncate",
			          spec->qname, name, v);
			continue;
		}
		cr_assert_eq(a, b, "%s (case %s, variant %u): %d bytes, the template's %d",
		             spec->qname, name, v, a, b);
		cr_assert_arr_eq(o1, o2, (size_t)a, "%s (case %s, variant %u): other bytes",
		                 spec->qname, name, v);
		served++;
	}
	r.age = 0;
	/* Another name of the same length is never answered from it. */
	struct wire_query other;
	client_query("www.example.org.", spec->qtype, 1, 0, false, false, &other);
	if (other.qname_len != strlen(spec->qname) + 1)
		cr_expect_eq(wire_resp_from_template(tpl, (size_t)tl, &r, &other, UINT32_MAX,
		                                     WIRE_MAXMSG, o2, sizeof(o2)),
		             0);
	/* Every cut of a template is refused, never read past. */
	for (int cut = 0; cut < tl; cut++)
		cr_expect_leq(wire_resp_from_template(tpl, (size_t)cut, &r, &other, UINT32_MAX,
		                                      WIRE_MAXMSG, o2, sizeof(o2)),
		              0, "cut %d", cut);
	return served;
}

Test(resp_template, same_bytes_as_the_rebuild)
{
	cr_expect_gt(template_same_as_rebuild(&basic), 0);
	cr_expect_gt(template_same_as_rebuild(&mixed), 0);
	struct rspec dname = {
	    .id = 7,
	    .qname = "a.b.example.com.",
	    .qtype = LDNS_RR_TYPE_A,
	    .an = {"example.com. 300 IN DNAME Example.NET.", "a.b.example.net. 60 IN A 192.0.2.7"},
	};
	cr_expect_gt(template_same_as_rebuild(&dname), 0);
	struct rspec nx = {
	    .id = 7,
	    .qname = "nope.example.com.",
	    .qtype = LDNS_RR_TYPE_AAAA,
	    .rcode = LDNS_RCODE_NXDOMAIN,
	    .flags = LDNS_AD,
	    .ns = {"example.com. 300 IN SOA ns.example.com. h.example.com. 1 2 3 4 120",
	           "example.com. 300 IN NS ns.example.com."},
	};
	cr_expect_gt(template_same_as_rebuild(&nx), 0);
	struct rspec https = {
	    .id = 7,
	    .qname = "svc.Example.com.",
	    .qtype = LDNS_RR_TYPE_MX,
	    .an = {"svc.example.com. 120 IN MX 10 mail.svc.example.com.",
	           "svc.example.com. 60 IN MX 20 mail2.example.com."},
	    .ar = {"mail.svc.example.com. 60 IN A 192.0.2.25"},
	};
	cr_expect_gt(template_same_as_rebuild(&https), 0);
	/* Large enough that every UDP limit truncates it: served only where it fits. */
	static char many[30][80];
	struct rspec big = {.id = 7, .qname = "big.example.com.", .qtype = LDNS_RR_TYPE_AAAA};
	for (int i = 0; i < 30; i++) {
		snprintf(many[i], sizeof(many[i]), "big.example.com. %d IN AAAA 2001:db8::%x",
		         100 + i, i + 1);
		big.an[i] = many[i];
	}
	cr_expect_gt(template_same_as_rebuild(&big), 0);
}
