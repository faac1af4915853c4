/* tests.c owns the ten escape tests: which probes each one sends, what counts as an escape, and
 * the detail and reason texts the report shows. Tests run one after another in number order;
 * every probe is bounded by the configured timeout, so a run is bounded by the probe count
 * (escape_worst_case_ms, kept here next to the tests it counts) plus test 8's wait.
 *
 * What counts as an escape, per test:
 *   1, 2, 3 (names)  any non-sinkhole address in the answer section, whatever the rcode;
 *   3 (connects), 6, 7, 8  a completed TCP handshake (a RST or a timeout is blocked: no
 *                    connection, no data);
 *   4                an internal address (moat's guard ranges) in the answer section;
 *   5                any reply from the other resolver over UDP or TCP, or a DoT handshake:
 *                    a reply of any kind, even REFUSED, proves a two-way channel;
 *   9                any reply but a deny (NXDOMAIN, REFUSED, sinkhole, empty NOERROR: moatd's
 *                    sinkhole deny of a TXT question), SERVFAIL, and no reply at all: the data
 *                    leaves with the query, so only an answer that says "denied" shows it went
 *                    no further (SERVFAIL or silence is what a forwarded query to a slow or dead
 *                    upstream looks like). A socket error (nothing listens) counts as denied.
 * Tests 1-4 count SERVFAIL, timeouts and malformed replies as blocked: no address came back,
 * and the control (10) catches a resolver that answers nothing at all. */
#include <arpa/inet.h>
#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "escape.h"
#include "moat/wire.h"

static const struct {
	const char *name;
	const char *expect;
} escape_tests[ESCAPE_NTESTS] = {
    {"unknown name resolves", "blocked"},
    {"metadata names resolve", "blocked"},
    {"metadata address reachable", "blocked"},
    {"rebinding name answered", "blocked"},
    {"other resolver answers", "blocked"},
    {"unresolved address reachable", "blocked"},
    {"IPv6 path open", "blocked"},
    {"expired grant still reachable", "blocked"},
    {"DNS tunnelling answered", "blocked"},
    {"control: allowed name works", "works"},
    {"port outside the grant opens", "blocked"},
    {"spoofed source passes", "blocked"},
    {"inbound connection accepted", "blocked"},
};

/* One reply buffer for the whole run: the tool is sequential and the buffer is 64 KB. */
static struct escape_dns escape_q;

void escape_result_init(struct escape_result *r, int id)
{
	memset(r, 0, sizeof(*r));
	r->id = id;
	r->name = escape_tests[id - 1].name;
	r->expect = escape_tests[id - 1].expect;
	r->outcome = id == ESCAPE_CONTROL ? ESCAPE_WORKS : ESCAPE_HELD;
}

int escape_ntests(const struct escape_cfg *c)
{
	return c->witness_host[0] ? ESCAPE_NTESTS : ESCAPE_NCORE;
}

uint64_t escape_worst_case_ms(const struct escape_cfg *c)
{
	uint64_t probes = 2              /* 1: A, AAAA */
	                  + 2 * c->nmeta /* 2: A, AAAA per name */
	                  + 6 + ESCAPE_NFORMS +
	                  2                /* 3: connects (at most one per form + 2), names */
	                  + 2 * c->nrebind /* 4 */
	                  + 3 * c->nothers /* 5: UDP, TCP, DoT */
	                  + 2 + 2          /* 6, 7: ports 80 and 443 */
	                  + 2 + 2          /* 8: A then AAAA, two connects */
	                  + 4              /* 9 */
	                  + 4 + 2          /* 10: allowed A/AAAA, target A/AAAA, two connects */
	                  + 2 + 4;         /* 11: A/AAAA, open and closed port per family */
	if (c->witness_host[0])
		probes += 2 + 2 + 2 * 2; /* 12, 13: witness A/AAAA, one question per family each */
	return probes * c->timeout_ms + (uint64_t)c->expire_wait * 1000;
}

/* Distinct probe outcomes and how often each came back, so a test of twenty queries that all
 * got NXDOMAIN says so in a few words. */
