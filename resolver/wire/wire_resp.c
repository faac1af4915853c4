/* wire_resp.c owns upstream answers: it checks that an answer belongs to our query, walks every
 * record with bounds checks, follows the CNAME/DNAME chain from the question, hands every
 * address (A, AAAA, SVCB/HTTPS hints, in any section) to the caller's check, and rebuilds the
 * answer for the client with only the records policy lets through: owners on the chain in the
 * answer section, the negative-answer proof in authority, nothing else. Rebuilding (rather than
 * patching the upstream's bytes) is what makes dropping records safe: compression pointers are
 * recomputed, so nothing in the client's copy can point at a record we removed. */
#include <string.h>

#include "moat/err.h"
#include "moat/svcb.h"
#include "moat/wire.h"
#include "wire/wire_writer.h"

bool wire_resp_on_chain(const struct wire_resp *r, const uint8_t *name)
{
	for (unsigned i = 0; i < r->nchain; i++)
		if (name_equal(r->chain[i], name))
			return true;
	for (unsigned i = 0; i < r->ndname; i++)
		if (name_equal(r->dname_owner[i], name))
			return true;
	return false;
}

static int owner_of(const uint8_t *pkt, size_t len, const struct wire_rr *rr, uint8_t *out)
{
	size_t off = rr->owner_off;
	return name_unpack_msg(pkt, len, &off, out);
}

/* Whether rr is an answer-section record of type in qclass; its owner is read into owner when
 * it is. Returns 1, 0 or MOAT_EFORMAT. */
static int answer_rr_is(const uint8_t *pkt, size_t len, const struct wire_rr *rr, uint16_t type,
                        uint16_t qclass, uint8_t *owner)
{
	if (rr->section != WIRE_SEC_AN || rr->rclass != qclass || rr->type != type)
		return 0;
	return owner_of(pkt, len, rr, owner) < 0 ? MOAT_EFORMAT : 1;
}

/* The one name that is the whole rdata of rr (a CNAME's or DNAME's target), lower-cased.
 * Returns 0 or MOAT_EFORMAT. */
static int rdata_name(const uint8_t *pkt, size_t len, const struct wire_rr *rr, uint8_t *out)
{
	size_t off = rr->rdata_off;
	if (name_unpack_msg(pkt, len, &off, out) < 0 || off != (size_t)rr->rdata_off + rr->rdlen)
		return MOAT_EFORMAT;
	name_lower(out);
	return 0;
}

/* Replace the labels of name that stand above owner by target: DNAME substitution (RFC 6672).
 * Returns the new length or MOAT_EFORMAT if the result is too long. */
static int dname_subst(const uint8_t *name, const uint8_t *owner, const uint8_t *target,
                       uint8_t *out)
{
	int skip = name_count_labels(name) - name_count_labels(owner);
	size_t pre = 0;
	const uint8_t *p = name;
	for (int i = 0; i < skip; i++) {
		pre += 1u + *p;
		p = name_parent(p);
	}
	int tl = name_wire_len(target, NAME_MAXWIRE);
	if (tl < 0 || pre + (size_t)tl > NAME_MAXWIRE)
		return MOAT_EFORMAT;
	memmove(out, name, pre);
	memcpy(out + pre, target, (size_t)tl);
	return (int)(pre + (size_t)tl);
}

/* The DNAME of the answer section that redirects cur (cur strictly below its owner): fills
 * owner and the substituted name next. Returns 1, 0 when there is none, or MOAT_EFORMAT. */
static int dname_find(const uint8_t *pkt, size_t len, const struct wire_resp *r, const uint8_t *cur,
                      uint16_t qclass, uint8_t *owner, uint8_t *next)
{
	uint8_t target[NAME_MAXWIRE];
	for (unsigned i = 0; i < r->nrr; i++) {
		int is = answer_rr_is(pkt, len, &r->rr[i], WIRE_DNAME, qclass, owner);
		if (is < 0)
			return is;
		/* A DNAME redirects the names strictly below its owner. */
		if (!is || name_equal(owner, cur) || !name_is_under(cur, owner))
			continue;
		if (rdata_name(pkt, len, &r->rr[i], target) < 0 ||
		    dname_subst(cur, owner, target, next) < 0)
			return MOAT_EFORMAT;
		name_lower(next);
		return 1;
	}
	return 0;
}

