/* control.c owns moatd's control socket (`control: PATH`): a Unix stream socket, mode 0660 with
 * the group `control_group:`, served on the main thread's loop (worker 0). Requests and replies
 * follow moat/ctlproto.h; this file runs the commands. explain asks the same pure policy_decide
 * the query path uses, on the running snapshot, then the qtype and label budget checks without
 * billing anything (serve/exfil.h); stats sums every worker's counters (and the budgets); flush is
 * posted to every worker (each empties its own cache share on its own thread) and answered
 * once the last one is done; reload calls main.c's reload, whose error text is the reply.
 * agent add/del are staged by control_agents.c and committed once per read of a connection:
 * their replies wait here, in order, until the commit says whether they took effect. An agent
 * add's pattern lines follow its request line; they are gathered here first.
 * The socket is bound before privileges drop; the filter then allows accept4/read/write on it. */
#include <arpa/inet.h>
#include <grp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "moat/cache.h"
#include "moat/ctlproto.h"
#include "moat/err.h"
#include "moat/log.h"
#include "moat/metrics.h"
#include "moat/policy_audit.h"
#include "moat/wire.h"
#include "ops/control.h"
#include "ops/control_agents.h"
#include "ops/control_ask.h"
#include "serve/ask.h"
#include "serve/fetch.h"
#include "serve/fwchan.h"
#include "serve/exfil.h"
#include "serve/metrics_workers.h"
#include "serve/worker.h"

#define REPLY_MAX (512u << 10)
/* Connections served at once. One past it is not accepted (libuv holds it and stops taking
 * more; the kernel's backlog keeps the rest) until one of them closes: a burst of clients (20
 * moat runs ending together, each with its agent del) waits its turn instead of being cut off. */
#define CONNS_MAX 16
#define AGENT_BODY_MAX (64u << 20) /* bytes of pattern lines one agent add may send */

/* A reply held until the commit of its agent command: body on success, or err. */
struct ctl_held {
	enum ctl_cmd cmd;
	char *body; /* owned */
	char *err;  /* owned */
};

/* An agent add whose pattern lines are still coming. */
struct ctl_addbody {
	struct agent_spec spec;
	bool force; /* the request's force: a range may overlap a config agent's */
	size_t want, bytes;
	char *err; /* owned: the first bad line, reported when the last one is in */
};

struct ctl_conn {
	uv_pipe_t pipe;
	struct dlist link;
	size_t len;
	bool overlong;           /* skipping the rest of a line that was too long */
	bool busy;               /* a flush is out; reading resumes after its reply */
	bool watching;           /* `watch`: ask-mode events are streamed to it */
	struct ctl_addbody *add; /* owned: an agent add gathering its lines, or NULL */
	struct ctl_held *held;   /* owned: replies waiting for the commit */
	size_t nheld;
	char buf[CTLPROTO_MAXLINE + 2];
};

struct ctl_write {
	uv_write_t req;
	char *text; /* owned */
};

static struct control_ops ops;
static uv_async_t watch_wake; /* ask.c queued events for the watchers */
static uv_pipe_t server;
static bool started;
static struct dlist conns;
static unsigned nconns;
static bool accept_waiting; /* a connection past CONNS_MAX, not accepted yet */

#define EXPLAIN_ADDRS 32 /* addresses explain lists from the caches */

/* The one round over every worker in flight: a flush (each worker empties its cache share) or
 * an explain's lookup (each worker reads its share for the name's addresses). One at a time:
 * worker_post_call holds one call per worker. */
static struct {
	unsigned pending; /* workers still to answer (atomic) */
	uint64_t removed; /* flush: entries dropped (atomic) */
	bool all;
	uint8_t lname[NAME_MAXWIRE];
	struct ctl_conn *conn; /* NULL once the asker went away */
	uv_async_t done;
	bool active;
	enum ctl_cmd cmd; /* CTL_FLUSH or CTL_EXPLAIN */
	/* explain: the decision's reply so far, the agent's upstream set, the addresses found */
	char *body; /* owned */
	const struct upstream_set *set;
	struct policy *policy; /* a reference: set lives in it */
	pthread_mutex_t lock;  /* over the addresses */
	uint8_t addr[EXPLAIN_ADDRS][16];
	uint8_t alen[EXPLAIN_ADDRS];
	unsigned naddr;
} fl = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void addbody_free(struct ctl_addbody *b)
{
	if (!b)
		return;
	agent_spec_clear(&b->spec);
	free(b->err);
	free(b);
}