struct escape_tally {
	char what[6][80];
	unsigned count[6];
	size_t n;
	unsigned more;
};

static void escape_tally_add(struct escape_tally *t, const char *what)
{
	for (size_t i = 0; i < t->n; i++)
		if (strcmp(t->what[i], what) == 0) {
			t->count[i]++;
			return;
		}
	if (t->n == sizeof(t->what) / sizeof(t->what[0])) {
		t->more++;
		return;
	}
	snprintf(t->what[t->n], sizeof(t->what[0]), "%s", what);
	t->count[t->n++] = 1;
}

/* "PREFIX: NXDOMAIN x8, REFUSED x2" appended to buf as one detail item. */
static void escape_tally_put(const struct escape_tally *t, const char *prefix, char *buf,
                             size_t cap)
{
	char all[600] = "";
	size_t n = 0;

	for (size_t i = 0; i < t->n && n < sizeof(all); i++)
		n += (size_t)snprintf(all + n, sizeof(all) - n, "%s%s x%u", i ? ", " : "",
		                      t->what[i], t->count[i]);
	if (t->more && n < sizeof(all))
		snprintf(all + n, sizeof(all) - n, ", %u other", t->more);
	escape_appendf(buf, cap, "%s: %s", prefix, all);
}

/* Ask server for (name, qtype). txt gets what came back ("NXDOMAIN (EDE 15)", "timeout", ...).
 * Returns the status; a is filled when a reply came. */
static enum escape_dns_status escape_ask(const struct escape_cfg *c, const struct sockaddr *server,
                                         const char *name, uint16_t qtype, enum escape_transport tr,
                                         struct escape_answer *a, char *txt, size_t cap)
{
	memset(a, 0, sizeof(*a));
	a->ede = -1;
	a->addr_ttl = UINT32_MAX;
	escape_dns_query(server, name, qtype, tr, c->timeout_ms, &escape_q);
	switch (escape_q.status) {
	case ESCAPE_DNS_REPLY:
		escape_classify(escape_q.pkt, escape_q.len, escape_q.id, escape_q.lname, qtype,
		                c->sinks, c->nsinks, a);
		escape_answer_str(a, txt, cap);
		break;
	case ESCAPE_DNS_TIMEOUT:
		snprintf(txt, cap, "no answer in %u ms", c->timeout_ms);
		break;
	case ESCAPE_DNS_NETERR:
		snprintf(txt, cap, "%s", strerror(escape_q.err));
		break;
	default:
		snprintf(txt, cap, "not a valid name");
		break;
	}
	return escape_q.status;
}

static const struct sockaddr *escape_res(const struct escape_cfg *c)
{
	return (const struct sockaddr *)&c->resolver;
}

static const char *escape_qt(uint16_t qtype, char *buf, size_t cap)
{
	return wire_type_str(qtype, buf, cap);
}

static void escape_addr_text(const struct escape_addr *a, char *buf, size_t cap)
{
	inet_ntop(a->len == 4 ? AF_INET : AF_INET6, a->b, buf, (socklen_t)cap);
}

/* Tests 1, 2 and 3's names: does any query (names[i], qtypes[i]) get a real address back? */
static void escape_names_resolve(const struct escape_cfg *c, const char *const *names,
                                 const uint16_t *qtypes, size_t n, struct escape_result *r,
                                 struct escape_tally *t)
{
	struct escape_answer a;
	char txt[256], qt[16], at[INET6_ADDRSTRLEN];

	for (size_t i = 0; i < n; i++) {
		escape_ask(c, escape_res(c), names[i], qtypes[i], ESCAPE_TR_AUTO, &a, txt,
		           sizeof(txt));
		escape_tally_add(t, txt);
		if (a.naddr == 0)
			continue;
		escape_addr_text(&a.addr[0], at, sizeof(at));
		escape_qt(qtypes[i], qt, sizeof(qt));
		if (r->outcome != ESCAPE_ESCAPED)
			snprintf(r->reason, sizeof(r->reason), "%s %s resolved to %s", names[i], qt,
			         at);
		r->outcome = ESCAPE_ESCAPED;
		escape_appendf(r->detail, sizeof(r->detail), "%s %s -> %s", names[i], qt, txt);
	}
}

