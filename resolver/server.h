/* server.h: a worker's state and the seams between moatd's I/O files. Only moatd's own files
 * include this (and uv.h); the pure modules in include/moat/ never see the event loop.
 * moatd runs one or more workers (--workers N), each a thread with its own event loop, sockets
 * (sharing the listening ports with SO_REUSEPORT), answer cache, upstream sockets and firewall
 * channel; everything in struct server belongs to its worker's thread. What workers share is
 * read-only (the config, the policy snapshot with its atomic reference count) or locked (the
 * log stream, the rate limiter). */
#ifndef MOAT_SERVER_H
#define MOAT_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <pthread.h>
#include <stdio.h>
#include <uv.h>

#include "moat/config.h"
#include "moat/dlist.h"
#include "moat/policy.h"
#include "moat/wire.h"

struct server_stats {
	uint64_t queries, answered, dropped, denied, forwarded, servfail, formerr, refused_clients;
	uint64_t upstream_mismatch, upstream_timeouts, tcp_rejected, ratelimited;
	uint64_t inflight_refused; /* SERVFAIL: over a cap on questions in flight */
};

struct server {
	unsigned index; /* worker number, 0 = the main thread */
	uv_loop_t *loop;
	const struct config *cfg; /* borrowed from main */
	const char *config_path;  /* NULL in flag mode */
	struct policy *policy;    /* one reference owned; queries hold their own */
	FILE *log;
	struct fwchan *fw;           /* NULL: no firewall companion */
	struct cache *cache;         /* NULL: no answer cache */
	struct ratelimit *rl;        /* NULL: no per-client rate limit */
	struct inflight *inflight;   /* caps on questions in flight (shared; NULL: none) */
	uint32_t upool_max;          /* upstream sockets this worker may hold open */
	struct fetch_table *fetches; /* questions in flight (fetch.c) */
	struct rpz_feed *feed;       /* borrowed: RPZ transfers (rpz_feed.h), for NOTIFY */
	struct dlist listeners;      /* struct listener */
	struct dlist tcp_conns;      /* struct tcp_conn */
	struct tcp_conn *tcp_resume; /* paused connections drained enough to be read again */
	struct dlist upstream_reqs;  /* struct upstream_req */
	struct upstream_pool *upool; /* upstream.c's UDP sockets (owned; created on first use) */
	void *udp_rx, *up_rx;        /* receive areas of listen_udp.c and upstream.c (owned) */
	struct dlist live_queries;   /* struct query (query.c) */
	uint32_t ntcp;
	uint32_t tcp_max;       /* this worker's share of tcp_max_clients */
	bool reuseport;         /* listeners share their port with other workers */
	unsigned next_upstream; /* round robin start */
	bool stopping;
	struct server_stats stats;
	uv_signal_t sig_term, sig_int, sig_hup;
	uv_check_t flush;          /* sends queued datagrams, writes the log: after I/O */
	uv_prepare_t flush_timers; /* the same after timers, before the loop waits */
	uv_timer_t stats_timer;
	/* worker.c: other threads post a new policy or a stop through wake */
	uv_loop_t loop_storage;
	uv_async_t wake;
	struct policy *next_policy; /* posted, not yet taken (under worker.c's lock) */
	void (*call_fn)(struct server *w, void *arg); /* posted by worker_post_call (same lock) */
	void *call_arg;
	struct metrics_worker *metrics; /* owned; this worker is its only writer (moat/metrics.h) */
	void *dnstap;                   /* dnstap_out.c's queue for this worker; NULL: off */
	bool post_stop, wake_closed;
	pthread_t thread;
};

/* How a reply gets back to its client. */
enum reply_kind { REPLY_UDP, REPLY_TCP };

struct tcp_conn;

struct reply_to {
	enum reply_kind kind;
	struct listener *udp;  /* REPLY_UDP: the listener socket (borrowed) */
	struct tcp_conn *conn; /* REPLY_TCP: holds a reference while the query lives */
	struct sockaddr_storage client;
};

/* A listening socket (UDP or TCP), on the server's list so shutdown can close it. */
struct udp_queue;

