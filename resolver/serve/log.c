/* log.c formats the query log's lines (format in moat/log.h): one JSON object per query, escaped
 * so that any byte a hostile client puts in a name stays inside its string. It writes with a
 * writer of its own into the caller's buffer: no printf (but for a rule's reason too long to
 * keep, cut by snprintf), no strlen of a field before it is copied (each string is scanned once, as
 * it is escaped), names go from wire form to escaped text in one pass, addresses are formatted by
 * hand (glibc's inet_ntop prints with sprintf). Where the lines go is log_sink.c's; which lines go
 * is log_bound.c's. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "moat/err.h"
#include "moat/log.h"
#include "moat/name.h"
#include "moat/policy.h"
#include "moat/wire.h"

/* A bounded writer into one line: what does not fit is cut, never overrun. */
struct lw {
	char *p, *end;
};

/* The cut end of a line: rare, kept out of line. */
static __attribute__((noinline, cold)) void put_cut(struct lw *w, const char *s)
{
	size_t n = (size_t)(w->end - w->p);
	memcpy(w->p, s, n);
	w->p += n;
}

/* The copy has its own branch so that a literal's constant length reaches memcpy: two or three
 * moves, where a length cut to the room left was a byte-by-byte copy (~20 instructions). */
static inline void put(struct lw *w, const char *s, size_t n)
{
	if (__builtin_expect(n > (size_t)(w->end - w->p), 0)) {
		put_cut(w, s);
		return;
	}
	memcpy(w->p, s, n);
	w->p += n;
}

#define PUT_LIT(w, s) put(w, s, sizeof(s) - 1)

/* A kept text of n bytes from a buffer of at least k (a constant): when the line has room for
 * k, one copy of k bytes (a few vector moves, no call; the bytes past n are overwritten by what
 * follows), else put's. */
#define PUT_UPTO(w, text, n, k)                                                                    \
	do {                                                                                       \
		_Static_assert(sizeof(text) >= (k), "the buffer holds k bytes");                   \
		size_t n_ = (n);                                                                   \
		if (n_ <= (k) && (size_t)((w)->end - (w)->p) >= (k)) {                             \
			memcpy((w)->p, (text), (k));                                               \
			(w)->p += n_;                                                              \
		} else {                                                                           \
			put((w), (text), n_);                                                      \
		}                                                                                  \
	} while (0)

static inline void put_c(struct lw *w, char c)
{
	if (w->p < w->end)
		*w->p++ = c;
}

/* "00".."99": two digits a step, one division by 100 where there were two by 10. */
static const char digits2[201] = "0001020304050607080910111213141516171819"
                                 "2021222324252627282930313233343536373839"
                                 "4041424344454647484950515253545556575859"
                                 "6061626364656667686970717273747576777879"
                                 "8081828384858687888990919293949596979899";

/* v in decimal, ending at d + UINT_TEXT - 1 where a NUL is put; returns where it starts. */
#define UINT_TEXT 21
static char *uint_text(char d[UINT_TEXT], uint64_t v)
{
	char *p = d + UINT_TEXT - 1;
	*p = 0;
	for (; v >= 100; v /= 100) {
		p -= 2;
		memcpy(p, digits2 + 2 * (v % 100), 2);
	}
	if (v >= 10) {
		p -= 2;
		memcpy(p, digits2 + 2 * v, 2);
	} else {
		*--p = (char)('0' + v);
	}
	return p;
}

static void put_uint(struct lw *w, uint64_t v)
{
	char d[UINT_TEXT];
	const char *p = uint_text(d, v);
	put(w, p, (size_t)(d + UINT_TEXT - 1 - p));
}

/* 1 for the bytes a JSON string holds as they are: printable ASCII but '"' and '\\' (the NUL
 * that ends a C string is 0, as every control byte and byte >= 0x7f). */
#define J4(c) ((c) >= 0x20 && (c) < 0x7f && (c) != '"' && (c) != '\\')
/* The first 128 entries of a byte table, F(c) each (the rest are 0). */
#define T16(F, b)                                                                                  \
	F(b), F(b + 1), F(b + 2), F(b + 3), F(b + 4), F(b + 5), F(b + 6), F(b + 7), F(b + 8),      \
	    F(b + 9), F(b + 10), F(b + 11), F(b + 12), F(b + 13), F(b + 14), F(b + 15)
