/* metrics.c owns moat-fw's metrics endpoint (see metrics.h): the grant counters, the snapshot
 * of table inet moat and the ledger, and libmicrohttpd serving them, as moatd's metrics_http.c
 * does. The table is read as nft's text listing and turned into metrics by the pure
 * fwmetrics_render_table. */
#include "metrics.h"

#include "ledger.h"
#include "moat/netaddr.h"
#include "moat/err.h"
#include "moat/metrics.h"
#include "nft.h"

#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define FWM_LIST_MAX (8u << 20) /* nft's listing of the table: sets of 65536 elements fit */
#define FWM_SNAP_MAX (64u << 10)
#define FWM_DROPS_MAX 64

static struct MHD_Daemon *mhd;
static int listen_fd = -1;
static const char *fwm_version;
static uint64_t fwm_grants[4]; /* received, ok, denied, failed; atomics */
static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER;
static char *snap; /* rendered table and ledger metrics, under snap_lock */

struct fwm_out {
	char *p;
	size_t len, cap;
	bool full;
};

static void fwm_emit(struct fwm_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fwm_emit(struct fwm_out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= o->cap - o->len)
		o->full = true;
	else
		o->len += (size_t)n;
}

struct fwm_drop {
	char chain[64];
	char reason[256];
	uint64_t packets, bytes;
};

/* The line without its leading and trailing blanks, into out (cut to cap). */
static void fwm_trim(const char *s, size_t n, char *out, size_t cap)
{
	while (n && (*s == ' ' || *s == '\t'))
		s++, n--;
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		n--;
	if (n >= cap)
		n = cap - 1;
	memcpy(out, s, n);
	out[n] = '\0';
}

/* One `... counter packets P bytes B drop` line of chain into the drops (same chain and reason
 * summed). */
static void fwm_drop_line(const char *line, size_t n, const char *chain, struct fwm_drop *d,
                          size_t *nd)
{
	char buf[512];
	fwm_trim(line, n, buf, sizeof(buf));
	char *c = strstr(buf, "counter packets ");
	unsigned long long p, b;
	if (!c || sscanf(c, "counter packets %llu bytes %llu", &p, &b) != 2 ||
	    !strstr(c, " drop") || strstr(c, " drop") != buf + strlen(buf) - 5)
		return;
	*c = '\0';
	char reason[256];
	fwm_trim(buf, strlen(buf), reason, sizeof(reason));
	if (!*reason)
		snprintf(reason, sizeof(reason), "any");
	size_t i = 0;
	while (i < *nd && (strcmp(d[i].chain, chain) || strcmp(d[i].reason, reason)))
		i++;
	if (i == *nd) {
		if (*nd == FWM_DROPS_MAX)
			return;
		memset(&d[i], 0, sizeof(d[i]));
		snprintf(d[i].chain, sizeof(d[i].chain), "%s", chain);
		snprintf(d[i].reason, sizeof(d[i].reason), "%s", reason);
		(*nd)++;
	}
	d[i].packets += p;
	d[i].bytes += b;
}

static void fwm_render_drops(struct fwm_out *o, const struct fwm_drop *d, size_t nd)
{
	fwm_emit(o, "# HELP moatfw_dropped_packets_total Packets dropped by a counter drop rule.\n"
	            "# TYPE moatfw_dropped_packets_total counter\n");
	for (int pass = 0; pass < 2; pass++) {
		if (pass)
			fwm_emit(o, "# HELP moatfw_dropped_bytes_total Bytes dropped by a counter "
			            "drop rule.\n# TYPE moatfw_dropped_bytes_total counter\n");
		for (size_t i = 0; i < nd; i++) {
			char ch[160], re[600];
			if (metrics_label_escape(d[i].chain, ch, sizeof(ch)) < 0 ||
			    metrics_label_escape(d[i].reason, re, sizeof(re)) < 0)
				continue;
			fwm_emit(o, "moatfw_dropped_%s_total{chain=\"%s\",reason=\"%s\"} %llu\n",
			         pass ? "bytes" : "packets", ch, re,
			         (unsigned long long)(pass ? d[i].bytes : d[i].packets));
		}
	}
}