static void conn_accept(void);

static void on_closed(uv_handle_t *h)
{
	struct ctl_conn *c = h->data;
	addbody_free(c->add);
	for (size_t i = 0; i < c->nheld; i++) {
		free(c->held[i].body);
		free(c->held[i].err);
	}
	free(c->held);
	free(c);
	if (accept_waiting && started && nconns < CONNS_MAX)
		conn_accept();
}

static void conn_close(struct ctl_conn *c)
{
	if (fl.conn == c)
		fl.conn = NULL;
	dlist_del(&c->link);
	nconns--;
	uv_close((uv_handle_t *)&c->pipe, on_closed);
}

static void on_written(uv_write_t *w, int status)
{
	(void)status;
	struct ctl_write *cw = (struct ctl_write *)w;
	free(cw->text);
	free(cw);
}

/* Send text (owned, handed over) as one reply. */
static void reply(struct ctl_conn *c, char *text, size_t len)
{
	struct ctl_write *w = malloc(sizeof(*w));
	if (!w) {
		free(text);
		conn_close(c);
		return;
	}
	w->text = text;
	uv_buf_t b = uv_buf_init(text, (unsigned)len);
	if (uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, on_written) < 0) {
		free(text);
		free(w);
	}
}

/* An error reply, naming the command when it is known (cmd < 0: not read). */
static void reply_error_cmd(struct ctl_conn *c, int cmd, const char *msg)
{
	char *t = malloc(1024);
	int n = t ? ctlproto_error_cmd(cmd, msg, t, 1024) : -1;
	if (n < 0) {
		free(t);
		conn_close(c);
		return;
	}
	reply(c, t, (size_t)n);
}

static void reply_error(struct ctl_conn *c, const char *msg)
{
	reply_error_cmd(c, -1, msg);
}

/* A success reply: {"v":1,"ok":true,"cmd":CMD, body}\n, body a list of members or "". */
static void reply_ok(struct ctl_conn *c, enum ctl_cmd cmd, const char *body)
{
	size_t len = strlen(body) + 64;
	char *t = malloc(len);
	if (!t) {
		conn_close(c);
		return;
	}
	int n = snprintf(t, len, "{\"v\":%d,\"ok\":true,\"cmd\":\"%s\"%s%s}\n", CTLPROTO_VERSION,
	                 ctlproto_cmd_str(cmd), *body ? "," : "", body);
	reply(c, t, (size_t)n);
}

/* The firewall link as worker 0 (this thread) sees it: each worker has its own channel, and
 * they fail and reconnect alike. */
static void status_firewall(char *out, size_t cap)
{
	char why[160], whyq[400], pathq[600];
	if (!ops.ws[0].fw) {
		snprintf(out, cap, "null");
		return;
	}
	bool up = fwchan_state(ops.ws[0].fw, why, sizeof(why));
	log_json_quote(ops.ws[0].cfg->fw_socket, pathq, sizeof(pathq));
	log_json_quote(why, whyq, sizeof(whyq));
	snprintf(out, cap, "{\"socket\":%s,\"connected\":%s,\"last_error\":%s}", pathq,
	         up ? "true" : "false", *why ? whyq : "null");
}

static void cmd_status(struct ctl_conn *c)
{
	char body[8192], cfgq[600], fw[1200], rerr[1100], asks[2048];
	const struct policy *p = ops.ws[0].policy;
	const char *re = ops.reload_error ? ops.reload_error() : "";
	log_json_quote(ops.config_path, cfgq, sizeof(cfgq));
	log_json_quote(re, rerr, sizeof(rerr));
	status_firewall(fw, sizeof(fw));
	if (ask_status_json(asks, sizeof(asks)) < 0)
		snprintf(asks, sizeof(asks), "null");
	snprintf(body, sizeof(body),
	         "\"version\":\"%s\",\"pid\":%ld,\"uptime_s\":%llu,\"workers\":%u,\"agents\":%zu,"
	         "\"patterns\":%zu,\"config\":%s,\"last_reload\":%llu,\"last_reload_ok\":%s,"
	         "\"last_reload_error\":%s,\"firewall\":%s,\"asks\":%s,\"control_protocol\":%d",
	         ops.version, (long)getpid(),
	         (unsigned long long)((uint64_t)time(NULL) - metrics_global.start_unix), ops.n,
	         p->nagents, policy_allow_count(p), cfgq,
	         (unsigned long long)metrics_get(&metrics_global.last_reload_unix),
	         metrics_get(&metrics_global.last_reload_ok) ? "true" : "false",
	         *re ? rerr : "null", fw, asks, CTLPROTO_VERSION);
	reply_ok(c, CTL_STATUS, body);
}