#define T128(F)                                                                                    \
	T16(F, 0), T16(F, 16), T16(F, 32), T16(F, 48), T16(F, 64), T16(F, 80), T16(F, 96),         \
	    T16(F, 112)
static const uint8_t json_plain[256] = {T128(J4)};

/* s as a JSON string (quotes included), or null. Runs of plain characters (nearly all of a
 * name or a reason) go in one copy. Returns strlen(s) (0 for NULL), found on the way. */
static size_t json_str(struct lw *w, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	if (!s) {
		PUT_LIT(w, "null");
		return 0;
	}
	put_c(w, '"');
	const unsigned char *p = (const unsigned char *)s;
	for (;;) {
		const unsigned char *q = p;
		while (json_plain[q[0]] && json_plain[q[1]] && json_plain[q[2]] && json_plain[q[3]])
			q += 4; /* never past the NUL: it stops the test it is in */
		while (json_plain[*q])
			q++;
		put(w, (const char *)p, (size_t)(q - p));
		if (!*q) {
			p = q;
			break;
		}
		if (*q == '"' || *q == '\\') {
			char e[2] = {'\\', (char)*q};
			put(w, e, 2);
		} else { /* a control character or a byte >= 0x7f */
			char e[6] = {'\\', 'u', '0', '0', hex[*q >> 4], hex[*q & 15]};
			put(w, e, 6);
		}
		p = q + 1;
	}
	put_c(w, '"');
	return (size_t)((const char *)p - s);
}

int log_json_quote(const char *s, char *out, size_t cap)
{
	char buf[LOG_LINE_MAX];
	struct lw w = {buf, buf + sizeof(buf)};
	json_str(&w, s);
	size_t n = (size_t)(w.p - buf);
	if (cap == 0)
		return MOAT_ESPACE;
	size_t k = n < cap ? n : cap - 1;
	memcpy(out, buf, k);
	out[k] = 0;
	return n < cap && n < sizeof(buf) ? (int)k : MOAT_ESPACE;
}

/* ---------------------------------------------------------------- addresses -- */

static char *ip4_text(char *o, const uint8_t *a)
{
	for (int i = 0; i < 4; i++) {
		unsigned v = a[i];
		if (i)
			*o++ = '.';
		if (v >= 100) {
			*o++ = (char)('0' + v / 100);
			v %= 100;
			memcpy(o, digits2 + 2 * v, 2);
			o += 2;
		} else if (v >= 10) {
			memcpy(o, digits2 + 2 * v, 2);
			o += 2;
		} else {
			*o++ = (char)('0' + v);
		}
	}
	return o;
}

/* RFC 5952 text as glibc's inet_ntop writes it: the first longest run of two or more zero
 * groups is "::", hex in lower case without leading zeros, and the last 32 bits in dotted
 * decimal for IPv4-mapped (::ffff:a.b.c.d) and IPv4-compatible (::a.b.c.d) addresses. */
static char *ip6_text(char *o, const uint8_t *a)
{
	static const char hex[] = "0123456789abcdef";
	unsigned wd[8];
	int best = -1, blen = 0, cur = -1, clen = 0;
	for (int i = 0; i < 8; i++) {
		wd[i] = (unsigned)a[2 * i] << 8 | a[2 * i + 1];
		if (wd[i] == 0) {
			if (cur < 0)
				cur = i, clen = 0;
			clen++;
			if (clen > blen)
				best = cur, blen = clen;
		} else {
			cur = -1;
		}
	}
	if (blen < 2)
		best = -1;
	for (int i = 0; i < 8; i++) {
		if (best >= 0 && i >= best && i < best + blen) {
			if (i == best)
				*o++ = ':';
			continue;
		}
		if (i)
			*o++ = ':';
		if (i == 6 && best == 0 && (blen == 6 || (blen == 5 && wd[5] == 0xffff)))
			return ip4_text(o, a + 12);
		bool lead = true;
		for (int s = 12; s >= 0; s -= 4) {
			unsigned d = (wd[i] >> s) & 15;
			if (lead && d == 0 && s)
				continue;
			lead = false;
			*o++ = hex[d];
		}
	}
	if (best >= 0 && best + blen == 8)
		*o++ = ':';
	return o;
}

