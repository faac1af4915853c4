/* fuzz_query: client queries, the first bytes moatd reads from an untrusted agent.
 *
 * wire_query_parse runs on arbitrary bytes, with ldns as a differential oracle:
 *   - WQ_OK implies ldns_wire2pkt accepts the packet and agrees on the ID, QR/opcode, one
 *     question, its name (lower-cased), type and class, and on EDNS (present, UDP size, DO bit);
 *   - whatever ldns rejects as malformed we do not answer as a normal query.
 * Then the local answers moatd builds for that query (the NXDOMAIN with an Extended DNS Error of a
 * deny, the sinkhole answer, the FORMERR/NOTIMP/BADVERS error answers, configured as query.c does)
 * must parse with ldns and say what we meant.
 *
 * Intentional differences, where ldns is the lenient one (we reject, ldns accepts; allowed):
 *   - trailing bytes after the last record;
 *   - a compression pointer in the question (it could only point into the header);
 *   - more than one OPT record, an OPT not owned by the root, OPT options that do not tile the
 *     RDATA, ANCOUNT or NSCOUNT other than 0, QDCOUNT other than 1.
 * One where ldns is the stricter one, checked narrowly:
 *   - additional records other than OPT (TSIG, SIG(0) or anything else) are skipped by their
 *     RDLENGTH, never interpreted and never forwarded; ldns also checks their RDATA against its
 *     type's layout (an A of 3 bytes). So ldns reads a copy of the packet whose additional records
 *     other than OPT carry a private type (65280): the framing (names, pointers, counts, lengths)
 *     is held to ldns's rules all the same, and a query we accept must parse that way. The fields
 *     are compared with that parse too: on the raw packet ldns reads a known type's fields and,
 *     when the RDATA is longer, goes on reading the next record from there (an A of 41 bytes made
 *     it find an OPT that is not there). When a name ldns reads points into a changed type field,
 *     the copy proves nothing and both checks are skipped. */
#include <ctype.h>
#include <ldns/ldns.h>
#include <string.h>

#include "fuzz_common.h"
#include "fuzz_ldns.h"
#include "moat/err.h"
#include "moat/wire.h"

struct retype {
	uint8_t *mod;        /* bytes changed */
	size_t owners[4096]; /* where the additional records' owners start */
	size_t nowners;
	size_t prev_end;
};

static void retype_extra(uint8_t *pkt, size_t t, int section, void *ctx)
{
	struct retype *rt = ctx;
	if (section == 3 && fz_u16(pkt + t) != WIRE_OPT) {
		pkt[t] = FZ_TYPE_PRIVATE >> 8;
		pkt[t + 1] = FZ_TYPE_PRIVATE & 0xFF;
		rt->mod[t] = rt->mod[t + 1] = 1;
	}
}

static void note_owner(uint8_t *pkt, size_t t, int section, void *ctx)
{
	struct retype *rt = ctx;
	/* The owner starts where the previous record ended (the question's after the header). */
	if (section == 3 && rt->nowners < sizeof(rt->owners) / sizeof(rt->owners[0]))
		rt->owners[rt->nowners++] = rt->prev_end;
	rt->prev_end = t + (section ? 10u + fz_u16(pkt + t + 8) : 4u);
}

/* ldns on a copy of pkt whose additional records other than OPT carry the private type, so
 * that ldns frames them by their RDLENGTH as we do (for a known type ldns reads its fields and,
 * when the RDATA is longer, goes on reading the next record from where they ended: it would then
 * find records, an OPT among them, that are not there). *inconclusive is set when a name ldns
 * reads passes through a changed type field (legal framing): then the copy proves nothing. */
static ldns_status ldns_neutral(const uint8_t *pkt, size_t len, ldns_pkt **out, bool *inconclusive)
{
	static struct retype rt;
	uint8_t *c = malloc(len), *mod = calloc(len, 1);
	if (!c || !mod)
		abort();
	memcpy(c, pkt, len);
	rt.mod = mod;
	rt.nowners = 0;
	rt.prev_end = WIRE_HDR;
	fz_each_type(c, len, note_owner, &rt);
	fz_each_type(c, len, retype_extra, &rt);
	*out = NULL;
	ldns_status st = ldns_wire2pkt(out, c, len);
	*inconclusive = false;
	for (size_t i = 0; !*inconclusive && i < rt.nowners; i++)
		*inconclusive = fz_name_reads(pkt, len, rt.owners[i], mod);
	free(c);
	free(mod);
	return st;
}

static void lower_copy(uint8_t *dst, const uint8_t *src, size_t n)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = (uint8_t)tolower(src[i]);
}