static void add_dname_owner(struct wire_resp *r, const uint8_t *owner)
{
	if (r->ndname < WIRE_MAXCHAIN) {
		memcpy(r->dname_owner[r->ndname], owner, NAME_MAXWIRE);
		name_lower(r->dname_owner[r->ndname++]);
	}
}

/* One step along the chain from cur, or 0 when it ends. */
static int chain_step(const uint8_t *pkt, size_t len, struct wire_resp *r, const uint8_t *cur,
                      uint16_t qclass, uint8_t *next)
{
	uint8_t owner[NAME_MAXWIRE], subst[NAME_MAXWIRE];
	for (unsigned i = 0; i < r->nrr; i++) {
		int is = answer_rr_is(pkt, len, &r->rr[i], WIRE_CNAME, qclass, owner);
		if (is < 0)
			return is;
		if (!is || !name_equal(owner, cur))
			continue;
		if (rdata_name(pkt, len, &r->rr[i], next) < 0)
			return MOAT_EFORMAT;
		/* A CNAME synthesized from a DNAME (RFC 6672 3.4): the DNAME goes to the client
		 * too, when it says the same as the CNAME that was followed. */
		int d = dname_find(pkt, len, r, cur, qclass, owner, subst);
		if (d < 0)
			return d;
		if (d > 0 && name_equal(subst, next))
			add_dname_owner(r, owner);
		return 1;
	}
	int d = dname_find(pkt, len, r, cur, qclass, owner, next);
	if (d > 0)
		add_dname_owner(r, owner);
	return d;
}

/* The header and the question: ours (QR, our ID, opcode QUERY, one question equal to ours) or
 * MOAT_EMISMATCH. Returns the offset just past the question. */
static int parse_question(const uint8_t *pkt, size_t len, uint16_t id, const uint8_t *lname,
                          uint16_t qtype, uint16_t qclass, struct wire_resp *r)
{
	uint8_t name[NAME_MAXWIRE];
	if (len < WIRE_HDR)
		return MOAT_EMISMATCH;
	r->id = be16_get(pkt);
	r->flags = be16_get(pkt + 2);
	r->rcode = r->flags & WIRE_FLAG_RCODE;
	if (r->id != id || !(r->flags & WIRE_FLAG_QR) || wire_opcode(r->flags) != WIRE_OP_QUERY)
		return MOAT_EMISMATCH;
	if (be16_get(pkt + 4) != 1)
		return MOAT_EMISMATCH;
	for (int s = 0; s < 3; s++)
		r->counts[s] = be16_get(pkt + 6 + 2 * s);
	size_t off = WIRE_HDR;
	int plain = name_match_plain(pkt, len, off, lname); /* the usual case: no copy */
	if (plain > 0)
		off += (size_t)plain;
	else if (name_unpack_msg(pkt, len, &off, name) < 0 || !name_equal(name, lname))
		return MOAT_EMISMATCH;
	if (off + 4 > len || be16_get(pkt + off) != qtype || be16_get(pkt + off + 2) != qclass)
		return MOAT_EMISMATCH;
	return (int)(off + 4);
}

/* Every record from off to the end, bounds-checked, into r->rr (the question's class only; the
 * OPT record read, not kept). Returns 0 or MOAT_EFORMAT. */
