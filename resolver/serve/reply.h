/* reply.h: the reply seam between the query path and the listeners. A struct reply_to says how
 * an answer gets back to its client; query.c and local_answer.c answer through reply_send,
 * reply_gone, reply_hold and reply_release without knowing the transport, and each listener
 * (listen_udp.c, listen_tcp.c) gives its own struct reply_ops. So the query path needs nothing
 * of the listeners, which hand it every message (query_handle). Loop thread only. */
#ifndef MOAT_REPLY_H
#define MOAT_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "serve/dnstap_out.h"
#include "serve/worker.h"

struct reply_to;

/* What a transport does with an answer. */
struct reply_ops {
	/* Send one answer; the message is copied if it cannot go out at once. */
	void (*send)(struct reply_to *to, const uint8_t *msg, size_t len);
	/* The client can no longer take an answer (its connection closed while the query waited);
	 * NULL: never (UDP). */
	bool (*gone)(const struct reply_to *to);
	/* A query that waits keeps its client: hold until release (NULL: nothing to hold). */
	void (*hold)(struct reply_to *to);
	void (*release)(struct reply_to *to);
	bool tcp; /* a stream: no size limit but 64 KiB, "tcp" in the log, dnstap and metrics */
};

struct reply_to {
	const struct reply_ops *ops;
	void *via; /* the transport's: its UDP listener (borrowed) or TCP connection (held) */
	struct sockaddr_storage client;
};

static inline bool reply_tcp(const struct reply_to *to)
{
	return to->ops->tcp;
}

/* The transport's name for the log. */
static inline const char *reply_transport(const struct reply_to *to)
{
	return to->ops->tcp ? "tcp" : "udp";
}

static inline bool reply_gone(const struct reply_to *to)
{
	return to->ops->gone && to->ops->gone(to);
}

static inline void reply_send(struct worker *srv, struct reply_to *to, const uint8_t *msg,
                              size_t len)
{
	if (srv->dnstap)
		dnstap_client(srv, (const struct sockaddr *)&to->client, to->ops->tcp, msg, len,
		              true);
	to->ops->send(to, msg, len);
}

static inline void reply_hold(struct reply_to *to)
{
	if (to->ops->hold)
		to->ops->hold(to);
}

/* Release what a reply_to holds (the TCP connection reference of a forwarded query). */
static inline void reply_release(struct reply_to *to)
{
	if (to->ops->release && to->via)
		to->ops->release(to);
	to->via = NULL;
}

#endif
