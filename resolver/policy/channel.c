/* channel.c owns an agent's query types and answer caps (moat/channel.h): whether a question's
 * type may go upstream, and whether the answer built for the agent is within its caps. Pure. */
#include <stdio.h>
#include <string.h>

#include "moat/bytes.h"
#include "moat/channel.h"
#include "moat/name.h"

const uint16_t channel_default_qtypes[8] = {WIRE_A,     WIRE_AAAA, WIRE_HTTPS, WIRE_SVCB,
                                            WIRE_CNAME, WIRE_TXT,  WIRE_MX,    WIRE_SRV};

bool channel_qtype_allowed(const struct config_channel *c, uint16_t qtype)
{
	if (c->any_qtype || qtype == WIRE_ANY)
		return true;
	const uint16_t *v = c->nqtypes ? c->qtypes : channel_default_qtypes;
	size_t n = c->nqtypes ? c->nqtypes : sizeof(channel_default_qtypes) / sizeof(*v);
	for (size_t i = 0; i < n; i++)
		if (v[i] == qtype)
			return true;
	return false;
}

/* Whether the message holds a TXT record in its answer or authority section. A message this
 * function cannot walk counts as holding one: it was built by moatd, so that does not happen. */
static bool has_txt(const uint8_t *pkt, size_t len)
{
	uint8_t nm[NAME_MAXWIRE];
	size_t off = WIRE_HDR;
	if (len < WIRE_HDR)
		return true;
	unsigned qd = be16_get(pkt + 4), rrs = be16_get(pkt + 6) + be16_get(pkt + 8);
	for (unsigned i = 0; i < qd; i++) {
		if (name_unpack_msg(pkt, len, &off, nm) < 0 || off + 4 > len)
			return true;
		off += 4;
	}
	for (unsigned i = 0; i < rrs; i++) {
		if (name_unpack_msg(pkt, len, &off, nm) < 0 || off + 10 > len)
			return true;
		if (be16_get(pkt + off) == WIRE_TXT)
			return true;
		off += 10 + (size_t)be16_get(pkt + off + 8);
		if (off > len)
			return true;
	}
	return false;
}

bool channel_answer_over(const struct config_channel *c, const char *agent, const uint8_t *pkt,
                         size_t len, char *why, size_t cap)
{
	unsigned records = len >= WIRE_HDR ? be16_get(pkt + 6) + be16_get(pkt + 8) : 0;
	if (c->answer_max_bytes && len > c->answer_max_bytes) {
		snprintf(why, cap, "moat: answer of %zu bytes is over agent %s's cap of %u", len,
		         agent, c->answer_max_bytes);
		return true;
	}
	if (c->answer_max_records && records > c->answer_max_records) {
		snprintf(why, cap, "moat: answer of %u records is over agent %s's cap of %u",
		         records, agent, c->answer_max_records);
		return true;
	}
	if (c->answer_no_txt && has_txt(pkt, len)) {
		snprintf(why, cap, "moat: answer holds TXT records, not allowed for agent %s",
		         agent);
		return true;
	}
	return false;
}

const char *channel_qtypes_text(const struct config_channel *c, char *out, size_t cap)
{
	if (c->any_qtype) {
		snprintf(out, cap, "any");
		return out;
	}
	const uint16_t *v = c->nqtypes ? c->qtypes : channel_default_qtypes;
	size_t n = c->nqtypes ? c->nqtypes : sizeof(channel_default_qtypes) / sizeof(*v), used = 0;
	out[0] = 0;
	for (size_t i = 0; i < n && used < cap; i++) {
		char t[16];
		int k = snprintf(out + used, cap - used, "%s%s", i ? " " : "",
		                 wire_type_str(v[i], t, sizeof(t)));
		used += k > 0 ? (size_t)k : 0;
	}
	return out;
}