static void cmd_stats(struct ctl_conn *c)
{
	struct metrics_worker *sum = malloc(sizeof(*sum));
	char *body = malloc(REPLY_MAX);
	if (sum && body) {
		metrics_collect(ops.ws, ops.n, sum);
		if (metrics_render_json(sum, ops.version, body, REPLY_MAX) >= 0)
			reply_ok(c, CTL_STATS, body);
		else
			reply_error(c, "stats too large");
	} else {
		reply_error(c, "out of memory");
	}
	free(sum);
	free(body);
}

static void cmd_reload(struct ctl_conn *c)
{
	char err[512];
	if (ops.reload(err, sizeof(err)) < 0) {
		char msg[600];
		snprintf(msg, sizeof(msg), "reload failed, running policy kept: %s", err);
		reply_error(c, msg);
		return;
	}
	char body[128];
	snprintf(body, sizeof(body), "\"agents\":%zu,\"patterns\":%zu", ops.ws[0].policy->nagents,
	         policy_allow_count(ops.ws[0].policy));
	reply_ok(c, CTL_RELOAD, body);
}

/* "10.0.0.0/24" for a range stored IPv4-mapped. */
static void cidr_text(const struct cidr *r, char *out, size_t cap)
{
	static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	struct sockaddr_storage ss;
	memset(&ss, 0, sizeof(ss));
	unsigned bits = r->bits;
	if (!memcmp(r->addr, mapped, 12) && bits >= 96) {
		struct sockaddr_in *s = (struct sockaddr_in *)&ss;
		s->sin_family = AF_INET;
		memcpy(&s->sin_addr, r->addr + 12, 4);
		bits -= 96;
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;
		s->sin6_family = AF_INET6;
		memcpy(&s->sin6_addr, r->addr, 16);
	}
	char a[64];
	snprintf(out, cap, "%s/%u", log_format_addr((struct sockaddr *)&ss, false, a, sizeof(a)),
	         bits);
}

static void cmd_agents(struct ctl_conn *c)
{
	static const char *const forms[] = {"nxdomain", "refused", "sinkhole"};
	const struct policy *p = ops.ws[0].policy;
	char *body = malloc(REPLY_MAX);
	if (!body) {
		reply_error(c, "out of memory");
		return;
	}
	size_t n = (size_t)snprintf(body, REPLY_MAX, "\"agents\":[");
	for (size_t i = 0; i < p->nagents && n < REPLY_MAX - 512; i++) {
		const struct policy_agent *a = &p->agents[i];
		n += (size_t)snprintf(body + n, REPLY_MAX - n,
		                      "%s{\"name\":\"%s\",\"deny\":\"%s\",\"allow_patterns\":%zu,"
		                      "\"strict_chain\":%s,\"allow_private\":%s,\"clients\":[",
		                      i ? "," : "", a->cfg.name, forms[a->cfg.deny],
		                      policy_set_count(a->allow),
		                      a->cfg.strict_chain ? "true" : "false",
		                      a->cfg.allow_private ? "true" : "false");
		for (size_t k = 0; k < a->nclients && n < REPLY_MAX - 256; k++) {
			char r[80];
			cidr_text(&a->clients[k], r, sizeof(r));
			n += (size_t)snprintf(body + n, REPLY_MAX - n, "%s\"%s\"", k ? "," : "", r);
		}
		n += (size_t)snprintf(body + n, REPLY_MAX - n, "],\"runtime\":%s,\"mode\":\"%s\"}",
		                      a->runtime ? "true" : "false",
		                      a->cfg.mode == AGENT_AUDIT ? "audit" : "enforce");
	}
	snprintf(body + n, REPLY_MAX - n, "]");
	reply_ok(c, CTL_AGENTS, body);
	free(body);
}

