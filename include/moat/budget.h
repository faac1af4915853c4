/* The label budget (issue 26): how many bytes of never-sent label text an agent may put under
 * one allowed wildcard zone in a sliding window. Default deny closes the names an agent was not
 * given; a wildcard it was given (`*.cdn.example`) still carries whatever the agent writes into
 * the labels below the zone to whoever reads that zone's authoritative logs. The budget bounds
 * that channel: a name the agent has sent before costs nothing and always resolves; a new one
 * costs the wire length of its labels below the zone (length octets included) and is denied
 * when the zone's charges in the window would pass the limit.
 *
 * One struct budget_state per agent, driven by the pure function budget_account: (state, name,
 * zone, limit, window, now) -> verdict. Not thread-safe: budget_share.h locks it.
 *
 * Seen names: a table of 64-bit fingerprints (SipHash-2-4 of the wire name under the state's
 * random key), buckets of 4, each name in one of two buckets (a full pair makes room by moving
 * one name to its other bucket), with the time it was last sent.
 * It is exact up to fingerprint collisions: a new name is taken for a seen one (and passes
 * unbilled) only when its fingerprint equals one of the 8 in its buckets, at most 8 / 2^64 per
 * query, and the key is secret, so collisions cannot be searched for offline. Every other error
 * goes the safe way: a name the table dropped (full buckets at the size cap: the least recently
 * sent of the 8 goes) or that expired (not sent for a window) is billed again when it comes back.
 * The table starts at 256 slots and doubles up to BUDGET_SLOTS_MAX (16 B each: 256 KiB).
 *
 * Zones: one account per zone (up to BUDGET_ZONES, then one shared account "other" with the
 * limit of whichever zone is asked), each a ring of BUDGET_RING counters of window/32 each, so a
 * charge stays in the sum for at least a whole window (between window and window + window/32):
 * any interval of one window holds at most the limit in charges. An account whose sum fell to 0
 * holds nothing worth keeping and is reused for another zone. Memory of one state at most:
 * BUDGET_SLOTS_MAX * 16 + (BUDGET_ZONES + 1) * ~440 bytes, about 285 KiB. */
#ifndef MOAT_BUDGET_H
#define MOAT_BUDGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moat/config.h"

#define BUDGET_RING 33 /* ticks a charge is summed over: 32 of window/32, plus the current one */
#define BUDGET_ZONES 64
#define BUDGET_SLOTS_MAX 16384u /* seen-name slots of one agent at most */

struct budget_state;

enum budget_result {
	BUDGET_SEEN,    /* sent before within the window (or as good as): free */
	BUDGET_CHARGED, /* new, billed to the zone: allowed */
	BUDGET_DENIED,  /* new, and the zone's budget would be passed */
};

/* One question under a wildcard rule. */
struct budget_ask {
	const uint8_t *lname; /* the name asked, lower-cased wire */
	const uint8_t *zone;  /* the suffix of lname the wildcard names (points into lname) */
	uint32_t limit;       /* bytes per window for this zone, > 0 */
	uint32_t window_ms;   /* > 0 */
	uint64_t now_ms;      /* a monotonic clock */
};

struct budget_verdict {
	enum budget_result result;
	uint32_t charge; /* what the name costs (0 when seen) */
	uint32_t used;   /* the zone's charges in the window, after this one (0 when seen) */
	uint32_t limit;
	bool first_deny; /* the zone's first deny since it last had room: alert once */
	bool other;      /* billed to the shared account: more zones than BUDGET_ZONES */
};

/* A zone account as reported (metrics, stats, explain). zone: borrowed, valid while the state
 * is held; NULL for the shared account. */
struct budget_zone_info {
	const uint8_t *zone;
	uint32_t used, limit;
	uint64_t denied, charged; /* queries denied, bytes billed since the account was made */
};

struct budget_info {
	size_t names;       /* slots holding a name (some may have expired) */
	size_t slots;       /* slots allocated */
	size_t mem_bytes;   /* what the state holds */
	unsigned zones;     /* accounts in use */
	uint32_t window_ms; /* the window it counts in (0: never asked) */
	uint64_t denied, charged, evicted;
};

/* A new, empty state with a random key. Ownership: the caller frees it with budget_state_free.
 * NULL on allocation failure. */
struct budget_state *budget_state_new(void);
/* The same with a given key (tests). */
struct budget_state *budget_state_new_key(const uint8_t key[16]);
void budget_state_free(struct budget_state *st);

/* Decide one name, billing it when it is new and fits (see above). Pure but for st. */
void budget_account(struct budget_state *st, const struct budget_ask *a,
                    struct budget_verdict *out);

/* What budget_account would say, without changing st (moatctl explain). */
void budget_peek(const struct budget_state *st, const struct budget_ask *a,
                 struct budget_verdict *out);

/* The state's figures at now_ms, and each zone account in use. */
void budget_state_info(const struct budget_state *st, struct budget_info *out);
typedef void (*budget_zone_cb)(void *ctx, const struct budget_zone_info *z);
void budget_state_each_zone(const struct budget_state *st, uint64_t now_ms, budget_zone_cb cb,
                            void *ctx);

/* The limit for zone (lower-cased wire) of an agent: its budget.zones override, else its
 * budget.bytes; 0: no budget there. Pure. */
uint32_t budget_limit(const struct config_agent *a, const uint8_t *zone);

#endif
