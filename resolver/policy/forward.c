/* forward.c owns the choice of upstream set for an allowed name (moat/forward.h): the tables of
 * forward zones built at policy load and the longest-zone match, on wire names. */
#include "moat/forward.h"

#include <stdlib.h>
#include <string.h>

#include "moat/err.h"
#include "moat/name.h"

/* Ids of forward zones: unique in the process, so a reload's zones never share cache entries
 * or in-flight questions with the zones they replace (whose upstreams may differ). */
static uint32_t next_id;

int forward_table_build(struct forward_table *t, const struct config_forward *f, size_t n,
                        const struct config *cfg)
{
	size_t naddr = 0;
	memset(t, 0, sizeof(*t));
	if (n == 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		naddr += f[i].nupstreams;
	t->sets = calloc(n, sizeof(*t->sets));
	t->addrs = calloc(naddr ? naddr : 1, sizeof(*t->addrs));
	if (!t->sets || !t->addrs) {
		forward_table_free(t);
		return MOAT_ENOMEM;
	}
	size_t at = 0;
	for (size_t i = 0; i < n; i++) {
		struct upstream_set *s = &t->sets[i];
		memcpy(t->addrs + at, f[i].upstreams, f[i].nupstreams * sizeof(*t->addrs));
		s->addrs = t->addrs + at;
		s->naddrs = f[i].nupstreams;
		at += f[i].nupstreams;
		s->timeout_ms = f[i].timeout_ms ? f[i].timeout_ms : cfg->upstream_timeout_ms;
		s->attempts = f[i].attempts ? f[i].attempts : cfg->upstream_attempts;
		s->allow_private = f[i].allow_private;
		/* Bit 0 of a cache variant is the DO bit: ids live above it. */
		uint32_t id = __atomic_add_fetch(&next_id, 1, __ATOMIC_RELAXED) & 0x7fffffffu;
		s->id = id ? id : 1;
		memcpy(s->zone, f[i].zone, (size_t)name_wire_len(f[i].zone, sizeof(f[i].zone)));
		s->labels = name_count_labels(s->zone);
	}
	t->n = n;
	return 0;
}

void forward_table_free(struct forward_table *t)
{
	free(t->sets);
	free(t->addrs);
	memset(t, 0, sizeof(*t));
}

static const struct upstream_set *best_in(const struct forward_table *t, const uint8_t *lname,
                                          const struct upstream_set *best)
{
	for (size_t i = 0; t && i < t->n; i++) {
		const struct upstream_set *s = &t->sets[i];
		if ((!best || s->labels > best->labels) && name_is_under(lname, s->zone))
			best = s;
	}
	return best;
}

const struct upstream_set *forward_pick(const struct forward_table *agent,
                                        const struct forward_table *global, const uint8_t *lname)
{
	return best_in(global, lname, best_in(agent, lname, NULL));
}