static void check_against_ldns(const struct wire_query *q, ldns_pkt *p)
{
	FZ_CHECK(ldns_pkt_id(p) == q->id, "id %u vs %u", ldns_pkt_id(p), q->id);
	FZ_CHECK(!ldns_pkt_qr(p) && ldns_pkt_get_opcode(p) == LDNS_PACKET_QUERY, "qr/opcode");
	FZ_CHECK(ldns_pkt_qdcount(p) == 1, "qdcount %u", ldns_pkt_qdcount(p));
	ldns_rr *qr = ldns_rr_list_rr(ldns_pkt_question(p), 0);
	FZ_CHECK(qr != NULL, "no question in ldns");
	ldns_rdf *owner = ldns_rr_owner(qr);
	uint8_t lo[NAME_MAXWIRE];
	FZ_CHECK(ldns_rdf_size(owner) == q->qname_len, "qname length %zu vs %u",
	         ldns_rdf_size(owner), q->qname_len);
	lower_copy(lo, ldns_rdf_data(owner), ldns_rdf_size(owner));
	FZ_CHECK(memcmp(lo, q->lname, q->qname_len) == 0, "qname differs");
	FZ_CHECK(memcmp(ldns_rdf_data(owner), q->qname, q->qname_len) == 0, "qname case differs");
	FZ_CHECK(ldns_rr_get_type(qr) == q->qtype, "qtype %u vs %u", ldns_rr_get_type(qr),
	         q->qtype);
	FZ_CHECK(ldns_rr_get_class(qr) == q->qclass, "qclass %u vs %u", ldns_rr_get_class(qr),
	         q->qclass);
	FZ_CHECK(ldns_pkt_edns(p) == q->edns, "edns %d vs %d", ldns_pkt_edns(p), q->edns);
	if (q->edns) {
		uint16_t sz = ldns_pkt_edns_udp_size(p);
		FZ_CHECK(q->edns_size == (sz < WIRE_UDP_MIN ? WIRE_UDP_MIN : sz),
		         "udp size %u vs %u", sz, q->edns_size);
		FZ_CHECK(ldns_pkt_edns_do(p) == q->edns_do, "DO bit");
		FZ_CHECK(ldns_pkt_edns_version(p) == q->edns_version, "EDNS version");
	}
}

/* The question of an answer we built must be the client's, byte for byte (its case echoed). */
static void check_question_echo(const struct wire_query *q, ldns_pkt *a)
{
	FZ_CHECK(ldns_pkt_id(a) == q->id && ldns_pkt_qr(a), "answer id/qr");
	FZ_CHECK(ldns_pkt_qdcount(a) == (q->has_question ? 1 : 0), "answer qdcount");
	if (!q->has_question)
		return;
	ldns_rr *qr = ldns_rr_list_rr(ldns_pkt_question(a), 0);
	ldns_rdf *owner = ldns_rr_owner(qr);
	FZ_CHECK(ldns_rdf_size(owner) == q->qname_len &&
	             memcmp(ldns_rdf_data(owner), q->qname, q->qname_len) == 0,
	         "question not echoed");
	FZ_CHECK(ldns_rr_get_type(qr) == q->qtype && ldns_rr_get_class(qr) == q->qclass,
	         "question type/class not echoed");
}

static ldns_pkt *parse_ours(const uint8_t *out, int n, const char *what)
{
	FZ_CHECK(n > 0, "%s: build failed: %d", what, n);
	ldns_pkt *a = NULL;
	ldns_status st = ldns_wire2pkt(&a, out, (size_t)n);
	FZ_CHECK(st == LDNS_STATUS_OK, "%s: ldns rejects our answer: %s", what,
	         ldns_get_errorstr_by_id(st));
	return a;
}

