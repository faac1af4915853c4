/* judge.c owns what a reply means to moat-escape: the verdict on a DNS reply (deny, no data,
 * failure, data, malformed), the sinkhole and internal-address checks, and the reply's one-line
 * text. Replies are read with ldns, as a client library in the sandbox would read them, never
 * with moatd's own parser (resolver/wire/wire_resp.c): the tool judges moatd, and a bug in moatd's
 * parser must not be able to hide itself by also reading the answers. A reply ldns cannot read
 * is malformed; otherwise what ldns reads is what is judged. */
#include <arpa/inet.h>
#include <ldns/ldns.h>
#include <stdio.h>
#include <string.h>

#include "escape.h"
#include "moat/addrguard.h"
#include "moat/bytes.h"
#include "moat/wire.h"

/* Our question came back: our ID, QR, a standard query, exactly one question and it is
 * (lname, qtype, IN). */
static bool escape_is_answer_to(const ldns_pkt *p, uint16_t id, const uint8_t *lname,
                                uint16_t qtype)
{
	const ldns_rr_list *qs = ldns_pkt_question(p);
	int nl = name_wire_len(lname, NAME_MAXWIRE);

	if (ldns_pkt_id(p) != id || !ldns_pkt_qr(p) ||
	    ldns_pkt_get_opcode(p) != LDNS_PACKET_QUERY || ldns_pkt_qdcount(p) != 1 ||
	    ldns_rr_list_rr_count(qs) != 1 || nl < 0)
		return false;
	const ldns_rr *q = ldns_rr_list_rr(qs, 0);
	ldns_rdf *want = ldns_dname_new_frm_data((uint16_t)nl, lname);
	bool same = want != NULL && ldns_dname_compare(ldns_rr_owner(q), want) == 0 &&
	            ldns_rr_get_type(q) == qtype && ldns_rr_get_class(q) == LDNS_RR_CLASS_IN;
	ldns_rdf_deep_free(want);
	return same;
}

static bool escape_has_type(const ldns_rr_list *l, ldns_rr_type t)
{
	for (size_t i = 0; i < ldns_rr_list_rr_count(l); i++)
		if (ldns_rr_get_type(ldns_rr_list_rr(l, i)) == t)
			return true;
	return false;
}

/* RFC 6891 6.1.1: one OPT record at most, in the additional section. ldns lifts the OPT records
 * and a TSIG out of that section (counting them off its arcount) and leaves any elsewhere. */
static bool escape_opt_ok(const ldns_pkt *p, const uint8_t *pkt)
{
	unsigned nopt = (unsigned)be16_get(pkt + 10) - ldns_pkt_arcount(p) -
	                (ldns_pkt_tsig(p) != NULL ? 1u : 0u);

	return nopt <= 1 && !escape_has_type(ldns_pkt_answer(p), LDNS_RR_TYPE_OPT) &&
	       !escape_has_type(ldns_pkt_authority(p), LDNS_RR_TYPE_OPT);
}

/* The RFC 8914 info code of the first EDE option, or -1. The option list belongs to p. */
static int escape_find_ede(ldns_pkt *p)
{
	ldns_edns_option_list *opts = ldns_pkt_edns_get_option_list(p);

	for (size_t i = 0; opts != NULL && i < ldns_edns_option_list_get_count(opts); i++) {
		ldns_edns_option *o = ldns_edns_option_list_get_option(opts, i);
		if (o != NULL && ldns_edns_get_code(o) == LDNS_EDNS_EDE &&
		    ldns_edns_get_size(o) >= 2)
			return be16_get(ldns_edns_get_data(o));
	}
	return -1;
}

static bool escape_is_sink(const uint8_t *b, size_t n, const struct escape_addr *sinks,
                           size_t nsinks)
{
	for (size_t i = 0; i < nsinks; i++)
		if (sinks[i].len == n && memcmp(sinks[i].b, b, n) == 0)
			return true;
	return false;
}

/* Count one answer record of class IN: a real address, a sinkhole address or something else. */
static void escape_count_rr(const ldns_rr *rr, const struct escape_addr *sinks, size_t nsinks,
                            struct escape_answer *a)
{
	ldns_rr_type t = ldns_rr_get_type(rr);
	const ldns_rdf *rd = ldns_rr_rd_count(rr) == 1 ? ldns_rr_rdf(rr, 0) : NULL;
	size_t n = rd != NULL ? ldns_rdf_size(rd) : 0;
	bool is_addr = (t == LDNS_RR_TYPE_A && n == 4) || (t == LDNS_RR_TYPE_AAAA && n == 16);

	if (!is_addr) {
		a->nother++;
		return;
	}
	if (escape_is_sink(ldns_rdf_data(rd), n, sinks, nsinks)) {
		a->nsink++;
		return;
	}
	if (a->naddr < ESCAPE_MAXADDR) {
		a->addr[a->naddr].len = (uint8_t)n;
		memcpy(a->addr[a->naddr].b, ldns_rdf_data(rd), n);
	}
	a->naddr++;
	uint32_t ttl = ldns_rr_ttl(rr);
	if (ttl > 0x7FFFFFFF)
		ttl = 0; /* RFC 2181 8: the top bit set means zero */
	if (ttl < a->addr_ttl)
		a->addr_ttl = ttl;
}

