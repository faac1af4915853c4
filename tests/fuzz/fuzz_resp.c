/* fuzz_resp: upstream answers, the bytes a misbehaving or spoofing upstream controls.
 *
 * The expected ID and question are taken from the input itself (the header's ID and the first
 * question, read with name_unpack and lower-cased), so that random bytes get past the "is this
 * ours" check and reach the record walk, the CNAME/DNAME chain, the address walk and the rebuild.
 * A fixed fake client query (same question, the ID 0x1234, RD and CD set; EDNS with and without
 * DO, or no EDNS, and a UDP/TCP size limit, all chosen by bits of the input's ID) is the one the
 * answer is rebuilt for.
 *
 * Properties:
 *   - wire_resp_parse returns 0, MOAT_EMISMATCH or MOAT_EFORMAT; on 0 its records lie inside the
 *     packet and the chain starts at the question;
 *   - every address handed to the address callbacks lies inside the packet and is 4 or 16 bytes;
 *     the addresses passed to the client are a subset of all addresses;
 *   - differential with ldns: an answer we accept (parse 0, address walk not MOAT_EFORMAT,
 *     rebuild > 0: what moatd would hand to a client) is accepted by ldns_wire2pkt, subject to
 *     the exceptions below;
 *   - the rebuilt answer parses with ldns, echoes the client's ID and question, has the ANCOUNT
 *     and NSCOUNT we wrote, only answer records owned by a chain name, only SOA/NSEC/NSEC3/RRSIG
 *     in authority, no additional record but our OPT (iff the client sent EDNS), TTLs capped, and
 *     every record it carries is, as ldns reads it, a record of the upstream's answer (the
 *     records whose names moat decompresses and recompresses compared in full, others by owner,
 *     type and class: their RDATA is copied as it is; skipped when the neutral copy below is
 *     inconclusive);
 *   - a rebuild that does not fit max_size is the question alone with TC set.
 *
 * Intentional differences, where ldns is the lenient one (allowed): trailing bytes; a compression
 * pointer that points forward (ldns follows it); OPT outside the additional section, more than one
 * OPT, or an OPT not owned by the root; more than WIRE_MAXRR records.
 * Where ldns is the stricter one: moat holds to a layout only the RDATA it reads (A and AAAA in
 * every section; CNAME, DNAME, NS, PTR, MX, SOA, SVCB and HTTPS it passes on, whose names it
 * decompresses). Everything else is skipped by its RDLENGTH (records it drops) or copied as it is
 * (answer records on the chain of other types, NSEC/NSEC3/RRSIG in authority: opaque RDATA, as
 * RFC 3597 treats unknown types), while ldns checks every known type's RDATA layout (a TXT string
 * running past the RDATA, an SRV of 3 bytes). ldns also reads an A or AAAA by its type alone,
 * whatever the class, where moat takes one of another class and another size for class-specific
 * data (wire_resp_each_addr, on purpose). For such records, the packet must still parse with ldns
 * once the types of exactly those records are replaced by the private type 65280: the framing
 * (names, pointers, counts, lengths) is held to ldns's rules all the same. The same goes for our
 * rebuilt answer (its opaque records retyped before ldns reads it), and the record-by-record
 * comparison reads both sides that way: ldns reads a known type's fields and, when the RDATA is
 * longer, goes on reading the next record from where they ended, which would compare records
 * that are not there. */
#include <ctype.h>
#include <ldns/ldns.h>
#include <string.h>

#include "fuzz_common.h"
#include "fuzz_ldns.h"
#include "moat/err.h"
#include "moat/name.h"
#include "moat/wire.h"

struct addr_ctx {
	const uint8_t *pkt;
	size_t len;
	unsigned n;
	unsigned stop_at; /* 0: never stop */
};

static int on_addr(void *c, const uint8_t *addr, size_t alen, uint16_t rrtype)
{
	struct addr_ctx *a = c;
	FZ_CHECK(alen == 4 || alen == 16, "address length %zu", alen);
	FZ_CHECK(addr >= a->pkt && addr + alen <= a->pkt + a->len, "address outside the packet");
	FZ_CHECK(rrtype == WIRE_A || rrtype == WIRE_AAAA || rrtype == WIRE_SVCB ||
	             rrtype == WIRE_HTTPS,
	         "address from type %u", rrtype);
	FZ_CHECK(rrtype != WIRE_A || alen == 4, "A of %zu bytes", alen);
	FZ_CHECK(rrtype != WIRE_AAAA || alen == 16, "AAAA of %zu bytes", alen);
	a->n++;
	return a->stop_at && a->n == a->stop_at ? 7 : 0;
}