static void explain_round(struct ctl_conn *c, const uint8_t *lname, const struct policy_agent *a,
                          const char *body);

/* The label budget of an explained name as JSON: null when none applies (an exact rule, a zone
 * without a budget, a denied name), else the zone, its limit and window, what the window holds,
 * what this name would cost (0: sent before) and whether it would pass (moat/budget.h). */
static void explain_budget(const struct policy_decision *d, const struct exfil_explain *ex,
                           char *out, size_t cap)
{
	char zone[NAME_MAXTEXT], zq[2 * NAME_MAXTEXT + 8];
	if (!ex->budgeted) {
		snprintf(out, cap, "null");
		return;
	}
	name_to_text(d->rule.at, zone, sizeof(zone));
	size_t zl = strlen(zone);
	if (zl > 1 && zone[zl - 1] == '.')
		zone[zl - 1] = 0;
	char star[NAME_MAXTEXT + 4];
	snprintf(star, sizeof(star), "*.%s", zone);
	log_json_quote(star, zq, sizeof(zq));
	const struct budget_verdict *v = &ex->bv;
	snprintf(out, cap,
	         "{\"zone\":%s,\"limit\":%u,\"window_s\":%u,\"used\":%u,\"charge\":%u,"
	         "\"seen\":%s,\"would\":\"%s\"}",
	         zq, v->limit, ex->window_s, v->used, v->charge,
	         v->result == BUDGET_SEEN ? "true" : "false",
	         v->result == BUDGET_DENIED ? "deny" : "allow");
}

static void cmd_explain(struct ctl_conn *c, const struct ctl_request *r)
{
	const struct policy *p = ops.ws[0].policy;
	char name[NAME_MAXTEXT], type[16], rule[600], reason[400], body[4096];
	name_to_text(r->lname, name, sizeof(name));
	char nameq[NAME_MAXTEXT * 2];
	log_json_quote(name, nameq, sizeof(nameq));
	const struct policy_agent *a =
	    r->has_client ? policy_agent_for(p, (const struct sockaddr *)&r->client)
	                  : (p->nagents ? &p->agents[0] : NULL);
	if (!a) {
		snprintf(
		    body, sizeof(body),
		    "\"name\":%s,\"type\":\"%s\",\"agent\":null,\"decision\":\"refuse-client\","
		    "\"reason\":\"client is not in any agent's range\",\"rule\":null,"
		    "\"alert\":false",
		    nameq, wire_type_str(r->qtype, type, sizeof(type)));
		reply_ok(c, CTL_EXPLAIN, body);
		return;
	}
	struct policy_decision d;
	struct exfil_explain ex;
	char budget[600];
	policy_decide(p, a, r->lname, 1, &d);
	exfil_explain(p, a, r->lname, r->qtype, uv_now(ops.ws[0].loop), &d, &ex);
	explain_budget(&d, &ex, budget, sizeof(budget));
	if (d.rule.file) {
		char fl_[520];
		snprintf(fl_, sizeof(fl_), "%s:%u", d.rule.file, d.rule.line);
		log_json_quote(fl_, rule, sizeof(rule));
	} else {
		snprintf(rule, sizeof(rule), "null");
	}
	char why[sizeof(d.reason)]; /* as long as any reason */
	log_json_quote(policy_reason(&d, why, sizeof(why)), reason, sizeof(reason));
	char ports[160] = "null";
	if (d.verdict == POLICY_ALLOW && d.rule.file) {
		ports[0] = '"';
		policy_ports_format(d.rule.ports, ports + 1, sizeof(ports) - 2);
		strcat(ports, "\"");
	}
	bool audit = policy_audit(a, &d); /* what the query path does with it */
	snprintf(body, sizeof(body),
	         "\"name\":%s,\"type\":\"%s\",\"agent\":\"%s\",\"decision\":\"%s\",\"reason\":%s,"
	         "\"rule\":%s,\"wildcard\":%s,\"ports\":%s,\"mode\":\"%s\",\"alert\":%s,"
	         "\"qtype_allowed\":%s,\"budget\":%s",
	         nameq, wire_type_str(r->qtype, type, sizeof(type)), a->cfg.name,
	         audit ? "would-deny" : policy_verdict_str(d.verdict), reason, rule,
	         d.rule.wildcard ? "true" : "false", ports,
	         a->cfg.mode == AGENT_AUDIT ? "audit" : "enforce", d.alert ? "true" : "false",
	         ex.qtype_ok ? "true" : "false", budget);
	if (d.verdict != POLICY_ALLOW || !ops.ws[0].fw) {
		/* Nothing was granted for it (or there is no firewall to hold a grant). */
		strcat(body, ops.ws[0].fw ? ",\"addresses\":[]" : ",\"addresses\":null");
		reply_ok(c, CTL_EXPLAIN, body);
		return;
	}
	explain_round(c, r->lname, a, body);
}

