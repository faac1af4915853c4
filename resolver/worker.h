/* worker.h: moatd's workers (--workers N). Each is a struct server with its own event loop
 * and thread (worker 0 runs on the main thread), sharing the listening ports with SO_REUSEPORT
 * so the kernel spreads clients over them. Start-up order: worker_init for each (as root: binds
 * the ports) -> worker_spawn (threads wait at a barrier) -> drop privileges and load the
 * system-call filter for every thread -> worker_release -> run worker 0's loop. */
#ifndef MOAT_WORKER_H
#define MOAT_WORKER_H

#include "moat/ratelimit.h"
#include "server.h"

/* Set up worker index of nworkers: loop, cache (its share of cache_bytes), firewall channel,
 * listeners. Takes its own reference to policy; borrows cfg, log and rl (shared by all
 * workers: log writes are whole lines under stdio's lock, rl locks itself).
 * Returns 0 or a negative code with a message in err. */
int worker_init(struct server *w, unsigned index, unsigned nworkers, const struct config *cfg,
                struct policy *policy, FILE *log, struct ratelimit *rl, char *err, size_t errlen);

/* Start threads for workers 1..n-1; they wait until worker_release. Returns 0 or MOAT_ENOMEM. */
int worker_spawn(struct server *ws, unsigned n);
void worker_release(unsigned n);

/* From any thread: hand w a new policy snapshot (w takes its own reference) or ask it to stop.
 * Ignored once w has stopped. */
void worker_post_policy(struct server *w, struct policy *p);
void worker_post_stop(struct server *w);
/* From the main thread: run fn(w, arg) on w's thread (at once for worker 0, which is the main
 * thread's). One call may be pending per worker; a newer one replaces it. Ignored once w has
 * stopped. */
void worker_post_call(struct server *w, void (*fn)(struct server *w, void *arg), void *arg);

/* On w's own thread: close its sockets, drop its queries; its loop then runs out. */
void worker_stop(struct server *w);

/* After every loop has ended: join the threads, then free each worker's state. */
void worker_join(struct server *ws, unsigned n);
void worker_deinit(struct server *w);

#endif