static void escape_test1(const struct escape_cfg *c, struct escape_result *r)
{
	static const uint16_t qt[] = {WIRE_A, WIRE_AAAA};
	struct escape_tally t = {0};
	uint8_t raw[10];
	char label[20], name[48];
	char tld[9];

	/* A random label under a random letters-only TLD: no allowlist or zone can hold it. */
	randombytes_buf(raw, sizeof(raw));
	escape_base32(raw, sizeof(raw), label);
	for (size_t i = 0; i < sizeof(tld) - 1; i++)
		tld[i] = (char)('a' + randombytes_uniform(26));
	tld[sizeof(tld) - 1] = '\0';
	snprintf(name, sizeof(name), "%s.%s", label, tld);
	const char *names[] = {name, name};
	escape_names_resolve(c, names, qt, 2, r, &t);
	escape_tally_put(&t, name, r->detail, sizeof(r->detail));
}

static void escape_test2(const struct escape_cfg *c, struct escape_result *r)
{
	struct escape_tally t = {0};
	const char *names[2 * ESCAPE_MAXLIST];
	uint16_t qt[2 * ESCAPE_MAXLIST];

	for (size_t i = 0; i < c->nmeta; i++) {
		names[2 * i] = names[2 * i + 1] = c->meta_names[i];
		qt[2 * i] = WIRE_A;
		qt[2 * i + 1] = WIRE_AAAA;
	}
	escape_names_resolve(c, names, qt, 2 * c->nmeta, r, &t);
	char what[64];
	snprintf(what, sizeof(what), "%zu names, A+AAAA", c->nmeta);
	escape_tally_put(&t, what, r->detail, sizeof(r->detail));
}

/* One connect for test 3/6/7: records an escape when it opens. */
static void escape_probe_connect(const struct escape_cfg *c, const struct sockaddr *sa,
                                 const char *label, struct escape_result *r)
{
	char st[64], at[80];
	int err;
	enum escape_conn s = escape_connect(sa, c->timeout_ms, &err);

	escape_conn_str(s, err, st, sizeof(st));
	escape_appendf(r->detail, sizeof(r->detail), "%s%s%s: %s",
	               escape_sa_str(sa, true, at, sizeof(at)), label[0] ? " " : "", label, st);
	if (s == ESCAPE_CONN_OPEN) {
		if (r->outcome != ESCAPE_ESCAPED)
			snprintf(r->reason, sizeof(r->reason), "%s%s%s accepted a connection", at,
			         label[0] ? " " : "", label);
		r->outcome = ESCAPE_ESCAPED;
	}
}

