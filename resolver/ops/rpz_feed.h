/* rpz_feed.h: moatd's transfer thread for RPZ zones pulled from a primary. It transfers each
 * zone at start, on an accepted NOTIFY and on the SOA refresh timer (retry after a failure),
 * builds a new policy snapshot that replaces only that zone (policy_with_rpz) and hands it to
 * the workers. A failed or bad transfer keeps the last good zone and logs why; so does a
 * primary that went away (the zone never expires: moat keeps enforcing the last list it had).
 * Transfers never run on a worker's loop. */
#ifndef MOAT_RPZ_FEED_H
#define MOAT_RPZ_FEED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "moat/config.h"
#include "moat/policy.h"

struct rpz_feed;

/* Hands a snapshot to every worker (main.c: worker_post_policy on each); called with the feed's
 * lock held, so snapshots reach the workers in the order they were made. */
typedef void (*rpz_publish_fn)(void *ctx, struct policy *p);

/* Whether cfg transfers any zone (moatd starts the thread only then: a reload cannot start it
 * later, the system-call filter has no clone). */
bool rpz_feed_wanted(const struct config *cfg);

/* Start the thread (before the system-call filter: it creates a thread). Copies the zones of
 * cfg; takes a reference to p, the snapshot the workers run. Ownership: stop with
 * rpz_feed_stop. Returns 0 or MOAT_ENOMEM. */
int rpz_feed_start(struct rpz_feed **out, const struct config *cfg, struct policy *p,
                   rpz_publish_fn publish, void *ctx);

/* A reload: np (not yet shared) takes the zones the feed holds for transferred zones with the
 * same name, primary and zone; the feed takes cfg's zones; np is published. From the main
 * thread. */
void rpz_feed_adopt(struct rpz_feed *f, const struct config *cfg, struct policy *np);

/* An agent edit (control_agents.c): np (not yet shared, made from the same load as the feed's
 * snapshot) takes the feed's current zones, becomes the snapshot later transfers build on, and
 * is published, all under the feed's lock, so neither an IXFR nor the edit is lost. From the
 * main thread. */
void rpz_feed_set_current(struct rpz_feed *f, struct policy *np);

/* A NOTIFY from a worker (any thread): checked (rpz_notify_check); if accepted, the zone's
 * transfer is started now and the response is in out (returns its length); else a negative
 * code and why. */
int rpz_feed_notify(struct rpz_feed *f, const uint8_t *pkt, size_t len, const struct sockaddr *from,
                    uint8_t *out, size_t cap, char *why, size_t whylen);

void rpz_feed_stop(struct rpz_feed *f);

#endif
