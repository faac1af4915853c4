/* DNS wire format as moatd needs it on the hot path: a bounds-checked reader for client
 * queries, builders for local answers and upstream queries, and a walker that checks an
 * upstream answer and rebuilds it for the client with only what policy lets through.
 * No ldns objects and no heap allocation per packet; every reader is bounds-checked and every
 * writer carries a sticky error checked once at the end. Pure and thread-safe. */
#ifndef MOAT_WIRE_H
#define MOAT_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moat/name.h"

#define WIRE_HDR 12
#define WIRE_PORT 53 /* DNS over UDP and TCP: the port an address without one gets */
#define WIRE_MAXMSG 65535
#define WIRE_UDP_MIN 512    /* RFC 1035 size without EDNS */
#define WIRE_EDNS_SIZE 1232 /* what moat advertises: the DNS flag day 2020 value */
#define WIRE_MAXRR 512      /* records walked per upstream answer; more is refused */
#define WIRE_MAXCHAIN 16    /* CNAME/DNAME steps followed */

/* The header's flags word (RFC 1035 4.1.1, RFC 4035 3.2) at offset 2; the opcode and rcode are
 * fields of it. */
#define WIRE_FLAG_QR 0x8000
#define WIRE_FLAG_OPCODE 0x7800 /* mask; wire_opcode reads it */
#define WIRE_FLAG_AA 0x0400
#define WIRE_FLAG_TC 0x0200
#define WIRE_FLAG_RD 0x0100
#define WIRE_FLAG_RA 0x0080
#define WIRE_FLAG_AD 0x0020
#define WIRE_FLAG_CD 0x0010
#define WIRE_FLAG_RCODE 0x000F /* mask */
#define WIRE_EDNS_DO 0x8000    /* the DO bit in the OPT record's TTL (RFC 3225) */
#define WIRE_NAME_PTR 0xC000   /* a compression pointer: these two bits, then the offset */

static inline unsigned wire_opcode(uint16_t flags)
{
	return flags >> 11 & 0xF;
}

enum wire_opcode {
	WIRE_OP_QUERY = 0,
	WIRE_OP_NOTIFY = 4,
};

enum wire_rcode {
	WIRE_NOERROR = 0,
	WIRE_FORMERR = 1,
	WIRE_SERVFAIL = 2,
	WIRE_NXDOMAIN = 3,
	WIRE_NOTIMP = 4,
	WIRE_REFUSED = 5,
	WIRE_BADVERS = 16,
};

enum wire_type {
	WIRE_A = 1,
	WIRE_NS = 2,
	WIRE_CNAME = 5,
	WIRE_SOA = 6,
	WIRE_PTR = 12,
	WIRE_HINFO = 13,
	WIRE_MX = 15,
	WIRE_TXT = 16,
	WIRE_AAAA = 28,
	WIRE_SRV = 33,
	WIRE_DNAME = 39,
	WIRE_OPT = 41,
	WIRE_RRSIG = 46,
	WIRE_NSEC = 47,
	WIRE_NSEC3 = 50,
	WIRE_SVCB = 64,
	WIRE_HTTPS = 65,
	WIRE_ANY = 255,
};

#define WIRE_CLASS_IN 1
#define WIRE_EDE_OPTION 15 /* RFC 8914 option code */
#define WIRE_EDE_STALE 3   /* Stale Answer (RFC 8767) */
#define WIRE_EDE_BLOCKED 15
#define WIRE_EDE_FILTERED 17
#define WIRE_EDE_PROHIBITED 18
#define WIRE_EDE_NOT_READY 14
#define WIRE_EDE_NO_REACHABLE_AUTHORITY 22
#define WIRE_EDE_NOT_SUPPORTED 21

/* ---- client queries (wire_query.c) ---- */

struct wire_query {
	uint16_t id;
	uint16_t flags; /* the header's flags word as received */
	uint8_t opcode;
	uint16_t qtype, qclass;
	uint16_t qname_len;
	uint16_t question_end; /* offset just past the question */
	bool has_question;
	bool edns;
	uint8_t edns_version;
	bool edns_do;
	uint16_t edns_size; /* what the client can receive over UDP (>= 512) */
	/* Names last: the reader clears everything before them. */
	uint8_t qname[NAME_MAXWIRE]; /* as received: the client's case is echoed back */
	uint8_t lname[NAME_MAXWIRE]; /* lower-cased: what policy sees */
};

enum wire_query_status {
	WQ_OK = 0,
	WQ_DROP,    /* not even a header, or a response (QR=1): answer nothing */
	WQ_FORMERR, /* malformed: answer FORMERR */
	WQ_NOTIMP,  /* opcode other than QUERY */
	WQ_BADVERS, /* EDNS version other than 0 */
};

/* Read a client query. Always fills what it could read (id, flags, maybe the question) so the
 * caller can build the error answer. No allocation. */