static int parse_records(const uint8_t *pkt, size_t len, size_t off, uint16_t qclass,
                         struct wire_resp *r)
{
	if ((size_t)r->counts[0] + r->counts[1] + r->counts[2] > WIRE_MAXRR)
		return MOAT_EFORMAT;
	for (int s = 0; s < 3; s++)
		for (unsigned i = 0; i < r->counts[s]; i++) {
			struct wire_rr *rr = &r->rr[r->nrr];
			rr->owner_off = (uint16_t)off;
			/* Checked here, read later only where needed (owner_of). */
			int nl = name_skip_msg(pkt, len, &off);
			if (nl < 0 || off + 10 > len)
				return MOAT_EFORMAT;
			rr->type = be16_get(pkt + off);
			rr->rclass = be16_get(pkt + off + 2);
			rr->ttl = be32_get(pkt + off + 4);
			rr->rdlen = be16_get(pkt + off + 8);
			rr->rdata_off = (uint16_t)(off + 10);
			rr->section = (uint8_t)s;
			rr->passes = false; /* answer_ttls knows, once the chain does */
			off += 10;
			if (off + rr->rdlen > len)
				return MOAT_EFORMAT;
			off += rr->rdlen;
			/* A record of another class than the question's is dropped before anything
			 * looks at it: a class-CH "A" of 16 bytes or "AAAA" of 4 holding a blocked
			 * address must never reach a client library that ignores the class. OPT's
			 * class is its UDP size. */
			if (rr->rclass != qclass && rr->type != WIRE_OPT)
				continue;
			if (rr->ttl > 0x7FFFFFFF)
				rr->ttl = 0; /* RFC 2181 8: the top bit set means zero */
			if (rr->type == WIRE_OPT) {
				if (s != WIRE_SEC_AR || r->has_opt || nl != 1) /* owner: the root */
					return MOAT_EFORMAT;
				r->has_opt = true;
				r->ext_rcode = (uint8_t)(rr->ttl >> 24);
				continue; /* ours is written fresh for the client */
			}
			r->nrr++;
		}
	return off == len ? 0 : MOAT_EFORMAT;
}

/* The chain: the question, then every CNAME/DNAME target in the answer section. */
static int follow_chain(const uint8_t *pkt, size_t len, const uint8_t *lname, uint16_t qtype,
                        uint16_t qclass, struct wire_resp *r)
{
	uint8_t name[NAME_MAXWIRE];
	memcpy(r->chain[0], lname, (size_t)name_wire_len(lname, NAME_MAXWIRE));
	r->nchain = 1;
	if (qtype == WIRE_CNAME || qtype == WIRE_ANY)
		return 0;
	for (;;) {
		int st = chain_step(pkt, len, r, r->chain[r->nchain - 1], qclass, name);
		if (st <= 0)
			return st;
		if (wire_resp_on_chain(r, name) || r->nchain > WIRE_MAXCHAIN) {
			r->chain_too_long = true; /* a loop or a chain nobody needs */
			return 0;
		}
		memcpy(r->chain[r->nchain++], name, NAME_MAXWIRE);
	}
}

/* min_ttl over the answer records on the chain, neg_ttl from the authority SOA (RFC 2308:
 * min(SOA TTL, SOA MINIMUM)). Returns 0 or MOAT_EFORMAT. */
static int answer_ttls(const uint8_t *pkt, size_t len, struct wire_resp *r)
{
	uint8_t name[NAME_MAXWIRE];
	for (unsigned i = 0; i < r->nrr; i++) {
		const struct wire_rr *rr = &r->rr[i];
		if (rr->section == WIRE_SEC_NS && rr->type == WIRE_SOA) {
			if (rr->rdlen >= 22) {
				uint32_t min = be32_get(pkt + rr->rdata_off + rr->rdlen - 4);
				uint32_t t = rr->ttl < min ? rr->ttl : min;
				if (t < r->neg_ttl)
					r->neg_ttl = t;
			}
			continue;
		}
		if (rr->section != WIRE_SEC_AN)
			continue;
		/* An owner that points at the question's name is chain[0] (parse_question compared
		 * them): nothing to read. Upstreams write most owners so. */
		if (rr->owner_off + 2u <= len && pkt[rr->owner_off] == (WIRE_NAME_PTR >> 8) &&
		    pkt[rr->owner_off + 1] == WIRE_HDR)
			r->rr[i].passes = true;
		else if (owner_of(pkt, len, &r->rr[i], name) < 0)
			return MOAT_EFORMAT;
		else
			r->rr[i].passes = wire_resp_on_chain(r, name);
		if (rr->passes && rr->ttl < r->min_ttl)
			r->min_ttl = rr->ttl;
	}
	return 0;
}