static enum escape_verdict escape_verdict_of(const struct escape_answer *a, uint8_t ext_rcode)
{
	if (ext_rcode != 0)
		return ESCAPE_V_FAIL; /* BADVERS and friends: an error, not a deny */
	if (a->rcode == WIRE_NXDOMAIN || a->rcode == WIRE_REFUSED)
		return ESCAPE_V_DENY;
	if (a->rcode != WIRE_NOERROR)
		return ESCAPE_V_FAIL;
	if (a->naddr > 0 || a->nother > 0)
		return ESCAPE_V_DATA;
	if (a->nsink > 0)
		return ESCAPE_V_DENY;
	return ESCAPE_V_NODATA;
}

void escape_classify(const uint8_t *pkt, size_t len, uint16_t id, const uint8_t *lname,
                     uint16_t qtype, const struct escape_addr *sinks, size_t nsinks,
                     struct escape_answer *a)
{
	ldns_pkt *p = NULL;

	memset(a, 0, sizeof(*a));
	a->ede = -1;
	a->addr_ttl = UINT32_MAX;
	a->verdict = ESCAPE_V_MALFORMED;
	if (ldns_wire2pkt(&p, pkt, len) != LDNS_STATUS_OK)
		return;
	if (!escape_is_answer_to(p, id, lname, qtype) || !escape_opt_ok(p, pkt))
		goto done;
	a->rcode = (uint8_t)ldns_pkt_get_rcode(p);
	a->ede = escape_find_ede(p);
	const ldns_rr_list *an = ldns_pkt_answer(p);
	for (size_t i = 0; i < ldns_rr_list_rr_count(an); i++) {
		const ldns_rr *rr = ldns_rr_list_rr(an, i);
		/* Another class than the question's is not an answer to it (moatd drops those). */
		if (ldns_rr_get_class(rr) == LDNS_RR_CLASS_IN)
			escape_count_rr(rr, sinks, nsinks, a);
	}
	a->verdict = escape_verdict_of(a, ldns_pkt_edns_extended_rcode(p));
done:
	ldns_pkt_free(p);
}

/* Broad versions of zones/blocked-ranges.txt, compiled in because the sandbox the tool runs in
 * need not have moat's data files. The address guard adds the embedded-IPv4 forms. */
static const char *const escape_internal_ranges[] = {
    "0.0.0.0/8",     "127.0.0.0/8",   "169.254.0.0/16", "224.0.0.0/4",   "240.0.0.0/4",
    "10.0.0.0/8",    "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "192.0.0.0/24",
    "198.18.0.0/15", "168.63.129.16", "::/128",         "::1/128",       "fe80::/10",
    "fec0::/10",     "ff00::/8",      "100::/64",       "fc00::/7",
};

bool escape_addr_internal(const struct escape_addr *a)
{
	static struct addrguard *g;

	if (g == NULL) {
		g = addrguard_new();
		for (size_t i = 0; g != NULL && i < sizeof(escape_internal_ranges) /
		                                        sizeof(escape_internal_ranges[0]);
		     i++)
			addrguard_add(g, escape_internal_ranges[i], ADDR_ALWAYS);
		if (g == NULL)
			return true; /* out of memory: fail towards "escaped", never towards "held"
			              */
	}
	return addrguard_check(g, a->b, a->len) != ADDR_OK;
}

const char *escape_answer_str(const struct escape_answer *a, char *buf, size_t cap)
{
	char t[INET6_ADDRSTRLEN];
	size_t n;

	if (a->verdict == ESCAPE_V_MALFORMED) {
		snprintf(buf, cap, "malformed reply");
		return buf;
	}
	n = (size_t)snprintf(buf, cap, "%s", wire_rcode_str(a->rcode));
	for (size_t i = 0; i < a->naddr && i < ESCAPE_MAXADDR && n < cap; i++) {
		inet_ntop(a->addr[i].len == 4 ? AF_INET : AF_INET6, a->addr[i].b, t, sizeof(t));
		n += (size_t)snprintf(buf + n, cap - n, "%s%s", i ? "," : " ", t);
	}
	if (a->nsink > 0 && n < cap)
		n += (size_t)snprintf(buf + n, cap - n, " sinkhole");
	if (a->nother > 0 && n < cap)
		n += (size_t)snprintf(buf + n, cap - n, " +%zu record%s", a->nother,
		                      a->nother == 1 ? "" : "s");
	if (a->verdict == ESCAPE_V_NODATA && n < cap)
		n += (size_t)snprintf(buf + n, cap - n, " (no data)");
	if (a->ede >= 0 && n < cap)
		snprintf(buf + n, cap - n, " (EDE %d)", a->ede);
	return buf;
}