/* explain, on each worker's thread: the addresses its cache share holds for the name (A and
 * AAAA; the DO bit is moatd's own, upstream_dnssec_ok), the ones a grant was asked for when they
 * were answered. The lookup counts as a cache hit or miss. */
static int explain_addr(void *ctx, const uint8_t *addr, size_t len, uint16_t rrtype)
{
	(void)ctx;
	(void)rrtype;
	for (unsigned i = 0; i < fl.naddr; i++)
		if (fl.alen[i] == len && !memcmp(fl.addr[i], addr, len))
			return 0;
	if (fl.naddr == EXPLAIN_ADDRS)
		return 1;
	memcpy(fl.addr[fl.naddr], addr, len);
	fl.alen[fl.naddr++] = (uint8_t)len;
	return 0;
}

static void explain_worker(struct worker *w, void *arg)
{
	(void)arg;
	static const uint16_t types[] = {WIRE_A, WIRE_AAAA};
	for (int t = 0; t < 2; t++) {
		struct answer *hit = NULL;
		struct fetch_wait *wait = NULL;
		if (fetch_answer(w, fl.set, fl.lname, types[t], WIRE_CLASS_IN, false, NULL, NULL,
		                 &hit, &wait) != FETCH_HIT)
			continue;
		pthread_mutex_lock(&fl.lock);
		wire_resp_each_passed_addr(hit->pkt, hit->len, &hit->resp, explain_addr, NULL);
		pthread_mutex_unlock(&fl.lock);
		answer_unref(hit);
	}
	if (__atomic_sub_fetch(&fl.pending, 1, __ATOMIC_ACQ_REL) == 0)
		uv_async_send(&fl.done);
}

/* The round's asker waits (its reading pauses) while fn runs on every worker. */
static void round_start(struct ctl_conn *c, void (*fn)(struct worker *w, void *arg))
{
	fl.conn = c;
	c->busy = true;
	__atomic_store_n(&fl.pending, ops.n, __ATOMIC_RELEASE);
	for (unsigned i = 0; i < ops.n; i++)
		worker_post_call(&ops.ws[i], fn, NULL);
}

static void explain_round(struct ctl_conn *c, const uint8_t *lname, const struct policy_agent *a,
                          const char *body)
{
	if (fl.active) {
		reply_error_cmd(c, CTL_EXPLAIN, "a flush or explain is running; try again");
		return;
	}
	if (!(fl.body = strdup(body))) {
		reply_error_cmd(c, CTL_EXPLAIN, "out of memory");
		return;
	}
	fl.active = true;
	fl.cmd = CTL_EXPLAIN;
	fl.policy = policy_ref(ops.ws[0].policy);
	fl.set = forward_pick(&a->fwd, &fl.policy->fwd, lname);
	memcpy(fl.lname, lname, sizeof(fl.lname));
	fl.naddr = 0;
	round_start(c, explain_worker);
}

/* explain's reply once every worker looked: the decision and the cached addresses. */
static void explain_done(struct ctl_conn *c)
{
	size_t cap = strlen(fl.body) + 64 + EXPLAIN_ADDRS * 48;
	char *body = malloc(cap), a[INET6_ADDRSTRLEN];
	if (body) {
		size_t n = (size_t)snprintf(body, cap, "%s,\"addresses\":[", fl.body);
		for (unsigned i = 0; i < fl.naddr; i++) {
			inet_ntop(fl.alen[i] == 4 ? AF_INET : AF_INET6, fl.addr[i], a, sizeof(a));
			n += (size_t)snprintf(body + n, cap - n, "%s\"%s\"", i ? "," : "", a);
		}
		snprintf(body + n, cap - n, "]");
	}
	if (c && body)
		reply_ok(c, CTL_EXPLAIN, body);
	else if (c)
		reply_error_cmd(c, CTL_EXPLAIN, "out of memory");
	free(body);
	free(fl.body);
	fl.body = NULL;
	policy_unref(fl.policy);
	fl.policy = NULL;
}

