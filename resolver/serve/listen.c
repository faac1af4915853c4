/* listen.c owns the end of a worker's listeners: closing every listening socket, UDP and TCP,
 * on the worker's list (listen_udp.c and listen_tcp.c open them). */
#include <stdlib.h>

#include "serve/listen.h"

static void on_listener_closed(uv_handle_t *h)
{
	struct listener *l = h->data;
	if (l->udpq)
		listen_udp_free(l);
	free(l);
}

/* A closed socket takes no new queries; queries already read finish. */
void listen_close_all(struct worker *srv)
{
	listen_flush_all(srv); /* what UDP listeners queued leaves first */
	while (!dlist_empty(&srv->listeners)) {
		struct listener *l = container_of(srv->listeners.next, struct listener, link);
		dlist_del(&l->link);
		uv_close(&l->h.handle, on_listener_closed);
	}
}
