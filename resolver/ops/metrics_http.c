/* metrics_http.c owns the metrics endpoint both moatd and moat-fw serve: libmicrohttpd answering
 * GET /metrics in Prometheus text format (the program renders the body) from its internal
 * polling thread, which is created at start-up before the system-call filter and afterwards
 * needs only accept4, recv, send, epoll and close. Anything else gets 404 and a line naming
 * the program. At most 8 scrapers at a time, 5 s each: the endpoint cannot be used to hold
 * the daemon's memory. */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/metrics_http.h"

struct metrics_http {
	struct MHD_Daemon *mhd;
	metrics_http_body body;
	void *ctx;
	char notfound[64];
};

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_len, void **state)
{
	struct metrics_http *h = cls;
	(void)version, (void)upload, (void)upload_len, (void)state;
	struct MHD_Response *r;
	unsigned code = MHD_HTTP_OK;
	if (strcmp(method, "GET") != 0 || strcmp(url, "/metrics") != 0) {
		code = MHD_HTTP_NOT_FOUND;
		r = MHD_create_response_from_buffer(strlen(h->notfound), h->notfound,
		                                    MHD_RESPMEM_PERSISTENT);
	} else {
		size_t n = 0;
		char *text = h->body(h->ctx, &n);
		if (!text)
			return MHD_NO; /* the connection closes: no half a scrape */
		r = MHD_create_response_from_buffer(n, text, MHD_RESPMEM_MUST_FREE);
		if (r)
			MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4");
		else
			free(text);
	}
	if (!r)
		return MHD_NO;
	enum MHD_Result rc = MHD_queue_response(c, code, r);
	MHD_destroy_response(r);
	return rc;
}

struct metrics_http *metrics_http_start(const struct metrics_http_opts *o)
{
	struct metrics_http *h = calloc(1, sizeof(*h));
	if (!h)
		return NULL;
	h->body = o->body;
	h->ctx = o->ctx;
	snprintf(h->notfound, sizeof(h->notfound), "%s: GET /metrics\n", o->program);
	unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL;
	if (o->addr && o->addr->sa_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	/* The same options either way; only where the socket comes from differs. */
	struct MHD_OptionItem opts[] = {
	    o->addr ? (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, (void *)o->addr}
	            : (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, o->fd, NULL},
	    {MHD_OPTION_CONNECTION_LIMIT, 8, NULL},
	    {MHD_OPTION_CONNECTION_TIMEOUT, 5, NULL},
	    {MHD_OPTION_END, 0, NULL},
	};
	h->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_ARRAY, opts,
	                          MHD_OPTION_END);
	if (!h->mhd) {
		free(h);
		return NULL;
	}
	return h;
}

void metrics_http_stop(struct metrics_http *h)
{
	if (h)
		MHD_stop_daemon(h->mhd); /* closes the listening socket too */
	free(h);
}