size_t log_format_ip(char out[LOG_IP_MAX], const uint8_t *addr, size_t len)
{
	char *e = len == 4 ? ip4_text(out, addr) : len == 16 ? ip6_text(out, addr) : NULL;
	if (!e) {
		out[0] = '?';
		e = out + 1;
	}
	*e = 0;
	return (size_t)(e - out);
}

/* The address of sa (4 or 16 bytes) and its port, or NULL for another family. */
static const uint8_t *sa_addr(const struct sockaddr *sa, size_t *len, unsigned *port)
{
	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)(const void *)sa;
		*len = 4;
		*port = ntohs(s->sin_port);
		return (const uint8_t *)&s->sin_addr;
	}
	if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)(const void *)sa;
		*len = 16;
		*port = ntohs(s->sin6_port);
		return s->sin6_addr.s6_addr;
	}
	return NULL;
}

/* "192.0.2.1", or "[2001:db8::1]:53" / "192.0.2.1:53" with the port; "?" for no address. */
static size_t addr_text(const struct sockaddr *sa, bool with_port, char *t)
{
	size_t len, n = 0;
	unsigned port;
	const uint8_t *a = sa_addr(sa, &len, &port);
	if (!a) {
		t[0] = '?';
		return 1;
	}
	bool br = with_port && len == 16;
	if (br)
		t[n++] = '[';
	n += log_format_ip(t + n, a, len);
	if (br)
		t[n++] = ']';
	if (with_port) {
		char d[5];
		int k = 0;
		t[n++] = ':';
		do
			d[k++] = (char)('0' + port % 10);
		while ((port /= 10) && k < 5);
		while (k > 0)
			t[n++] = d[--k];
	}
	return n;
}

const char *log_format_addr(const struct sockaddr *sa, bool with_port, char *buf, size_t cap)
{
	char t[LOG_IP_MAX + 8];
	size_t n = addr_text(sa, with_port, t);
	if (cap == 0)
		return buf;
	if (n >= cap)
		n = cap - 1;
	memcpy(buf, t, n);
	buf[n] = 0;
	return buf;
}

/* ---------------------------------------------------------------- memos -- */

/* Most of a line repeats from one query to the next (one sandbox asks, with the same agent,
 * decision and reason), so each thread keeps the JSON text of the last values it wrote: a field
 * that did not change is one copy. Strings that log.h says are constants are kept by pointer;
 * the others (the agent's name, the reason) are compared first; addresses by their bytes. */
#define MEMO_TEXT 200 /* a longer string is escaped every time */

struct cmemo { /* a string constant: its pointer says it all */
	const char *ptr;
	uint16_t len;
	char text[64];
};

struct vmemo {                /* any string: compared before its text is reused */
	uint16_t len, rawlen; /* of text and of raw; len 0: empty */
	char raw[MEMO_TEXT];
	char text[MEMO_TEXT * 6 + 2];
};

struct amemo { /* an address (and port): family, bytes, port */
	uint8_t key[20];
	uint16_t len;
	char text[LOG_IP_MAX + 10];
};

static _Thread_local struct {
	struct cmemo c[16];
	struct vmemo agent, reason, rule;
	struct amemo upstream;
} memo;

/* A string constant (transport, decision, rcode, grant). */
static void put_const(struct lw *w, const char *s)
{
	if (!s) {
		PUT_LIT(w, "null");
		return;
	}
	struct cmemo *m = &memo.c[((uintptr_t)s >> 3 ^ (uintptr_t)s >> 7) & 15];
	if (m->ptr != s) {
		struct lw t = {m->text, m->text + sizeof(m->text)};
		json_str(&t, s);
		if (t.p == t.end) { /* too long to keep */
			m->ptr = NULL;
			json_str(w, s);
			return;
		}
		m->len = (uint16_t)(t.p - m->text);
		m->ptr = s;
	}
	PUT_UPTO(w, m->text, m->len, 32);
}

/* m made to hold s's JSON text: compared first, escaped again only when s changed. False when
 * s is too long to keep (the caller escapes it itself). */
static bool memo_hold(struct vmemo *m, const char *s)
{
	if (m->len && strcmp(s, m->raw) == 0)
		return true;
	struct lw t = {m->text, m->text + sizeof(m->text)};
	size_t n = json_str(&t, s);
	if (n >= MEMO_TEXT || t.p == t.end) {
		m->len = 0;
		return false;
	}
	memcpy(m->raw, s, n + 1);
	m->rawlen = (uint16_t)n;
	m->len = (uint16_t)(t.p - m->text);
	return true;
}

