/* Local answers: records the operator writes (local_data: "db.corp.internal A 10.1.2.3",
 * "name [TTL] AAAA|CNAME|TXT data") and hosts(5) files (hosts:), answered by moatd without any
 * upstream. They are answered only to agents whose allowlist allows the name (the policy
 * decides first, as for every name), go through the same answer checks and firewall grant as an
 * upstream answer, and are exempt from the private-range block (the operator wrote them) but
 * never from the always-deny ranges. Pure: a sorted table built at policy load, looked up by
 * wire name (label by label, lower-cased), and a builder for the answer packet. */
#ifndef MOAT_LOCAL_H
#define MOAT_LOCAL_H

#include <stddef.h>
#include <stdint.h>

#define LOCAL_TTL 300 /* seconds, when a line gives none */

struct local_data;
struct addrguard;
struct policy_lint;

/* Ownership: free with local_data_free. NULL on allocation failure. */
struct local_data *local_data_new(void);
void local_data_free(struct local_data *ld);

/* One "name [TTL] TYPE data" record; file/line name it in errors ("file:line: reason" in err).
 * Returns 0 or MOAT_EINVAL/MOAT_ENOMEM. */
int local_data_add(struct local_data *ld, const char *text, const char *file, int line, char *err,
                   size_t errlen);

/* Every line of a hosts(5) file: "ADDRESS NAME [ALIASES...]", '#' comments. The same returns. */
int local_data_load_hosts(struct local_data *ld, const char *path, char *err, size_t errlen);

/* Sort the table for lookups (after the last add) and warn, through lint, about addresses in
 * the always-deny ranges of guard: they are never answered. */
int local_data_finish(struct local_data *ld, const struct addrguard *guard,
                      struct policy_lint *lint);

size_t local_data_count(const struct local_data *ld);

/* The answer to (lname, qtype) from the table as an upstream-style response packet (QR, AA,
 * RA; id; one question; the name's records of qtype, or its CNAME chain inside the table, or
 * nothing: NODATA), written to out[cap]. Returns its length, 0 when the table has nothing for
 * lname, or MOAT_ESPACE. */
int local_data_answer(const struct local_data *ld, const uint8_t *lname, uint16_t qtype,
                      uint16_t id, uint8_t *out, size_t cap);

#endif
