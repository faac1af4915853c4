/* rpz_notify.c owns the check of a NOTIFY (RFC 1996) for a transferred RPZ zone: the zone it
 * names, the address it came from (the zone's primary only), its TSIG (key, algorithm, time and
 * MAC: rpz_xfr.c's check), and the NOTIFY response. Replays are rpz_feed.c's to refuse.
 * Everything else NOTIFY-related is refused by the caller. Uses ldns: NOTIFY is rare and never
 * on the path of a query. */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/err.h"
#include "moat/netaddr.h"
#include "moat/rpz_xfr.h"

/* The transferred zone a NOTIFY question names, or -1. */
static long zone_of(const struct config *cfg, const ldns_pkt *p)
{
	if (ldns_pkt_qdcount(p) != 1)
		return -1;
	const ldns_rr *q = ldns_rr_list_rr(ldns_pkt_question(p), 0);
	const ldns_rdf *o = ldns_rr_owner(q);
	uint8_t lo[NAME_MAXWIRE];
	if (ldns_rr_get_type(q) != LDNS_RR_TYPE_SOA || ldns_rdf_size(o) > NAME_MAXWIRE)
		return -1;
	memcpy(lo, ldns_rdf_data(o), ldns_rdf_size(o));
	name_lower(lo);
	for (size_t i = 0; i < cfg->nrpz; i++)
		if (cfg->rpz[i].primary.ss_family && name_equal(cfg->rpz[i].zone, lo))
			return (long)i;
	return -1;
}

/* The response: the request's id and question, QR and AA set, signed like the request. */
static int respond(const struct config_rpz *z, const ldns_pkt *req, uint8_t *out, size_t cap,
                   char *why, size_t whylen)
{
	ldns_pkt *r = ldns_pkt_new();
	uint8_t *wire = NULL;
	size_t wlen = 0;
	int rc = MOAT_ENOMEM;
	if (!r)
		return rc;
	ldns_pkt_set_id(r, ldns_pkt_id(req));
	ldns_pkt_set_opcode(r, LDNS_PACKET_NOTIFY);
	ldns_pkt_set_qr(r, true);
	ldns_pkt_set_aa(r, true);
	ldns_rr_list_free(ldns_pkt_question(r));
	ldns_pkt_set_question(r, ldns_rr_list_clone(ldns_pkt_question(req)));
	ldns_pkt_set_qdcount(r, 1);
	if (z->tsig_name[0] &&
	    ldns_pkt_tsig_sign(r, z->tsig_name, z->tsig_secret, 300, z->tsig_alg,
	                       ldns_rr_rdf(ldns_pkt_tsig(req), 3)) != LDNS_STATUS_OK) {
		snprintf(why, whylen, "cannot sign the response");
		rc = MOAT_EINVAL;
	} else if (ldns_pkt2wire(&wire, r, &wlen) == LDNS_STATUS_OK && wlen <= cap) {
		memcpy(out, wire, wlen);
		rc = (int)wlen;
	}
	free(wire);
	ldns_pkt_free(r);
	return rc;
}

/* The TSIG of the NOTIFY, checked, into *sig. */
static bool notify_signed(ldns_pkt *p, const uint8_t *pkt, size_t len, const struct config_rpz *z,
                          uint64_t now, struct rpz_notify_sig *sig)
{
	if (!rpz_tsig_verify_at(p, pkt, len, z, NULL, false, now, &sig->signed_at))
		return false;
	const ldns_rdf *mac = ldns_rr_rdf(ldns_pkt_tsig(p), 3);
	sig->mac_len =
	    ldns_rdf_size(mac) < sizeof(sig->mac) ? ldns_rdf_size(mac) : sizeof(sig->mac);
	memcpy(sig->mac, ldns_rdf_data(mac), sig->mac_len);
	return true;
}

int rpz_notify_check(const struct config *cfg, const uint8_t *pkt, size_t len,
                     const struct sockaddr *from, uint64_t now, uint8_t *out, size_t cap,
                     size_t *zone, struct rpz_notify_sig *sig, char *why, size_t whylen)
{
	ldns_pkt *p = NULL;
	int rc = MOAT_EINVAL;
	long zi;
	bool primary = false;
	memset(sig, 0, sizeof(*sig));
	/* Sandboxes may send NOTIFYs too: anything not from a primary is refused before ldns
	 * reads a byte of it. */
	for (size_t i = 0; i < cfg->nrpz && !primary; i++)
		primary =
		    cfg->rpz[i].primary.ss_family && netaddr_same_host(from, &cfg->rpz[i].primary);
	if (!primary) {
		snprintf(why, whylen, "NOTIFY not from a configured primary");
		return MOAT_EINVAL;
	}
	if (ldns_wire2pkt(&p, pkt, len) != LDNS_STATUS_OK) {
		snprintf(why, whylen, "malformed NOTIFY");
		return MOAT_EINVAL;
	}
	if (ldns_pkt_get_opcode(p) != LDNS_PACKET_NOTIFY || ldns_pkt_qr(p))
		snprintf(why, whylen, "not a NOTIFY request");
	else if ((zi = zone_of(cfg, p)) < 0)
		snprintf(why, whylen, "NOTIFY for a zone moat does not transfer");
	else if (!netaddr_same_host(from, &cfg->rpz[zi].primary))
		snprintf(why, whylen, "NOTIFY for rpz %s not from its primary", cfg->rpz[zi].name);
	else if (cfg->rpz[zi].tsig_name[0] && !notify_signed(p, pkt, len, &cfg->rpz[zi], now, sig))
		snprintf(why, whylen,
		         "NOTIFY for rpz %s without a valid TSIG of key %s (%s, signed within its "
		         "fudge of now)",
		         cfg->rpz[zi].name, cfg->rpz[zi].tsig_name, cfg->rpz[zi].tsig_alg);
	else if ((rc = respond(&cfg->rpz[zi], p, out, cap, why, whylen)) > 0)
		*zone = (size_t)zi;
	ldns_pkt_free(p);
	return rc;
}