int wire_resp_parse(const uint8_t *pkt, size_t len, uint16_t id, const uint8_t *lname,
                    uint16_t qtype, uint16_t qclass, struct wire_resp *r)
{
	r->nrr = 0;
	r->nchain = 0;
	r->ndname = 0;
	r->has_opt = false;
	r->ext_rcode = 0;
	r->chain_too_long = false;
	r->min_ttl = UINT32_MAX;
	r->neg_ttl = UINT32_MAX;
	r->age = 0;
	int off = parse_question(pkt, len, id, lname, qtype, qclass, r);
	if (off < 0)
		return off;
	/* Ours from here on: anything wrong is a malformed answer, not a stranger's packet. */
	int rc = parse_records(pkt, len, (size_t)off, qclass, r);
	if (rc == 0)
		rc = follow_chain(pkt, len, lname, qtype, qclass, r);
	if (rc == 0)
		rc = answer_ttls(pkt, len, r);
	return rc;
}

struct hint_ctx {
	wire_addr_mark_fn fn;
	void *ctx;
	uint16_t type;
	bool passes;
};

static int on_hint(void *c, const uint8_t *addr, size_t alen)
{
	struct hint_ctx *h = c;
	return h->fn(h->ctx, addr, alen, h->type, h->passes);
}

static int each_addr(const uint8_t *pkt, size_t len, const struct wire_resp *r,
                     wire_addr_mark_fn fn, void *ctx, bool passed_only)
{
	for (unsigned i = 0; i < r->nrr; i++) {
		const struct wire_rr *rr = &r->rr[i];
		size_t want = rr->type == WIRE_A ? 4 : rr->type == WIRE_AAAA ? 16 : 0;
		int rc;
		if (!want && rr->type != WIRE_SVCB && rr->type != WIRE_HTTPS)
			continue;
		if (passed_only && !rr->passes)
			continue; /* what wire_resp_build hands the client: answer records on the
			             chain */
		if (want) {
			/* Class IN data has a fixed size; any class with that size is still checked
			 * since a client library may not look at the class. */
			if (rr->rdlen != want) {
				if (rr->rclass == WIRE_CLASS_IN)
					return MOAT_EFORMAT;
				continue;
			}
			if ((rc = fn(ctx, pkt + rr->rdata_off, want, rr->type, rr->passes)))
				return rc;
		} else {
			struct hint_ctx h = {fn, ctx, rr->type, rr->passes};
			rc = svcb_each_hint(pkt, len, rr->rdata_off, rr->rdlen, on_hint, &h);
			if (rc)
				return rc;
		}
	}
	return 0;
}

struct plain_ctx {
	wire_addr_fn fn;
	void *ctx;
};

static int on_plain(void *c, const uint8_t *addr, size_t alen, uint16_t rrtype, bool passes)
{
	struct plain_ctx *p = c;
	(void)passes;
	return p->fn(p->ctx, addr, alen, rrtype);
}

int wire_resp_each_addr(const uint8_t *pkt, size_t len, const struct wire_resp *r, wire_addr_fn fn,
                        void *ctx)
{
	struct plain_ctx p = {fn, ctx};
	return each_addr(pkt, len, r, on_plain, &p, false);
}

int wire_resp_each_passed_addr(const uint8_t *pkt, size_t len, const struct wire_resp *r,
                               wire_addr_fn fn, void *ctx)
{
	struct plain_ctx p = {fn, ctx};
	return each_addr(pkt, len, r, on_plain, &p, true);
}

int wire_resp_each_addr_marked(const uint8_t *pkt, size_t len, const struct wire_resp *r,
                               wire_addr_mark_fn fn, void *ctx)
{
	return each_addr(pkt, len, r, fn, ctx, false);
}

/* ---- rebuilding with name compression ---- */

#define COMP_MAX 128
#define COMP_STORE 8192