/* Any string, NULL as null. */
static void put_str(struct lw *w, const char *s, struct vmemo *m)
{
	if (!s)
		PUT_LIT(w, "null");
	else if (memo_hold(m, s))
		PUT_UPTO(w, m->text, m->len, 64);
	else
		json_str(w, s);
}

/* A reason's text at most, as a decision holds it: the rule's reason is cut where policy_reason
 * and moatctl explain cut it, and a long file name cannot push the line past LOG_LINE_MAX (it is
 * also in "rule"). */
#define RULE_REASON_MAX (sizeof(((struct policy_decision *)0)->reason) - 1)

/* An allow's reason left to its rule (log.h's reason_rule): "allowed by FILE:LINE", from the rule
 * file's kept text (rule: memo.rule holding rule_file, or NULL if too long to keep). line (llen
 * bytes) is rule_line's text. */
static void put_rule_reason(struct lw *w, const struct log_query *e, const struct vmemo *rule,
                            const char *line, size_t llen)
{
	static const char lead[] = "allowed by ";
	const size_t ll = sizeof(lead) - 1;
	if (!rule || ll + rule->rawlen + 1 + llen > RULE_REASON_MAX) {
		/* The text made and cut as policy_reason makes it, then escaped as any reason. */
		char t[RULE_REASON_MAX + 1];
		snprintf(t, sizeof(t), "%s%s:%.*s", lead, e->rule_file, (int)llen, line);
		json_str(w, t);
		return;
	}
	PUT_LIT(w, "\"allowed by ");
	put(w, rule->text + 1, rule->len - 2u); /* the file's text without its quotes */
	put_c(w, ':');
	put(w, line, llen);
	put_c(w, '"');
}

/* An address as a JSON string (its text never needs escaping). */
static void put_addr(struct lw *w, const struct sockaddr *sa, bool with_port, struct amemo *m)
{
	uint8_t key[20] = {0};
	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)(const void *)sa;
		key[0] = 4;
		memcpy(key + 2, &s->sin_port, 2);
		memcpy(key + 4, &s->sin_addr, 4);
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)(const void *)sa;
		key[0] = 6;
		memcpy(key + 2, &s->sin6_port, 2);
		memcpy(key + 4, &s->sin6_addr, 16);
	}
	key[1] = with_port;
	if (!m->len || memcmp(key, m->key, sizeof(key)) != 0) {
		m->text[0] = '"';
		size_t n = 1 + addr_text(sa, with_port, m->text + 1);
		m->text[n++] = '"';
		m->len = (uint16_t)n;
		memcpy(m->key, key, sizeof(key));
	}
	PUT_UPTO(w, m->text, m->len, 32);
}

/* ---------------------------------------------------------------- fields -- */

/* The characters name_to_text escapes as \c ('.', '\\', '"', ';', '(', ')', '@', '$'), as bits
 * of c (below 64) and of c - 64. */
#define NAME_SPECIAL_LO                                                                            \
	((1ull << '"') | (1ull << '$') | (1ull << '(') | (1ull << ')') | (1ull << '.') |           \
	 (1ull << ';'))
#define NAME_SPECIAL_HI ((1ull << ('@' - 64)) | (1ull << ('\\' - 64)))

/* 1 for the bytes a name's text holds as they are: 33..126 but the special ones. */
#define N4(c)                                                                                      \
	((c) > 32 && (c) < 127 &&                                                                  \
	 !(((c) < 64 ? NAME_SPECIAL_LO >> (c) : NAME_SPECIAL_HI >> ((c)-64)) & 1))
static const uint8_t name_plain[256] = {T128(N4)};

/* A wire name as the JSON string of its presentation form: exactly what json_str of
 * name_to_text's text gives (\DDD for bytes outside 33..126, \c for the special ones, each
 * backslash then escaped for JSON), in one pass. out has room for the longest (5 bytes a
 * byte). */