/* Does moat pass this record on (as wire_resp_build decides)? */
static bool passed_on(const uint8_t *pkt, size_t len, const struct wire_resp *r,
                      const struct wire_rr *rr)
{
	if (rr->section == WIRE_SEC_NS)
		return rr->type == WIRE_SOA || rr->type == WIRE_NSEC || rr->type == WIRE_NSEC3 ||
		       rr->type == WIRE_RRSIG;
	if (rr->section != WIRE_SEC_AN)
		return false;
	uint8_t owner[NAME_MAXWIRE];
	size_t off = rr->owner_off;
	return name_unpack(pkt, len, &off, owner) > 0 && wire_resp_on_chain(r, owner);
}

/* RDATA that moat passes on as it is, without reading it: every type but the ones below, and an
 * A or AAAA of another class and another size. */
static bool opaque_rdata(uint16_t type, uint16_t rclass, uint16_t rdlen)
{
	switch (type) {
	case WIRE_A:
	case WIRE_AAAA:
		return rclass != WIRE_CLASS_IN && rdlen != (type == WIRE_A ? 4 : 16);
	case WIRE_CNAME:
	case WIRE_DNAME:
	case WIRE_NS:
	case WIRE_PTR:
	case WIRE_MX:
	case WIRE_SOA:
	case WIRE_SVCB:
	case WIRE_HTTPS:
		return false;
	default:
		return true;
	}
}

/* Did moat read this record's RDATA (and so hold it to a layout), or skip or copy it as it is? */
static bool interpreted(const uint8_t *pkt, size_t len, const struct wire_resp *r,
                        const struct wire_rr *rr)
{
	if (opaque_rdata(rr->type, rr->rclass, rr->rdlen))
		return false;
	switch (rr->type) {
	case WIRE_A:
	case WIRE_AAAA: /* every section */
		return true;
	default:
		/* CNAME, DNAME, NS, PTR, MX, SOA, SVCB, HTTPS: names decompressed when passed on.
		 * (wire_resp_each_addr walks the hints of SVCB/HTTPS records in every section,
		 * more strictly than ldns, but reads the target only of those passed on.) */
		return passed_on(pkt, len, r, rr);
	}
}

/* A copy of the upstream's answer whose records moat does not interpret carry the private type,
 * so that ldns frames every record by its RDLENGTH as moat does (ldns reads a known type's fields
 * and, when RDATA is longer than they are, goes on reading the next record from where they
 * ended). The walk reuses moat's record offsets: they are only trusted as far as ldns then agrees.
 * mod (len bytes, zeroed) marks the bytes changed. */
/* Records of another class than the question's: wire_resp_parse drops them unread (they are not
 * in r->rr), so they are neutral too. */
struct other_class {
	uint16_t qclass;
	uint8_t *mod;
};

static void neutral_other_class(uint8_t *c, size_t t, int section, void *ctx)
{
	struct other_class *o = ctx;
	if (section == 0) {
		o->qclass = fz_u16(c + t + 2);
		return;
	}
	if (fz_u16(c + t + 2) == o->qclass || fz_u16(c + t) == WIRE_OPT)
		return;
	c[t] = FZ_TYPE_PRIVATE >> 8;
	c[t + 1] = FZ_TYPE_PRIVATE & 0xFF;
	o->mod[t] = o->mod[t + 1] = 1;
}

static uint8_t *neutral_input(const uint8_t *pkt, size_t len, const struct wire_resp *r,
                              uint8_t *mod)
{
	uint8_t *c = malloc(len);
	if (!c)
		abort();
	memcpy(c, pkt, len);
	for (unsigned i = 0; i < r->nrr; i++) {
		const struct wire_rr *rr = &r->rr[i];
		if (interpreted(pkt, len, r, rr))
			continue; /* held to ldns's full rules */
		size_t t = (size_t)rr->rdata_off - 10;
		c[t] = FZ_TYPE_PRIVATE >> 8;
		c[t + 1] = FZ_TYPE_PRIVATE & 0xFF;
		mod[t] = mod[t + 1] = 1;
	}
	struct other_class o = {0, mod};
	fz_each_type(c, len, neutral_other_class, &o);
	return c;
}

/* Whether retyping changed bytes that a name ldns reads points into (a pointer into a record's
 * type field is legal framing): then the neutral copy says nothing. */
