/* wire_build.c builds the messages moatd writes itself: local answers (deny, sinkhole, errors),
 * its own upstream queries, and the OPT record with the Extended DNS Error that explains a deny.
 * Everything is written into caller storage; nothing is allocated. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "moat/err.h"
#include "moat/wire.h"
#include "wire/wire_writer.h"

#define EDE_TEXT_MAX 300 /* the reason is for people; keep answers small */

int wire_append_opt(uint8_t *out, size_t len, size_t cap, uint16_t udp_size, bool dnssec_ok,
                    uint8_t ext_rcode, const struct wire_ede *ede)
{
	struct wire_writer w = {out, cap, len, 0};
	size_t tl = 0;
	if (ede && ede->text) {
		tl = strlen(ede->text);
		if (tl > EDE_TEXT_MAX)
			tl = EDE_TEXT_MAX;
	}
	ww_u8(&w, 0); /* root owner */
	ww_u16(&w, WIRE_OPT);
	ww_u16(&w, udp_size);
	ww_u32(&w, (uint32_t)ext_rcode << 24 | (dnssec_ok ? WIRE_EDNS_DO : 0u));
	if (ede) {
		ww_u16(&w, (uint16_t)(4 + 2 + tl));
		ww_u16(&w, WIRE_EDE_OPTION);
		ww_u16(&w, (uint16_t)(2 + tl));
		ww_u16(&w, ede->code);
		if (tl)
			ww_bytes(&w, ede->text, tl); /* text may be NULL: no memcpy from it */
	} else {
		ww_u16(&w, 0);
	}
	if (w.err)
		return w.err;
	be16_put(out + 10, (uint16_t)(be16_get(out + 10) + 1));
	return (int)w.len;
}

int wire_add_ede(uint8_t *out, size_t len, size_t cap, const struct wire_ede *ede)
{
	/* An OPT record without options is 11 bytes: root, type, size, TTL, RDLENGTH 0. */
	if (len < WIRE_HDR + 11 || be16_get(out + 10) == 0 || out[len - 11] != 0 ||
	    be16_get(out + len - 10) != WIRE_OPT || be16_get(out + len - 2) != 0)
		return MOAT_EINVAL;
	size_t tl = ede->text ? strlen(ede->text) : 0;
	if (tl > EDE_TEXT_MAX)
		tl = EDE_TEXT_MAX;
	struct wire_writer w = {out, cap, len, 0};
	ww_u16(&w, WIRE_EDE_OPTION);
	ww_u16(&w, (uint16_t)(2 + tl));
	ww_u16(&w, ede->code);
	if (tl)
		ww_bytes(&w, ede->text, tl);
	if (w.err)
		return w.err;
	be16_put(out + len - 2, (uint16_t)(4 + 2 + tl));
	return (int)w.len;
}

int wire_build_answer(const struct wire_query *q, uint8_t rcode, const struct wire_ede *ede,
                      const uint8_t *sink4, const uint8_t *sink6, uint32_t ttl, uint8_t *out,
                      size_t cap)
{
	struct wire_writer w = {out, cap, 0, 0};
	const uint8_t *addr = NULL;
	size_t alen = 0;

	if (q->has_question && q->qclass == WIRE_CLASS_IN) {
		if (q->qtype == WIRE_A && sink4) {
			addr = sink4;
			alen = 4;
		} else if (q->qtype == WIRE_AAAA && sink6) {
			addr = sink6;
			alen = 16;
		}
	}
	ww_u16(&w, q->id);
	/* QR, the client's opcode, RD and CD; RA set: we are a recursive service for it. */
	ww_u16(&w,
	       (uint16_t)(WIRE_FLAG_QR | (q->flags & (WIRE_FLAG_OPCODE | WIRE_FLAG_RD)) |
	                  WIRE_FLAG_RA | (q->flags & WIRE_FLAG_CD) | (rcode & WIRE_FLAG_RCODE)));
	ww_u16(&w, q->has_question ? 1 : 0);
	ww_u16(&w, addr ? 1 : 0);
	ww_u16(&w, 0);
	ww_u16(&w, 0);
	if (q->has_question) {
		ww_bytes(&w, q->qname, q->qname_len);
		ww_u16(&w, q->qtype);
		ww_u16(&w, q->qclass);
	}
	if (addr) {
		ww_u16(&w, WIRE_NAME_PTR | WIRE_HDR); /* the question's name */
		ww_u16(&w, q->qtype);
		ww_u16(&w, WIRE_CLASS_IN);
		ww_u32(&w, ttl);
		ww_u16(&w, (uint16_t)alen);
		ww_bytes(&w, addr, alen);
	}
	if (w.err)
		return w.err;
	if (!q->edns)
		return (int)w.len;
	return wire_append_opt(out, w.len, cap, WIRE_EDNS_SIZE, q->edns_do, (uint8_t)(rcode >> 4),
	                       ede);
}