/* On each worker's thread. */
static void flush_worker(struct worker *w, void *arg)
{
	(void)arg;
	size_t n = w->cache ? cache_flush(w->cache, fl.all ? NULL : fl.lname) : 0;
	__atomic_add_fetch(&fl.removed, n, __ATOMIC_RELAXED);
	if (__atomic_sub_fetch(&fl.pending, 1, __ATOMIC_ACQ_REL) == 0)
		uv_async_send(&fl.done);
}

static void conn_resume(struct ctl_conn *c);

static void on_flushed(uv_async_t *a)
{
	(void)a;
	if (!fl.active || __atomic_load_n(&fl.pending, __ATOMIC_ACQUIRE) != 0)
		return;
	fl.active = false;
	struct ctl_conn *c = fl.conn;
	fl.conn = NULL;
	if (fl.cmd == CTL_EXPLAIN)
		explain_done(c);
	if (!c)
		return;
	if (fl.cmd == CTL_EXPLAIN) {
		c->busy = false;
		conn_resume(c);
		return;
	}
	char body[128];
	snprintf(body, sizeof(body), "\"removed\":%llu,\"workers\":%u",
	         (unsigned long long)__atomic_load_n(&fl.removed, __ATOMIC_RELAXED), ops.n);
	reply_ok(c, CTL_FLUSH, body);
	c->busy = false;
	conn_resume(c);
}

static void cmd_flush(struct ctl_conn *c, const struct ctl_request *r)
{
	if (fl.active) {
		reply_error_cmd(c, CTL_FLUSH, "a flush or explain is running; try again");
		return;
	}
	fl.active = true;
	fl.cmd = CTL_FLUSH;
	fl.all = !r->has_name;
	if (r->has_name)
		memcpy(fl.lname, r->lname, sizeof(fl.lname));
	fl.removed = 0;
	round_start(c, flush_worker);
}

/* Hold a reply until the commit: body (a copy) or err. */
static void hold(struct ctl_conn *c, enum ctl_cmd cmd, const char *body, const char *err)
{
	struct ctl_held *nh = realloc(c->held, (c->nheld + 1) * sizeof(*nh));
	if (!nh) {
		conn_close(c);
		return;
	}
	c->held = nh;
	nh[c->nheld++] =
	    (struct ctl_held){cmd, body ? strdup(body) : NULL, err ? strdup(err) : NULL};
}

/* Commit what is staged and send the held replies, in order. A failed commit turns every
 * success among them into that failure: none of them took effect. */
static void commit_held(struct ctl_conn *c)
{
	char err[512] = "";
	bool failed = control_agents_commit(err, sizeof(err)) < 0;
	for (size_t i = 0; i < c->nheld; i++) {
		struct ctl_held *h = &c->held[i];
		if (h->err || failed)
			reply_error_cmd(c, h->err && h->cmd == CTL_STATUS ? -1 : (int)h->cmd,
			                h->err ? h->err : err);
		else
			reply_ok(c, h->cmd, h->body ? h->body : "");
		free(h->body);
		free(h->err);
	}
	c->nheld = 0;
}

static void agent_run_add(struct ctl_conn *c, struct ctl_addbody *b)
{
	char body[1024], err[600];
	if (b->err)
		hold(c, CTL_AGENT_ADD, NULL, b->err);
	else if (control_agents_add(&b->spec, b->force, body, sizeof(body), err, sizeof(err)) < 0)
		hold(c, CTL_AGENT_ADD, NULL, err);
	else
		hold(c, CTL_AGENT_ADD, body, NULL);
	addbody_free(b);
}