struct comp {
	uint16_t off[COMP_MAX];
	const uint8_t *name[COMP_MAX]; /* suffixes, inside store */
	unsigned n;
	uint8_t store[COMP_STORE];
	size_t used;
};

/* Write a name, pointing at the longest suffix already written. */
static void put_name(struct wire_writer *w, struct comp *c, const uint8_t *nm, bool compress)
{
	int nl = name_wire_len(nm, NAME_MAXWIRE);
	if (nl < 0) {
		w->err = MOAT_EFORMAT;
		return;
	}
	size_t start = w->len;
	const uint8_t *s = nm;
	int hit = -1;
	for (; compress && *s; s = name_parent(s)) {
		for (unsigned i = 0; i < c->n && hit < 0; i++)
			if (name_equal(c->name[i], s))
				hit = (int)i;
		if (hit >= 0)
			break;
	}
	size_t lit = hit >= 0 ? (size_t)(s - nm) : (size_t)nl;
	ww_bytes(w, nm, lit);
	if (hit >= 0)
		ww_u16(w, (uint16_t)(WIRE_NAME_PTR | c->off[hit]));
	if (w->err || !compress || lit == 0 || c->used + (size_t)nl > COMP_STORE)
		return;
	/* Remember each literal suffix for later names. */
	uint8_t *copy = c->store + c->used;
	memcpy(copy, nm, (size_t)nl);
	c->used += (size_t)nl;
	for (size_t p = 0; p < lit && copy[p] && c->n < COMP_MAX; p += 1u + copy[p]) {
		if (start + p >= 0x4000)
			break;
		c->off[c->n] = (uint16_t)(start + p);
		c->name[c->n++] = copy + p;
	}
}

/* Copy one record's RDATA, decompressing and recompressing the names of the RFC 1035 types
 * that may carry compressed names, and writing the DNAME and SVCB/HTTPS targets (which must not
 * be compressed but may come so) uncompressed; other types are copied as they are. */
static void put_rdata(struct wire_writer *w, struct comp *c, const uint8_t *pkt, size_t len,
                      const struct wire_rr *rr)
{
	uint8_t nm[NAME_MAXWIRE];
	size_t off = rr->rdata_off, end = (size_t)rr->rdata_off + rr->rdlen;
	size_t lenpos = w->len;
	ww_u16(w, 0);
	switch (rr->type) {
	case WIRE_CNAME:
	case WIRE_NS:
	case WIRE_PTR:
		if (name_unpack_msg(pkt, len, &off, nm) < 0 || off != end)
			goto bad;
		put_name(w, c, nm, true);
		break;
	case WIRE_DNAME:
		/* Read like CNAME when the chain was followed; never compressed (RFC 6672 2.5). */
		if (name_unpack_msg(pkt, len, &off, nm) < 0 || off != end)
			goto bad;
		put_name(w, c, nm, false);
		break;
	case WIRE_SVCB:
	case WIRE_HTTPS:
		/* The target must not be compressed (RFC 9460 2.2) and svcb.c only skips a pointer
		 * there: read it like any name and write it out in full, parameters as they are. */
		if (rr->rdlen < 3)
			goto bad;
		ww_bytes(w, pkt + off, 2);
		off += 2;
		if (name_unpack_msg(pkt, len, &off, nm) < 0 || off > end)
			goto bad;
		put_name(w, c, nm, false);
		ww_bytes(w, pkt + off, end - off);
		break;
	case WIRE_MX:
		if (rr->rdlen < 3)
			goto bad;
		ww_bytes(w, pkt + off, 2);
		off += 2;
		if (name_unpack_msg(pkt, len, &off, nm) < 0 || off != end)
			goto bad;
		put_name(w, c, nm, true);
		break;
	case WIRE_SOA:
		for (int k = 0; k < 2; k++) {
			if (name_unpack_msg(pkt, len, &off, nm) < 0)
				goto bad;
			put_name(w, c, nm, true);
		}
		if (off + 20 != end)
			goto bad;
		ww_bytes(w, pkt + off, 20);
		break;
	default:
		ww_bytes(w, pkt + off, rr->rdlen);
	}
	if (!w->err)
		be16_put(w->buf + lenpos, (uint16_t)(w->len - lenpos - 2));
	return;
bad:
	w->err = MOAT_EFORMAT;
}

