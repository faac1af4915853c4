/* metrics_http.c owns the metrics endpoint both moatd and moat-fw serve: libmicrohttpd answering
 * GET /metrics in Prometheus text format (the program renders the body) from a thread of its own,
 * which is created at start-up before the system-call filter and afterwards needs only accept4,
 * recv, send, epoll, shutdown and close. Anything else gets 404 and a line naming the program.
 *
 * The endpoint cannot be held: at most MH_CONNS connections at a time and MH_PER_ADDR from one
 * address, each closed MH_DEADLINE_MS after it was accepted whatever the client does (a byte
 * every few seconds resets libmicrohttpd's idle timeout, never this), and a connection over a
 * cap closes the oldest one in its way instead of waiting for it: slow clients cannot keep a
 * scraper out, and the endpoint cannot be used to hold the daemon's memory. The thread runs
 * libmicrohttpd's loop itself (MHD_run_wait) so that the deadline is kept on the same thread
 * that owns the connections.
 *
 * libmicrohttpd is loaded when an endpoint starts, not linked: with gnutls and the six libraries
 * behind it, its relocations were 4.7M of the 12.6M instructions of `moatd --version` (callgrind),
 * paid at every exec of moatd and moat-fw, and a daemon without an endpoint now never maps that
 * code at all. MOAT_MHD_SONAME is the soname of the library CMake found (CMakeLists.txt),
 * whose header this file is compiled against. */
#include <dlfcn.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "moat/metrics_http.h"
#include "moat/netaddr.h"

#define MH_CONNS 8          /* connections served at once */
#define MH_PER_ADDR 4       /* of them from one address */
#define MH_DEADLINE_MS 5000 /* from accept to close, whatever the client does */
#define MH_TICK_MS 100      /* how often the deadline is looked at */

/* A connection: its socket, its client's address and when it was accepted. cut: shut down, and
 * libmicrohttpd closes it at its next look. */
struct mh_conn {
	bool used, cut;
	MHD_socket fd;
	struct sockaddr_storage addr;
	uint64_t since;
};

struct metrics_http {
	struct MHD_Daemon *mhd;
	pthread_t thread;
	int stop; /* atomic */
	metrics_http_body body;
	void *ctx;
	char notfound[64];
	/* Only the thread touches these (libmicrohttpd calls back on it). Twice the cap: a cut
	 * connection holds its slot until libmicrohttpd has closed it. */
	struct mh_conn conns[2 * MH_CONNS];
};

/* The functions used, from the library loaded once (mh_load). */
static struct {
	__typeof__(&MHD_start_daemon) start_daemon;
	__typeof__(&MHD_stop_daemon) stop_daemon;
	__typeof__(&MHD_run_wait) run_wait;
	__typeof__(&MHD_get_connection_info) get_connection_info;
	__typeof__(&MHD_create_response_from_buffer) create_response_from_buffer;
	__typeof__(&MHD_add_response_header) add_response_header;
	__typeof__(&MHD_queue_response) queue_response;
	__typeof__(&MHD_destroy_response) destroy_response;
} mhd;
static pthread_once_t mhd_once = PTHREAD_ONCE_INIT;
static char mhd_error[160] = "not loaded"; /* why it could not be; emptied once it is */

static bool mh_sym(void *lib, const char *name, void *slot)
{
	void *f = dlsym(lib, name);
	if (f)
		memcpy(slot, &f, sizeof(f)); /* POSIX: a function's address fits a void * */
	else
		snprintf(mhd_error, sizeof(mhd_error), "%s lacks %s", MOAT_MHD_SONAME, name);
	return f != NULL;
}

static void mh_load(void)
{
	void *lib = dlopen(MOAT_MHD_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		snprintf(mhd_error, sizeof(mhd_error), "cannot load %s", dlerror());
		return;
	}
	/* Never closed: the program keeps its endpoint until it exits. */
	if (mh_sym(lib, "MHD_start_daemon", &mhd.start_daemon) &&
	    mh_sym(lib, "MHD_stop_daemon", &mhd.stop_daemon) &&
	    mh_sym(lib, "MHD_run_wait", &mhd.run_wait) &&
	    mh_sym(lib, "MHD_get_connection_info", &mhd.get_connection_info) &&
	    mh_sym(lib, "MHD_create_response_from_buffer", &mhd.create_response_from_buffer) &&
	    mh_sym(lib, "MHD_add_response_header", &mhd.add_response_header) &&
	    mh_sym(lib, "MHD_queue_response", &mhd.queue_response) &&
	    mh_sym(lib, "MHD_destroy_response", &mhd.destroy_response))
		mhd_error[0] = '\0';
}

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void cut(struct mh_conn *c)
{
	shutdown(c->fd, SHUT_RDWR);
	c->cut = true;
}

/* Close what outlived its deadline. */
static void sweep(struct metrics_http *h, uint64_t now)
{
	for (size_t i = 0; i < 2 * MH_CONNS; i++)
		if (h->conns[i].used && !h->conns[i].cut &&
		    now - h->conns[i].since >= MH_DEADLINE_MS)
			cut(&h->conns[i]);
}