static void escape_test3(const struct escape_cfg *c, struct escape_result *r)
{
	char forms[ESCAPE_NFORMS][32];
	struct sockaddr_in tried[ESCAPE_NFORMS];
	size_t ntried = 0;
	char same[160] = "";
	char mapped[64], v6[INET6_ADDRSTRLEN];

	escape_numeric_forms(c->meta_addr.sin_addr, forms);
	/* inet_aton reads every form; equal addresses are one connect, shown once. */
	for (int f = 0; f < ESCAPE_NFORMS; f++) {
		struct sockaddr_in sa = c->meta_addr;
		size_t k;
		if (inet_aton(forms[f], &sa.sin_addr) == 0) {
			escape_appendf(r->detail, sizeof(r->detail), "%s: inet_aton rejects it",
			               forms[f]);
			continue;
		}
		for (k = 0; k < ntried; k++)
			if (tried[k].sin_addr.s_addr == sa.sin_addr.s_addr)
				break;
		if (k < ntried) {
			size_t l = strlen(same);
			snprintf(same + l, sizeof(same) - l, "%s%s", l ? " = " : "(= ", forms[f]);
			continue;
		}
		tried[ntried++] = sa;
	}
	if (same[0])
		strncat(same, ")", sizeof(same) - strlen(same) - 1);
	for (size_t k = 0; k < ntried; k++)
		escape_probe_connect(c, (const struct sockaddr *)&tried[k], k == 0 ? same : "", r);

	/* The same address as IPv4-mapped IPv6, then the IPv6 metadata address. */
	struct sockaddr_in6 m6 = {.sin6_family = AF_INET6, .sin6_port = c->meta_addr.sin_port};
	m6.sin6_addr.s6_addr[10] = 0xff;
	m6.sin6_addr.s6_addr[11] = 0xff;
	memcpy(&m6.sin6_addr.s6_addr[12], &c->meta_addr.sin_addr, 4);
	escape_probe_connect(c, (const struct sockaddr *)&m6, "", r);
	escape_probe_connect(c, (const struct sockaddr *)&c->meta_addr6, "", r);

	/* The literal forms as query names: a resolver must not answer them with anything. */
	snprintf(mapped, sizeof(mapped), "::ffff:%s", forms[ESCAPE_FORM_DOTTED]);
	inet_ntop(AF_INET6, &c->meta_addr6.sin6_addr, v6, sizeof(v6));
	const char *names[] = {forms[0], forms[1], forms[2], forms[3], mapped, v6};
	static const uint16_t qt[] = {WIRE_A, WIRE_A, WIRE_A, WIRE_A, WIRE_AAAA, WIRE_AAAA};
	struct escape_tally t = {0};
	enum escape_outcome before = r->outcome;
	char reason[ESCAPE_REASON];
	memcpy(reason, r->reason, sizeof(reason));
	escape_names_resolve(c, names, qt, 6, r, &t);
	if (before == ESCAPE_ESCAPED)
		memcpy(r->reason, reason, sizeof(reason)); /* a connect is the bigger news */
	escape_tally_put(&t, "as names", r->detail, sizeof(r->detail));
}

static void escape_test4(const struct escape_cfg *c, struct escape_result *r)
{
	static const uint16_t qts[] = {WIRE_A, WIRE_AAAA};
	struct escape_tally t = {0};
	struct escape_answer a;
	char txt[256], qt[16], at[INET6_ADDRSTRLEN];

	for (size_t i = 0; i < c->nrebind; i++)
		for (size_t k = 0; k < 2; k++) {
			escape_ask(c, escape_res(c), c->rebind[i], qts[k], ESCAPE_TR_AUTO, &a, txt,
			           sizeof(txt));
			escape_tally_add(&t, txt);
			for (size_t j = 0; j < a.naddr && j < ESCAPE_MAXADDR; j++) {
				if (!escape_addr_internal(&a.addr[j]))
					continue;
				escape_addr_text(&a.addr[j], at, sizeof(at));
				if (r->outcome != ESCAPE_ESCAPED)
					snprintf(r->reason, sizeof(r->reason),
					         "%s %s answered with internal %s", c->rebind[i],
					         escape_qt(qts[k], qt, sizeof(qt)), at);
				r->outcome = ESCAPE_ESCAPED;
				escape_appendf(r->detail, sizeof(r->detail), "%s %s -> %s",
				               c->rebind[i], escape_qt(qts[k], qt, sizeof(qt)),
				               txt);
				break;
			}
		}
	char what[160];
	snprintf(what, sizeof(what), "%zu name%s%s, A+AAAA", c->nrebind, c->nrebind == 1 ? "" : "s",
	         c->rebind_default ? " (public rebinding services by default: set rebind to an "
	                             "allowed name that points inside)"
	                           : "");
	escape_tally_put(&t, what, r->detail, sizeof(r->detail));
}

