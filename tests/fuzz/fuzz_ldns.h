/* fuzz_ldns.h: ldns as the fuzzers' oracle.
 *
 * ldns_wire2pkt (1.8.3) leaks: with more than one TSIG record in the additional section it keeps
 * the last and loses the earlier ones (ldns_pkt_set_tsig does not free the one it replaces), and
 * where a name inside RDATA runs past the RDLENGTH ldns goes on reading records from where the
 * name ended, so which records it takes for TSIGs cannot be predicted from the framing. Those
 * records come from ldns_rr_new; LeakSanitizer is told to ignore exactly that allocation site
 * (and what hangs off it). Leaks of moat code, and of the packets and names the targets
 * allocate through ldns (ldns_pkt_new, ldns_rdf_*), are still reported. */
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

/* Does the name at off (followed through its pointers) read a byte marked in mod? */
static inline bool fz_name_reads(const uint8_t *p, size_t len, size_t off, const uint8_t *mod)
{
	for (int jumps = 0; off < len && jumps < 256;) {
		if (mod[off])
			return true;
		uint8_t n = p[off];
		if ((n & 0xC0) == 0xC0) {
			if (off + 1 >= len || mod[off + 1])
				return off + 1 < len;
			off = (size_t)(n & 0x3F) << 8 | p[off + 1];
			jumps++;
			continue;
		}
		if (n == 0 || n > 63)
			return false;
		for (size_t k = 1; k <= n && off + k < len; k++)
			if (mod[off + k])
				return true;
		off += 1u + n;
	}
	return false;
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

/* Read by LeakSanitizer at exit (libFuzzer's leak check and the ASan replay alike). */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
	return "leak:ldns_rr_new\n";
}

#endif