static void check_answers(const struct wire_query *q)
{
	static const char text[] = "moat: not on allowlist of agent fuzz";
	static const uint8_t sink4[4] = {0, 0, 0, 0}, sink6[16] = {0};
	uint8_t out[WIRE_UDP_MIN + 512];
	struct wire_ede ede = {WIRE_EDE_BLOCKED, text};

	/* A deny: NXDOMAIN with the reason as EDE text when the client sent EDNS. */
	int n = wire_build_answer(q, WIRE_NXDOMAIN, &ede, NULL, NULL, 0, out, sizeof(out));
	ldns_pkt *a = parse_ours(out, n, "nxdomain");
	check_question_echo(q, a);
	FZ_CHECK(ldns_pkt_get_rcode(a) == LDNS_RCODE_NXDOMAIN, "rcode");
	FZ_CHECK(ldns_pkt_ancount(a) == 0 && ldns_pkt_nscount(a) == 0 && ldns_pkt_arcount(a) == 0,
	         "nxdomain carries records");
	FZ_CHECK(ldns_pkt_edns(a) == q->edns, "answer EDNS presence");
	if (q->edns) {
		FZ_CHECK(ldns_pkt_edns_do(a) == q->edns_do, "answer DO bit");
		ldns_rdf *opt = ldns_pkt_edns_data(a);
		size_t tl = strlen(text);
		FZ_CHECK(opt && ldns_rdf_size(opt) == 6 + tl, "EDE option size");
		const uint8_t *o = ldns_rdf_data(opt);
		FZ_CHECK(fz_u16(o) == WIRE_EDE_OPTION && fz_u16(o + 2) == 2 + tl &&
		             fz_u16(o + 4) == WIRE_EDE_BLOCKED && memcmp(o + 6, text, tl) == 0,
		         "EDE option content");
	}
	ldns_pkt_free(a);

	/* A sinkhole: one A or AAAA record for the question's own name (a pointer to it). */
	n = wire_build_answer(q, WIRE_NOERROR, &ede, sink4, sink6, 60, out, sizeof(out));
	a = parse_ours(out, n, "sinkhole");
	check_question_echo(q, a);
	bool rec = q->qclass == WIRE_CLASS_IN && (q->qtype == WIRE_A || q->qtype == WIRE_AAAA);
	FZ_CHECK(ldns_pkt_ancount(a) == (rec ? 1 : 0), "sinkhole ancount");
	if (rec) {
		ldns_rr *rr = ldns_rr_list_rr(ldns_pkt_answer(a), 0);
		FZ_CHECK(ldns_dname_compare(ldns_rr_owner(rr), ldns_rr_owner(ldns_rr_list_rr(
		                                                   ldns_pkt_question(a), 0))) == 0,
		         "sinkhole owner");
		FZ_CHECK(ldns_rr_get_type(rr) == q->qtype && ldns_rr_ttl(rr) == 60, "sinkhole rr");
		ldns_rdf *rd = ldns_rr_rdf(rr, 0);
		FZ_CHECK(rd && ldns_rdf_size(rd) == (q->qtype == WIRE_A ? 4u : 16u) &&
		             memcmp(ldns_rdf_data(rd), sink6, ldns_rdf_size(rd)) == 0,
		         "sinkhole address");
	}
	ldns_pkt_free(a);
}

/* The error answers, with the query adjusted as query_handle does. */
static void check_error_answer(struct wire_query *q, enum wire_query_status st)
{
	uint8_t out[WIRE_UDP_MIN + 512];
	uint8_t rcode = WIRE_FORMERR;
	if (st == WQ_FORMERR || st == WQ_NOTIMP) {
		rcode = st == WQ_FORMERR ? WIRE_FORMERR : WIRE_NOTIMP;
		q->has_question = false;
		q->edns = false;
	} else {
		rcode = WIRE_BADVERS;
	}
	int n = wire_build_answer(q, rcode, NULL, NULL, NULL, 0, out, sizeof(out));
	ldns_pkt *a = parse_ours(out, n, "error answer");
	check_question_echo(q, a);
	FZ_CHECK(ldns_pkt_get_rcode(a) == (rcode & 0xF), "error rcode");
	if (st == WQ_BADVERS)
		FZ_CHECK(ldns_pkt_edns(a) && ldns_pkt_edns_extended_rcode(a) == 1,
		         "BADVERS in OPT");
	/* The opcode is echoed (NOTIMP names the one we do not implement). */
	FZ_CHECK(ldns_pkt_get_opcode(a) == q->opcode, "opcode echo");
	ldns_pkt_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct wire_query q;
	enum wire_query_status st = wire_query_parse(data, size, &q);
	FZ_CHECK(st <= WQ_BADVERS, "status %d", (int)st);
	ldns_pkt *p = NULL;
	ldns_status ls = ldns_wire2pkt(&p, data, size);

	if (st == WQ_OK) {
		FZ_CHECK(q.has_question && q.qname_len >= 1 && q.qname_len <= NAME_MAXWIRE &&
		             name_wire_len(q.qname, NAME_MAXWIRE) == q.qname_len,
		         "question fields");
		FZ_CHECK(q.question_end == WIRE_HDR + q.qname_len + 4, "question_end");
		FZ_CHECK(q.edns_size >= WIRE_UDP_MIN, "edns_size");
		ldns_pkt *np = NULL;
		bool inconclusive;
		ldns_status ns = ldns_neutral(data, size, &np, &inconclusive);
		if (ns == LDNS_STATUS_OK && !inconclusive)
			check_against_ldns(&q, np);
		else if (ns != LDNS_STATUS_OK)
			FZ_CHECK(inconclusive, "we accept what ldns rejects as malformed: %s / %s",
			         ldns_get_errorstr_by_id(ls), ldns_get_errorstr_by_id(ns));
		ldns_pkt_free(np);
		check_answers(&q);
	} else if (st != WQ_DROP) {
		FZ_CHECK(size >= WIRE_HDR, "status %d without a header", (int)st);
		FZ_CHECK(fz_u16(data) == q.id && fz_u16(data + 2) == q.flags, "header fields");
		check_error_answer(&q, st);
	} else {
		FZ_CHECK(size < WIRE_HDR || (data[2] & 0x80), "dropped a query");
	}
	ldns_pkt_free(p);
	return 0;
}
