/* worker.h: one moatd worker (--workers N) and its life. Each worker is a thread with its own
 * event loop, sockets (sharing the listening ports with SO_REUSEPORT, so the kernel spreads
 * clients over them), answer cache, upstream sockets and firewall channel; worker 0 runs on the
 * main thread. Everything in struct worker belongs to its worker's thread. What workers share
 * is read-only (the config, the policy snapshot with its atomic reference count), locked (the
 * rate limiter) or split (the query log: a ring per worker, serve/log_sink.h). Only moatd's own
 * files include this (and uv.h); the pure modules in include/moat/ never see the event loop.
 * Start-up order: worker_init for each (as root: binds the ports) -> worker_spawn (threads wait
 * at a barrier) -> drop privileges and load the system-call filter for every thread ->
 * worker_release -> run worker 0's loop. */
#ifndef MOAT_WORKER_H
#define MOAT_WORKER_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "moat/config.h"
#include "moat/dlist.h"
#include "moat/err.h"
#include "moat/policy.h"

struct ratelimit;
struct log_sink;
struct log_out;
struct query;

/* Where a NOTIFY from from goes: checked there; if accepted the response is written to out and
 * its length returned, else a negative code with why set. Any thread. */
typedef int (*worker_notify_fn)(void *ctx, const uint8_t *pkt, size_t len,
                                const struct sockaddr *from, uint8_t *out, size_t cap, char *why,
                                size_t whylen);

/* Counters of one worker: read by metrics_publish (moat/metrics.h) and main's stop summary. */
struct worker_stats {
	uint64_t queries, answered, dropped, denied, forwarded, servfail, formerr, refused_clients;
	uint64_t upstream_mismatch, upstream_timeouts, tcp_rejected, ratelimited;
	uint64_t inflight_refused; /* SERVFAIL: over a cap on questions in flight */
};

struct worker {
	unsigned index; /* worker number, 0 = the main thread */
	uv_loop_t *loop;
	const struct config *cfg; /* borrowed from main */
	struct policy *policy;    /* one reference owned; queries hold their own */
	struct {                  /* the agent of the last client address asking (a sandbox */
		bool valid;       /* asks from one address), in policy: reset whenever the */
		struct sockaddr_storage client; /* worker takes another snapshot (agent_of) */
		const struct policy_agent *agent;
	} agent_memo;
	struct log_out *log;         /* owned; NULL: no query log (none, or /dev/null) */
	struct fwchan *fw;           /* NULL: no firewall companion */
	struct cache *cache;         /* NULL: no answer cache */
	struct ratelimit *rl;        /* NULL: no per-client rate limit */
	struct inflight *inflight;   /* caps on questions in flight (shared; NULL: none) */
	uint32_t upool_max;          /* upstream sockets this worker may hold open */
	struct fetch_table *fetches; /* questions in flight (fetch.c) */
	worker_notify_fn notify;     /* a NOTIFY goes here (main.c: the RPZ transfer thread's */
	void *notify_ctx;            /* rpz_feed_notify, ops/rpz_feed.h); NULL: refused */
	struct dlist listeners;      /* struct listener (listen.h) */
	struct dlist tcp_conns;      /* struct tcp_conn (listen_tcp.c) */
	struct tcp_conn *tcp_resume; /* paused connections drained enough to be read again */
	struct dlist upstream_reqs;  /* struct upstream_req (upstream.c) */
	struct upstream_pool *upool; /* upstream.c's UDP sockets (owned; created on first use) */
	void *udp_rx, *up_rx;        /* receive areas of listen_udp.c and upstream.c (owned) */
	struct dlist live_queries;   /* struct query (query.c) */
	struct query *query_spare;   /* freed ones kept for reuse (query.c; owned) */
	unsigned nquery_spare;
	uint32_t ntcp;
	uint32_t tcp_max;       /* this worker's share of tcp_max_clients */
	bool reuseport;         /* listeners share their port with other workers */
	unsigned next_upstream; /* round robin start */
	bool stopping;
	struct worker_stats stats;
	uv_check_t flush;          /* sends queued datagrams, writes the log: after I/O */
	uv_prepare_t flush_timers; /* the same after timers, before the loop waits */
	uv_timer_t log_timer;      /* closes the log's counts each second (log_bound.h) */
	/* worker.c: other threads post a new policy or a stop through wake */
	uv_loop_t loop_storage;
	uv_async_t wake;
	struct policy *next_policy; /* posted, not yet taken (under worker.c's lock) */
	void (*call_fn)(struct worker *w, void *arg); /* posted by worker_post_call (same lock) */
	void *call_arg;
	struct metrics_worker *metrics; /* owned; this worker is its only writer (moat/metrics.h) */
	void *dnstap;                   /* dnstap_out.c's queue for this worker; NULL: off */
	bool post_stop, wake_closed;
	pthread_t thread;
};

/* Set up worker index of nworkers: loop, cache (its share of cache_bytes), query log (ring
 * index of log, its share of log_budget; log NULL: none), firewall channel, listeners. Takes its
 * own reference to policy; borrows cfg, log and rl (shared by all workers: each worker has its
 * own ring in log, rl locks itself).
 * Returns 0 or a negative MOAT_* code with a message in err. */
int worker_init(struct worker *w, unsigned index, unsigned nworkers, const struct config *cfg,
                struct policy *policy, struct log_sink *log, struct ratelimit *rl, char *err,
                size_t errlen);

/* Start threads for workers 1..n-1; they wait until worker_release. Returns 0 or MOAT_ENOMEM. */
int worker_spawn(struct worker *ws, unsigned n);
void worker_release(unsigned n);

/* On w's own thread: w takes the snapshot p (and the caller's reference to it) in place of
 * its current one, which it releases. */
void worker_take_policy(struct worker *w, struct policy *p);

/* From any thread: hand w a new policy snapshot (w takes its own reference) or ask it to stop.
 * Ignored once w has stopped. */
void worker_post_policy(struct worker *w, struct policy *p);
void worker_post_stop(struct worker *w);
/* From the main thread: run fn(w, arg) on w's thread (at once for worker 0, which is the main
 * thread's). One call may be pending per worker; a newer one replaces it. Ignored once w has
 * stopped. */
void worker_post_call(struct worker *w, void (*fn)(struct worker *w, void *arg), void *arg);

/* On w's own thread: close its sockets, drop its queries; its loop then runs out. */
void worker_stop(struct worker *w);

/* After every loop has ended: join the threads, then free each worker's state. */
void worker_join(struct worker *ws, unsigned n);
void worker_deinit(struct worker *w);

/* The one error space of moatd's I/O boundaries (listeners, upstream attempts, the firewall
 * channel): MOAT_* codes, a failed system or libuv call being MOAT_EIO with errno holding its
 * cause. worker_eio converts where the boundary is crossed (libuv's codes are negated errno
 * values on Linux); worker_strerror reads either back (errno must not have changed since). */
static inline int worker_eio(int neg_errno)
{
	errno = -neg_errno;
	return MOAT_EIO;
}

static inline const char *worker_strerror(int rc)
{
	return rc == MOAT_EIO && errno ? strerror(errno) : moat_strerror(rc);
}

/* A monotonic clock in microseconds, for latencies. */
static inline uint64_t worker_now_us(void)
{
	return uv_hrtime() / 1000;
}

#endif