static bool authority_keeps(uint16_t type)
{
	return type == WIRE_SOA || type == WIRE_NSEC || type == WIRE_NSEC3 || type == WIRE_RRSIG;
}

/* A record the client gets: an answer record on the chain, or an authority record kept. */
static bool rr_kept(const struct wire_rr *rr)
{
	return rr->section == WIRE_SEC_AN   ? rr->passes
	       : rr->section == WIRE_SEC_NS ? authority_keeps(rr->type)
	                                    : false;
}

/* The answer's flags for the client of q: RD and CD echoed, RA set, AD only when asked. */
static uint16_t answer_flags(const struct wire_resp *r, const struct wire_query *q)
{
	bool want_ad = q->edns_do || (q->flags & WIRE_FLAG_AD);
	return (uint16_t)(WIRE_FLAG_QR | (q->flags & WIRE_FLAG_RD) | WIRE_FLAG_RA |
	                  (want_ad ? (r->flags & WIRE_FLAG_AD) : 0) | (q->flags & WIRE_FLAG_CD) |
	                  (r->rcode & WIRE_FLAG_RCODE));
}

/* Where build writes each record's TTL and the TTL, as a template keeps them (big-endian, 16
 * and 32 bits), or NULL. */
struct ttl_marks {
	uint8_t *off, *ttl;
	unsigned n, max;
};

static int build(const uint8_t *pkt, size_t len, const struct wire_resp *r,
                 const struct wire_query *q, uint32_t age, uint32_t ttl_cap, size_t max_size,
                 uint8_t *out, size_t cap, struct ttl_marks *marks)
{
	struct wire_writer w = {out, cap, 0, 0};
	struct comp c;
	uint8_t owner[NAME_MAXWIRE];
	uint16_t count[2] = {0, 0};
	c.n = 0;
	c.used = 0;
	ww_u16(&w, q->id);
	ww_u16(&w, answer_flags(r, q));
	ww_u16(&w, 1);
	ww_u16(&w, 0);
	ww_u16(&w, 0);
	ww_u16(&w, 0);
	put_name(&w, &c, q->qname, true);
	ww_u16(&w, q->qtype);
	ww_u16(&w, q->qclass);
	if (w.err)
		return w.err; /* not even the question fits: nothing to truncate to */
	size_t question_end = w.len;

	for (int s = WIRE_SEC_AN; s <= WIRE_SEC_NS; s++)
		for (unsigned i = 0; i < r->nrr; i++) {
			const struct wire_rr *rr = &r->rr[i];
			if (rr->section != s || !rr_kept(rr))
				continue; /* records of unrelated owners are dropped */
			if (owner_of(pkt, len, rr, owner) < 0)
				return MOAT_EFORMAT;
			put_name(&w, &c, owner, true);
			ww_u16(&w, rr->type);
			ww_u16(&w, rr->rclass);
			if (marks) {
				if (w.len > UINT16_MAX || marks->n >= marks->max)
					return MOAT_ESPACE;
				be16_put(marks->off + 2 * marks->n, (uint16_t)w.len);
				be32_put(marks->ttl + 4 * marks->n++, rr->ttl);
			}
			uint32_t ttl = rr->ttl > age ? rr->ttl - age : 0;
			ww_u32(&w, ttl < ttl_cap ? ttl : ttl_cap);
			put_rdata(&w, &c, pkt, len, rr);
			count[s]++;
		}
	if (w.err == MOAT_EFORMAT)
		return w.err;
	size_t opt = q->edns ? 11 : 0;
	if (w.err || w.len + opt > max_size) {
		/* Does not fit: the question alone with TC, so the client retries over TCP. */
		if (marks)
			return MOAT_ESPACE; /* a template is the whole answer or nothing */
		w.err = 0;
		w.len = question_end;
		count[0] = count[1] = 0;
		be16_put(out + 2, be16_get(out + 2) | WIRE_FLAG_TC);
	}
	be16_put(out + 6, count[0]);
	be16_put(out + 8, count[1]);
	if (w.err)
		return w.err;
	if (!q->edns)
		return (int)w.len;
	return wire_append_opt(out, w.len, cap, WIRE_EDNS_SIZE, q->edns_do, r->ext_rcode, NULL);
}

