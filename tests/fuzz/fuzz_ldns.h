/* fuzz_ldns.h: ldns as the fuzzers' oracle, with the one ldns defect the fuzzers ran into worked
 * around: ldns_wire2pkt (1.8.3) keeps the last TSIG record of the additional section in the packet
 * and leaks every earlier one, so a packet with two TSIGs would be reported as a leak in ldns.
 * Before ldns sees a packet, every TSIG but the first gets the private type 65280: ldns still
 * checks its framing (owner name, lengths), only its TSIG RDATA layout goes unchecked, and that
 * record is one moat never reads either. */
#ifndef MOAT_FUZZ_LDNS_H
#define MOAT_FUZZ_LDNS_H

#include <ldns/ldns.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

#define FZ_TYPE_PRIVATE 0xFF00 /* 65280: private use, opaque RDATA for ldns */

/* Skip a name without following pointers; returns the offset after it, or 0 on a framing error. */
static inline size_t fz_skip_name(const uint8_t *p, size_t len, size_t off)
{
	while (off < len) {
		uint8_t n = p[off];
		if ((n & 0xC0) == 0xC0)
			return off + 2 <= len ? off + 2 : 0;
		if (n > 63)
			return 0;
		off += 1u + n;
		if (n == 0)
			return off;
	}
	return 0;
}

/* Walk the records of pkt (which may be a modified copy) and call fn on each record's type field
 * offset, with its section (0 question .. 3 additional). Stops at the first framing error. */
static inline void fz_each_type(uint8_t *pkt, size_t len,
				void (*fn)(uint8_t *pkt, size_t type_off, int section, void *ctx),
				void *ctx)
{
	if (len < 12)
		return;
	unsigned counts[4] = {fz_u16(pkt + 4), fz_u16(pkt + 6), fz_u16(pkt + 8), fz_u16(pkt + 10)};
	size_t off = 12;
	for (int s = 0; s < 4; s++)
		for (unsigned i = 0; i < counts[s]; i++) {
			off = fz_skip_name(pkt, len, off);
			if (!off || off + (s ? 10u : 4u) > len)
				return;
			fn(pkt, off, s, ctx);
			off += s ? 10u + fz_u16(pkt + off + 8) : 4u;
		}
}

static inline void fz_retype_extra_tsig(uint8_t *pkt, size_t t, int section, void *ctx)
{
	int *seen = ctx;
	if (section == 3 && fz_u16(pkt + t) == LDNS_RR_TYPE_TSIG && (*seen)++) {
		pkt[t] = FZ_TYPE_PRIVATE >> 8;
		pkt[t + 1] = FZ_TYPE_PRIVATE & 0xFF;
	}
}

static inline ldns_status fz_ldns_wire2pkt(ldns_pkt **p, const uint8_t *data, size_t size)
{
	uint8_t *c = malloc(size ? size : 1);
	if (!c)
		return LDNS_STATUS_MEM_ERR;
	memcpy(c, data, size);
	int seen = 0;
	fz_each_type(c, size, fz_retype_extra_tsig, &seen);
	*p = NULL;
	ldns_status st = ldns_wire2pkt(p, c, size);
	free(c);
	return st;
}

#endif