static void escape_test5(const struct escape_cfg *c, struct escape_result *r)
{
	struct escape_answer a;
	char txt[256], at[80];
	static const char *const how[] = {"UDP", "TCP"};
	static const enum escape_transport tr[] = {ESCAPE_TR_UDP, ESCAPE_TR_TCP};

	for (size_t i = 0; i < c->nothers; i++) {
		const struct sockaddr *sa = (const struct sockaddr *)&c->others[i];
		uint16_t port = sa->sa_family == AF_INET
		                    ? ntohs(((const struct sockaddr_in *)sa)->sin_port)
		                    : ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
		escape_sa_str(sa, false, at, sizeof(at));
		for (int k = 0; k < 2; k++) {
			enum escape_dns_status s =
			    escape_ask(c, sa, c->allowed, WIRE_A, tr[k], &a, txt, sizeof(txt));
			if (s == ESCAPE_DNS_REPLY) {
				escape_appendf(r->detail, sizeof(r->detail),
				               "%s %s %u: answered (%s)", at, how[k], port, txt);
				if (r->outcome != ESCAPE_ESCAPED)
					snprintf(r->reason, sizeof(r->reason),
					         "other resolver %s answered over %s %u", at,
					         how[k], port);
				r->outcome = ESCAPE_ESCAPED;
			} else {
				escape_appendf(r->detail, sizeof(r->detail), "%s %s %u: %s", at,
				               how[k], port, txt);
			}
		}
		/* DoT: a completed handshake on 853 is a path to an encrypted resolver. */
		struct sockaddr_storage dot = c->others[i];
		if (dot.ss_family == AF_INET)
			((struct sockaddr_in *)&dot)->sin_port = htons(853);
		else
			((struct sockaddr_in6 *)&dot)->sin6_port = htons(853);
		escape_probe_connect(c, (const struct sockaddr *)&dot, "(DoT)", r);
	}
	if (c->others_default)
		escape_appendf(r->detail, sizeof(r->detail), "(default public resolvers)");
}

static void escape_test6(const struct escape_cfg *c, struct escape_result *r)
{
	static const uint16_t ports[] = {80, 443};

	for (int k = 0; k < 2; k++) {
		struct sockaddr_storage sa = c->unresolved;
		if (sa.ss_family == AF_INET)
			((struct sockaddr_in *)&sa)->sin_port = htons(ports[k]);
		else
			((struct sockaddr_in6 *)&sa)->sin6_port = htons(ports[k]);
		escape_probe_connect(c, (const struct sockaddr *)&sa, "", r);
	}
	if (c->unresolved_default)
		escape_appendf(r->detail, sizeof(r->detail),
		               "(documentation address by default: set unresolved to a host that "
		               "answers)");
}

static void escape_test7(const struct escape_cfg *c, struct escape_result *r)
{
	static const uint16_t ports[] = {80, 443};

	for (int k = 0; k < 2; k++) {
		struct sockaddr_in6 sa = c->v6_target;
		sa.sin6_port = htons(ports[k]);
		escape_probe_connect(c, (const struct sockaddr *)&sa, "", r);
	}
	if (c->v6_default)
		escape_appendf(r->detail, sizeof(r->detail),
		               "(documentation address by default: set v6-target to a host that "
		               "answers)");
}

static void escape_sleep(unsigned sec)
{
	struct timespec ts = {.tv_sec = sec};

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

void escape_to_sa(const struct escape_addr *a, uint16_t port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->len == 4) {
		struct sockaddr_in *s = (struct sockaddr_in *)ss;
		s->sin_family = AF_INET;
		s->sin_port = htons(port);
		memcpy(&s->sin_addr, a->b, 4);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)ss;
		s->sin6_family = AF_INET6;
		s->sin6_port = htons(port);
		memcpy(&s->sin6_addr, a->b, 16);
	}
}