static char *qname_json(char *o, const uint8_t *p)
{
	*o++ = '"';
	if (!*p)
		*o++ = '.';
	while (*p) {
		unsigned n = *p++, plain = 1;
		/* Copied as it is checked (a call to memcpy a label cost more than the label): a
		 * label that is not plain is written again over it. */
		unsigned k = 0;
		for (; k + 4 <= n; k += 4) {
			memcpy(o + k, p + k, 4);
			plain &= name_plain[p[k]] & name_plain[p[k + 1]] & name_plain[p[k + 2]] &
			         name_plain[p[k + 3]];
		}
		for (; k < n; k++) {
			o[k] = (char)p[k];
			plain &= name_plain[p[k]];
		}
		if (plain) { /* nearly every label */
			o += n, p += n;
			*o++ = '.';
			continue;
		}
		for (unsigned k = 0; k < n; k++) {
			unsigned c = *p++;
			if (c <= 32 || c >= 127) {
				o[0] = '\\', o[1] = '\\';
				o[2] = (char)('0' + c / 100);
				o[3] = (char)('0' + c / 10 % 10);
				o[4] = (char)('0' + c % 10);
				o += 5;
			} else if ((c < 64 ? NAME_SPECIAL_LO >> c : NAME_SPECIAL_HI >> (c - 64)) &
			           1) {
				*o++ = '\\', *o++ = '\\';
				if (c == '"' || c == '\\')
					*o++ = '\\'; /* the character itself, escaped for JSON */
				*o++ = (char)c;
			} else {
				*o++ = (char)c;
			}
		}
		*o++ = '.';
	}
	*o++ = '"';
	return o;
}

static void put_qname(struct lw *w, const uint8_t *wire)
{
	char t[2 + NAME_MAXWIRE * 5];
	if ((size_t)(w->end - w->p) >= sizeof(t)) {
		w->p = qname_json(w->p, wire);
		return;
	}
	put(w, t, (size_t)(qname_json(t, wire) - t));
}

/* The type's mnemonic (wire_type_str), kept per thread for the few types a log sees. */
static void put_qtype(struct lw *w, uint16_t type)
{
	static _Thread_local struct {
		uint16_t type;
		uint8_t len; /* 0: empty */
		char text[14];
	} memo[8];
	unsigned i = type & 7;
	if (memo[i].len == 0 || memo[i].type != type) {
		char buf[16];
		const char *s = wire_type_str(type, buf, sizeof(buf));
		size_t n = strlen(s);
		memo[i].text[0] = '"';
		memcpy(memo[i].text + 1, s, n);
		memo[i].text[n + 1] = '"';
		memo[i].len = (uint8_t)(n + 2);
		memo[i].type = type;
	}
	PUT_UPTO(w, memo[i].text, memo[i].len, 8);
}

void log_format_ts(int64_t unix_ms, char ts[LOG_TS_LEN])
{
	/* "2026-11-30T07:55:01": formatted once a second, not once a line. */
	static _Thread_local time_t last = -1;
	static _Thread_local char text[32];
	time_t sec = (time_t)(unix_ms / 1000);
	unsigned ms = (unsigned)(unix_ms % 1000);
	if (sec != last) {
		struct tm tm;
		gmtime_r(&sec, &tm);
		strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &tm);
		last = sec;
	}
	memcpy(ts, text, 19);
	ts[19] = '.';
	ts[20] = (char)('0' + ms / 100);
	ts[21] = (char)('0' + ms / 10 % 10);
	ts[22] = (char)('0' + ms % 10);
	ts[23] = 'Z';
}

/* ---------------------------------------------------------------- runs -- */

/* A run of fields whose values are constants (log.h: kept by pointer) and numbers: the text of
 * the last one a thread wrote is kept with the key it was made of, so the same run again is one
 * copy. Nearly every line is four such runs around the few values of its own (ts, name,
 * reason, rule, addresses): field by field, a line took ~30 bounded copies. */
#define RUN_TEXT 128
struct run {
	uint64_t key[4];
	uint16_t len; /* 0: empty */
	char text[RUN_TEXT];
};

static _Thread_local struct {
	struct run head, question, result, grant;
} runs;

/* The kept text of r if it was made of key (written, true), else false. */
static inline bool run_put(struct lw *w, const struct run *r, const uint64_t key[4])
{
	/* Word by word: memcmp was a call. */
	if (!r->len || ((r->key[0] ^ key[0]) | (r->key[1] ^ key[1]) | (r->key[2] ^ key[2]) |
	                (r->key[3] ^ key[3])))
		return false;
	PUT_UPTO(w, r->text, r->len, RUN_TEXT);
	return true;
}