int fwmetrics_render_table(const char *table, char *out, size_t cap)
{
	struct fwm_out o = {out, 0, cap, false};
	struct fwm_drop *d = calloc(FWM_DROPS_MAX, sizeof(*d));
	char chain[64] = "", set[64] = "";
	size_t nd = 0;
	long elems = -1; /* inside a set's elements list: the commas seen so far */
	if (!d || !cap)
		return free(d), MOAT_ESPACE;
	out[0] = '\0';
	fwm_emit(&o, "# HELP moatfw_set_elements Elements in each set of table inet moat.\n"
	             "# TYPE moatfw_set_elements gauge\n");
	for (const char *l = table; *l;) {
		const char *e = strchr(l, '\n');
		size_t n = e ? (size_t)(e - l) : strlen(l);
		char t[128];
		fwm_trim(l, n < sizeof(t) ? n : sizeof(t) - 1, t, sizeof(t));
		if (elems >= 0) {
			for (size_t i = 0; i < n; i++)
				elems += l[i] == ',';
			if (memchr(l, '}', n)) {
				fwm_emit(&o, "moatfw_set_elements{set=\"%s\"} %ld\n", set,
				         elems + 1);
				elems = -1;
				set[0] = '\0';
			}
		} else if (sscanf(t, "set %63[A-Za-z0-9_] {", set) == 1) {
			chain[0] = '\0';
		} else if (sscanf(t, "chain %63[A-Za-z0-9_] {", chain) == 1) {
			set[0] = '\0';
		} else if (*set && !strncmp(t, "elements = {", 12)) {
			elems = 0;
			l = strchr(l, '{') + 1;
			continue; /* the rest of the line is read as a list line */
		} else if (*set && !strcmp(t, "}")) {
			fwm_emit(&o, "moatfw_set_elements{set=\"%s\"} 0\n", set);
			set[0] = '\0';
		} else if (*chain) {
			fwm_drop_line(l, n, chain, d, &nd);
		}
		l = e ? e + 1 : l + n;
	}
	fwm_render_drops(&o, d, nd);
	free(d);
	return o.full ? MOAT_ESPACE : (int)o.len;
}

void fwmetrics_grants(size_t received, size_t ok, size_t denied, size_t failed)
{
	if (!mhd)
		return;
	__atomic_add_fetch(&fwm_grants[0], received, __ATOMIC_RELAXED);
	__atomic_add_fetch(&fwm_grants[1], ok, __ATOMIC_RELAXED);
	__atomic_add_fetch(&fwm_grants[2], denied, __ATOMIC_RELAXED);
	__atomic_add_fetch(&fwm_grants[3], failed, __ATOMIC_RELAXED);
}

struct fwm_ledger {
	uint64_t entries, bytes;
};

static int fwm_ledger_cb(const struct ledger_entry *e, void *ctx)
{
	struct fwm_ledger *s = ctx;
	s->entries++;
	s->bytes += LEDGER_KEYLEN + 9 + strlen(e->agent); /* the record format in ledger.h */
	return 0;
}

void fwmetrics_refresh(struct fwnft *nft, struct ledger *l)
{
	if (!mhd)
		return;
	char *list = malloc(FWM_LIST_MAX), *text = malloc(FWM_SNAP_MAX), err[256];
	struct fwm_ledger ls = {0, 0};
	int n = MOAT_ENOMEM;
	if (list && text &&
	    fwnft_query(nft, "list table inet moat", list, FWM_LIST_MAX, err, sizeof(err)) == 0)
		n = fwmetrics_render_table(list, text, FWM_SNAP_MAX);
	free(list);
	if (n >= 0 && ledger_iterate(l, (uint64_t)time(NULL), fwm_ledger_cb, &ls) >= 0)
		snprintf(text + n, FWM_SNAP_MAX - (size_t)n,
		         "# HELP moatfw_ledger_entries Live grants in the ledger.\n"
		         "# TYPE moatfw_ledger_entries gauge\nmoatfw_ledger_entries %llu\n"
		         "# HELP moatfw_ledger_bytes Bytes of the ledger's live records.\n"
		         "# TYPE moatfw_ledger_bytes gauge\nmoatfw_ledger_bytes %llu\n",
		         (unsigned long long)ls.entries, (unsigned long long)ls.bytes);
	if (n < 0) { /* a failed read keeps the last snapshot */
		free(text);
		return;
	}
	pthread_mutex_lock(&snap_lock);
	free(snap);
	snap = text;
	pthread_mutex_unlock(&snap_lock);
}