enum wire_query_status wire_query_parse(const uint8_t *pkt, size_t len, struct wire_query *q);

/* True for the meta query types a stub resolver never needs and an upstream must never see from
 * a sandbox: zone transfers (AXFR 252, IXFR 251), MAILB 253, MAILA 254, TSIG 250, TKEY 249, and
 * OPT 41 asked as a type. moatd answers them locally (NOTIMP, EDE 21). */
bool wire_qtype_is_meta(uint16_t qtype);

/* ---- answers built here (wire_build.c) ---- */

struct wire_ede {
	uint16_t code;
	const char *text; /* may be NULL */
};

/* A local answer to q: the client's ID, RD and CD copied, QR and RA set, the question echoed,
 * rcode, and (when the client sent EDNS) an OPT record carrying ede if not NULL.
 * Records: for deny-by-sinkhole pass sink4/sink6 (NULL for none) and ttl; an A question gets
 * sink4, AAAA gets sink6, other types no record. Returns the length or MOAT_ESPACE. */
int wire_build_answer(const struct wire_query *q, uint8_t rcode, const struct wire_ede *ede,
                      const uint8_t *sink4, const uint8_t *sink6, uint32_t ttl, uint8_t *out,
                      size_t cap);

/* The RFC 8482 answer to an ANY question for an allowed name: one synthesized HINFO record
 * ("RFC8482", ""), so ANY is never forwarded and never amplifies. Returns the length or
 * MOAT_ESPACE. */
int wire_build_rfc8482(const struct wire_query *q, uint8_t *out, size_t cap);

/* moatd's own upstream query: one question (lname, qtype, qclass), RD set, our EDNS record
 * (size WIRE_EDNS_SIZE, DO as given) and nothing else from the client. */
int wire_build_query(uint16_t id, const uint8_t *lname, uint16_t qtype, uint16_t qclass,
                     bool dnssec_ok, uint8_t *out, size_t cap);

/* Append an OPT record (udp size, DO, optional EDE) to a message being built at out[len];
 * bumps ARCOUNT. Returns the new length or MOAT_ESPACE. */
int wire_append_opt(uint8_t *out, size_t len, size_t cap, uint16_t udp_size, bool dnssec_ok,
                    uint8_t ext_rcode, const struct wire_ede *ede);

/* Add an EDE option to the message out[0..len) whose last record is an OPT record without
 * options (what wire_resp_build appends for an EDNS client). Returns the new length, MOAT_ESPACE
 * (beyond cap: out[0..len) unchanged) or MOAT_EINVAL (no such OPT record at the end). */
int wire_add_ede(uint8_t *out, size_t len, size_t cap, const struct wire_ede *ede);

/* ---- upstream answers (wire_resp.c) ---- */

enum wire_section { WIRE_SEC_AN = 0, WIRE_SEC_NS, WIRE_SEC_AR };

struct wire_rr {
	uint16_t owner_off; /* offset of the (maybe compressed) owner name */
	uint16_t type, rclass;
	uint32_t ttl;
	uint16_t rdata_off, rdlen;
	uint8_t section;
	/* An answer record whose owner is on the chain: what the client gets. Set by
	 * wire_resp_parse once the chain is known, so a cached answer is never walked by name
	 * again (wire_resp_build, wire_resp_each_passed_addr). */
	bool passes;
};

struct wire_resp {
	uint16_t id, flags;
	uint8_t rcode;
	uint16_t counts[3];
	struct wire_rr rr[WIRE_MAXRR];
	uint16_t nrr;
	bool has_opt;
	uint8_t ext_rcode;
	/* The CNAME/DNAME chain from the question, lower-cased: chain[0] is the question name. */
	uint8_t chain[WIRE_MAXCHAIN + 1][NAME_MAXWIRE];
	uint8_t nchain;
	bool chain_too_long;
	/* Lowest TTL of the records passed to the client, and the SOA minimum for negative
	 * answers (RFC 2308), UINT32_MAX when absent. */
	uint32_t min_ttl;
	uint32_t neg_ttl;
	/* Seconds the answer has been cached: wire_resp_build subtracts it from every TTL.
	 * wire_resp_parse sets it to 0. */
	uint32_t age;
	/* DNAME owners (lower-cased) whose records also pass the owner filter. */
	uint8_t dname_owner[WIRE_MAXCHAIN][NAME_MAXWIRE];
	uint8_t ndname;
};

/* Parse an upstream answer and check it belongs to our query: QR set, same ID, one question
 * equal to (lname, qtype, qclass). Walks every record (bounds, names, OPT) and follows the
 * CNAME/DNAME chain from lname. Returns 0, MOAT_EMISMATCH (not ours: ignore it) or
 * MOAT_EFORMAT (ours but malformed). */
int wire_resp_parse(const uint8_t *pkt, size_t len, uint16_t id, const uint8_t *lname,
                    uint16_t qtype, uint16_t qclass, struct wire_resp *r);