static void escape_test8(const struct escape_cfg *c, struct escape_result *r)
{
	struct escape_answer a;
	char txt4[256], txt6[256], st[64], at[80];
	struct sockaddr_storage sa;
	int err;

	if (c->expire_wait == 0) {
		r->outcome = ESCAPE_NOTRUN;
		snprintf(r->reason, sizeof(r->reason), "expire-wait is 0");
		snprintf(r->detail, sizeof(r->detail), "skipped: expire-wait is 0");
		return;
	}
	escape_ask(c, escape_res(c), c->expire_name, WIRE_A, ESCAPE_TR_AUTO, &a, txt4,
	           sizeof(txt4));
	if (a.naddr == 0)
		escape_ask(c, escape_res(c), c->expire_name, WIRE_AAAA, ESCAPE_TR_AUTO, &a, txt6,
		           sizeof(txt6));
	if (a.naddr == 0) {
		r->outcome = ESCAPE_NOTRUN;
		snprintf(r->reason, sizeof(r->reason), "%s did not resolve", c->expire_name);
		escape_appendf(r->detail, sizeof(r->detail), "%s: A %s, AAAA %s: nothing granted",
		               c->expire_name, txt4, txt6);
		return;
	}
	escape_to_sa(&a.addr[0], c->expire_port, &sa);
	escape_sa_str((const struct sockaddr *)&sa, true, at, sizeof(at));
	uint32_t ttl = a.addr_ttl;
	enum escape_conn s = escape_connect((const struct sockaddr *)&sa, c->timeout_ms, &err);
	if (s != ESCAPE_CONN_OPEN) {
		r->outcome = ESCAPE_NOTRUN;
		snprintf(r->reason, sizeof(r->reason), "first connection to %s failed", at);
		escape_appendf(r->detail, sizeof(r->detail),
		               "%s (%s, TTL %u s): first connection %s, so no grant to outlive", at,
		               c->expire_name, ttl, escape_conn_str(s, err, st, sizeof(st)));
		return;
	}
	/* moat-fw holds an address for max(TTL, its --min-lifetime) plus at most its 2 s slack. */
	uint64_t wait = (uint64_t)(ttl > c->grant_min ? ttl : c->grant_min) + ESCAPE_EXPIRE_MARGIN;
	if (wait > c->expire_wait) {
		r->outcome = ESCAPE_NOTRUN;
		snprintf(r->reason, sizeof(r->reason), "TTL of %s is %u s, needs expire-wait %llu",
		         c->expire_name, ttl, (unsigned long long)wait);
		escape_appendf(r->detail, sizeof(r->detail),
		               "%s: TTL %u s, grant-min %u s: waiting past the grant takes %llu s, "
		               "more than expire-wait %u s",
		               at, ttl, c->grant_min, (unsigned long long)wait, c->expire_wait);
		return;
	}
	fprintf(stderr, "(test 8: waiting %llu s for the grant of %s to expire)\n",
	        (unsigned long long)wait, at);
	escape_sleep((unsigned)wait);
	s = escape_connect((const struct sockaddr *)&sa, c->timeout_ms, &err);
	escape_appendf(r->detail, sizeof(r->detail),
	               "%s (%s, TTL %u s): first connection open; new connection %llu s later: %s",
	               at, c->expire_name, ttl, (unsigned long long)wait,
	               escape_conn_str(s, err, st, sizeof(st)));
	if (s == ESCAPE_CONN_OPEN) {
		r->outcome = ESCAPE_ESCAPED;
		snprintf(r->reason, sizeof(r->reason),
		         "%s still accepted a new connection %llu s after it was granted for %u s",
		         at, (unsigned long long)wait, ttl);
	}
}

static void escape_test9(const struct escape_cfg *c, struct escape_result *r)
{
	static const uint16_t qts[] = {WIRE_TXT, WIRE_A, WIRE_AAAA, WIRE_TXT};
	struct escape_tally t = {0};
	struct escape_answer a;
	char name[ESCAPE_NAMELEN], txt[256], qt[16];
	int len = 0;

	for (size_t k = 0; k < sizeof(qts) / sizeof(qts[0]); k++) {
		len = escape_tunnel_name(c->tunnel_domain, name, sizeof(name));
		if (len < 0) {
			r->outcome = ESCAPE_NOTRUN;
			snprintf(r->reason, sizeof(r->reason), "tunnel-domain too long");
			escape_appendf(r->detail, sizeof(r->detail), "tunnel-domain %s too long",
			               c->tunnel_domain);
			return;
		}
		enum escape_dns_status s = escape_ask(c, escape_res(c), name, qts[k],
		                                      ESCAPE_TR_AUTO, &a, txt, sizeof(txt));
		escape_tally_add(&t, txt);
		bool denied = s == ESCAPE_DNS_NETERR ||
		              (s == ESCAPE_DNS_REPLY &&
		               (a.verdict == ESCAPE_V_DENY || a.verdict == ESCAPE_V_NODATA));
		if (!denied && r->outcome != ESCAPE_ESCAPED) {
			r->outcome = ESCAPE_ESCAPED;
			snprintf(r->reason, sizeof(r->reason),
			         "a %s tunnelling query under %s got %s",
			         escape_qt(qts[k], qt, sizeof(qt)), c->tunnel_domain, txt);
		}
	}
	char what[ESCAPE_NAMELEN + 64];
	snprintf(what, sizeof(what), "4 queries (TXT, A, AAAA, TXT), %d-char names under %s", len,
	         c->tunnel_domain);
	escape_tally_put(&t, what, r->detail, sizeof(r->detail));
}

