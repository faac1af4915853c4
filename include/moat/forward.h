/* Per-domain upstreams: which upstream set answers an allowed name. A forward zone
 * ({zone: corp.internal, upstreams: [...]}, global or per agent) sends the names at and below
 * it to its own upstreams, with its own timeouts, failover and cache entries; the longest
 * matching zone wins (an agent's zone before a global one of the same length), everything else
 * goes to the global upstreams. The policy decides first: a zone allows nothing by itself.
 * Pure: the choice is a function of wire names, label by label. */
#ifndef MOAT_FORWARD_H
#define MOAT_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "moat/config.h"

/* Where one question goes. The global set has id 0; each forward zone of a policy snapshot
 * gets a process-unique id, which is part of the cache key and of the in-flight question. */
struct upstream_set {
	const struct sockaddr_storage *addrs; /* borrowed from the config or the table */
	size_t naddrs;
	uint32_t timeout_ms, attempts;
	uint32_t id;
	bool allow_private; /* answers may hold private addresses */
	uint8_t zone[256];  /* lower-cased wire name; the root for the global set */
	int labels;         /* of zone */
};

struct forward_table {
	struct upstream_set *sets;      /* owned */
	struct sockaddr_storage *addrs; /* owned: every set's addresses, back to back */
	size_t n;
};

/* Build a table from config entries; timeouts and attempts left 0 take cfg's. Ownership: free
 * with forward_table_free. Returns 0 or MOAT_ENOMEM. */
int forward_table_build(struct forward_table *t, const struct config_forward *f, size_t n,
                        const struct config *cfg);
void forward_table_free(struct forward_table *t);

/* The set with the longest zone containing lname, from the agent's table first, then the
 * global one; NULL when no zone matches (the global upstreams answer). Either table may be
 * NULL. */
const struct upstream_set *forward_pick(const struct forward_table *agent,
                                        const struct forward_table *global, const uint8_t *lname);

#endif