int wire_build_rfc8482(const struct wire_query *q, uint8_t *out, size_t cap)
{
	static const uint8_t hinfo[] = {7, 'R', 'F', 'C', '8', '4', '8', '2', 0};
	int n = wire_build_answer(q, WIRE_NOERROR, NULL, NULL, NULL, 0, out, cap);
	if (n < 0)
		return n;
	/* Put the record between the question and the OPT record (if any). */
	size_t end = q->edns ? (size_t)n - 11 : (size_t)n;
	size_t rr = 2 + 2 + 2 + 4 + 2 + sizeof(hinfo);
	if ((size_t)n + rr > cap)
		return MOAT_ESPACE;
	memmove(out + end + rr, out + end, (size_t)n - end);
	struct wire_writer w = {out, cap, end, 0};
	ww_u16(&w, WIRE_NAME_PTR | WIRE_HDR);
	ww_u16(&w, WIRE_HINFO);
	ww_u16(&w, WIRE_CLASS_IN);
	ww_u32(&w, 3600);
	ww_u16(&w, sizeof(hinfo));
	ww_bytes(&w, hinfo, sizeof(hinfo));
	be16_put(out + 6, 1);
	return w.err ? w.err : n + (int)rr;
}

int wire_build_query(uint16_t id, const uint8_t *lname, uint16_t qtype, uint16_t qclass,
                     bool dnssec_ok, uint8_t *out, size_t cap)
{
	struct wire_writer w = {out, cap, 0, 0};
	int nl = name_wire_len(lname, NAME_MAXWIRE);
	if (nl < 0)
		return nl;
	ww_u16(&w, id);
	ww_u16(&w, WIRE_FLAG_RD); /* the upstream resolves for us */
	ww_u16(&w, 1);
	ww_u16(&w, 0);
	ww_u16(&w, 0);
	ww_u16(&w, 0);
	ww_bytes(&w, lname, (size_t)nl);
	ww_u16(&w, qtype);
	ww_u16(&w, qclass);
	if (w.err)
		return w.err;
	return wire_append_opt(out, w.len, cap, WIRE_EDNS_SIZE, dnssec_ok, 0, NULL);
}

const char *wire_type_str(uint16_t type, char *buf, size_t cap)
{
	static const struct {
		uint16_t t;
		const char *s;
	} names[] = {{1, "A"},      {2, "NS"},      {5, "CNAME"},  {6, "SOA"},    {12, "PTR"},
	             {13, "HINFO"}, {15, "MX"},     {16, "TXT"},   {28, "AAAA"},  {33, "SRV"},
	             {35, "NAPTR"}, {39, "DNAME"},  {41, "OPT"},   {43, "DS"},    {46, "RRSIG"},
	             {47, "NSEC"},  {48, "DNSKEY"}, {50, "NSEC3"}, {52, "TLSA"},  {64, "SVCB"},
	             {65, "HTTPS"}, {99, "SPF"},    {252, "AXFR"}, {251, "IXFR"}, {255, "ANY"},
	             {257, "CAA"}};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].t == type) {
			snprintf(buf, cap, "%s", names[i].s);
			return buf;
		}
	snprintf(buf, cap, "TYPE%u", type);
	return buf;
}

int wire_type_parse(const char *s, uint16_t *out)
{
	char buf[16];
	if (!strncasecmp(s, "TYPE", 4) && s[4]) {
		char *end;
		long v = strtol(s + 4, &end, 10);
		if (*end || v < 0 || v > 65535)
			return MOAT_EINVAL;
		*out = (uint16_t)v;
		return 0;
	}
	/* Every mnemonic wire_type_str knows is below 260. */
	for (unsigned t = 1; t < 260; t++)
		if (!strcasecmp(wire_type_str((uint16_t)t, buf, sizeof(buf)), s) &&
		    strncmp(buf, "TYPE", 4) != 0) {
			*out = (uint16_t)t;
			return 0;
		}
	return MOAT_EINVAL;
}

const char *wire_rcode_str(uint8_t rcode)
{
	static const char *const names[] = {"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN",
	                                    "NOTIMP",  "REFUSED", "YXDOMAIN", "YXRRSET",
	                                    "NXRRSET", "NOTAUTH", "NOTZONE"};
	if (rcode < sizeof(names) / sizeof(names[0]))
		return names[rcode];
	return rcode == 16 ? "BADVERS" : "RCODE?";
}