static bool escape_same_name(const char *x, const char *y)
{
	uint8_t a[NAME_MAXWIRE], b[NAME_MAXWIRE];

	return name_from_text(x, strlen(x), a) > 0 && name_from_text(y, strlen(y), b) > 0 &&
	       name_equal(a, b);
}

size_t escape_resolve2(const struct escape_cfg *c, const char *name, struct escape_addr out[2],
                       char *txt, size_t cap)
{
	static const uint16_t qts[] = {WIRE_A, WIRE_AAAA};
	struct escape_answer a;
	char t[256], qt[16];
	size_t n = 0;

	txt[0] = '\0';
	for (int k = 0; k < 2; k++) {
		escape_ask(c, escape_res(c), name, qts[k], ESCAPE_TR_AUTO, &a, t, sizeof(t));
		/* ", " inside: the summary line uses "; " between its parts. */
		size_t l = strlen(txt);
		snprintf(txt + l, cap - l, "%s%s %s", l ? ", " : "",
		         escape_qt(qts[k], qt, sizeof(qt)), t);
		if (a.naddr > 0)
			out[n++] = a.addr[0];
	}
	return n;
}

static void escape_test10(const struct escape_cfg *c, struct escape_result *r)
{
	struct escape_addr name_addrs[2], tgt[2];
	char txt[600], ttxt[600], st[64], at[80];
	size_t nn = escape_resolve2(c, c->allowed, name_addrs, txt, sizeof(txt));
	size_t nt = 0;

	escape_appendf(r->detail, sizeof(r->detail), "%s: %s", c->allowed, txt);
	if (nn == 0) {
		r->outcome = ESCAPE_FAILED;
		snprintf(r->reason, sizeof(r->reason), "allowed name %s did not resolve: %s",
		         c->allowed, txt);
		return;
	}
	/* The target: an address literal as is, the allowed name's addresses, or its own. */
	if (inet_pton(AF_INET, c->target_host, tgt[0].b) == 1) {
		tgt[0].len = 4;
		nt = 1;
	} else if (inet_pton(AF_INET6, c->target_host, tgt[0].b) == 1) {
		tgt[0].len = 16;
		nt = 1;
	} else if (escape_same_name(c->target_host, c->allowed)) {
		memcpy(tgt, name_addrs, sizeof(tgt));
		nt = nn;
	} else {
		nt = escape_resolve2(c, c->target_host, tgt, ttxt, sizeof(ttxt));
		escape_appendf(r->detail, sizeof(r->detail), "%s: %s", c->target_host, ttxt);
		if (nt == 0) {
			r->outcome = ESCAPE_FAILED;
			snprintf(r->reason, sizeof(r->reason), "target %s did not resolve",
			         c->target_host);
			return;
		}
	}
	for (size_t i = 0; i < nt; i++) {
		struct sockaddr_storage sa;
		int err;
		escape_to_sa(&tgt[i], c->target_port, &sa);
		escape_sa_str((const struct sockaddr *)&sa, true, at, sizeof(at));
		enum escape_conn s =
		    escape_connect((const struct sockaddr *)&sa, c->timeout_ms, &err);
		escape_appendf(r->detail, sizeof(r->detail), "%s: %s", at,
		               escape_conn_str(s, err, st, sizeof(st)));
		if (s == ESCAPE_CONN_OPEN) {
			r->outcome = ESCAPE_WORKS;
			return;
		}
	}
	r->outcome = ESCAPE_FAILED;
	snprintf(r->reason, sizeof(r->reason), "%s:%u did not accept a connection (%s)",
	         c->target_host, c->target_port, st);
}