/* The whole scrape: the grant counters, the snapshot, build info. Caller frees. */
static char *fwm_scrape(size_t *len)
{
	static const char *const outcome[4] = {"received", "ok", "denied", "failed"};
	struct fwm_out o = {malloc(FWM_SNAP_MAX + 4096), 0, FWM_SNAP_MAX + 4096, false};
	if (!o.p)
		return NULL;
	fwm_emit(&o, "# HELP moatfw_grants_total Grants by outcome (received counts every one).\n"
	             "# TYPE moatfw_grants_total counter\n");
	for (int i = 0; i < 4; i++)
		fwm_emit(&o, "moatfw_grants_total{outcome=\"%s\"} %llu\n", outcome[i],
		         (unsigned long long)__atomic_load_n(&fwm_grants[i], __ATOMIC_RELAXED));
	pthread_mutex_lock(&snap_lock);
	if (snap)
		fwm_emit(&o, "%s", snap);
	pthread_mutex_unlock(&snap_lock);
	char v[128];
	if (metrics_label_escape(fwm_version, v, sizeof(v)) < 0)
		v[0] = '\0';
	fwm_emit(&o,
	         "# HELP moatfw_build_info moat-fw's version.\n# TYPE moatfw_build_info gauge\n"
	         "moatfw_build_info{version=\"%s\"} 1\n",
	         v);
	if (o.full)
		return free(o.p), NULL;
	*len = o.len;
	return o.p;
}

static enum MHD_Result fwm_request(void *cls, struct MHD_Connection *c, const char *url,
                                   const char *method, const char *version, const char *upload,
                                   size_t *upload_len, void **state)
{
	(void)cls, (void)version, (void)upload, (void)upload_len, (void)state;
	struct MHD_Response *r;
	unsigned code = MHD_HTTP_OK;
	if (strcmp(method, "GET") != 0 || strcmp(url, "/metrics") != 0) {
		static const char nf[] = "moat-fw: GET /metrics\n";
		code = MHD_HTTP_NOT_FOUND;
		r = MHD_create_response_from_buffer(sizeof(nf) - 1, (void *)nf,
		                                    MHD_RESPMEM_PERSISTENT);
	} else {
		size_t n = 0;
		char *text = fwm_scrape(&n);
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

int fwmetrics_bind(const char *addrport, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	if (netaddr_parse_addrport(addrport, 0, &ss) != 0 ||
	    ((struct sockaddr_in *)&ss)->sin_port == 0) { /* the port sits alike in both */
		snprintf(err, errlen, "--metrics wants ADDR:PORT");
		return MOAT_EINVAL;
	}
	socklen_t len =
	    ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	int one = 1, fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 16) != 0) {
		snprintf(err, errlen, "--metrics %s: cannot listen: %m", addrport);
		if (fd >= 0)
			close(fd);
		return MOAT_EIO;
	}
	listen_fd = fd;
	return 0;
}

int fwmetrics_serve(const char *version, char *err, size_t errlen)
{
	if (listen_fd < 0)
		return 0;
	fwm_version = version;
	mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, 0, NULL, NULL,
	                       fwm_request, NULL, MHD_OPTION_LISTEN_SOCKET, listen_fd,
	                       MHD_OPTION_CONNECTION_LIMIT, 8u, MHD_OPTION_CONNECTION_TIMEOUT, 5u,
	                       MHD_OPTION_END);
	if (!mhd) {
		snprintf(err, errlen, "--metrics: cannot start the HTTP server");
		return MOAT_EIO;
	}
	return 0;
}

void fwmetrics_stop(void)
{
	if (mhd)
		MHD_stop_daemon(mhd); /* closes the listening socket too */
	else if (listen_fd >= 0)
		close(listen_fd);
	mhd = NULL;
	listen_fd = -1;
	free(snap);
	snap = NULL;
}