/* One pattern line of the add being gathered. */
static void agent_line(struct ctl_conn *c, const char *line, size_t len)
{
	struct ctl_addbody *b = c->add;
	while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		len--;
	b->bytes += len + 1;
	if (!b->err && (memchr(line, 0, len) || b->bytes > AGENT_BODY_MAX)) {
		b->err = strdup(memchr(line, 0, len) ? "a pattern line holds a NUL byte"
		                                     : "pattern lines over 64 MiB in all");
	} else if (!b->err) {
		char *t = strndup(line, len);
		if (t)
			b->spec.patterns[b->spec.npatterns++] = t;
		else
			b->err = strdup("out of memory");
	}
	if (--b->want)
		return;
	c->add = NULL;
	agent_run_add(c, b);
}

static void agent_begin(struct ctl_conn *c, const struct ctl_request *r)
{
	char body[256], err[600];
	if (r->cmd == CTL_AGENT_DEL) {
		if (control_agents_del(r->agent, body, sizeof(body), err, sizeof(err)) < 0)
			hold(c, r->cmd, NULL, err);
		else
			hold(c, r->cmd, body, NULL);
		return;
	}
	struct ctl_addbody *b = calloc(1, sizeof(*b));
	if (!b || (r->npatterns && !(b->spec.patterns = calloc(r->npatterns, sizeof(char *))))) {
		free(b);
		conn_close(c);
		return;
	}
	snprintf(b->spec.name, sizeof(b->spec.name), "%s", r->agent);
	b->spec.deny = r->deny;
	b->spec.mode = r->mode;
	b->force = r->force;
	memcpy(b->spec.clients, r->clients, r->nclients * sizeof(r->clients[0]));
	b->spec.nclients = r->nclients;
	b->want = r->npatterns;
	if (b->want)
		c->add = b;
	else
		agent_run_add(c, b);
}

/* watch: the ok reply, the asks waiting now, then every event as it comes (on_watch). */
static void cmd_watch(struct ctl_conn *c)
{
	char *pending = ask_pending_lines();
	c->watching = true;
	reply_ok(c, CTL_WATCH, "");
	if (pending && *pending)
		reply(c, pending, strlen(pending));
	else
		free(pending);
}

static void on_watch(uv_async_t *a)
{
	(void)a;
	char *text = ask_events_take();
	size_t len = text ? strlen(text) : 0;
	for (struct dlist *it = conns.next; len && it != &conns; it = it->next) {
		struct ctl_conn *c = container_of(it, struct ctl_conn, link);
		char *copy = c->watching ? strdup(text) : NULL;
		if (copy)
			reply(c, copy, len);
	}
	free(text);
}

/* ask.c's notice, from any worker's thread: wake the control loop. */
static void watch_notify(void *ctx)
{
	(void)ctx;
	uv_async_send(&watch_wake);
}

static void cmd_decide(struct ctl_conn *c, const struct ctl_request *r)
{
	char body[1024], err[600];
	if (control_ask_decide(r, body, sizeof(body), err, sizeof(err)) < 0)
		reply_error_cmd(c, (int)r->cmd, err);
	else
		reply_ok(c, r->cmd, body);
}

static void handle_line(struct ctl_conn *c, const char *line, size_t len)
{
	struct ctl_request r;
	char err[256];
	if (c->add) {
		agent_line(c, line, len);
		return;
	}
	if (ctlproto_parse(line, len, &r, err, sizeof(err)) < 0) {
		if (c->nheld)
			hold(c, CTL_STATUS, NULL, err);
		else
			reply_error(c, err);
		return;
	}
	if (r.cmd == CTL_AGENT_ADD || r.cmd == CTL_AGENT_DEL) {
		agent_begin(c, &r);
		return;
	}
	if (c->nheld) /* what follows an agent command sees it, and replies stay in order */
		commit_held(c);
	switch (r.cmd) {
	case CTL_STATUS:
		cmd_status(c);
		break;
	case CTL_STATS:
		cmd_stats(c);
		break;
	case CTL_RELOAD:
		cmd_reload(c);
		break;
	case CTL_FLUSH:
		cmd_flush(c, &r);
		break;
	case CTL_AGENTS:
		cmd_agents(c);
		break;
	case CTL_EXPLAIN:
		cmd_explain(c, &r);
		break;
	case CTL_WATCH:
		cmd_watch(c);
		break;
	case CTL_ALLOW:
	case CTL_DENY:
		cmd_decide(c, &r);
		break;
	case CTL_AGENT_ADD:
	case CTL_AGENT_DEL:
		break;
	}
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
	(void)hint;
	struct ctl_conn *c = h->data;
	*b = uv_buf_init(c->buf + c->len, (unsigned)(sizeof(c->buf) - c->len));
}

