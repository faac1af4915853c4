/* worker.c owns a worker's life: its event loop, sockets, cache and firewall channel; its
 * thread; a new policy or a stop posted to it from another thread; and the order in which it
 * shuts down. main.c decides how many workers run and owns the signals (on worker 0's loop). */
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include "moat/err.h"
#include "moat/log.h"
#include "moat/metrics.h"
#include "serve/log_bound.h"
#include "serve/log_sink.h"
#include "serve/dnstap_out.h"
#include "serve/fetch.h"
#include "serve/fwchan.h"
#include "serve/metrics_workers.h"
#include "serve/listen.h"
#include "serve/query.h"
#include "serve/upstream.h"
#include "serve/worker.h"
#include "serve/ask.h"

/* Guards next_policy, post_stop and wake_closed of every worker: the only fields another thread
 * touches. */
static pthread_mutex_t post_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t started, go;

/* Send the queued UDP answers and upstream queries, then hand the log lines on: after each loop
 * turn's I/O (check) and again after its timers, just before the loop waits (prepare), so what
 * a timer callback queued (a retry, a SERVFAIL) does not wait for the next event. The log's
 * writer is woken only after the answers left (log_sink.h). */
static void flush_all(struct worker *w)
{
	tcp_resume_all(w);  /* first: what it answers is sent below */
	metrics_publish(w); /* before the answers leave: a client that saw one sees it counted */
	listen_flush_all(w);
	upstream_flush(w);
	log_out_flush(w->log, uv_now(w->loop));
}

static void on_check(uv_check_t *c)
{
	flush_all(c->data);
}

static void on_prepare(uv_prepare_t *p)
{
	flush_all(p->data);
}

/* A quiet loop has no turn ends: the log's counts still close each second. */
static void on_log_timer(uv_timer_t *t)
{
	struct worker *w = t->data;
	log_out_flush(w->log, uv_now(w->loop));
}

static void on_wake(uv_async_t *a)
{
	struct worker *w = a->data;
	pthread_mutex_lock(&post_lock);
	struct policy *np = w->next_policy;
	bool stop = w->post_stop;
	void (*fn)(struct worker *, void *) = w->call_fn;
	void *arg = w->call_arg;
	w->next_policy = NULL;
	w->call_fn = NULL;
	pthread_mutex_unlock(&post_lock);
	if (fn)
		fn(w, arg);
	if (np)
		worker_take_policy(w, np);
	if (stop)
		worker_stop(w);
}

void worker_take_policy(struct worker *w, struct policy *p)
{
	/* Queries in flight keep the snapshot they started with (their own reference). */
	policy_unref(w->policy);
	w->policy = p;
	w->agent_memo.valid = false; /* its agent is the old snapshot's */
	ask_policy_changed(w);       /* a rule of it may decide the names held for an answer */
}

int worker_init(struct worker *w, unsigned index, unsigned nworkers, const struct config *cfg,
                struct policy *policy, struct log_sink *log, struct ratelimit *rl, char *err,
                size_t errlen)
{
	memset(w, 0, sizeof(*w));
	w->index = index;
	ask_worker_init(w);
	w->loop = &w->loop_storage;
	w->cfg = cfg;
	w->rl = rl;
	w->reuseport = nworkers > 1;
	w->tcp_max = (cfg->tcp_max_clients + nworkers - 1) / nworkers;
	w->upool_max =
	    upstream_pool_max((cfg->inflight_max + nworkers - 1) / nworkers, cfg->nupstreams);
	dlist_init(&w->listeners);
	dlist_init(&w->tcp_conns);
	dlist_init(&w->upstream_reqs);
	dlist_init(&w->live_queries);
	int rc = uv_loop_init(w->loop);
	if (rc < 0) {
		snprintf(err, errlen, "cannot start an event loop: %s", uv_strerror(rc));
		return MOAT_EIO;
	}
	w->policy = policy_ref(policy);
	if (!(w->metrics = calloc(1, sizeof(*w->metrics)))) {
		snprintf(err, errlen, "out of memory for the counters");
		return MOAT_ENOMEM;
	}
	/* The budget is split like the cache: the whole stays within log_bytes_per_s. */
	uint64_t budget = cfg->log_budget ? (cfg->log_budget + nworkers - 1) / nworkers : 0;
	if (log && !(w->log = log_out_new(log_sink_ring(log, index), budget))) {
		snprintf(err, errlen, "out of memory for the query log");
		return MOAT_ENOMEM;
	}
	dnstap_out_attach(w);
	/* The cache budget is split, so the whole stays within cache_size_mb. */
	if (fetch_init(w, cfg->cache_bytes / nworkers) < 0) {
		snprintf(err, errlen, "out of memory for the answer cache");
		return MOAT_ENOMEM;
	}
	if (cfg->fw_socket &&
	    (rc = fwchan_new(w->loop, cfg->fw_socket, cfg->fw_timeout_ms, &w->fw)) < 0) {
		snprintf(err, errlen, "firewall socket %s: %s", cfg->fw_socket,
		         rc == MOAT_EINVAL ? "path too long" : moat_strerror(rc));
		return rc;
	}
	for (size_t i = 0; i < cfg->nlisten; i++) {
		const struct sockaddr *a = (const struct sockaddr *)&cfg->listen[i];
		rc = listen_udp_start(w, a);
		if (rc == 0)
			rc = listen_tcp_start(w, a);
		if (rc < 0) {
			const char *why =
			    worker_strerror(rc); /* before anything can change errno */
			char addr[80];
			snprintf(err, errlen, "cannot listen on %s: %s",
			         log_format_addr(a, true, addr, sizeof(addr)), why);
			return rc;
		}
	}
	uv_check_init(w->loop, &w->flush);
	w->flush.data = w;
	uv_check_start(&w->flush, on_check);
	uv_unref((uv_handle_t *)&w->flush);
	uv_prepare_init(w->loop, &w->flush_timers);
	w->flush_timers.data = w;
	uv_prepare_start(&w->flush_timers, on_prepare);
	uv_unref((uv_handle_t *)&w->flush_timers);
	uv_timer_init(w->loop, &w->log_timer);
	w->log_timer.data = w;
	if (w->log)
		uv_timer_start(&w->log_timer, on_log_timer, 1000, 1000);
	uv_unref((uv_handle_t *)&w->log_timer);
	uv_async_init(w->loop, &w->wake, on_wake);
	w->wake.data = w;
	return 0;
}

