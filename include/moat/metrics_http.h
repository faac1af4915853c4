/* metrics_http.h: the one metrics endpoint moatd and moat-fw both run (metrics_http.c):
 * libmicrohttpd answering GET /metrics from a thread of its own with a body the program
 * renders. */
#ifndef MOAT_METRICS_HTTP_H
#define MOAT_METRICS_HTTP_H

#include <stddef.h>
#include <sys/socket.h>

/* One scrape's body: a malloc'd text of *len bytes (the server frees it), or NULL to close the
 * connection unanswered (no half a scrape). Called on the server's thread. */
typedef char *(*metrics_http_body)(void *ctx, size_t *len);

struct metrics_http_opts {
	const char *program;         /* "moatd", "moat-fw": the not-found page names it */
	const struct sockaddr *addr; /* listen on this address, or ... */
	int fd;                      /* ... (addr NULL) serve this listening socket */
	metrics_http_body body;
	void *ctx; /* the body's, borrowed until metrics_http_stop */
};

struct metrics_http;

/* Start serving from a thread of its own (so before any system-call filter that forbids
 * creating threads): at most 8 connections at a time and 4 from one address, each closed 5 s
 * after it was accepted; a new connection over a cap closes the oldest in its way (slow clients
 * cannot keep a scraper out). libmicrohttpd is loaded by the first call (so also before that
 * filter). Returns the server, owned by the caller until metrics_http_stop, or NULL with why in
 * err when the library cannot be loaded or it cannot listen or start. */
struct metrics_http *metrics_http_start(const struct metrics_http_opts *o, char *err,
                                        size_t errlen);

/* Stop the thread and close the listening socket (also a given fd). NULL: nothing. */
void metrics_http_stop(struct metrics_http *h);

#endif
