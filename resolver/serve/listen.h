/* listen.h: moatd's client-facing side. The listeners (listen_udp.c, listen_tcp.c; listen.c
 * closes them), and the reply seam: a struct reply_to says how an answer gets back to its
 * client, and query.c answers through reply_send / reply_gone / reply_release without knowing
 * the transport. Loop thread only. */
#ifndef MOAT_LISTEN_H
#define MOAT_LISTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "dnstap_out.h"
#include "worker.h"

/* How a reply gets back to its client. */
enum reply_kind { REPLY_UDP, REPLY_TCP };

struct tcp_conn;
struct udp_queue;

struct reply_to {
	enum reply_kind kind;
	struct listener *udp;  /* REPLY_UDP: the listener socket (borrowed) */
	struct tcp_conn *conn; /* REPLY_TCP: holds a reference while the query lives */
	struct sockaddr_storage client;
};

/* A listening socket (UDP or TCP), on its worker's list so shutdown can close it. */
struct listener {
	struct dlist link;
	struct worker *srv;
	struct udp_queue *udpq; /* UDP: answers waiting for one sendmmsg (owned) */
	int fd;                 /* UDP: the socket, watched by h.poll (owned) */
	union {
		uv_handle_t handle;
		uv_poll_t poll; /* UDP */
		uv_tcp_t tcp;
	} h;
};

/* Bind and watch a UDP or TCP listener on addr (port shared with the other workers when
 * srv->reuseport). Returns 0, MOAT_ENOMEM, or MOAT_EIO with errno saying why (worker_strerror). */
int listen_udp_start(struct worker *srv, const struct sockaddr *addr);
int listen_tcp_start(struct worker *srv, const struct sockaddr *addr);

/* listen.c: close every listening socket of srv, UDP and TCP (their queued answers are sent
 * first); client connections stay open until tcp_close_all. */
void listen_close_all(struct worker *srv);

/* listen_udp.c */
/* Send the answers UDP listeners have queued (called once per loop turn). */
void listen_flush_all(struct worker *srv);
/* Send one answer; the message is copied if it cannot be sent at once. */
void udp_reply(struct listener *l, const struct sockaddr *client, const uint8_t *msg, size_t len);
/* The UDP part of a listener, once its handle has closed: its queue and socket. */
void listen_udp_free(struct listener *l);

/* listen_tcp.c */
/* Close every client TCP connection of srv (queries holding one see it closed). */
void tcp_close_all(struct worker *srv);
/* Read again the TCP connections that drained below their caps (once per loop turn, from the
 * worker's flush: never inside a query's callback). */
void tcp_resume_all(struct worker *srv);
void tcp_conn_send(struct tcp_conn *c, const uint8_t *msg, size_t len);
void tcp_conn_ref(struct tcp_conn *c);
void tcp_conn_unref(struct tcp_conn *c);
bool tcp_conn_closed(const struct tcp_conn *c);

/* ---- the reply seam ---- */

/* The client can no longer take an answer (its TCP connection closed while the query waited);
 * never for UDP. */
static inline bool reply_gone(const struct reply_to *to)
{
	return to->kind == REPLY_TCP && tcp_conn_closed(to->conn);
}

static inline void reply_send(struct worker *srv, struct reply_to *to, const uint8_t *msg,
                              size_t len)
{
	if (srv->dnstap)
		dnstap_client(srv, to, msg, len, true);
	if (to->kind == REPLY_UDP)
		udp_reply(to->udp, (const struct sockaddr *)&to->client, msg, len);
	else if (!tcp_conn_closed(to->conn))
		tcp_conn_send(to->conn, msg, len);
}

/* A query that waits keeps its client: the TCP connection is referenced until reply_release. */
static inline void reply_hold(struct reply_to *to)
{
	if (to->kind == REPLY_TCP)
		tcp_conn_ref(to->conn);
}

/* Release what a reply_to holds (the TCP connection reference of a forwarded query). */
static inline void reply_release(struct reply_to *to)
{
	if (to->kind == REPLY_TCP && to->conn)
		tcp_conn_unref(to->conn);
	to->conn = NULL;
}

/* The transport's name for the log. */
static inline const char *reply_transport(const struct reply_to *to)
{
	return to->kind == REPLY_UDP ? "udp" : "tcp";
}

#endif
