/* report.c owns what `moatctl report` knows: moatd's query log (format v2, moat/log.h) and
 * moat-fw's drop and connection log (tools/fw/droplog.h) read line by line with jansson (the
 * lines hold names a hostile client chose, escaped: a real JSON parser reads them back exactly),
 * aggregated per agent into the names asked for (decisions, count, first and last seen, the
 * addresses released) and the connections seen (destination, protocol, port, outcome), then
 * each connection attributed to the names whose answers held its destination (the ports of the
 * recommendation) and each agent's recommended allowlist built (moat/recommend.h). */
#include "report.h"

#include <arpa/inet.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "moat/err.h"

/* --- a string-keyed index into the arrays (open addressing, FNV-1a) ------------------------ */

struct rep_index {
	char **key; /* owned */
	size_t *val;
	size_t cap, n;
};

static uint64_t fnv(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

static struct rep_index *index_grow(struct rep_index *x)
{
	struct rep_index n = {0};
	n.cap = x && x->cap ? x->cap * 2 : 1024;
	if (!(n.key = calloc(n.cap, sizeof(char *))) || !(n.val = calloc(n.cap, sizeof(size_t)))) {
		free(n.key);
		return NULL;
	}
	for (size_t i = 0; x && i < x->cap; i++) {
		if (!x->key[i])
			continue;
		size_t j = fnv(x->key[i]) & (n.cap - 1);
		while (n.key[j])
			j = (j + 1) & (n.cap - 1);
		n.key[j] = x->key[i];
		n.val[j] = x->val[i];
	}
	n.n = x ? x->n : 0;
	struct rep_index *out = x ? x : malloc(sizeof(*out));
	if (!out) {
		free(n.key);
		free(n.val);
		return NULL;
	}
	if (x) {
		free(x->key);
		free(x->val);
	}
	*out = n;
	return out;
}

/* The value of key, or SIZE_MAX; with add, key is added with val when absent (SIZE_MAX on
 * allocation failure too). */
static size_t index_get(struct rep_index **xp, const char *key, bool add, size_t val)
{
	struct rep_index *x = *xp;
	if (add && (!x || (x->n + 1) * 2 > x->cap) && !(x = *xp = index_grow(x)))
		return SIZE_MAX;
	if (!x)
		return SIZE_MAX;
	size_t j = fnv(key) & (x->cap - 1);
	while (x->key[j] && strcmp(x->key[j], key))
		j = (j + 1) & (x->cap - 1);
	if (x->key[j])
		return x->val[j];
	if (!add || !(x->key[j] = strdup(key)))
		return SIZE_MAX;
	x->val[j] = val;
	x->n++;
	return val;
}

static void index_free(struct rep_index *x)
{
	for (size_t i = 0; x && i < x->cap; i++)
		free(x->key[i]);
	if (x) {
		free(x->key);
		free(x->val);
	}
	free(x);
}

/* --- helpers ------------------------------------------------------------------------------- */

static const char *str_of(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

static bool addr_parse(const char *t, struct rep_addr *a)
{
	memset(a, 0, sizeof(*a));
	if (t && inet_pton(AF_INET, t, a->a) == 1)
		a->family = 4;
	else if (t && inet_pton(AF_INET6, t, a->a) == 1)
		a->family = 6;
	return a->family != 0;
}

static bool addr_eq(const struct rep_addr *x, const struct rep_addr *y)
{
	return x->family == y->family && !memcmp(x->a, y->a, 16);
}

static void seen_at(char *first, char *last, const char *ts)
{
	if (!*first || strcmp(ts, first) < 0)
		snprintf(first, REP_TS, "%s", ts);
	if (strcmp(ts, last) > 0)
		snprintf(last, REP_TS, "%s", ts);
}

const char *report_proto(uint8_t p, char *buf, size_t cap)
{
	if (p == 6 || p == 17)
		return p == 6 ? "tcp" : "udp";
	snprintf(buf, cap, "%s", p == 1 ? "icmp" : p == 58 ? "icmpv6" : "?");
	if (p != 1 && p != 58)
		snprintf(buf, cap, "%u", p);
	return buf;
}

static size_t agent_index(struct report *r, const char *name)
{
	for (size_t i = 0; i < r->nagents; i++)
		if (!strcmp(r->agents[i].name, name))
			return i;
	struct rep_agent *na = realloc(r->agents, (r->nagents + 1) * sizeof(*na));
	if (!na)
		return SIZE_MAX;
	r->agents = na;
	memset(&na[r->nagents], 0, sizeof(*na));
	snprintf(na[r->nagents].name, sizeof(na->name), "%s", name);
	return r->nagents++;
}

/* --- the query log --------------------------------------------------------------------------- */

static int grow(void **v, size_t *cap, size_t n, size_t size)
{
	if (n < *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 256;
	void *nv = realloc(*v, nc * size);
	if (!nv)
		return MOAT_ENOMEM;
	*v = nv;
	*cap = nc;
	return 0;
}

static void name_add_answer(struct rep_name *n, json_t *answer)
{
	size_t i;
	json_t *v;
	json_array_foreach(answer, i, v)
	{
		struct rep_addr a;
		if (!addr_parse(json_string_value(v), &a))
			continue;
		bool have = false;
		for (unsigned k = 0; k < n->naddr && !have; k++)
			have = addr_eq(&n->addr[k], &a);
		if (!have && n->naddr < REP_ADDRS)
			n->addr[n->naddr++] = a;
	}
}

static int query_line(struct report *r, json_t *o)
{
	const char *ts = str_of(o, "ts"), *agent = str_of(o, "agent"), *q = str_of(o, "qname"),
	           *dec = str_of(o, "decision"), *client = str_of(o, "client");
	if (!ts || !agent || !q || !dec)
		return 0; /* refused clients, malformed queries: no agent's name */
	if ((*r->since && strcmp(ts, r->since) < 0) || (r->only && strcmp(agent, r->only)))
		return 0;
	size_t ai = agent_index(r, agent);
	if (ai == SIZE_MAX)
		return MOAT_ENOMEM;
	r->agents[ai].queries++;
	seen_at(r->first, r->last, ts);
	char key[REP_AGENT + NAME_MAXTEXT + 2];
	snprintf(key, sizeof(key), "%s %s", agent, q);
	size_t i = index_get(&r->byname, key, true, r->nnames);
	if (i == SIZE_MAX)
		return MOAT_ENOMEM;
	if (i == r->nnames) {
		if (grow((void **)&r->names, &r->cap_names, r->nnames, sizeof(*r->names)))
			return MOAT_ENOMEM;
		struct rep_name *n = &r->names[r->nnames++];
		memset(n, 0, sizeof(*n));
		n->agent = ai;
		snprintf(n->name, sizeof(n->name), "%s", q);
	}
	struct rep_name *n = &r->names[i];
	n->count++;
	seen_at(n->first, n->last, ts);
	bool have = false;
	for (unsigned k = 0; k < n->ndec && !have; k++)
		have = !strcmp(n->dec[k], dec);
	if (!have && n->ndec < REP_DECS)
		snprintf(n->dec[n->ndec++], sizeof(n->dec[0]), "%s", dec);
	json_t *ans = json_object_get(o, "answer");
	if (json_is_array(ans))
		name_add_answer(n, ans);
	/* The sandbox address moat-fw will log its connections from. */
	if (client && index_get(&r->byclient, client, true, ai) == SIZE_MAX)
		return MOAT_ENOMEM;
	return 0;
}

/* Each JSON line of path to fn; lines that are not JSON objects are counted, not fatal (a line
 * cut by a crash). */
static int each_line(struct report *r, const char *path, int (*fn)(struct report *, json_t *))
{
	FILE *f = fopen(path, "re");
	if (!f) {
		fprintf(stderr, "moatctl: report: %s: %m\n", path);
		return MOAT_EIO;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int rc = 0;
	while (!rc && (n = getline(&line, &cap, f)) > 0) {
		json_error_t e;
		json_t *o = json_loadb(line, (size_t)n, JSON_REJECT_DUPLICATES, &e);
		r->lines++;
		if (json_is_object(o))
			rc = fn(r, o);
		else
			r->bad_lines++;
		json_decref(o);
	}
	free(line);
	fclose(f);
	if (rc)
		fprintf(stderr, "moatctl: report: %s: %s\n", path, moat_strerror(rc));
	return rc;
}

int report_read_queries(struct report *r, const char *path)
{
	return each_line(r, path, query_line);
}

/* --- moat-fw's log ----------------------------------------------------------------------- */

static int fw_line(struct report *r, json_t *o)
{
	const char *ts = str_of(o, "ts"), *ev = str_of(o, "event"), *src = str_of(o, "src");
	if (!ts || !ev || (*r->since && strcmp(ts, r->since) < 0))
		return 0;
	if (!strcmp(ev, "suppressed")) {
		json_t *c = json_object_get(o, "count");
		r->suppressed += json_is_integer(c) ? (uint64_t)json_integer_value(c) : 0;
		return 0;
	}
	struct rep_addr dst;
	json_t *pr = json_object_get(o, "proto_num"), *po = json_object_get(o, "port");
	if ((strcmp(ev, "drop") && strcmp(ev, "connect")) || !src ||
	    !addr_parse(str_of(o, "dst"), &dst) || !json_is_integer(pr))
		return 0;
	const char *agent = str_of(o, "agent");
	size_t ai = agent ? agent_index(r, agent) : index_get(&r->byclient, src, false, 0);
	if (r->only && (ai == SIZE_MAX || strcmp(r->agents[ai].name, r->only)))
		return 0;
	const char *outcome = !strcmp(ev, "connect") ? "connected" : str_of(o, "reason");
	uint8_t proto = (uint8_t)json_integer_value(pr);
	uint16_t port = json_is_integer(po) ? (uint16_t)json_integer_value(po) : 0;
	char key[256], a[64];
	inet_ntop(dst.family == 4 ? AF_INET : AF_INET6, dst.a, a, sizeof(a));
	snprintf(key, sizeof(key), "%zu %s %s %u %u %s", ai, src, a, proto, port,
	         outcome ? outcome : "?");
	size_t i = index_get(&r->byname, key, true, r->nconns);
	if (i == SIZE_MAX)
		return MOAT_ENOMEM;
	if (i == r->nconns) {
		if (grow((void **)&r->conns, &r->cap_conns, r->nconns, sizeof(*r->conns)))
			return MOAT_ENOMEM;
		struct rep_conn *c = &r->conns[r->nconns++];
		memset(c, 0, sizeof(*c));
		c->agent = ai;
		snprintf(c->src, sizeof(c->src), "%s", src);
		c->dst = dst;
		c->proto = proto;
		c->port = port;
		snprintf(c->outcome, sizeof(c->outcome), "%s", outcome ? outcome : "?");
	}
	r->conns[i].count++;
	seen_at(r->conns[i].first, r->conns[i].last, ts);
	return 0;
}

int report_read_fw(struct report *r, const char *path)
{
	return each_line(r, path, fw_line);
}

/* --- attribution and the recommendation ---------------------------------------------------- */

/* The decisions that say the name can be on an allowlist: allowed, audited, or denied only
 * for want of a rule. High-risk names mark their domain (never widened); the rest (literals,
 * internal addresses, other classes) stay out. */
static int candidate(const struct rep_name *n, bool *highrisk)
{
	int take = 0;
	*highrisk = false;
	for (unsigned k = 0; k < n->ndec; k++) {
		const char *d = n->dec[k];
		if (!strcmp(d, "deny-high-risk"))
			*highrisk = true;
		else if (!strncmp(d, "allow", 5) || !strcmp(d, "would-deny") ||
		         !strcmp(d, "deny-not-allowed"))
			take = 1;
		else if (!strcmp(d, "deny-embedded-address") || !strcmp(d, "deny-ip-literal"))
			return 0;
	}
	return take || *highrisk;
}

/* One port of a connection onto a name. */
static void port_onto(struct rep_name *n, const struct rep_conn *x)
{
	if (x->proto != 6 && x->proto != 17)
		return; /* ICMP follows any grant: no port to list */
	struct policy_ports one = {1, {{x->proto, x->port}}};
	if (!x->port || policy_ports_union(&n->ports, &one) < 0)
		n->any_port = true;
}

/* Each connection's port onto the names of its agent whose answers held its destination,
 * through an index of (agent, address) -> the names that had it. */
static int attribute(struct report *r)
{
	struct rep_index *byaddr = NULL;
	size_t total = 0, *next, *head = NULL;
	for (size_t i = 0; i < r->nnames; i++)
		total += r->names[i].naddr;
	next = malloc((total ? total : 1) * 2 * sizeof(size_t));
	if (!next)
		return MOAT_ENOMEM;
	size_t *owner = next + (total ? total : 1), k = 0, nheads = 0;
	for (size_t i = 0; i < r->nnames; i++)
		for (unsigned j = 0; j < r->names[i].naddr; j++, k++) {
			char key[128], a[64];
			const struct rep_addr *x = &r->names[i].addr[j];
			inet_ntop(x->family == 4 ? AF_INET : AF_INET6, x->a, a, sizeof(a));
			snprintf(key, sizeof(key), "%zu %s", r->names[i].agent, a);
			size_t h = index_get(&byaddr, key, true, nheads);
			if (h == SIZE_MAX)
				goto oom;
			if (h == nheads) {
				size_t *nh = realloc(head, (nheads + 1) * sizeof(*nh));
				if (!nh)
					goto oom;
				head = nh;
				head[nheads++] = SIZE_MAX;
			}
			owner[k] = i;
			next[k] = head[h];
			head[h] = k;
		}
	for (size_t c = 0; c < r->nconns; c++) {
		struct rep_conn *x = &r->conns[c];
		char key[128], a[64];
		inet_ntop(x->dst.family == 4 ? AF_INET : AF_INET6, x->dst.a, a, sizeof(a));
		snprintf(key, sizeof(key), "%zu %s", x->agent, a);
		size_t h = x->agent == SIZE_MAX ? SIZE_MAX : index_get(&byaddr, key, false, 0);
		for (size_t e = h == SIZE_MAX ? SIZE_MAX : head[h]; e != SIZE_MAX; e = next[e]) {
			x->nnames++;
			port_onto(&r->names[owner[e]], x);
		}
	}
	index_free(byaddr);
	free(head);
	free(next);
	return 0;
oom:
	index_free(byaddr);
	free(head);
	free(next);
	return MOAT_ENOMEM;
}

int report_finish(struct report *r, const struct policy_set *highrisk, unsigned wildcard_min)
{
	if (attribute(r))
		return MOAT_ENOMEM;
	struct recommend_name *v = calloc(r->nnames ? r->nnames : 1, sizeof(*v));
	if (!v)
		return MOAT_ENOMEM;
	for (size_t a = 0; a < r->nagents; a++) {
		size_t n = 0;
		for (size_t i = 0; i < r->nnames; i++) {
			bool hr;
			if (r->names[i].agent != a || !candidate(&r->names[i], &hr))
				continue;
			if (name_from_text(r->names[i].name, strlen(r->names[i].name), v[n].lname) <
			    1)
				continue;
			v[n].ports = r->names[i].ports;
			v[n].any_port = r->names[i].any_port;
			v[n].highrisk = hr;
			n++;
		}
		int rc = recommend_build(v, n, highrisk, wildcard_min, &r->agents[a].rec);
		if (rc) {
			free(v);
			return rc;
		}
		r->agents[a].rec_done = true;
	}
	free(v);
	return 0;
}

void report_free(struct report *r)
{
	for (size_t a = 0; a < r->nagents; a++)
		if (r->agents[a].rec_done)
			recommend_free(&r->agents[a].rec);
	free(r->agents);
	free(r->names);
	free(r->conns);
	index_free(r->byname);
	index_free(r->byclient);
	memset(r, 0, sizeof(*r));
}

int report_since(const char *t, char out[REP_TS])
{
	char *end;
	unsigned long v = strtoul(t, &end, 10);
	static const struct {
		char unit;
		unsigned long s;
	} units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
	for (size_t i = 0; end != t && i < 4; i++)
		if (end[0] == units[i].unit && !end[1]) {
			time_t at = time(NULL) - (time_t)(v * units[i].s);
			struct tm tm;
			gmtime_r(&at, &tm);
			strftime(out, REP_TS, "%Y-%m-%dT%H:%M:%S", &tm);
			return 0;
		}
	struct tm tm = {0};
	const char *rest = strptime(t, "%Y-%m-%d", &tm);
	if (rest && *rest == 'T')
		rest = strptime(rest + 1, "%H:%M:%S", &tm);
	if (!rest || (*rest && strcmp(rest, "Z")))
		return MOAT_EINVAL;
	strftime(out, REP_TS, "%Y-%m-%dT%H:%M:%S", &tm);
	return 0;
}