/* Keep what was written since start as r's text (a cut one is not kept). */
static void run_keep(struct run *r, const uint64_t key[4], const char *start, const struct lw *w)
{
	size_t n = (size_t)(w->p - start);
	r->len = 0;
	if (w->p == w->end || n == 0 || n > RUN_TEXT)
		return;
	memcpy(r->key, key, sizeof(r->key));
	memcpy(r->text, start, n);
	r->len = (uint16_t)n;
}

/* ","client":"ADDR","transport":"udp","agent": (after the ts). */
static void put_head(struct lw *w, const struct log_query *e)
{
	uint64_t key[4] = {0, 0, 0, (uintptr_t)e->transport};
	const struct sockaddr *sa = e->client;
	size_t alen;
	unsigned port;
	const uint8_t *a = sa_addr(sa, &alen, &port);
	if (a) { /* its length tells the family */
		key[0] = alen;
		memcpy(&key[1], a, alen);
	}
	if (run_put(w, &runs.head, key))
		return;
	char *start = w->p;
	char t[LOG_IP_MAX + 2];
	t[0] = '"';
	size_t n = 1 + addr_text(sa, false, t + 1);
	t[n++] = '"';
	PUT_LIT(w, "\",\"client\":");
	put(w, t, n);
	PUT_LIT(w, ",\"transport\":");
	put_const(w, e->transport);
	PUT_LIT(w, ",\"agent\":");
	run_keep(&runs.head, key, start, w);
}

/* ,"qtype":"A","qclass":1,"decision":"allow","reason": */
static void put_question(struct lw *w, const struct log_query *e)
{
	const uint64_t key[4] = {(uint64_t)e->qtype | (uint64_t)e->qclass << 16 |
	                             (uint64_t)(e->qname != NULL) << 32,
	                         (uintptr_t)e->decision, 0, 0};
	if (run_put(w, &runs.question, key))
		return;
	char *start = w->p;
	PUT_LIT(w, ",\"qtype\":");
	if (e->qname)
		put_qtype(w, e->qtype);
	else
		PUT_LIT(w, "null");
	PUT_LIT(w, ",\"qclass\":");
	put_uint(w, e->qclass);
	PUT_LIT(w, ",\"decision\":");
	put_const(w, e->decision);
	PUT_LIT(w, ",\"reason\":");
	run_keep(&runs.question, key, start, w);
}

/* ,"rcode":"NOERROR","upstream":null,"upstream_ms":null,"alert":false,"v":2,"rule":
 * A forwarded answer's upstream and time are its own: written field by field. */
static void put_result(struct lw *w, const struct log_query *e)
{
	bool local = !e->upstream && e->upstream_us < 0;
	const uint64_t key[4] = {(uint64_t)(uint32_t)e->rcode | (uint64_t)e->alert << 32, 0, 0, 0};
	if (local && run_put(w, &runs.result, key))
		return;
	char *start = w->p;
	PUT_LIT(w, ",\"rcode\":");
	put_const(w, e->rcode < 0 ? NULL : wire_rcode_str((uint8_t)e->rcode));
	PUT_LIT(w, ",\"upstream\":");
	if (e->upstream)
		put_addr(w, e->upstream, true, &memo.upstream);
	else
		PUT_LIT(w, "null");
	PUT_LIT(w, ",\"upstream_ms\":");
	if (e->upstream_us >= 0) {
		put_uint(w, (uint64_t)e->upstream_us / 1000);
		char frac[4] = {'.', (char)('0' + e->upstream_us % 1000 / 100),
		                (char)('0' + e->upstream_us % 100 / 10),
		                (char)('0' + e->upstream_us % 10)};
		put(w, frac, 4);
	} else {
		PUT_LIT(w, "null");
	}
	if (e->alert)
		PUT_LIT(w, ",\"alert\":true,\"v\":2,\"rule\":");
	else
		PUT_LIT(w, ",\"alert\":false,\"v\":2,\"rule\":");
	if (local)
		run_keep(&runs.result, key, start, w);
}