int wire_resp_build(const uint8_t *pkt, size_t len, const struct wire_resp *r,
                    const struct wire_query *q, uint32_t ttl_cap, size_t max_size, uint8_t *out,
                    size_t cap)
{
	return build(pkt, len, r, q, r->age, ttl_cap, max_size, out, cap, NULL);
}

/* ---- the prebuilt answer (wire_resp_template) ---- */

/* A template: a header of three 16-bit fields (body length, question name length, TTL count),
 * the TTLs' offsets (16 bits each) and values (32 bits each), then the body: the answer as
 * wire_resp_build makes it for no EDNS, ID 0, flags 0, the lower-cased question, age 0, no cap. */
#define TPL_HEAD 6

int wire_resp_template(const uint8_t *pkt, size_t len, const struct wire_resp *r,
                       const uint8_t *lname, uint16_t qtype, uint16_t qclass, uint8_t *out,
                       size_t cap)
{
	struct wire_query q;
	int nl = name_wire_len(lname, NAME_MAXWIRE);
	if (nl < 0)
		return nl;
	memset(&q, 0, offsetof(struct wire_query, qname));
	memcpy(q.qname, lname, (size_t)nl);
	q.qname_len = (uint16_t)nl;
	q.qtype = qtype;
	q.qclass = qclass;
	/* The records build writes, so the body is made where it stays. */
	unsigned nrec = 0;
	for (unsigned i = 0; i < r->nrr; i++)
		nrec += rr_kept(&r->rr[i]);
	size_t head = TPL_HEAD + 6 * (size_t)nrec;
	if (cap < head + WIRE_HDR)
		return MOAT_ESPACE;
	size_t room = cap - head < WIRE_MAXMSG ? cap - head : WIRE_MAXMSG;
	struct ttl_marks marks = {out + TPL_HEAD, out + TPL_HEAD + 2 * nrec, 0, nrec};
	int n = build(pkt, len, r, &q, 0, UINT32_MAX, room, out + head, room, &marks);
	if (n < 0)
		return n;
	if (marks.n != nrec)
		return MOAT_EFORMAT; /* not what was counted: never serve it */
	be16_put(out, (uint16_t)n);
	be16_put(out + 2, (uint16_t)nl);
	be16_put(out + 4, (uint16_t)nrec);
	return (int)(head + (size_t)n);
}

int wire_resp_from_template(const uint8_t *tpl, size_t tlen, const struct wire_resp *r,
                            const struct wire_query *q, uint32_t ttl_cap, size_t max_size,
                            uint8_t *out, size_t cap)
{
	if (tlen < TPL_HEAD)
		return MOAT_EFORMAT;
	size_t n = be16_get(tpl), nl = be16_get(tpl + 2), nttl = be16_get(tpl + 4);
	size_t head = TPL_HEAD + 6 * nttl;
	if (head + n != tlen || n < WIRE_HDR + nl + 4)
		return MOAT_EFORMAT;
	if (nl != q->qname_len || n + (q->edns ? 11 : 0) > max_size || n > cap)
		return 0; /* another question's, or truncated here: wire_resp_build's to make */
	const uint8_t *body = tpl + head;
	memcpy(out, body, n);
	be16_put(out, q->id);
	be16_put(out + 2, answer_flags(r, q));
	memcpy(out + WIRE_HDR, q->qname, nl); /* the client's case, as build writes it */
	for (size_t i = 0; i < nttl; i++) {
		size_t off = be16_get(tpl + TPL_HEAD + 2 * i);
		uint32_t t = be32_get(tpl + TPL_HEAD + 2 * nttl + 4 * i);
		t = t > r->age ? t - r->age : 0;
		if (off + 4 > n)
			return MOAT_EFORMAT;
		be32_put(out + off, t < ttl_cap ? t : ttl_cap);
	}
	if (!q->edns)
		return (int)n;
	return wire_append_opt(out, n, cap, WIRE_EDNS_SIZE, q->edns_do, r->ext_rcode, NULL);
}

