/* Unit tests for channel.c (moat/channel.h): the default qtypes, [any], an agent's own list,
 * ANY always; answer caps on bytes, records and TXT records, on answers built with ldns. */
#include <criterion/criterion.h>

#include <ldns/ldns.h>
#include <string.h>

#include "moat/channel.h"

Test(channel, qtypes)
{
	struct config_agent a;
	config_agent_init(&a);
	const uint16_t yes[] = {WIRE_A,   WIRE_AAAA, WIRE_HTTPS, WIRE_SVCB, WIRE_CNAME,
	                        WIRE_TXT, WIRE_MX,   WIRE_SRV,   WIRE_ANY};
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		cr_expect(channel_qtype_allowed(&a.channel, yes[i]), "default allows %u", yes[i]);
	const uint16_t no[] = {2, 6, 10 /* NULL */, 12, 13, 35, 99, 257, 65280, 65534};
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		cr_expect_not(channel_qtype_allowed(&a.channel, no[i]), "default refuses %u",
		              no[i]);
	char txt[128];
	cr_expect_str_eq(channel_qtypes_text(&a.channel, txt, sizeof(txt)),
	                 "A AAAA HTTPS SVCB CNAME TXT MX SRV");
	a.channel.qtypes[0] = WIRE_A;
	a.channel.nqtypes = 1;
	cr_expect(channel_qtype_allowed(&a.channel, WIRE_A));
	cr_expect_not(channel_qtype_allowed(&a.channel, WIRE_AAAA), "its own list only");
	cr_expect(channel_qtype_allowed(&a.channel, WIRE_ANY), "ANY never leaves moatd");
	a.channel.any_qtype = true;
	cr_expect(channel_qtype_allowed(&a.channel, 10));
	cr_expect_str_eq(channel_qtypes_text(&a.channel, txt, sizeof(txt)), "any");
}

/* An answer to NAME/qtype with n records of type rtype (A: 4 bytes each; TXT: size bytes). */
static size_t answer(uint8_t *out, size_t cap, uint16_t qtype, ldns_rr_type rtype, int n,
                     size_t size)
{
	ldns_pkt *p = ldns_pkt_new();
	ldns_rdf *owner = ldns_dname_new_frm_str("a.cdn.example.");
	ldns_rr *q = ldns_rr_new();
	ldns_rr_set_owner(q, ldns_rdf_clone(owner));
	ldns_rr_set_type(q, (ldns_rr_type)qtype);
	ldns_rr_set_question(q, true);
	ldns_pkt_push_rr(p, LDNS_SECTION_QUESTION, q);
	ldns_pkt_set_qr(p, true);
	for (int i = 0; i < n; i++) {
		char text[1200];
		if (rtype == LDNS_RR_TYPE_A) {
			snprintf(text, sizeof(text), "a.cdn.example. 60 IN A 192.0.2.%d", i % 250);
		} else {
			char blob[256];
			memset(blob, 'x', size < 250 ? size : 250);
			blob[size < 250 ? size : 250] = 0;
			snprintf(text, sizeof(text), "a.cdn.example. 60 IN TXT \"%s\"", blob);
		}
		ldns_rr *rr = NULL;
		cr_assert_eq(ldns_rr_new_frm_str(&rr, text, 0, NULL, NULL), LDNS_STATUS_OK);
		ldns_pkt_push_rr(p, LDNS_SECTION_ANSWER, rr);
	}
	uint8_t *wire = NULL;
	size_t len = 0;
	cr_assert_eq(ldns_pkt2wire(&wire, p, &len), LDNS_STATUS_OK);
	cr_assert_leq(len, cap);
	memcpy(out, wire, len);
	free(wire);
	ldns_pkt_free(p);
	ldns_rdf_deep_free(owner);
	return len;
}

Test(channel, answer_caps)
{
	struct config_agent a;
	config_agent_init(&a);
	static uint8_t pkt[65535];
	char why[160];
	size_t n = answer(pkt, sizeof(pkt), WIRE_A, LDNS_RR_TYPE_A, 8, 0);
	cr_expect_not(channel_answer_over(&a.channel, "ci", pkt, n, why, sizeof(why)),
	              "8 A records pass the defaults");
	n = answer(pkt, sizeof(pkt), WIRE_A, LDNS_RR_TYPE_A, 100, 0);
	cr_expect(channel_answer_over(&a.channel, "ci", pkt, n, why, sizeof(why)));
	cr_expect(strstr(why, "100 records") && strstr(why, "cap of 64"), "%s", why);
	n = answer(pkt, sizeof(pkt), WIRE_TXT, LDNS_RR_TYPE_TXT, 40, 250);
	cr_expect(channel_answer_over(&a.channel, "ci", pkt, n, why, sizeof(why)));
	cr_expect(strstr(why, "bytes is over agent ci's cap of 8192"), "%s", why);
	a.channel.answer_max_bytes = 0;
	a.channel.answer_max_records = 0;
	cr_expect_not(channel_answer_over(&a.channel, "ci", pkt, n, why, sizeof(why)), "no caps");
	a.channel.answer_no_txt = true;
	cr_expect(channel_answer_over(&a.channel, "ci", pkt, n, why, sizeof(why)));
	cr_expect(strstr(why, "TXT"), "%s", why);
	n = answer(pkt, sizeof(pkt), WIRE_A, LDNS_RR_TYPE_A, 3, 0);
	cr_expect_not(channel_answer_over(&a.channel, "ci", pkt, n, why, sizeof(why)),
	              "no TXT record: passes");
	cr_expect(channel_answer_over(&a.channel, "ci", pkt, 5, why, sizeof(why)),
	          "a message too short to walk counts as holding one");
}