/* Answer every complete line in the buffer; stop at a flush (it answers later). */
static void drain(struct ctl_conn *c)
{
	char *nl;
	while (!c->busy && (nl = memchr(c->buf, '\n', c->len))) {
		size_t l = (size_t)(nl - c->buf) + 1;
		if (c->overlong)
			c->overlong = false; /* the end of the line already refused */
		else
			handle_line(c, c->buf, l);
		memmove(c->buf, c->buf + l, c->len - l);
		c->len -= l;
	}
	if (c->nheld)
		commit_held(c);
	if (!c->busy && c->len == sizeof(c->buf)) {
		if (!c->overlong)
			reply_error(c, "request too long");
		c->overlong = true;
		c->len = 0;
	}
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	(void)b;
	struct ctl_conn *c = s->data;
	if (n < 0) {
		conn_close(c);
		return;
	}
	c->len += (size_t)n;
	drain(c);
	if (c->busy)
		uv_read_stop(s);
}

static void conn_resume(struct ctl_conn *c)
{
	drain(c);
	if (!c->busy)
		uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
}

/* Accept the connection libuv holds. Past CONNS_MAX, or without memory, it stays held (and the
 * server unread) until a connection closes. */
static void conn_accept(void)
{
	struct ctl_conn *c = calloc(1, sizeof(*c));
	accept_waiting = !c || nconns >= CONNS_MAX;
	if (accept_waiting) {
		free(c);
		return;
	}
	uv_pipe_init(server.loop, &c->pipe, 0);
	c->pipe.data = c;
	if (uv_accept((uv_stream_t *)&server, (uv_stream_t *)&c->pipe) < 0) {
		uv_close((uv_handle_t *)&c->pipe, on_closed);
		return;
	}
	dlist_add(&conns, &c->link);
	nconns++;
	uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
}

static void on_connection(uv_stream_t *s, int status)
{
	(void)s;
	if (status == 0)
		conn_accept();
}

int control_start(uv_loop_t *loop, const char *path, const char *group, const struct control_ops *o,
                  char *err, size_t errlen)
{
	struct stat st;
	gid_t gid = (gid_t)-1;
	ops = *o;
	control_agents_init(o->ws, o->n, o->store);
	dlist_init(&conns);
	if (group) {
		struct group *g = getgrnam(group);
		if (!g) {
			snprintf(err, errlen, "control: no such group '%s'", group);
			return MOAT_EINVAL;
		}
		gid = g->gr_gid;
	}
	/* A socket left by an earlier run is replaced; any other file is not ours to remove. */
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
	uv_pipe_init(loop, &server, 0);
	mode_t old = umask(0117); /* born 0660: no moment with wider access */
	int rc = uv_pipe_bind(&server, path);
	umask(old);
	if (rc == 0 && chown(path, (uid_t)-1, gid) < 0 && gid != (gid_t)-1)
		rc = UV_EPERM;
	if (rc == 0)
		rc = uv_listen((uv_stream_t *)&server, 16, on_connection);
	if (rc < 0) {
		snprintf(err, errlen, "control: cannot listen on %s: %s", path, uv_strerror(rc));
		uv_close((uv_handle_t *)&server, NULL);
		return MOAT_EIO;
	}
	uv_async_init(loop, &fl.done, on_flushed);
	uv_async_init(loop, &watch_wake, on_watch);
	control_ask_init(loop);
	ask_set_notify(watch_notify, NULL);
	started = true;
	return 0;
}

void control_stop(void)
{
	if (!started)
		return;
	started = false;
	while (conns.next != &conns)
		conn_close(container_of(conns.next, struct ctl_conn, link));
	uv_close((uv_handle_t *)&server, NULL);
	uv_close((uv_handle_t *)&fl.done, NULL);
	ask_set_notify(NULL, NULL);
	uv_close((uv_handle_t *)&watch_wake, NULL);
	control_ask_stop();
}
