/* grants.c owns `moatctl grants`: moat-fw's grant ledger read through ledger.c's own API
 * (ledger_iterate hands over decoded records; the byte format stays in ledger.c), printed as
 * JSON, one object per grant. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ctl.h"
#include "moat/bytes.h"
#include "ledger.h"
#include "moat/err.h"

struct grants_out {
	const char *agent;
	char *buf;
	size_t n, cap;
	unsigned count;
};

static void addr_text(uint8_t family, const uint8_t *a, char *out, size_t cap)
{
	if (!inet_ntop(family == 4 ? AF_INET : AF_INET6, a, out, (socklen_t)cap))
		snprintf(out, cap, "?");
}

static int on_entry(const struct ledger_entry *e, void *ctx)
{
	struct grants_out *g = ctx;
	static const uint8_t zero[16];
	if (g->agent && strcmp(g->agent, e->agent) != 0)
		return 0;
	char src[64], dst[64];
	addr_text(e->key.family, e->key.dst, dst, sizeof(dst));
	bool has_src = memcmp(e->key.src, zero, 16) != 0;
	if (has_src)
		addr_text(e->key.family, e->key.src, src, sizeof(src));
	/* Room for one record (512 bytes at most). */
	if (grow_one(&g->buf, &g->cap, g->n + 511, 1, 4096) < 0)
		return -1;
	/* Agent names are [A-Za-z0-9_.-] (moat-fw checks them), so need no escaping. */
	g->n += (size_t)snprintf(g->buf + g->n, g->cap - g->n,
	                         "%s{\"agent\":\"%s\",\"family\":%u,\"sandbox\":%s%s%s,"
	                         "\"destination\":\"%s\",\"expires\":%llu,\"remaining_s\":%llu",
	                         g->count ? "," : "", e->agent, e->key.family, has_src ? "\"" : "",
	                         has_src ? src : "null", has_src ? "\"" : "", dst,
	                         (unsigned long long)e->expiry, (unsigned long long)e->remaining);
#if defined(LEDGER_VERSION) && LEDGER_VERSION >= 2
	/* Ledger version 2 binds a grant to a protocol and port (0: every port). */
	g->n += (size_t)snprintf(g->buf + g->n, g->cap - g->n, ",\"proto\":%u,\"port\":%u",
	                         e->key.proto, e->key.port);
#endif
	g->n += (size_t)snprintf(g->buf + g->n, g->cap - g->n, "}");
	g->count++;
	return 0;
}

int ctl_grants(const char *dir, const char *agent, bool raw)
{
	struct stat st;
	char err[256];
	struct ledger *l = NULL;
	/* ledger_open would create a missing directory: a typo must not leave one behind. */
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		fprintf(stderr, "moatctl: no ledger at %s\n", dir);
		return 1;
	}
	/* A damaged page could crash this reader: checked in a child first (moat-fw moves a
	 * damaged ledger aside when it starts). */
	if (ledger_check(dir, err, sizeof(err)) == MOAT_EFORMAT) {
		fprintf(stderr,
		        "moatctl: the ledger at %s is damaged (%s); moat-fw moves it aside "
		        "when it starts\n",
		        dir, err);
		return 1;
	}
	if (ledger_open(dir, &l, err, sizeof(err)) < 0) {
		fprintf(stderr, "moatctl: %s\n", err);
		return 1;
	}
	struct grants_out g = {agent, malloc(4096), 0, 4096, 0};
	if (!g.buf) {
		ledger_close(l);
		return 1;
	}
	g.n =
	    (size_t)snprintf(g.buf, g.cap, "{\"v\":1,\"ok\":true,\"cmd\":\"grants\",\"grants\":[");
	int rc = ledger_iterate(l, (uint64_t)time(NULL), on_entry, &g);
	ledger_close(l);
	if (rc < 0) {
		fprintf(stderr, "moatctl: cannot read the ledger in %s\n", dir);
		free(g.buf);
		return 1;
	}
	if (g.cap - g.n < 64) {
		char *nb = realloc(g.buf, g.cap + 64);
		if (!nb) {
			free(g.buf);
			return 1;
		}
		g.buf = nb;
		g.cap += 64;
	}
	snprintf(g.buf + g.n, g.cap - g.n, "],\"count\":%u}", g.count);
	ctl_print_json(g.buf, raw);
	free(g.buf);
	return 0;
}
