/* metrics.c owns moat-fw's metrics (see metrics.h): the grant counters, the snapshot of table
 * inet moat and the ledger, the socket --metrics binds, and the scrape's body, which the
 * endpoint moatd serves too (moat/metrics_http.h) answers with. The text is built with
 * moat/metrics_text.h; the table is read as nft's text listing and turned into metrics by the
 * pure fwmetrics_render_table. */
#include "metrics.h"

#include "ledger.h"
#include "moat/netaddr.h"
#include "moat/err.h"
#include "moat/metrics_http.h"
#include "moat/metrics_text.h"
#include "nft.h"

#include <netinet/in.h>
#include <pthread.h>
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

static struct metrics_http *http;
static int listen_fd = -1;
static const char *fwm_version;
static uint64_t fwm_grants[4]; /* received, ok, denied, failed; atomics */
static uint64_t fwm_tables[3]; /* changes by others, restores ok, restores failed; atomics */
static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER;
static char *snap;  /* rendered table and ledger metrics, under snap_lock */
static char *extra; /* the drop log's counters (fwmetrics_extra), under snap_lock */

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

static void fwm_render_drops(struct metrics_text *o, const struct fwm_drop *d, size_t nd)
{
	for (int pass = 0; pass < 2; pass++) {
		metrics_head(o,
		             pass ? "moatfw_dropped_bytes_total" : "moatfw_dropped_packets_total",
		             "counter",
		             pass ? "Bytes dropped by a counter drop rule."
		                  : "Packets dropped by a counter drop rule.");
		for (size_t i = 0; i < nd; i++) {
			char ch[160], re[600];
			if (metrics_label_escape(d[i].chain, ch, sizeof(ch)) < 0 ||
			    metrics_label_escape(d[i].reason, re, sizeof(re)) < 0)
				continue;
			metrics_emit(o,
			             "moatfw_dropped_%s_total{chain=\"%s\",reason=\"%s\"} %llu\n",
			             pass ? "bytes" : "packets", ch, re,
			             (unsigned long long)(pass ? d[i].bytes : d[i].packets));
		}
	}
}