struct listener {
	struct dlist link;
	struct server *srv;
	struct udp_queue *udpq; /* UDP: answers waiting for one sendmmsg (owned) */
	int fd;                 /* UDP: the socket, watched by h.poll (owned) */
	union {
		uv_handle_t handle;
		uv_poll_t poll; /* UDP */
		uv_tcp_t tcp;
	} h;
};

/* listen_udp.c / listen_tcp.c */
int listen_udp_start(struct server *srv, const struct sockaddr *addr);
int listen_tcp_start(struct server *srv, const struct sockaddr *addr);
void listen_close_all(struct server *srv);
/* SO_REUSEPORT on a listener's socket before it binds: workers then share the port and the
 * kernel spreads clients over them by address and port. */
int listen_share_port(uv_handle_t *h);
/* Send the answers UDP listeners have queued (called once per loop turn). */
void listen_flush_all(struct server *srv);
void tcp_close_all(struct server *srv);
/* Read again the TCP connections that drained below their caps (once per loop turn, from the
 * worker's flush: never inside a query's callback). */
void tcp_resume_all(struct server *srv);
/* Send one answer; the message is copied if it cannot be sent at once. */
void udp_reply(struct listener *l, const struct sockaddr *client, const uint8_t *msg, size_t len);
void tcp_conn_send(struct tcp_conn *c, const uint8_t *msg, size_t len);
void tcp_conn_ref(struct tcp_conn *c);
void tcp_conn_unref(struct tcp_conn *c);
bool tcp_conn_closed(const struct tcp_conn *c);

/* dnstap_out.c: a client message seen by this worker. */
void dnstap_client(struct server *srv, const struct reply_to *to, const uint8_t *msg, size_t len,
                   bool response);

static inline void reply_send(struct server *srv, struct reply_to *to, const uint8_t *msg,
                              size_t len)
{
	if (srv->dnstap)
		dnstap_client(srv, to, msg, len, true);
	if (to->kind == REPLY_UDP)
		udp_reply(to->udp, (const struct sockaddr *)&to->client, msg, len);
	else if (!tcp_conn_closed(to->conn))
		tcp_conn_send(to->conn, msg, len);
}

/* Release what a reply_to holds (the TCP connection reference of a forwarded query). */
static inline void reply_release(struct reply_to *to)
{
	if (to->kind == REPLY_TCP && to->conn)
		tcp_conn_unref(to->conn);
	to->conn = NULL;
}

/* query.c: one client message, from any listener. */
/* oversized: the datagram was longer than the receive slot and pkt holds its start only; it
 * is answered FORMERR (no real query is that long). */
void query_handle(struct server *srv, struct reply_to *to, const uint8_t *pkt, size_t len,
                  bool oversized);
void query_cancel_all(struct server *srv);

/* upstream.c */
struct upstream_req;
/* status 0: pkt/len is an answer to our question, already parsed into *resp; otherwise a
 * negative code (MOAT_EIO: every attempt failed or timed out; MOAT_EFORMAT: malformed answer). */
typedef void (*upstream_cb)(void *ctx, int status, const uint8_t *pkt, size_t len,
                            const struct sockaddr *from, int64_t elapsed_us);
/* Ask the upstreams (lname, qtype, qclass). The answer is parsed into *resp (caller storage that
 * must live until the callback). cb runs exactly once, unless upstream_cancel is called first.
 * Ownership: the request frees itself after the callback or cancel. */
/* set: the upstreams to ask (a forward zone's, copied into the request), NULL for the global
 * ones. */
int upstream_query(struct server *srv, const struct upstream_set *set, const uint8_t *lname,
                   uint16_t qtype, uint16_t qclass, bool dnssec_ok, struct wire_resp *resp,
                   upstream_cb cb, void *ctx, struct upstream_req **out);
void upstream_cancel(struct upstream_req *req);
/* Shutdown: end every request and close the pooled sockets (the loop must run to finish
 * closing them); after the loop has ended, upstream_deinit frees the pool. */
void upstream_cancel_all(struct server *srv);
/* Send the upstream queries queued this loop turn (called once per turn, after the I/O). */
void upstream_flush(struct server *srv);
void upstream_deinit(struct server *srv);
/* How many UDP sockets a worker's pool may hold for inflight_share questions in flight. */
uint32_t upstream_pool_max(uint32_t inflight_share, size_t nupstreams);

uint64_t server_now_us(void);

#endif
