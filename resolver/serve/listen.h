/* listen.h: moatd's client-facing side: the listeners (listen_udp.c, listen_tcp.c; listen.c
 * closes them). Each hands its messages to query_handle with a struct reply_to of its own
 * transport (serve/reply.h). Loop thread only. */
#ifndef MOAT_LISTEN_H
#define MOAT_LISTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "serve/worker.h"

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
/* The UDP part of a listener, once its handle has closed: its queue and socket. */
void listen_udp_free(struct listener *l);

/* listen_tcp.c */
/* Close every client TCP connection of srv (queries holding one see it closed). */
void tcp_close_all(struct worker *srv);
/* Read again the TCP connections that drained below their caps (once per loop turn, from the
 * worker's flush: never inside a query's callback). */
void tcp_resume_all(struct worker *srv);

#endif