/* Called once per address anywhere in the answer: A and AAAA records of every section and
 * class, and SVCB/HTTPS ipv4hint/ipv6hint. Return nonzero to stop. */
typedef int (*wire_addr_fn)(void *ctx, const uint8_t *addr, size_t len, uint16_t rrtype);

/* Visit every address of a parsed answer. Returns 0, the callback's value, or MOAT_EFORMAT
 * (an A/AAAA with a wrong length or a malformed SVCB record). */
int wire_resp_each_addr(const uint8_t *pkt, size_t len, const struct wire_resp *r, wire_addr_fn fn,
                        void *ctx);

/* The same for only the addresses wire_resp_build passes to the client (answer records on the
 * chain): what the firewall must grant before the answer is released. */
int wire_resp_each_passed_addr(const uint8_t *pkt, size_t len, const struct wire_resp *r,
                               wire_addr_fn fn, void *ctx);

/* Every address, as wire_resp_each_addr, each with whether wire_resp_build passes it to the
 * client: one walk for the checks that differ between the two. */
typedef int (*wire_addr_mark_fn)(void *ctx, const uint8_t *addr, size_t len, uint16_t rrtype,
                                 bool passes);
int wire_resp_each_addr_marked(const uint8_t *pkt, size_t len, const struct wire_resp *r,
                               wire_addr_mark_fn fn, void *ctx);

/* Rebuild a parsed answer for the client of q: the client's ID and question, RA set, AA and TC
 * cleared; answer records whose owner is in the chain (or a DNAME owner); authority SOA, NSEC,
 * NSEC3 and RRSIG records only; no additional records but our own OPT (when the client sent
 * EDNS); TTLs lowered by r->age and capped at ttl_cap. If the result exceeds max_size (the caller's
 * limit: over UDP the client's EDNS size or 512, over TCP 65535), an empty answer with TC=1 is
 * returned instead. Names are recompressed. Returns the length, or MOAT_ESPACE/MOAT_EFORMAT. */
int wire_resp_build(const uint8_t *pkt, size_t len, const struct wire_resp *r,
                    const struct wire_query *q, uint32_t ttl_cap, size_t max_size, uint8_t *out,
                    size_t cap);

/* A hit's answer without the rebuild: wire_resp_template makes, once per upstream answer, what
 * wire_resp_build would make for (lname, qtype, qclass), with where each TTL sits, into out
 * (cap: WIRE_TEMPLATE_MAX is always enough); returns its length, MOAT_ESPACE (no template: the
 * answer is too large) or MOAT_EFORMAT. wire_resp_from_template then makes wire_resp_build's
 * bytes for the client of q: its ID, flags and question case, TTLs lowered by r->age and capped
 * at ttl_cap, OPT when the client sent EDNS. Returns the length, 0 when the template cannot
 * serve (the answer would be truncated under max_size, or q asks another name: call
 * wire_resp_build), or MOAT_EFORMAT / MOAT_ESPACE. r: the answer's parse (flags, rcode, age). */
#define WIRE_TEMPLATE_MAX (6 + 6 * WIRE_MAXRR + WIRE_MAXMSG)
int wire_resp_template(const uint8_t *pkt, size_t len, const struct wire_resp *r,
                       const uint8_t *lname, uint16_t qtype, uint16_t qclass, uint8_t *out,
                       size_t cap);
int wire_resp_from_template(const uint8_t *tpl, size_t tlen, const struct wire_resp *r,
                            const struct wire_query *q, uint32_t ttl_cap, size_t max_size,
                            uint8_t *out, size_t cap);

/* The parse of an answer as a compact byte string (the records in use and the chain names, not
 * the whole fixed-size struct), so the cache can keep it beside the packet and a cache hit
 * skips the parse. pack returns the length or MOAT_ESPACE; unpack returns 0 or MOAT_EFORMAT
 * (bounds and names are checked, age is set to 0). */
#define WIRE_RESP_PACKED_MAX                                                                       \
	(32 + WIRE_MAXRR * sizeof(struct wire_rr) + (2 * WIRE_MAXCHAIN + 1) * NAME_MAXWIRE)
int wire_resp_pack(const struct wire_resp *r, uint8_t *out, size_t cap);
int wire_resp_unpack(const uint8_t *in, size_t len, struct wire_resp *r);

/* Whether name (wire form, lower-cased) is on r's chain: the question's name, a CNAME target
 * or a DNAME's owner. */
bool wire_resp_on_chain(const struct wire_resp *r, const uint8_t *name);

/* Short text for a type ("A", "AAAA", "TYPE123") into buf; returns buf. */
const char *wire_type_str(uint16_t type, char *buf, size_t cap);
/* The other way, case-insensitive ("a", "Svcb", "TYPE65"): 0, or MOAT_EINVAL when unknown. */
int wire_type_parse(const char *s, uint16_t *out);
const char *wire_rcode_str(uint8_t rcode);

#endif
