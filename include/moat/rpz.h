/* RPZ zones (Response Policy Zones, draft-vixie-dnsop-dns-rpz) as a policy source: an agent's
 * allow source or the high-risk source. moat takes the QNAME subset only:
 *   trigger  NAME.<origin> or *.NAME.<origin>   (the name and everything below it)
 *   action   CNAME rpz-passthru.                 allow (allow zones only)
 *            CNAME .                             NXDOMAIN, alert (high-risk zones only)
 *            CNAME *.                            NODATA, alert (high-risk zones only)
 * SOA and NS at the apex are the zone's own and ignored. Everything else is refused when the
 * zone is loaded, with file:line (files) or the owner name (transfers): the other triggers
 * (rpz-ip, rpz-nsdname, rpz-nsip, rpz-client-ip), the other actions (rpz-drop, rpz-tcp-only,
 * local data of any type, a CNAME to another name), a trigger listed with two actions.
 *
 * A zone's triggers live in one policy_set per action (the same matcher as the text lists), in
 * an rpz_data that is reference-counted and immutable once published: policy snapshots share
 * it, and an IXFR patches a copy (rpz_data_copy) made without parsing the zone again.
 * Pure: no I/O beyond reading a zone file. */
#ifndef MOAT_RPZ_H
#define MOAT_RPZ_H

#include <ldns/ldns.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moat/name.h"
#include "moat/policy.h"

enum rpz_kind { RPZ_ALLOW = 0, RPZ_HIGHRISK };
enum rpz_action { RPZ_PASSTHRU = 0, RPZ_NXDOMAIN, RPZ_NODATA, RPZ_NACTIONS };

struct rpz_data {
	int refs; /* atomic: snapshots on several threads share it */
	enum rpz_kind kind;
	char *label; /* owned: rule "file" for explanations (the file path, or "rpz:NAME") */
	uint8_t origin[NAME_MAXWIRE]; /* lower-cased wire name; root until known */
	uint32_t serial;
	bool loaded;         /* false: no zone yet (it lists nothing) */
	bool file;           /* read from a file: rules carry its lines (a transfer's carry none) */
	size_t max_triggers; /* adding one more fails (MOAT_ELIMIT); 0: no cap */
	struct policy_set *set[RPZ_NACTIONS]; /* owned: the triggers of each action */
};

/* An empty zone of kind with origin (NULL: root, set by the file's SOA) and label (copied).
 * Ownership: one reference; release with rpz_data_unref. NULL on allocation failure. */
struct rpz_data *rpz_data_new(enum rpz_kind kind, const uint8_t *origin, const char *label);
struct rpz_data *rpz_data_ref(struct rpz_data *d);
void rpz_data_unref(struct rpz_data *d);

/* A private copy of d (sets copied slot for slot, nothing parsed) for an IXFR to patch.
 * Ownership: one reference. NULL on allocation failure. */
struct rpz_data *rpz_data_copy(const struct rpz_data *d);

/* Add (add true) or delete one record of the zone. where/line name it in errors and in the
 * rules ("zones/feed.rpz:12"; line 0 for a transferred record, then the owner name is the
 * place). Returns 0 (also for the apex SOA/NS, ignored), MOAT_EINVAL with err = "where: reason"
 * for what moat does not take, MOAT_ENOENT for deleting a record the zone does not hold,
 * MOAT_ELIMIT for an add past d->max_triggers, or MOAT_ENOMEM. */
int rpz_data_apply(struct rpz_data *d, const ldns_rr *rr, bool add, const char *where,
                   uint32_t line, char *err, size_t errlen);

/* Read an RPZ zone file (master file format, $ORIGIN/$TTL, the SOA first; origin NULL: from the
 * SOA's owner). Ownership: *out has one reference. On error nothing is returned and err holds
 * "path:line: reason". */
int rpz_load_file(enum rpz_kind kind, const char *path, const uint8_t *origin,
                  struct rpz_data **out, char *err, size_t errlen);

/* The same, loaded only if the file's signature (path.sig, moat/policy_sig.h) verifies with pk
 * (NULL: not checked) over the very bytes parsed; else the policy_sig error. max_triggers: the
 * zone's cap (0: none), over it MOAT_ELIMIT. */
int rpz_load_file_signed(enum rpz_kind kind, const char *path, const uint8_t *origin,
                         const uint8_t *pk, size_t max_triggers, struct rpz_data **out, char *err,
                         size_t errlen);

/* The trigger of d that matches the lower-cased wire name lname, by RPZ precedence (the exact
 * name before a wildcard, a nearer wildcard before a farther one). On a match fills *act and
 * *rule (either may be NULL) and returns true. */
bool rpz_match(const struct rpz_data *d, const uint8_t *lname, enum rpz_action *act,
               struct policy_rule *rule);

/* Number of triggers. */
size_t rpz_count(const struct rpz_data *d);

#endif