/* The oldest live connection (from addr's host if addr is set), and how many there are. */
static struct mh_conn *oldest(struct metrics_http *h, const struct sockaddr *addr, size_t *n)
{
	struct mh_conn *o = NULL;
	*n = 0;
	for (size_t i = 0; i < 2 * MH_CONNS; i++) {
		struct mh_conn *c = &h->conns[i];
		if (!c->used || c->cut || (addr && !netaddr_same_host(addr, &c->addr)))
			continue;
		(*n)++;
		if (!o || c->since < o->since)
			o = c;
	}
	return o;
}

/* A new connection from addr: make room under both caps by closing the oldest in its way. */
static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	struct metrics_http *h = cls;
	size_t n;
	(void)addrlen;
	sweep(h, mono_ms());
	struct mh_conn *o = oldest(h, addr, &n);
	if (n >= MH_PER_ADDR)
		cut(o);
	o = oldest(h, NULL, &n);
	if (n >= MH_CONNS)
		cut(o);
	return MHD_YES;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
	struct metrics_http *h = cls;
	struct mh_conn *e = *socket_context;
	if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
		if (e)
			e->used = false;
		return;
	}
	const union MHD_ConnectionInfo *fd =
	    mhd.get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	const union MHD_ConnectionInfo *ad =
	    mhd.get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	for (size_t i = 0; fd && ad && i < 2 * MH_CONNS && !e; i++)
		if (!h->conns[i].used)
			e = &h->conns[i];
	if (!e) { /* cannot be: as many slots as libmicrohttpd's own limit */
		if (fd)
			shutdown(fd->connect_fd, SHUT_RDWR);
		return;
	}
	*e = (struct mh_conn){.used = true, .fd = fd->connect_fd, .since = mono_ms()};
	memcpy(&e->addr, ad->client_addr,
	       ad->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
	                                              : sizeof(struct sockaddr_in));
	*socket_context = e;
}

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
		r = mhd.create_response_from_buffer(strlen(h->notfound), h->notfound,
		                                    MHD_RESPMEM_PERSISTENT);
	} else {
		size_t n = 0;
		char *text = h->body(h->ctx, &n);
		if (!text)
			return MHD_NO; /* the connection closes: no half a scrape */
		r = mhd.create_response_from_buffer(n, text, MHD_RESPMEM_MUST_FREE);
		if (r)
			mhd.add_response_header(r, "Content-Type", "text/plain; version=0.0.4");
		else
			free(text);
	}
	if (!r)
		return MHD_NO;
	enum MHD_Result rc = mhd.queue_response(c, code, r);
	mhd.destroy_response(r);
	return rc;
}

static void *mh_thread(void *arg)
{
	struct metrics_http *h = arg;
	while (!__atomic_load_n(&h->stop, __ATOMIC_ACQUIRE)) {
		mhd.run_wait(h->mhd, MH_TICK_MS);
		sweep(h, mono_ms());
	}
	return NULL;
}

struct metrics_http *metrics_http_start(const struct metrics_http_opts *o, char *err, size_t errlen)
{
	pthread_once(&mhd_once, mh_load);
	if (mhd_error[0]) {
		snprintf(err, errlen, "%s", mhd_error);
		return NULL;
	}
	struct metrics_http *h = calloc(1, sizeof(*h));
	if (!h) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	h->body = o->body;
	h->ctx = o->ctx;
	snprintf(h->notfound, sizeof(h->notfound), "%s: GET /metrics\n", o->program);
	unsigned flags = MHD_USE_EPOLL; /* no thread of its own: mh_thread runs its loop */
	if (o->addr && o->addr->sa_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	/* The same options either way; only where the socket comes from differs. */
	struct MHD_OptionItem opts[] = {
	    o->addr ? (struct MHD_OptionItem){MHD_OPTION_SOCK_ADDR, 0, (void *)o->addr}
	            : (struct MHD_OptionItem){MHD_OPTION_LISTEN_SOCKET, o->fd, NULL},
	    {MHD_OPTION_CONNECTION_LIMIT, 2 * MH_CONNS, NULL},
	    {MHD_OPTION_CONNECTION_TIMEOUT, MH_DEADLINE_MS / 1000, NULL},
	    {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, h},
	    {MHD_OPTION_END, 0, NULL},
	};
	h->mhd = mhd.start_daemon(flags, 0, on_accept, h, on_request, h, MHD_OPTION_ARRAY, opts,
	                          MHD_OPTION_END);
	if (!h->mhd) {
		snprintf(err, errlen, "cannot listen (address in use or not local?)");
		free(h);
		return NULL;
	}
	if (pthread_create(&h->thread, NULL, mh_thread, h) != 0) {
		snprintf(err, errlen, "cannot start its thread");
		mhd.stop_daemon(h->mhd);
		free(h);
		return NULL;
	}
	return h;
}

void metrics_http_stop(struct metrics_http *h)
{
	if (!h)
		return;
	__atomic_store_n(&h->stop, 1, __ATOMIC_RELEASE);
	pthread_join(h->thread, NULL); /* within one tick */
	mhd.stop_daemon(h->mhd);       /* closes the listening socket too */
	free(h);
}
