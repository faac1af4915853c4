/* Zone transfer client for RPZ zones: one AXFR or IXFR (RFC 5936, RFC 1995) from a zone's
 * primary over TCP, signed and verified with TSIG (RFC 8945) when the zone has a key, and the
 * messages turned into an rpz_data: a whole new zone (AXFR, or an IXFR answered in AXFR form)
 * or a copy of the current zone with only the changes applied (IXFR).
 *
 * Bounded: a deadline for the whole transfer, at most RPZ_XFR_MAX_BYTES read. Every message of
 * a signed transfer must carry a valid TSIG (Knot DNS signs each one; unsigned intermediate
 * messages, which RFC 8945 allows, are refused: ldns cannot verify across them). Blocking:
 * run it off the query path (rpz_feed.c's thread). Uses ldns for the packets and the TSIG. */
#ifndef MOAT_RPZ_XFR_H
#define MOAT_RPZ_XFR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moat/config.h"
#include "moat/rpz.h"

#define RPZ_XFR_MAX_BYTES ((size_t)1 << 30)

struct rpz_xfr_result {
	struct rpz_data *data;   /* owned reference; NULL: the zone is up to date */
	bool ixfr;               /* data is cur patched by an incremental transfer */
	uint32_t serial;         /* the primary's serial */
	uint32_t refresh, retry; /* from its SOA (seconds) */
	size_t changes;          /* records added or deleted (IXFR) or held (AXFR) */
};

/* Pull zone z of kind from its primary. cur (borrowed; NULL or not loaded: no zone yet) asks
 * for an IXFR from its serial; without one, an AXFR. timeout_ms bounds the whole transfer.
 * Returns 0 with *res filled, or a negative code with err saying why (the caller keeps cur). */
int rpz_xfr_pull(const struct config_rpz *z, enum rpz_kind kind, const struct rpz_data *cur,
                 uint32_t timeout_ms, struct rpz_xfr_result *res, char *err, size_t errlen);

/* Whether message wire[0..len) (parsed as p) carries a valid TSIG of z's key: its key name and
 * algorithm those of z (never the packet's choice), its time signed within its fudge of now,
 * its MAC right; mac: the request's MAC (NULL for a request), timers_only for the later
 * messages of a transfer. Works around ldns 1.8 losing the packet's TSIG record when the MAC
 * cannot be computed (an unknown algorithm): it is freed here then, not leaked. */
bool rpz_tsig_verify(ldns_pkt *p, const uint8_t *wire, size_t len, const struct config_rpz *z,
                     const ldns_rdf *mac, bool timers_only);

/* The same at time now (unix seconds); *signed_at (may be NULL): the record's time signed. */
bool rpz_tsig_verify_at(ldns_pkt *p, const uint8_t *wire, size_t len, const struct config_rpz *z,
                        const ldns_rdf *mac, bool timers_only, uint64_t now, uint64_t *signed_at);

/* What a NOTIFY's TSIG said, for the caller's replay check: its time signed and MAC. */
struct rpz_notify_sig {
	uint64_t signed_at; /* 0: the zone has no key (nothing to check) */
	uint8_t mac[66];    /* the MAC field as sent (length, then up to 64 bytes) */
	size_t mac_len;
};

/* Check a NOTIFY (opcode 4) that arrived from `from` against the zones of cfg at time now: it
 * must name a transferred zone, come from that zone's primary address, and carry a valid TSIG
 * (rpz_tsig_verify) when the zone has a key. On acceptance writes the NOTIFY response (signed
 * like the request) to out and returns its length, with *zone the index into cfg->rpz and *sig
 * the request's TSIG; otherwise returns MOAT_EINVAL with why (the caller answers REFUSED). Pure:
 * a replay is the caller's to refuse (rpz_feed.c keeps what was accepted). */
int rpz_notify_check(const struct config *cfg, const uint8_t *pkt, size_t len,
                     const struct sockaddr *from, uint64_t now, uint8_t *out, size_t cap,
                     size_t *zone, struct rpz_notify_sig *sig, char *why, size_t whylen);

#endif