/* Test 11: a name whose allowlist line names ports (scoped-name, scoped-open) must reach only
 * those. Its allowed port must open (else the test cannot tell anything: not run); the closed
 * port must not answer at all: a connection or even a RST means the packet got through. */
static void escape_test11(const struct escape_cfg *c, struct escape_result *r)
{
	struct escape_addr addrs[2];
	char txt[600], st[64], at[80];
	uint16_t closed = c->scoped_closed ? c->scoped_closed : c->scoped_open == 443 ? 80 : 443;
	bool opened = false;

	if (c->scoped_name[0] == '\0' || c->scoped_open == 0) {
		r->outcome = ESCAPE_NOTRUN;
		snprintf(r->reason, sizeof(r->reason), "set scoped-name and scoped-open");
		escape_appendf(r->detail, sizeof(r->detail), "not configured");
		return;
	}
	size_t n = escape_resolve2(c, c->scoped_name, addrs, txt, sizeof(txt));
	escape_appendf(r->detail, sizeof(r->detail), "%s: %s", c->scoped_name, txt);
	for (size_t i = 0; i < n; i++) {
		struct sockaddr_storage sa;
		int err;
		escape_to_sa(&addrs[i], c->scoped_open, &sa);
		enum escape_conn s =
		    escape_connect((const struct sockaddr *)&sa, c->timeout_ms, &err);
		escape_appendf(r->detail, sizeof(r->detail), "%s: %s",
		               escape_sa_str((const struct sockaddr *)&sa, true, at, sizeof(at)),
		               escape_conn_str(s, err, st, sizeof(st)));
		if (s != ESCAPE_CONN_OPEN)
			continue;
		opened = true;
		escape_to_sa(&addrs[i], closed, &sa);
		s = escape_connect((const struct sockaddr *)&sa, c->timeout_ms, &err);
		escape_sa_str((const struct sockaddr *)&sa, true, at, sizeof(at));
		escape_appendf(r->detail, sizeof(r->detail), "%s: %s", at,
		               escape_conn_str(s, err, st, sizeof(st)));
		if (s == ESCAPE_CONN_OPEN || s == ESCAPE_CONN_REFUSED) {
			r->outcome = ESCAPE_ESCAPED;
			snprintf(r->reason, sizeof(r->reason), "%s %s past a grant for port %u", at,
			         s == ESCAPE_CONN_OPEN ? "accepted a connection" : "answered",
			         c->scoped_open);
		}
	}
	if (!opened) {
		r->outcome = ESCAPE_NOTRUN;
		snprintf(r->reason, sizeof(r->reason), "%s:%u did not open", c->scoped_name,
		         c->scoped_open);
	}
}

void escape_run(const struct escape_cfg *c, struct escape_result res[ESCAPE_NTESTS],
                escape_progress_fn fn, void *ctx)
{
	static void (*const run[ESCAPE_NTESTS])(const struct escape_cfg *,
	                                        struct escape_result *) = {
	    escape_test1,  escape_test2,      escape_test3,       escape_test4, escape_test5,
	    escape_test6,  escape_test7,      escape_test8,       escape_test9, escape_test10,
	    escape_test11, escape_test_spoof, escape_test_inbound,
	};

	for (int i = 0; i < ESCAPE_NTESTS; i++) {
		escape_result_init(&res[i], i + 1);
		if (i >= ESCAPE_NCORE && !c->witness_host[0]) {
			res[i].outcome = ESCAPE_UNSET;
			continue;
		}
		run[i](c, &res[i]);
		if (fn != NULL)
			fn(ctx, &res[i]);
	}
}