void worker_stop(struct worker *w)
{
	if (w->stopping)
		return;
	w->stopping = true;
	listen_close_all(w);
	tcp_close_all(w);
	query_cancel_all(w);
	fetch_cancel_all(w);
	upstream_cancel_all(w);
	fwchan_close(w->fw);
	w->fw = NULL;
	uv_close((uv_handle_t *)&w->flush, NULL);
	uv_close((uv_handle_t *)&w->flush_timers, NULL);
	uv_close((uv_handle_t *)&w->log_timer, NULL);
	pthread_mutex_lock(&post_lock);
	w->wake_closed = true;
	policy_unref(w->next_policy);
	w->next_policy = NULL;
	pthread_mutex_unlock(&post_lock);
	uv_close((uv_handle_t *)&w->wake, NULL);
}

void worker_post_policy(struct worker *w, struct policy *p)
{
	pthread_mutex_lock(&post_lock);
	if (!w->wake_closed) {
		policy_unref(w->next_policy); /* an older one it has not taken yet */
		w->next_policy = policy_ref(p);
		uv_async_send(&w->wake);
	}
	pthread_mutex_unlock(&post_lock);
}

void worker_post_call(struct worker *w, void (*fn)(struct worker *w, void *arg), void *arg)
{
	if (w->index == 0) { /* worker 0 runs on the caller's (main) thread */
		fn(w, arg);
		return;
	}
	pthread_mutex_lock(&post_lock);
	if (!w->wake_closed) {
		w->call_fn = fn;
		w->call_arg = arg;
		uv_async_send(&w->wake);
	}
	pthread_mutex_unlock(&post_lock);
}

void worker_post_stop(struct worker *w)
{
	pthread_mutex_lock(&post_lock);
	if (!w->wake_closed) {
		w->post_stop = true;
		uv_async_send(&w->wake);
	}
	pthread_mutex_unlock(&post_lock);
}

static void *worker_thread(void *arg)
{
	struct worker *w = arg;
	/* no_new_privs is per thread; the filter's TSYNC copies it, but --no-seccomp has none. */
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	/* Only now is glibc's own thread set-up (rseq registration and the like) done: the filter,
	 * which refuses those calls, must not be loaded before every thread got here. */
	pthread_barrier_wait(&started);
	pthread_barrier_wait(&go);
	uv_run(w->loop, UV_RUN_DEFAULT);
	return NULL;
}

int worker_spawn(struct worker *ws, unsigned n)
{
	if (n < 2)
		return 0;
	if (pthread_barrier_init(&started, NULL, n) != 0 || pthread_barrier_init(&go, NULL, n) != 0)
		return MOAT_ENOMEM;
	for (unsigned i = 1; i < n; i++)
		if (pthread_create(&ws[i].thread, NULL, worker_thread, &ws[i]) != 0)
			return MOAT_ENOMEM;
	pthread_barrier_wait(&started);
	return 0;
}

void worker_release(unsigned n)
{
	if (n >= 2)
		pthread_barrier_wait(&go);
}

void worker_join(struct worker *ws, unsigned n)
{
	for (unsigned i = 1; i < n; i++)
		pthread_join(ws[i].thread, NULL);
}

void worker_deinit(struct worker *w)
{
	log_out_close(w->log, uv_now(w->loop)); /* its counts, before the sink closes */
	log_out_free(w->log);
	w->log = NULL;
	query_free_spares(w);
	uv_loop_close(w->loop);
	upstream_deinit(w);
	fetch_deinit(w);
	policy_unref(w->policy);
	w->policy = NULL;
	free(w->udp_rx);
	free(w->up_rx);
	free(w->metrics);
	w->metrics = NULL;
	w->udp_rx = w->up_rx = NULL;
}