/* ---- the packed parse (for the cache) ---- */

struct packed_head {
	uint16_t id, flags, counts[3], nrr;
	uint8_t rcode, has_opt, ext_rcode, nchain, chain_too_long, ndname;
	uint32_t min_ttl, neg_ttl;
};

int wire_resp_pack(const struct wire_resp *r, uint8_t *out, size_t cap)
{
	struct packed_head h = {
	    .id = r->id,
	    .flags = r->flags,
	    .counts = {r->counts[0], r->counts[1], r->counts[2]},
	    .nrr = r->nrr,
	    .rcode = r->rcode,
	    .has_opt = r->has_opt,
	    .ext_rcode = r->ext_rcode,
	    .nchain = r->nchain,
	    .chain_too_long = r->chain_too_long,
	    .ndname = r->ndname,
	    .min_ttl = r->min_ttl,
	    .neg_ttl = r->neg_ttl,
	};
	size_t n = sizeof(h), rrs = (size_t)r->nrr * sizeof(r->rr[0]);
	if (r->nrr > WIRE_MAXRR || r->nchain > WIRE_MAXCHAIN + 1 || r->ndname > WIRE_MAXCHAIN ||
	    n + rrs > cap)
		return MOAT_ESPACE;
	memcpy(out, &h, sizeof(h));
	memcpy(out + n, r->rr, rrs);
	n += rrs;
	for (unsigned i = 0; i < (unsigned)r->nchain + r->ndname; i++) {
		const uint8_t *name = i < r->nchain ? r->chain[i] : r->dname_owner[i - r->nchain];
		int nl = name_wire_len(name, NAME_MAXWIRE);
		if (nl < 0 || n + (size_t)nl > cap)
			return MOAT_ESPACE;
		memcpy(out + n, name, (size_t)nl);
		n += (size_t)nl;
	}
	return (int)n;
}

int wire_resp_unpack(const uint8_t *in, size_t len, struct wire_resp *r)
{
	struct packed_head h;
	if (len < sizeof(h))
		return MOAT_EFORMAT;
	memcpy(&h, in, sizeof(h));
	size_t n = sizeof(h), rrs = (size_t)h.nrr * sizeof(r->rr[0]);
	if (h.nrr > WIRE_MAXRR || h.nchain > WIRE_MAXCHAIN + 1 || h.ndname > WIRE_MAXCHAIN ||
	    n + rrs > len)
		return MOAT_EFORMAT;
	r->id = h.id;
	r->flags = h.flags;
	memcpy(r->counts, h.counts, sizeof(r->counts));
	r->nrr = h.nrr;
	r->rcode = h.rcode;
	r->has_opt = h.has_opt;
	r->ext_rcode = h.ext_rcode;
	r->nchain = h.nchain;
	r->chain_too_long = h.chain_too_long;
	r->ndname = h.ndname;
	r->min_ttl = h.min_ttl;
	r->neg_ttl = h.neg_ttl;
	r->age = 0;
	memcpy(r->rr, in + n, rrs);
	n += rrs;
	for (unsigned i = 0; i < (unsigned)h.nchain + h.ndname; i++) {
		uint8_t *name = i < h.nchain ? r->chain[i] : r->dname_owner[i - h.nchain];
		int nl = name_wire_len(in + n, len - n < NAME_MAXWIRE ? len - n : NAME_MAXWIRE);
		if (nl < 0)
			return MOAT_EFORMAT;
		memcpy(name, in + n, (size_t)nl);
		n += (size_t)nl;
	}
	return n == len ? 0 : MOAT_EFORMAT;
}