static bool neutral_inconclusive(const uint8_t *pkt, size_t len, const struct wire_resp *r,
                                 const uint8_t *mod)
{
	if (fz_name_reads(pkt, len, WIRE_HDR, mod))
		return true;
	/* Every owner, those of the records dropped for their class too. */
	unsigned counts[3] = {fz_u16(pkt + 6), fz_u16(pkt + 8), fz_u16(pkt + 10)};
	size_t off = fz_skip_name(pkt, len, WIRE_HDR);
	off = off ? off + 4 : 0;
	for (int sec = 0; sec < 3 && off; sec++)
		for (unsigned i = 0; i < counts[sec] && off; i++) {
			if (fz_name_reads(pkt, len, off, mod))
				return true;
			off = fz_skip_name(pkt, len, off);
			off = off && off + 10 <= len ? off + 10 + fz_u16(pkt + off + 8) : 0;
		}
	for (unsigned i = 0; i < r->nrr; i++) {
		const struct wire_rr *rr = &r->rr[i];
		if (fz_name_reads(pkt, len, rr->owner_off, mod))
			return true;
		if (!interpreted(pkt, len, r, rr) || rr->rdlen == 0)
			continue;
		size_t d = rr->rdata_off;
		switch (rr->type) {
		case WIRE_MX:
		case WIRE_SVCB:
		case WIRE_HTTPS:
			d += 2;
			/* fall through */
		case WIRE_CNAME:
		case WIRE_DNAME:
		case WIRE_NS:
		case WIRE_PTR:
		case WIRE_SOA:
			if (d < len && fz_name_reads(pkt, len, d, mod))
				return true;
			if (rr->type == WIRE_SOA && (d = fz_skip_name(pkt, len, d)) &&
			    fz_name_reads(pkt, len, d, mod))
				return true; /* the second name */
			break;
		}
	}
	return false;
}

/* What our rebuilt answer may carry outside the answer section, read from its own bytes. */
static void check_sections(uint8_t *pkt, size_t t, int section, void *ctx)
{
	uint16_t type = fz_u16(pkt + t);
	(void)ctx;
	if (section == 2)
		FZ_CHECK(type == WIRE_SOA || type == WIRE_NSEC || type == WIRE_NSEC3 ||
		             type == WIRE_RRSIG,
		         "authority type %u passed on", type);
	if (section == 3)
		FZ_CHECK(type == WIRE_OPT, "additional type %u passed on", type);
}

/* The same for our rebuilt answer: its answer and authority records of opaque RDATA. */
static void retype_opaque(uint8_t *pkt, size_t t, int section, void *ctx)
{
	(void)ctx;
	if ((section == 1 || section == 2) &&
	    opaque_rdata(fz_u16(pkt + t), fz_u16(pkt + t + 2), fz_u16(pkt + t + 8))) {
		pkt[t] = FZ_TYPE_PRIVATE >> 8;
		pkt[t + 1] = FZ_TYPE_PRIVATE & 0xFF;
	}
}

/* The types whose names moat decompresses and recompresses: compared in full. */
static bool full_compare(uint16_t t)
{
	return t == WIRE_A || t == WIRE_AAAA || t == WIRE_CNAME || t == WIRE_DNAME ||
	       t == WIRE_NS || t == WIRE_PTR || t == WIRE_MX || t == WIRE_SOA || t == WIRE_SVCB ||
	       t == WIRE_HTTPS;
}

static bool in_list(const ldns_rr_list *l, const ldns_rr *rr)
{
	for (size_t i = 0; i < ldns_rr_list_rr_count(l); i++) {
		ldns_rr *x = ldns_rr_list_rr(l, i);
		if (ldns_rr_get_type(rr) != ldns_rr_get_type(x))
			continue;
		if ((full_compare(ldns_rr_get_type(rr)) ? ldns_rr_compare(rr, x)
		                                        : ldns_rr_compare_no_rdata(rr, x)) == 0)
			return true;
	}
	return false;
}

