/* wire_query.c reads client queries: the header, exactly one uncompressed question, and the
 * EDNS OPT record if any. It allocates nothing and trusts no count or length in the packet. */
#include <string.h>

#include "moat/bytes.h"
#include "moat/err.h"
#include "moat/wire.h"

/* Skip one resource record at *off (name, fixed fields, rdata). Fills type, class, ttl and the
 * rdata span for the caller. */
static int skip_rr(const uint8_t *pkt, size_t len, size_t *off, uint16_t *type, uint16_t *rclass,
                   uint32_t *ttl, size_t *rdoff, uint16_t *rdlen, uint8_t *owner)
{
	if (name_unpack_msg(pkt, len, off, owner) < 0)
		return MOAT_EFORMAT;
	if (*off + 10 > len)
		return MOAT_EFORMAT;
	const uint8_t *p = pkt + *off;
	*type = be16_get(p);
	*rclass = be16_get(p + 2);
	*ttl = be32_get(p + 4);
	*rdlen = be16_get(p + 8);
	*rdoff = *off + 10;
	if (*rdoff + *rdlen > len)
		return MOAT_EFORMAT;
	*off = *rdoff + *rdlen;
	return 0;
}

/* The options of an OPT record must tile its RDATA exactly. */
static bool opt_options_ok(const uint8_t *p, size_t n)
{
	size_t o = 0;
	while (o < n) {
		if (o + 4 > n)
			return false;
		size_t ol = be16_get(p + o + 2);
		if (o + 4 + ol > n)
			return false;
		o += 4 + ol;
	}
	return true;
}

enum wire_query_status wire_query_parse(const uint8_t *pkt, size_t len, struct wire_query *q)
{
	memset(q, 0, offsetof(struct wire_query, qname));
	q->qname[0] = q->lname[0] = 0;
	if (len < WIRE_HDR)
		return WQ_DROP;
	q->id = be16_get(pkt);
	q->flags = be16_get(pkt + 2);
	q->opcode = (uint8_t)wire_opcode(q->flags);
	q->edns_size = WIRE_UDP_MIN;
	if (q->flags & WIRE_FLAG_QR)
		return WQ_DROP; /* a response: answering it could start a loop */
	if (q->opcode != WIRE_OP_QUERY)
		return WQ_NOTIMP;
	uint16_t qd = be16_get(pkt + 4), an = be16_get(pkt + 6), ns = be16_get(pkt + 8),
	         ar = be16_get(pkt + 10);
	if (qd != 1 || an != 0 || ns > 0)
		return WQ_FORMERR;

	/* The question: a compression pointer here could only point into the header. */
	size_t off = WIRE_HDR;
	int nl = name_wire_len(pkt + off, len - off);
	if (nl < 0 || off + (size_t)nl + 4 > len)
		return WQ_FORMERR;
	memcpy(q->qname, pkt + off, (size_t)nl);
	memcpy(q->lname, pkt + off, (size_t)nl);
	name_lower(q->lname);
	q->qname_len = (uint16_t)nl;
	off += (size_t)nl;
	q->qtype = be16_get(pkt + off);
	q->qclass = be16_get(pkt + off + 2);
	off += 4;
	q->question_end = (uint16_t)off;
	q->has_question = true;

	for (uint16_t i = 0; i < ar; i++) {
		uint16_t type, rclass, rdlen;
		uint32_t ttl;
		size_t rdoff;
		uint8_t owner[NAME_MAXWIRE];
		if (skip_rr(pkt, len, &off, &type, &rclass, &ttl, &rdoff, &rdlen, owner))
			return WQ_FORMERR;
		if (type != WIRE_OPT)
			continue; /* TSIG and friends: not ours to check, never forwarded */
		/* RFC 6891: one OPT, owned by the root. */
		if (q->edns || owner[0] != 0 || !opt_options_ok(pkt + rdoff, rdlen))
			return WQ_FORMERR;
		q->edns = true;
		q->edns_size = rclass < WIRE_UDP_MIN ? WIRE_UDP_MIN : rclass;
		q->edns_version = (uint8_t)(ttl >> 16 & 0xFF);
		q->edns_do = (ttl & WIRE_EDNS_DO) != 0;
	}
	if (off != len)
		return WQ_FORMERR; /* trailing bytes: some parser would read them differently */
	if (q->edns && q->edns_version != 0)
		return WQ_BADVERS;
	return WQ_OK;
}

bool wire_qtype_is_meta(uint16_t qtype)
{
	return qtype == WIRE_OPT || (qtype >= 249 && qtype <= 254);
}
