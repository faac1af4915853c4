/* explain.c owns what moatctl adds to moatd's explain reply: whether moat-fw holds a grant for
 * the name. moatd answers with its decision and the addresses its answer cache holds for the
 * name (the addresses it asked moat-fw to open when it answered); the grants themselves live in
 * moat-fw's ledger, read here through ledger.c's API as `moatctl grants` does. The reply gains
 * "grant": {"held":true|false|null, "addresses":[...], "remaining_s":N, "ports":[...]}. */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ctl.h"
#include "ledger.h"

#define GRANT_ADDRS 32
#define GRANT_PORTS 16

struct grant_look {
	const char *agent;
	uint8_t family[GRANT_ADDRS], addr[GRANT_ADDRS][16];
	bool held[GRANT_ADDRS];
	unsigned n;
	uint64_t remaining;
	char ports[GRANT_PORTS][16];
	unsigned nports;
	bool any_port;
};

/* The text of the string member key ("agent") of a flat JSON reply into out; false if absent. */
static bool member(const char *json, const char *key, char *out, size_t cap)
{
	char k[64];
	snprintf(k, sizeof(k), "\"%s\":\"", key);
	const char *p = strstr(json, k);
	if (!p)
		return false;
	p += strlen(k);
	size_t n = strcspn(p, "\"");
	if (n >= cap)
		return false;
	memcpy(out, p, n);
	out[n] = 0;
	return true;
}

/* The addresses of "addresses":[...] (moatd writes them as plain quoted IP addresses). */
static int addresses(const char *json, struct grant_look *g)
{
	const char *p = strstr(json, "\"addresses\":[");
	if (!p)
		return -1;
	for (p += 13; *p == '"' && g->n < GRANT_ADDRS;) {
		char a[64];
		size_t n = strcspn(p + 1, "\"");
		if (n >= sizeof(a))
			return -1;
		memcpy(a, p + 1, n);
		a[n] = 0;
		memset(g->addr[g->n], 0, 16);
		if (inet_pton(AF_INET, a, g->addr[g->n]) == 1)
			g->family[g->n++] = 4;
		else if (inet_pton(AF_INET6, a, g->addr[g->n]) == 1)
			g->family[g->n++] = 6;
		p += n + 2;
		if (*p == ',')
			p++;
	}
	return 0;
}

static int on_grant(const struct ledger_entry *e, void *ctx)
{
	struct grant_look *g = ctx;
	if (strcmp(e->agent, g->agent))
		return 0;
	for (unsigned i = 0; i < g->n; i++) {
		if (g->family[i] != e->key.family ||
		    memcmp(g->addr[i], e->key.dst, e->key.family == 4 ? 4 : 16))
			continue;
		g->held[i] = true;
		if (e->remaining > g->remaining)
			g->remaining = e->remaining;
		if (e->key.proto == 0)
			g->any_port = true;
		else if ((e->key.proto == 6 || e->key.proto == 17) && g->nports < GRANT_PORTS) {
			char t[16];
			snprintf(t, sizeof(t), "%s/%u", e->key.proto == 6 ? "tcp" : "udp",
			         e->key.port);
			bool seen = false;
			for (unsigned k = 0; k < g->nports && !seen; k++)
				seen = !strcmp(g->ports[k], t);
			if (!seen)
				snprintf(g->ports[g->nports++], sizeof(g->ports[0]), "%s", t);
		}
	}
	return 0;
}

/* The "grant" member for the reply into out. */
static void grant_text(const char *reply, const char *dir, char *out, size_t cap)
{
	struct grant_look g = {0};
	char agent[80], err[256];
	struct stat st;
	struct ledger *l = NULL;
	if (!member(reply, "agent", agent, sizeof(agent)) || addresses(reply, &g) < 0) {
		snprintf(out, cap, "null"); /* no firewall, or no agent */
		return;
	}
	g.agent = agent;
	if (!g.n) {
		snprintf(out, cap,
		         "{\"held\":false,\"why\":\"no answer for it in moatd's cache\"}");
		return;
	}
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) ||
	    ledger_open(dir, &l, err, sizeof(err)) < 0 ||
	    ledger_iterate(l, (uint64_t)time(NULL), on_grant, &g) < 0) {
		ledger_close(l);
		snprintf(
		    out, cap,
		    "{\"held\":null,\"why\":\"cannot read moat-fw's ledger in %s (--state DIR)\"}",
		    dir);
		return;
	}
	ledger_close(l);
	char held[GRANT_ADDRS * 48] = "";
	size_t h = 0;
	for (unsigned i = 0; i < g.n; i++) {
		char a[64];
		if (!g.held[i])
			continue;
		inet_ntop(g.family[i] == 4 ? AF_INET : AF_INET6, g.addr[i], a, sizeof(a));
		h += (size_t)snprintf(held + h, sizeof(held) - h, "%s\"%s\"", h ? "," : "", a);
	}
	size_t n = (size_t)snprintf(out, cap,
	                            "{\"held\":%s,\"addresses\":[%s],\"remaining_s\":%llu,"
	                            "\"ports\":",
	                            h ? "true" : "false", held, (unsigned long long)g.remaining);
	if (!h || g.any_port) {
		snprintf(out + n, cap - n, "%s}", h ? "\"any\"" : "null");
		return;
	}
	n += (size_t)snprintf(out + n, cap - n, "[");
	for (unsigned k = 0; k < g.nports && n < cap; k++)
		n += (size_t)snprintf(out + n, cap - n, "%s\"%s\"", k ? "," : "", g.ports[k]);
	snprintf(out + n, cap - n, "]}");
}

char *ctl_explain_grant(const char *reply, const char *state_dir)
{
	char grant[2048];
	grant_text(reply, state_dir, grant, sizeof(grant));
	size_t len = strlen(reply);
	while (len && (reply[len - 1] == '\n' || reply[len - 1] == '}'))
		len--;
	char *out = malloc(len + strlen(grant) + 16);
	if (out)
		sprintf(out, "%.*s,\"grant\":%s}\n", (int)len, reply, grant);
	return out;
}