static void check_rebuilt(const uint8_t *out, int n, const struct wire_query *q,
                          const struct wire_resp *r, ldns_pkt *in, uint32_t ttl_cap,
                          size_t max_size)
{
	FZ_CHECK(n >= WIRE_HDR, "rebuild length %d", n);
	FZ_CHECK((size_t)n <= max_size || (out[2] & 0x02), "rebuild of %d over the limit %zu", n,
	         max_size);
	uint8_t *copy = malloc((size_t)n);
	if (!copy)
		abort();
	memcpy(copy, out, (size_t)n);
	fz_each_type(copy, (size_t)n, check_sections, NULL);
	fz_each_type(copy, (size_t)n, retype_opaque, NULL);
	ldns_pkt *a = NULL;
	ldns_status st = ldns_wire2pkt(&a, copy, (size_t)n);
	free(copy);
	FZ_CHECK(st == LDNS_STATUS_OK, "ldns rejects our rebuilt answer: %s",
	         ldns_get_errorstr_by_id(st));
	FZ_CHECK(ldns_pkt_id(a) == q->id && ldns_pkt_qr(a) && !ldns_pkt_aa(a), "header");
	FZ_CHECK(ldns_pkt_get_rcode(a) == (r->rcode & 0xF), "rcode");
	FZ_CHECK(ldns_pkt_qdcount(a) == 1, "qdcount");
	ldns_rr *qr = ldns_rr_list_rr(ldns_pkt_question(a), 0);
	FZ_CHECK(ldns_rdf_size(ldns_rr_owner(qr)) == q->qname_len &&
	             memcmp(ldns_rdf_data(ldns_rr_owner(qr)), q->qname, q->qname_len) == 0 &&
	             ldns_rr_get_type(qr) == q->qtype && ldns_rr_get_class(qr) == q->qclass,
	         "question not echoed");
	FZ_CHECK(ldns_pkt_ancount(a) == fz_u16(out + 6) && ldns_pkt_nscount(a) == fz_u16(out + 8),
	         "counts");
	FZ_CHECK(ldns_rr_list_rr_count(ldns_pkt_answer(a)) == ldns_pkt_ancount(a) &&
	             ldns_rr_list_rr_count(ldns_pkt_authority(a)) == ldns_pkt_nscount(a),
	         "ldns lists vs counts");
	FZ_CHECK(ldns_pkt_arcount(a) == 0, "additional records passed on");
	FZ_CHECK(ldns_pkt_edns(a) == q->edns, "EDNS presence");
	if (ldns_pkt_tc(a))
		FZ_CHECK(ldns_pkt_ancount(a) == 0 && ldns_pkt_nscount(a) == 0, "TC with records");

	const ldns_rr_list *an = ldns_pkt_answer(a), *ns = ldns_pkt_authority(a);
	for (size_t i = 0; i < ldns_rr_list_rr_count(an); i++) {
		ldns_rr *rr = ldns_rr_list_rr(an, i);
		uint8_t owner[NAME_MAXWIRE];
		ldns_rdf *o = ldns_rr_owner(rr);
		FZ_CHECK(ldns_rdf_size(o) <= NAME_MAXWIRE, "owner size");
		memcpy(owner, ldns_rdf_data(o), ldns_rdf_size(o));
		FZ_CHECK(wire_resp_on_chain(r, owner), "answer record off the chain");
		FZ_CHECK(ldns_rr_ttl(rr) <= ttl_cap, "TTL not capped");
		FZ_CHECK(!in || in_list(ldns_pkt_answer(in), rr),
		         "answer record %zu not in the upstream's", i);
	}
	for (size_t i = 0; i < ldns_rr_list_rr_count(ns); i++) {
		ldns_rr *rr = ldns_rr_list_rr(ns, i);
		FZ_CHECK(ldns_rr_ttl(rr) <= ttl_cap, "TTL not capped");
		FZ_CHECK(!in || in_list(ldns_pkt_authority(in), rr),
		         "authority record %zu not upstream's", i);
	}
	ldns_pkt_free(a);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct wire_resp r;
	static struct wire_query q;
	static uint8_t out[WIRE_MAXMSG + 1];
	uint8_t lname[NAME_MAXWIRE];

	/* The expected question: the packet's own, when it has one. */
	uint16_t id = size >= 2 ? fz_u16(data) : 0, qtype = 1, qclass = 1;
	size_t off = WIRE_HDR;
	lname[0] = 0;
	if (size > WIRE_HDR && name_unpack(data, size, &off, lname) > 0 && off + 4 <= size) {
		name_lower(lname);
		qtype = fz_u16(data + off);
		qclass = fz_u16(data + off + 2);
	}

	int rc = wire_resp_parse(data, size, id, lname, qtype, qclass, &r);
	FZ_CHECK(rc == 0 || rc == MOAT_EMISMATCH || rc == MOAT_EFORMAT, "parse returned %d", rc);
	if (rc != 0)
		return 0;

	FZ_CHECK(r.nrr <= WIRE_MAXRR && r.nchain >= 1 && r.nchain <= WIRE_MAXCHAIN + 1 &&
	             r.ndname <= WIRE_MAXCHAIN,
	         "counts in struct");
	FZ_CHECK(name_equal(r.chain[0], lname), "chain[0] is not the question");
	for (unsigned i = 0; i < r.nrr; i++) {
		const struct wire_rr *rr = &r.rr[i];
		FZ_CHECK(rr->owner_off < size && (size_t)rr->rdata_off + rr->rdlen <= size &&
		             rr->rdata_off >= 10 && rr->section <= WIRE_SEC_AR,
		         "record %u outside the packet", i);
		FZ_CHECK(rr->ttl <= 0x7FFFFFFF, "TTL with the top bit");
	}

	/* Every address, then the ones passed on; stop early on some inputs. */
	struct addr_ctx all = {data, size, 0, 0}, passed = {data, size, 0, 0};
	int ar = wire_resp_each_addr(data, size, &r, on_addr, &all);
	FZ_CHECK(ar == 0 || ar == MOAT_EFORMAT, "each_addr returned %d", ar);
	int pr = wire_resp_each_passed_addr(data, size, &r, on_addr, &passed);
	FZ_CHECK(pr == 0 || pr == MOAT_EFORMAT, "each_passed_addr returned %d", pr);
	if (ar == 0)
		FZ_CHECK(pr == 0 && passed.n <= all.n, "passed addresses are not a subset");
	if (all.n > 1) {
		struct addr_ctx stop = {data, size, 0, all.n / 2};
		FZ_CHECK(wire_resp_each_addr(data, size, &r, on_addr, &stop) == 7 &&
		             stop.n == all.n / 2,
		         "the walk did not stop");
	}

	/* The client's side: same question, its own ID, flags and EDNS from the input's ID bits. */
	uint8_t cq[WIRE_HDR + NAME_MAXWIRE + 4 + 11];
	int qn = wire_build_query(0x1234, lname, qtype, qclass, (id & 1) != 0, cq, sizeof(cq));
	FZ_CHECK(qn > 0, "fake query: %d", qn);
	cq[3] |= 0x10; /* CD */
	if (id & 2) {  /* no EDNS */
		qn -= 11;
		cq[11] = 0;
	}
	if (lname[0]) /* a client's case, to be echoed */
		cq[WIRE_HDR + 1] = (uint8_t)toupper(cq[WIRE_HDR + 1]);
	FZ_CHECK(wire_query_parse(cq, (size_t)qn, &q) == WQ_OK, "fake query does not parse");
	static const size_t limits[4] = {WIRE_UDP_MIN, WIRE_EDNS_SIZE, 4096, WIRE_MAXMSG};
	size_t max_size = limits[(id >> 2) & 3];
	uint32_t ttl_cap = (id & 0x10) ? 300 : UINT32_MAX;

	int n = wire_resp_build(data, size, &r, &q, ttl_cap, max_size, out, sizeof(out));
	FZ_CHECK(n > 0 || n == MOAT_EFORMAT, "rebuild returned %d", n);

	/* The cache keeps the parse packed: unpacked, it must rebuild the very same answer. */
	static uint8_t packed[WIRE_RESP_PACKED_MAX], out2[WIRE_MAXMSG + 1];
	static struct wire_resp back;
	int pn = wire_resp_pack(&r, packed, sizeof(packed));
	FZ_CHECK(pn > 0, "pack returned %d", pn);
	FZ_CHECK(wire_resp_unpack(packed, (size_t)pn, &back) == 0, "unpack failed");
	FZ_CHECK(wire_resp_unpack(packed, (size_t)pn - 1, &back) == MOAT_EFORMAT, "short unpack");
	FZ_CHECK(wire_resp_unpack(packed, (size_t)pn, &back) == 0, "unpack failed");
	int n2 = wire_resp_build(data, size, &back, &q, ttl_cap, max_size, out2, sizeof(out2));
	FZ_CHECK(n2 == n && (n <= 0 || memcmp(out, out2, (size_t)n) == 0),
	         "the unpacked parse rebuilds differently");

	ldns_pkt *raw = NULL, *in = NULL;
	ldns_status ls = ldns_wire2pkt(&raw, data, size);
	uint8_t *mod = calloc(size ? size : 1, 1);
	if (!mod)
		abort();
	uint8_t *neutral = neutral_input(data, size, &r, mod);
	ldns_status ns = ldns_wire2pkt(&in, neutral, size);
	free(neutral);
	bool inconclusive = neutral_inconclusive(data, size, &r, mod);
	if (ar == 0 && n > 0 && ls != LDNS_STATUS_OK && ns != LDNS_STATUS_OK)
		FZ_CHECK(inconclusive, "we accept what ldns rejects as malformed: %s / %s",
		         ldns_get_errorstr_by_id(ls), ldns_get_errorstr_by_id(ns));
	free(mod);
	if (ar == 0 && n > 0 && ns == LDNS_STATUS_OK) /* what moatd hands to a client */
		check_rebuilt(out, n, &q, &r, inconclusive ? NULL : in, ttl_cap, max_size);
	ldns_pkt_free(raw);
	ldns_pkt_free(in);
	return 0;
}