int fwmetrics_render_table(const char *table, char *out, size_t cap)
{
	struct metrics_text o = metrics_text_on(out, cap);
	struct fwm_drop *d = calloc(FWM_DROPS_MAX, sizeof(*d));
	char chain[64] = "", set[64] = "";
	size_t nd = 0;
	long elems = -1; /* inside a set's elements list: the commas seen so far */
	if (!d || !cap)
		return free(d), MOAT_ESPACE;
	out[0] = '\0';
	metrics_head(&o, "moatfw_set_elements", "gauge",
	             "Elements in each set of table inet moat.");
	for (const char *l = table; *l;) {
		const char *e = strchr(l, '\n');
		size_t n = e ? (size_t)(e - l) : strlen(l);
		char t[128];
		fwm_trim(l, n < sizeof(t) ? n : sizeof(t) - 1, t, sizeof(t));
		if (elems >= 0) {
			for (size_t i = 0; i < n; i++)
				elems += l[i] == ',';
			if (memchr(l, '}', n)) {
				metrics_emit(&o, "moatfw_set_elements{set=\"%s\"} %ld\n", set,
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
			metrics_emit(&o, "moatfw_set_elements{set=\"%s\"} 0\n", set);
			set[0] = '\0';
		} else if (*chain) {
			fwm_drop_line(l, n, chain, d, &nd);
		}
		l = e ? e + 1 : l + n;
	}
	fwm_render_drops(&o, d, nd);
	free(d);
	return metrics_text_len(&o);
}

void fwmetrics_grants(size_t received, size_t ok, size_t denied, size_t failed)
{
	if (!http)
		return;
	__atomic_add_fetch(&fwm_grants[0], received, __ATOMIC_RELAXED);
	__atomic_add_fetch(&fwm_grants[1], ok, __ATOMIC_RELAXED);
	__atomic_add_fetch(&fwm_grants[2], denied, __ATOMIC_RELAXED);
	__atomic_add_fetch(&fwm_grants[3], failed, __ATOMIC_RELAXED);
}

void fwmetrics_table_change(void)
{
	__atomic_add_fetch(&fwm_tables[0], 1, __ATOMIC_RELAXED);
}

void fwmetrics_table_restore(int ok)
{
	__atomic_add_fetch(&fwm_tables[ok ? 1 : 2], 1, __ATOMIC_RELAXED);
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
	if (!http)
		return;
	char *list = malloc(FWM_LIST_MAX), *text = malloc(FWM_SNAP_MAX), err[256];
	struct fwm_ledger ls = {0, 0};
	int n = MOAT_ENOMEM;
	if (list && text &&
	    fwnft_query(nft, "list table inet moat", list, FWM_LIST_MAX, err, sizeof(err)) == 0) {
		/* The guard's chains and the bridge tables' (forward placement) have names of
		 * their own: appended, they are read as more chains of the same listing. */
		static const char *const more[] = {"list table inet moat_guard",
		                                   "list table bridge moat",
		                                   "list table bridge moat_guard"};
		for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++) {
			size_t l = strlen(list);
			if (fwnft_query(nft, more[i], list + l, FWM_LIST_MAX - l, err,
			                sizeof(err)) != 0)
				list[l] = '\0';
		}
		n = fwmetrics_render_table(list, text, FWM_SNAP_MAX);
	}
	free(list);
	if (n >= 0 && ledger_iterate(l, (uint64_t)time(NULL), fwm_ledger_cb, &ls) >= 0) {
		/* Cut short when it does not fit, like the rest of the snapshot's text. */
		struct metrics_text t = {text, (size_t)n, FWM_SNAP_MAX, false};
		metrics_scalar(&t, "moatfw_ledger_entries", "gauge", "Live grants in the ledger.",
		               ls.entries);
		metrics_scalar(&t, "moatfw_ledger_bytes", "gauge",
		               "Bytes of the ledger's live records.", ls.bytes);
	}
	if (n < 0) { /* a failed read keeps the last snapshot */
		free(text);
		return;
	}
	pthread_mutex_lock(&snap_lock);
	free(snap);
	snap = text;
	pthread_mutex_unlock(&snap_lock);
}

void fwmetrics_extra(const char *text)
{
	if (!http)
		return;
	char *copy = text ? strdup(text) : NULL;
	pthread_mutex_lock(&snap_lock);
	free(extra);
	extra = copy;
	pthread_mutex_unlock(&snap_lock);
}

/* The whole scrape (a metrics_http body): the grant counters, the snapshot, build info. */
static char *fwm_scrape(void *ctx, size_t *len)
{
	static const char *const outcome[4] = {"received", "ok", "denied", "failed"};
	struct metrics_text o = metrics_text_on(malloc(FWM_SNAP_MAX + 4096), FWM_SNAP_MAX + 4096);
	(void)ctx;
	if (!o.p)
		return NULL;
	metrics_head(&o, "moatfw_grants_total", "counter",
	             "Grants by outcome (received counts every one).");
	for (int i = 0; i < 4; i++)
		metrics_emit(&o, "moatfw_grants_total{outcome=\"%s\"} %llu\n", outcome[i],
		             (unsigned long long)__atomic_load_n(&fwm_grants[i], __ATOMIC_RELAXED));
	static const char *const tables[3][2] = {
	    {"moatfw_table_changes_total", "Changes of moat's tables by another process."},
	    {"moatfw_table_restores_total", "Tables restored after such a change."},
	    {"moatfw_table_restore_failures_total", "Restores the kernel refused (retried)."}};
	for (int i = 0; i < 3; i++)
		metrics_scalar(&o, tables[i][0], "counter", tables[i][1],
		               __atomic_load_n(&fwm_tables[i], __ATOMIC_RELAXED));
	pthread_mutex_lock(&snap_lock);
	if (snap)
		metrics_emit(&o, "%s", snap);
	if (extra)
		metrics_emit(&o, "%s", extra);
	pthread_mutex_unlock(&snap_lock);
	char v[128];
	if (metrics_label_escape(fwm_version, v, sizeof(v)) < 0)
		v[0] = '\0';
	metrics_head(&o, "moatfw_build_info", "gauge", "moat-fw's version.");
	metrics_emit(&o, "moatfw_build_info{version=\"%s\"} 1\n", v);
	if (metrics_text_len(&o) < 0)
		return free(o.p), NULL;
	*len = o.n;
	return o.p;
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
	struct metrics_http_opts o = {.program = "moat-fw", .fd = listen_fd, .body = fwm_scrape};
	char why[200];
	if (!(http = metrics_http_start(&o, why, sizeof(why)))) {
		snprintf(err, errlen, "--metrics: %s", why);
		return MOAT_EIO;
	}
	return 0;
}

void fwmetrics_stop(void)
{
	if (http)
		metrics_http_stop(http); /* closes the listening socket too */
	else if (listen_fd >= 0)
		close(listen_fd);
	http = NULL;
	listen_fd = -1;
	free(snap);
	snap = NULL;
	free(extra);
	extra = NULL;
}