/* ,"grant":"none","grant_lifetime":null} */
static void put_grant(struct lw *w, const struct log_query *e)
{
	const uint64_t key[4] = {(uintptr_t)e->grant,
	                         (uint64_t)e->grant_life << 1 | e->has_grant_life, 0, 0};
	if (run_put(w, &runs.grant, key))
		return;
	char *start = w->p;
	PUT_LIT(w, ",\"grant\":");
	put_const(w, e->grant);
	PUT_LIT(w, ",\"grant_lifetime\":");
	if (e->has_grant_life)
		put_uint(w, e->grant_life);
	else
		PUT_LIT(w, "null");
	put_c(w, '}');
	run_keep(&runs.grant, key, start, w);
}

/* The addresses passed: a list of strings, or null. */
static void put_answer(struct lw *w, const struct log_query *e)
{
	PUT_LIT(w, ",\"answer\":");
	if (!e->has_answer) {
		PUT_LIT(w, "null");
		return;
	}
	put_c(w, '[');
	const uint8_t *a = e->answer;
	for (unsigned i = 0; i < e->nanswer; i++) {
		char t[LOG_IP_MAX + 3];
		t[0] = i ? ',' : '"';
		size_t n = 1;
		if (i)
			t[n++] = '"';
		n += log_format_ip(t + n, a, e->alen[i]);
		t[n++] = '"';
		put(w, t, n);
		a += e->alen[i];
	}
	put_c(w, ']');
}

/* Close the line: an overlong one is cut, never left without its brace and newline. */
static size_t line_end(struct lw *w, char *out)
{
	if (w->p == w->end)
		w->p--;
	*w->p++ = '\n';
	return (size_t)(w->p - out);
}

size_t log_format_query(char out[LOG_LINE_MAX], const struct log_query *e,
                        const char ts[LOG_TS_LEN])
{
	struct lw w = {out, out + LOG_LINE_MAX - 1}; /* the last byte: the newline */
	PUT_LIT(&w, "{\"ts\":\"");
	put(&w, ts, LOG_TS_LEN);
	put_head(&w, e);
	put_str(&w, e->agent, &memo.agent);
	PUT_LIT(&w, ",\"qname\":");
	if (e->qname)
		put_qname(&w, e->qname);
	else
		PUT_LIT(&w, "null");
	put_question(&w, e);
	/* The rule, in the reason and the rule: its file's text and its line's made once. */
	char d[UINT_TEXT];
	const char *line = e->rule_file ? uint_text(d, e->rule_line) : NULL;
	size_t llen = line ? (size_t)(d + UINT_TEXT - 1 - line) : 0;
	const struct vmemo *rule =
	    e->rule_file && memo_hold(&memo.rule, e->rule_file) ? &memo.rule : NULL;
	if (e->reason_rule && line)
		put_rule_reason(&w, e, rule, line, llen);
	else
		put_str(&w, e->reason, &memo.reason);
	put_result(&w, e);
	if (line) {
		if (rule)
			put(&w, rule->text, rule->len);
		else
			json_str(&w, e->rule_file);
		w.p--; /* reopen the string for ":line" */
		put_c(&w, ':');
		put(&w, line, llen);
		put_c(&w, '"');
	} else {
		PUT_LIT(&w, "null");
	}
	put_answer(&w, e);
	put_grant(&w, e);
	return line_end(&w, out);
}

size_t log_format_repeated(char out[LOG_LINE_MAX], const char *line, size_t len,
                           const char ts[LOG_TS_LEN], uint64_t count)
{
	struct lw w = {out, out + LOG_LINE_MAX - 1};
	/* The line as it was, its ts now, "repeated" before the closing brace. */
	PUT_LIT(&w, "{\"ts\":\"");
	put(&w, ts, LOG_TS_LEN);
	put(&w, line + LOG_TS_END, len - LOG_TS_END - 2);
	PUT_LIT(&w, ",\"repeated\":");
	put_uint(&w, count);
	put_c(&w, '}');
	return line_end(&w, out);
}

size_t log_format_suppressed(char out[LOG_LINE_MAX], const char ts[LOG_TS_LEN], uint64_t count,
                             const char *why)
{
	struct lw w = {out, out + LOG_LINE_MAX - 1};
	PUT_LIT(&w, "{\"ts\":\"");
	put(&w, ts, LOG_TS_LEN);
	PUT_LIT(&w, "\",\"v\":2,\"suppressed\":");
	put_uint(&w, count);
	PUT_LIT(&w, ",\"why\":");
	json_str(&w, why);
	put_c(&w, '}');
	return line_end(&w, out);
}
