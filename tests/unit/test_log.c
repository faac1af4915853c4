/* Unit tests for the query log: each line is read back by a small strict JSON parser (flat
 * object, strings, numbers, true/false/null) and its fields compared with log.h's format,
 * including hostile names (quotes, backslashes, control bytes) and the null fields. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moat/log.h"
#include "moat/name.h"
#include "moat/policy.h"

/* ---- a strict JSON reader for one flat object ---- */

#define JMAX 20

struct jfield {
	char key[32];
	char kind; /* 's' string, 'n' number, 'b' boolean, 'z' null */
	char val[2048];
	size_t vlen;
};

struct jobj {
	struct jfield f[JMAX];
	int n;
};

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Read a JSON string at *p (the opening quote) into out; code points above 0xFF are refused
 * (the log escapes bytes one by one). Returns the length or -1. */
static long jstring(const char **p, char *out, size_t cap)
{
	const char *s = *p;
	size_t o = 0;
	if (*s++ != '"')
		return -1;
	for (;;) {
		unsigned char c = (unsigned char)*s++;
		if (c == '"')
			break;
		if (c < 0x20)
			return -1; /* raw control bytes are not JSON */
		if (c == '\\') {
			char e = *s++;
			switch (e) {
			case '"':
			case '\\':
			case '/':
				c = (unsigned char)e;
				break;
			case 'b':
				c = '\b';
				break;
			case 'f':
				c = '\f';
				break;
			case 'n':
				c = '\n';
				break;
			case 'r':
				c = '\r';
				break;
			case 't':
				c = '\t';
				break;
			case 'u': {
				int v = 0;
				for (int k = 0; k < 4; k++) {
					int h = hexval(s[k]);
					if (h < 0)
						return -1;
					v = v * 16 + h;
				}
				s += 4;
				if (v > 0xFF)
					return -1;
				c = (unsigned char)v;
				break;
			}
			default:
				return -1;
			}
		}
		if (o + 1 >= cap)
			return -1;
		out[o++] = (char)c;
	}
	out[o] = 0;
	*p = s;
	return (long)o;
}

/* Parse line (one object, then "\n" and nothing else). Returns 0 or -1. */
static int jparse(const char *line, struct jobj *obj)
{
	const char *p = line;
	obj->n = 0;
	if (*p++ != '{')
		return -1;
	for (;;) {
		if (obj->n >= JMAX)
			return -1;
		struct jfield *f = &obj->f[obj->n];
		if (jstring(&p, f->key, sizeof(f->key)) < 0)
			return -1;
		if (*p++ != ':')
			return -1;
		if (*p == '"') {
			long l = jstring(&p, f->val, sizeof(f->val));
			if (l < 0)
				return -1;
			f->kind = 's';
			f->vlen = (size_t)l;
		} else if (*p == '[') {
			/* a list of strings (v2 "answer"), kept as "a|b|c" */
			size_t o = 0;
			p++;
			while (*p != ']') {
				char item[64];
				long l = jstring(&p, item, sizeof(item));
				if (l < 0 || o + (size_t)l + 2 > sizeof(f->val))
					return -1;
				if (o)
					f->val[o++] = '|';
				memcpy(f->val + o, item, (size_t)l);
				o += (size_t)l;
				if (*p == ',')
					p++;
				else if (*p != ']')
					return -1;
			}
			p++;
			f->val[o] = 0;
			f->kind = 'a';
		} else if (strncmp(p, "null", 4) == 0) {
			f->kind = 'z';
			p += 4;
		} else if (strncmp(p, "true", 4) == 0 || strncmp(p, "false", 5) == 0) {
			f->kind = 'b';
			size_t l = *p == 't' ? 4 : 5;
			memcpy(f->val, p, l);
			f->val[l] = 0;
			p += l;
		} else if (*p == '-' || (*p >= '0' && *p <= '9')) {
			const char *b = p;
			if (*p == '-')
				p++;
			if (!(*p >= '0' && *p <= '9'))
				return -1;
			while (*p >= '0' && *p <= '9')
				p++;
			if (*p == '.') {
				p++;
				if (!(*p >= '0' && *p <= '9'))
					return -1;
				while (*p >= '0' && *p <= '9')
					p++;
			}
			f->kind = 'n';
			memcpy(f->val, b, (size_t)(p - b));
			f->val[p - b] = 0;
		} else {
			return -1;
		}
		obj->n++;
		if (*p == ',') {
			p++;
			continue;
		}
		if (*p++ != '}')
			return -1;
		break;
	}
	return strcmp(p, "\n") == 0 ? 0 : -1;
}

static const struct jfield *jget(const struct jobj *o, const char *key)
{
	for (int i = 0; i < o->n; i++)
		if (strcmp(o->f[i].key, key) == 0)
			return &o->f[i];
	return NULL;
}

#define EXPECT_STR(o, key, want)                                                                   \
	do {                                                                                       \
		const struct jfield *f_ = jget(o, key);                                            \
		cr_assert_not_null(f_, "no field %s", key);                                        \
		cr_expect_eq(f_->kind, 's', "%s is not a string", key);                            \
		cr_expect_str_eq(f_->val, want, "field %s", key);                                  \
	} while (0)

#define EXPECT_KIND(o, key, k, want)                                                               \
	do {                                                                                       \
		const struct jfield *f_ = jget(o, key);                                            \
		cr_assert_not_null(f_, "no field %s", key);                                        \
		cr_expect_eq(f_->kind, k, "%s kind %c", key, f_->kind);                            \
		if (want)                                                                          \
			cr_expect_str_eq(f_->val, (const char *)(want), "field %s", key);          \
	} while (0)

/* ---- writing and reading back ---- */

static char line[8192];

/* Format e and check the result: exactly one line, valid JSON. */
static void write_and_read(const struct log_query *e, struct jobj *obj)
{
	char ts[LOG_TS_LEN];
	log_format_ts(1796025301123, ts); /* 2026-11-30T07:55:01.123Z */
	size_t n = log_format_query(line, e, ts);
	cr_assert_gt(n, 0);
	cr_assert_leq(n, LOG_LINE_MAX);
	line[n] = 0;
	cr_assert_eq(strlen(line), n, "no NUL byte inside the line");
	cr_assert_eq(line[n - 1], '\n');
	cr_assert_eq(strchr(line, '\n'), line + n - 1, "exactly one line: %s", line);
	cr_assert_eq(jparse(line, obj), 0, "not valid JSON: %s", line);
}

static struct sockaddr_in v4(const char *ip, uint16_t port)
{
	struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(port)};
	cr_assert_eq(inet_pton(AF_INET, ip, &s.sin_addr), 1);
	return s;
}

static struct sockaddr_in6 v6(const char *ip, uint16_t port)
{
	struct sockaddr_in6 s = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
	cr_assert_eq(inet_pton(AF_INET6, ip, &s.sin6_addr), 1);
	return s;
}

static const char *const fields[] = {"ts",       "client",      "transport",     "agent",  "qname",
                                     "qtype",    "qclass",      "decision",      "reason", "rcode",
                                     "upstream", "upstream_ms", "alert",         "v",      "rule",
                                     "answer",   "grant",       "grant_lifetime"};

Test(log, full_line)
{
	struct sockaddr_in c = v4("10.1.2.3", 40000), u = v4("192.0.2.53", 53);
	uint8_t qn[NAME_MAXWIRE];
	cr_assert_gt(name_from_text("WWW.example.com", 15, qn), 0);
	struct log_query e = {
	    .client = (struct sockaddr *)&c,
	    .transport = "udp",
	    .agent = "ci-42",
	    .qname = qn,
	    .qtype = 1,
	    .qclass = 1,
	    .decision = "allow",
	    .reason = "allowed by allow/example.txt:12",
	    .rcode = 0,
	    .upstream = (struct sockaddr *)&u,
	    .upstream_us = 1234,
	    .alert = false,
	};
	struct jobj o;
	write_and_read(&e, &o);
	cr_expect_eq(o.n, (int)(sizeof(fields) / sizeof(fields[0])), "%s", line);
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]) && i < (size_t)o.n; i++)
		cr_expect_str_eq(o.f[i].key, fields[i], "field order");
	const struct jfield *ts = jget(&o, "ts");
	cr_assert_not_null(ts);
	cr_expect_eq(ts->kind, 's');
	/* 2026-11-30T07:55:01.123Z */
	const char *pat = "dddd-dd-ddTdd:dd:dd.dddZ";
	cr_assert_eq(strlen(ts->val), strlen(pat), "ts %s", ts->val);
	for (size_t i = 0; pat[i]; i++) {
		if (pat[i] == 'd')
			cr_expect(ts->val[i] >= '0' && ts->val[i] <= '9', "ts %s", ts->val);
		else
			cr_expect_eq(ts->val[i], pat[i], "ts %s", ts->val);
	}
	EXPECT_STR(&o, "client", "10.1.2.3");
	EXPECT_STR(&o, "transport", "udp");
	EXPECT_STR(&o, "agent", "ci-42");
	EXPECT_STR(&o, "qname", "www.example.com.");
	EXPECT_STR(&o, "qtype", "A");
	EXPECT_KIND(&o, "qclass", 'n', "1");
	EXPECT_STR(&o, "decision", "allow");
	EXPECT_STR(&o, "reason", "allowed by allow/example.txt:12");
	EXPECT_STR(&o, "rcode", "NOERROR");
	EXPECT_STR(&o, "upstream", "192.0.2.53:53");
	EXPECT_KIND(&o, "upstream_ms", 'n', "1.234");
	EXPECT_KIND(&o, "alert", 'b', "false");
}

Test(log, null_fields)
{
	struct sockaddr_in6 c = v6("2001:db8::1", 5353);
	struct log_query e = {
	    .client = (struct sockaddr *)&c,
	    .transport = "tcp",
	    .agent = NULL,
	    .qname = NULL,
	    .qtype = 28,
	    .qclass = 1,
	    .decision = "refused-unknown-client",
	    .reason = NULL,
	    .rcode = -1,
	    .upstream = NULL,
	    .upstream_us = -1,
	    .alert = true,
	};
	struct jobj o;
	write_and_read(&e, &o);
	cr_expect_eq(o.n, 18);
	EXPECT_KIND(&o, "v", 'n', "2");
	EXPECT_KIND(&o, "rule", 'z', NULL);
	EXPECT_KIND(&o, "answer", 'z', NULL);
	EXPECT_KIND(&o, "grant", 'z', NULL);
	EXPECT_KIND(&o, "grant_lifetime", 'z', NULL);
	EXPECT_STR(&o, "client", "2001:db8::1");
	EXPECT_STR(&o, "transport", "tcp");
	EXPECT_KIND(&o, "agent", 'z', NULL);
	EXPECT_KIND(&o, "qname", 'z', NULL);
	EXPECT_KIND(&o, "qtype", 'z', NULL);
	EXPECT_KIND(&o, "reason", 'z', NULL);
	EXPECT_KIND(&o, "rcode", 'z', NULL);
	EXPECT_KIND(&o, "upstream", 'z', NULL);
	EXPECT_KIND(&o, "upstream_ms", 'z', NULL);
	EXPECT_KIND(&o, "alert", 'b', "true");
}

/* An allowed UDP query with nothing else set. */
static struct log_query plain_allow(const struct sockaddr_in *c)
{
	return (struct log_query){.client = (const struct sockaddr *)c,
	                          .transport = "udp",
	                          .decision = "allow",
	                          .rcode = 0,
	                          .upstream_us = -1};
}

Test(log, v2_fields)
{
	struct sockaddr_in c = v4("10.1.2.3", 40000);
	const uint8_t addrs[4 + 16] = {192, 0, 2, 10, 0x20, 0x01, 0x0d, 0xb8, [19] = 0x10};
	const uint8_t lens[2] = {4, 16};
	struct log_query e = {
	    .client = (struct sockaddr *)&c,
	    .transport = "tcp",
	    .agent = "ci-42",
	    .decision = "allow-cached",
	    .rcode = 0,
	    .upstream_us = -1,
	    .rule_file = "allow/ci \"x\".txt",
	    .rule_line = 12,
	    .answer = addrs,
	    .alen = lens,
	    .nanswer = 2,
	    .has_answer = true,
	    .grant = "OK",
	    .has_grant_life = true,
	    .grant_life = 300,
	};
	struct jobj o;
	write_and_read(&e, &o);
	EXPECT_KIND(&o, "v", 'n', "2");
	EXPECT_STR(&o, "rule", "allow/ci \"x\".txt:12");
	EXPECT_KIND(&o, "answer", 'a', "192.0.2.10|2001:db8::10");
	EXPECT_STR(&o, "grant", "OK");
	EXPECT_KIND(&o, "grant_lifetime", 'n', "300");
	/* released with no address: an empty list, not null */
	e.nanswer = 0;
	e.grant = "none";
	e.has_grant_life = false;
	write_and_read(&e, &o);
	EXPECT_KIND(&o, "answer", 'a', "");
	EXPECT_STR(&o, "grant", "none");
	EXPECT_KIND(&o, "grant_lifetime", 'z', NULL);
	cr_expect_eq(LOG_FORMAT_VERSION, 2);
}

Test(log, json_quote)
{
	char out[64];
	cr_expect_eq(log_json_quote("a\"b\\c\n", out, sizeof(out)), 15);
	cr_expect_str_eq(out, "\"a\\\"b\\\\c\\u000a\"");
	cr_expect_eq(log_json_quote(NULL, out, sizeof(out)), 4);
	cr_expect_str_eq(out, "null");
	char small[4];
	cr_expect_lt(log_json_quote("abcdef", small, sizeof(small)), 0);
	cr_expect_str_eq(small, "\"ab");
}

Test(log, hostile_name_escaped)
{
	/* one label: a " b 0x01 c \ d, then "com"; and a label with 0x7f, 0xff, '\n', tab */
	const uint8_t qn[] = {8,    'a',  '"',  'b',  0x01, 'c', '\\', 'd', '}', 4,
	                      0x7f, 0xff, '\n', '\t', 3,    'c', 'o',  'm', 0};
	struct sockaddr_in c = v4("127.0.0.1", 1);
	struct log_query e = {
	    .client = (struct sockaddr *)&c,
	    .transport = "udp",
	    .agent = "a\"gent",
	    .qname = qn,
	    .qtype = 16,
	    .qclass = 3,
	    .decision = "deny-not-allowed",
	    .reason = "bad \"reason\" \\ with\nnewline\x01 and \xc3\xa9",
	    .rcode = 5,
	    .upstream = NULL,
	    .upstream_us = -1,
	};
	struct jobj o;
	write_and_read(&e, &o);
	char text[NAME_MAXTEXT];
	cr_assert_gt(name_to_text(qn, text, sizeof(text)), 0);
	cr_expect_str_eq(text, "a\\\"b\\001c\\\\d}.\\127\\255\\010\\009.com.");
	EXPECT_STR(&o, "qname", text);
	EXPECT_STR(&o, "agent", "a\"gent");
	EXPECT_STR(&o, "reason", "bad \"reason\" \\ with\nnewline\x01 and \xc3\xa9");
	EXPECT_STR(&o, "qtype", "TXT");
	EXPECT_KIND(&o, "qclass", 'n', "3");
	EXPECT_STR(&o, "rcode", "REFUSED");
	/* no raw control or non-ASCII bytes anywhere but the final newline */
	for (const unsigned char *p = (const unsigned char *)line; *p; p++)
		if (*p != '\n')
			cr_expect(*p >= 0x20 && *p < 0x7f, "raw byte 0x%02x in %s", *p, line);
}

Test(log, rcodes_and_types)
{
	struct sockaddr_in c = v4("10.0.0.1", 1);
	uint8_t qn[NAME_MAXWIRE];
	cr_assert_gt(name_from_text(".", 1, qn), 0);
	struct log_query e = {.client = (struct sockaddr *)&c,
	                      .transport = "udp",
	                      .qname = qn,
	                      .qtype = 4242,
	                      .qclass = 1,
	                      .decision = "badvers",
	                      .rcode = 16,
	                      .upstream_us = -1};
	struct jobj o;
	write_and_read(&e, &o);
	EXPECT_STR(&o, "qname", ".");
	EXPECT_STR(&o, "qtype", "TYPE4242");
	EXPECT_STR(&o, "rcode", "BADVERS");
	e.rcode = 3;
	write_and_read(&e, &o);
	EXPECT_STR(&o, "rcode", "NXDOMAIN");
	/* no transport, no client */
	e.client = NULL;
	e.transport = NULL;
	write_and_read(&e, &o);
	EXPECT_STR(&o, "client", "?");
	EXPECT_KIND(&o, "transport", 'z', NULL);
}

Test(log, upstream_v6_and_timing)
{
	struct sockaddr_in c = v4("10.0.0.1", 1);
	struct sockaddr_in6 u = v6("2001:db8::53", 5353);
	struct log_query e = {.client = (struct sockaddr *)&c,
	                      .transport = "udp",
	                      .decision = "allow",
	                      .rcode = 0,
	                      .upstream = (struct sockaddr *)&u,
	                      .upstream_us = 0};
	struct jobj o;
	write_and_read(&e, &o);
	EXPECT_STR(&o, "upstream", "[2001:db8::53]:5353");
	EXPECT_KIND(&o, "upstream_ms", 'n', "0.000");
	e.upstream_us = 2500000;
	write_and_read(&e, &o);
	EXPECT_KIND(&o, "upstream_ms", 'n', "2500.000");
}

Test(log, format_addr)
{
	char buf[80];
	struct sockaddr_in a = v4("192.0.2.1", 53);
	struct sockaddr_in6 b = v6("::ffff:10.0.0.1", 853);
	cr_expect_str_eq(log_format_addr((struct sockaddr *)&a, false, buf, sizeof(buf)),
	                 "192.0.2.1");
	cr_expect_str_eq(log_format_addr((struct sockaddr *)&a, true, buf, sizeof(buf)),
	                 "192.0.2.1:53");
	cr_expect_str_eq(log_format_addr((struct sockaddr *)&b, false, buf, sizeof(buf)),
	                 "::ffff:10.0.0.1");
	cr_expect_str_eq(log_format_addr((struct sockaddr *)&b, true, buf, sizeof(buf)),
	                 "[::ffff:10.0.0.1]:853");
	struct sockaddr_in6 c = v6("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", 65535);
	cr_expect_str_eq(log_format_addr((struct sockaddr *)&c, true, buf, sizeof(buf)),
	                 "[2001:db8:ffff:ffff:ffff:ffff:ffff:ffff]:65535");
	struct sockaddr_in d = v4("0.0.0.0", 0);
	cr_expect_str_eq(log_format_addr((struct sockaddr *)&d, true, buf, sizeof(buf)),
	                 "0.0.0.0:0");
	cr_expect_str_eq(log_format_addr(NULL, true, buf, sizeof(buf)), "?");
	struct sockaddr other = {.sa_family = AF_UNIX};
	cr_expect_str_eq(log_format_addr(&other, true, buf, sizeof(buf)), "?");
	char small[6];
	cr_expect_str_eq(log_format_addr((struct sockaddr *)&a, true, small, sizeof(small)),
	                 "192.0");
	cr_expect_eq(log_format_addr((struct sockaddr *)&a, true, buf, sizeof(buf)), buf);
}

Test(log, ts_text)
{
	char ts[LOG_TS_LEN + 1] = {0};
	log_format_ts(1796025301123, ts);
	cr_expect_str_eq(ts, "2026-11-30T07:55:01.123Z");
	log_format_ts(1796025302005, ts); /* the next second, leading zeros of the milliseconds */
	cr_expect_str_eq(ts, "2026-11-30T07:55:02.005Z");
	log_format_ts(0, ts);
	cr_expect_str_eq(ts, "1970-01-01T00:00:00.000Z");
}

/* The hand-written address text is inet_ntop's, byte for byte: every pattern of zero and
 * non-zero groups (where "::" goes, ties, a run at either end), the IPv4-mapped and -compatible
 * forms and their near misses, and IPv4. */
Test(log, ip_text_is_inet_ntop)
{
	static const uint16_t vals[] = {1, 0xabc, 0xffff, 0x10};
	char mine[LOG_IP_MAX], theirs[INET6_ADDRSTRLEN];
	int checked = 0;
	for (unsigned mask = 0; mask < 256; mask++)
		for (unsigned v = 0; v < 4; v++) {
			uint8_t a[16] = {0};
			for (int i = 0; i < 8; i++)
				if (mask >> i & 1) {
					uint16_t w = (uint16_t)(vals[(v + (unsigned)i) % 4] + i);
					a[2 * i] = (uint8_t)(w >> 8);
					a[2 * i + 1] = (uint8_t)w;
				}
			cr_assert_not_null(inet_ntop(AF_INET6, a, theirs, sizeof(theirs)));
			size_t n = log_format_ip(mine, a, 16);
			cr_expect_str_eq(mine, theirs, "mask %02x v %u", mask, v);
			cr_expect_eq(n, strlen(theirs));
			checked++;
		}
	static const char *const special[] = {"::",
	                                      "::1",
	                                      "::ffff:10.0.0.1",
	                                      "::10.0.0.1",
	                                      "::ffff:0:10.0.0.1",
	                                      "::1:10.0.0.1",
	                                      "1::",
	                                      "::0.0.1.0",
	                                      "::ffff:0.0.0.0",
	                                      "64:ff9b::192.0.2.1",
	                                      "fe80::1:2:3:4",
	                                      "2001:db8::",
	                                      "1:0:0:1:0:0:0:1",
	                                      "1:0:0:2:0:0:3:4"};
	for (size_t i = 0; i < sizeof(special) / sizeof(special[0]); i++) {
		uint8_t a[16];
		cr_assert_eq(inet_pton(AF_INET6, special[i], a), 1, "%s", special[i]);
		inet_ntop(AF_INET6, a, theirs, sizeof(theirs));
		log_format_ip(mine, a, 16);
		cr_expect_str_eq(mine, theirs, "%s", special[i]);
	}
	for (unsigned x = 0; x < 256; x++) {
		uint8_t a[4] = {(uint8_t)x, (uint8_t)(255 - x), (uint8_t)(x * 7), (uint8_t)(x / 3)};
		inet_ntop(AF_INET, a, theirs, sizeof(theirs));
		log_format_ip(mine, a, 4);
		cr_expect_str_eq(mine, theirs);
	}
	cr_expect_eq(checked, 1024);
	log_format_ip(mine, (const uint8_t *)"x", 1);
	cr_expect_str_eq(mine, "?");
}

/* Every byte value in a label: the qname field is name_to_text's text, JSON-escaped. */
Test(log, qname_every_byte)
{
	struct sockaddr_in c = v4("10.0.0.1", 1);
	for (unsigned b = 0; b < 256; b++) {
		uint8_t qn[] = {3, 'a', (uint8_t)b, 'Z', 3, 'c', 'o', 'm', 0};
		struct log_query e = plain_allow(&c);
		e.qname = qn;
		e.qtype = 1;
		struct jobj o;
		write_and_read(&e, &o);
		char text[NAME_MAXTEXT];
		cr_assert_gt(name_to_text(qn, text, sizeof(text)), 0);
		EXPECT_STR(&o, "qname", text);
	}
}

Test(log, summary_lines)
{
	struct sockaddr_in c = v4("10.1.2.3", 40000);
	uint8_t qn[NAME_MAXWIRE];
	cr_assert_gt(name_from_text("evil.test", 9, qn), 0);
	struct log_query e = plain_allow(&c);
	e.qname = qn;
	e.qtype = 1;
	e.decision = "deny-not-allowed";
	struct jobj o;
	write_and_read(&e, &o);
	char first[LOG_LINE_MAX];
	size_t n = strlen(line);
	memcpy(first, line, n);
	char ts[LOG_TS_LEN];
	log_format_ts(1796025302500, ts);
	size_t m = log_format_repeated(line, first, n, ts, 41);
	line[m] = 0;
	cr_assert_eq(jparse(line, &o), 0, "%s", line);
	cr_expect_eq(o.n, 19);
	EXPECT_STR(&o, "ts", "2026-11-30T07:55:02.500Z");
	EXPECT_STR(&o, "qname", "evil.test.");
	EXPECT_STR(&o, "decision", "deny-not-allowed");
	EXPECT_KIND(&o, "repeated", 'n', "41");
	/* the same line, but for ts and the count */
	cr_expect_eq(memcmp(line + LOG_TS_END, first + LOG_TS_END, n - LOG_TS_END - 2), 0);
	m = log_format_suppressed(line, ts, 123456, "log budget");
	line[m] = 0;
	cr_assert_eq(jparse(line, &o), 0, "%s", line);
	cr_expect_eq(o.n, 4);
	EXPECT_KIND(&o, "v", 'n', "2");
	EXPECT_KIND(&o, "suppressed", 'n', "123456");
	EXPECT_STR(&o, "why", "log budget");
}

/* The formatter keeps the text of the last values it wrote: a buffer whose content changed
 * under the same pointer, another client or upstream, must never show the old text. */
Test(log, kept_text_follows_the_values)
{
	struct sockaddr_in c1 = v4("10.0.0.1", 1), c2 = v4("10.0.0.2", 1);
	struct sockaddr_in u1 = v4("192.0.2.53", 53), u2 = v4("192.0.2.53", 5353);
	char agent[16], reason[64], rule[32];
	struct jobj o;
	for (int i = 0; i < 6; i++) {
		snprintf(agent, sizeof(agent), "agent-%d", i % 2);
		snprintf(reason, sizeof(reason), "reason %d \"q\"", i % 3);
		snprintf(rule, sizeof(rule), "allow/%d.txt", i % 2);
		struct log_query e = plain_allow(i % 2 ? &c2 : &c1);
		e.agent = agent;
		e.reason = reason;
		e.rule_file = rule;
		e.rule_line = (uint32_t)i;
		e.upstream = (const struct sockaddr *)(i % 3 ? &u2 : &u1);
		e.upstream_us = 1000;
		write_and_read(&e, &o);
		EXPECT_STR(&o, "client", i % 2 ? "10.0.0.2" : "10.0.0.1");
		EXPECT_STR(&o, "agent", agent);
		EXPECT_STR(&o, "reason", reason);
		char want[48];
		snprintf(want, sizeof(want), "%s:%d", rule, i);
		EXPECT_STR(&o, "rule", want);
		EXPECT_STR(&o, "upstream", i % 3 ? "192.0.2.53:5353" : "192.0.2.53:53");
	}
	/* a reason too long to keep is written whole every time */
	char longr[400];
	memset(longr, 'r', sizeof(longr) - 1);
	longr[sizeof(longr) - 1] = 0;
	struct log_query e = plain_allow(&c1);
	e.reason = longr;
	write_and_read(&e, &o);
	EXPECT_STR(&o, "reason", longr);
	longr[5] = 'x';
	write_and_read(&e, &o);
	EXPECT_STR(&o, "reason", longr);
}

/* The runs of a line (log.c: the fields around the name, reason and rule) are kept with what
 * they were made of: each value, changed alone (a reason or rule buffer rewritten in place),
 * shows. */
Test(log, kept_tail_follows_the_values)
{
	struct sockaddr_in c = v4("10.0.0.1", 1);
	uint8_t qn[NAME_MAXWIRE];
	cr_assert_gt(name_from_text("evil.test", 9, qn), 0);
	char reason[64], rule[32];
	struct jobj o;
	for (int i = 0; i < 48; i++) {
		struct log_query e = plain_allow(&c);
		e.qname = qn;
		e.qtype = i % 2 ? 28 : 1;
		e.qclass = i % 3 == 2 ? 3 : 1;
		e.decision = i % 4 < 2 ? "deny-not-allowed" : "deny-high-risk";
		snprintf(reason, sizeof(reason), "why %d", i / 8);
		e.reason = i % 5 == 4 ? NULL : reason;
		snprintf(rule, sizeof(rule), "hr/%d.txt", i / 16);
		e.rule_file = i % 6 == 5 ? NULL : rule;
		e.rule_line = (uint32_t)(i / 12);
		e.rcode = i % 7 == 6 ? 5 : 3;
		e.alert = i % 8 >= 4;
		write_and_read(&e, &o);
		EXPECT_STR(&o, "qtype", i % 2 ? "AAAA" : "A");
		EXPECT_KIND(&o, "qclass", 'n', i % 3 == 2 ? "3" : "1");
		EXPECT_STR(&o, "decision", e.decision);
		if (e.reason)
			EXPECT_STR(&o, "reason", reason);
		else
			EXPECT_KIND(&o, "reason", 'z', NULL);
		char want[48];
		snprintf(want, sizeof(want), "%s:%u", rule, e.rule_line);
		if (e.rule_file)
			EXPECT_STR(&o, "rule", want);
		else
			EXPECT_KIND(&o, "rule", 'z', NULL);
		EXPECT_STR(&o, "rcode", i % 7 == 6 ? "REFUSED" : "NXDOMAIN");
		EXPECT_KIND(&o, "alert", 'b', i % 8 >= 4 ? "true" : "false");
		/* and the same line twice in a row (the kept text itself) */
		char first[LOG_LINE_MAX];
		memcpy(first, line, strlen(line) + 1);
		write_and_read(&e, &o);
		cr_expect_str_eq(line, first);
	}
}

/* Each value a kept run is made of, changed alone from the line before, shows in its line, and
 * the line after (the first again) is the first's: the client (its address, its family), the
 * transport, whether there is a question, the rcode and alert of an answer moatd gave itself,
 * the grant and its lifetime, and a forwarded answer's own upstream and time. */
static struct sockaddr_in run_c4a, run_c4b, run_up;
static struct sockaddr_in6 run_c6;
static uint8_t run_qn[NAME_MAXWIRE];

static struct log_query run_line(int change)
{
	struct log_query e = plain_allow(&run_c4a);
	e.qname = run_qn;
	e.qtype = 28;
	e.grant = "OK";
	e.has_grant_life = true;
	e.grant_life = 30;
	switch (change) {
	case 1:
		e.client = (const struct sockaddr *)&run_c4b;
		break;
	case 2:
		e.client = (const struct sockaddr *)&run_c6;
		break;
	case 3:
		e.transport = "tcp";
		break;
	case 4:
		e.qname = NULL;
		break;
	case 5:
		e.rcode = 2;
		break;
	case 6:
		e.alert = true;
		break;
	case 7:
		e.grant = "none", e.has_grant_life = false;
		break;
	case 8:
		e.grant_life = 31;
		break;
	case 9:
		e.upstream = (const struct sockaddr *)&run_up, e.upstream_us = 2500;
		break;
	}
	return e;
}

static void run_check(int change)
{
	struct log_query e = run_line(change);
	struct jobj o;
	write_and_read(&e, &o);
	EXPECT_STR(&o, "client", change == 1 ? "10.0.0.11" : change == 2 ? "a00:1::" : "10.0.0.1");
	EXPECT_STR(&o, "transport", change == 3 ? "tcp" : "udp");
	if (change == 4) {
		EXPECT_KIND(&o, "qname", 'z', NULL);
		EXPECT_KIND(&o, "qtype", 'z', NULL);
	} else {
		EXPECT_STR(&o, "qname", "a.test.");
		EXPECT_STR(&o, "qtype", "AAAA");
	}
	EXPECT_STR(&o, "rcode", change == 5 ? "SERVFAIL" : "NOERROR");
	EXPECT_KIND(&o, "alert", 'b', change == 6 ? "true" : "false");
	EXPECT_STR(&o, "grant", change == 7 ? "none" : "OK");
	if (change == 7)
		EXPECT_KIND(&o, "grant_lifetime", 'z', NULL);
	else
		EXPECT_KIND(&o, "grant_lifetime", 'n', change == 8 ? "31" : "30");
	if (change == 9) {
		EXPECT_STR(&o, "upstream", "192.0.2.53:53");
		EXPECT_KIND(&o, "upstream_ms", 'n', "2.500");
	} else {
		EXPECT_KIND(&o, "upstream", 'z', NULL);
		EXPECT_KIND(&o, "upstream_ms", 'z', NULL);
	}
}

Test(log, runs_follow_every_value)
{
	run_c4a = v4("10.0.0.1", 1);
	run_c4b = v4("10.0.0.11", 1);
	run_c6 = v6("a00:1::", 1); /* its bytes: 10.0.0.1's, then zeros */
	run_up = v4("192.0.2.53", 53);
	cr_assert_gt(name_from_text("a.test", 6, run_qn), 0);
	for (int change = 1; change <= 9; change++)
		for (int k = 0; k < 2; k++) {
			run_check(0);
			run_check(change);
		}
	run_check(0);
}

/* A line longer than LOG_LINE_MAX is cut to the longest it may be (LOG_LINE_MAX - 1 bytes and
 * its newline, within out), the text up to the cut as it would have been (log.c's put_cut). */
Test(log, overlong_line_cut_at_the_limit)
{
	static char reason[LOG_LINE_MAX + 100];
	memset(reason, 'r', sizeof(reason) - 1);
	struct sockaddr_in c = v4("10.1.2.3", 40000);
	struct log_query e = {
	    .client = (struct sockaddr *)&c,
	    .transport = "udp",
	    .agent = "ci-42",
	    .decision = "formerr",
	    .reason = reason,
	    .rcode = -1,
	    .upstream_us = -1,
	};
	char ts[LOG_TS_LEN];
	log_format_ts(1796025301123, ts);
	static char out[LOG_LINE_MAX];
	size_t n = log_format_query(out, &e, ts);
	cr_assert_eq(n, LOG_LINE_MAX - 1);
	cr_expect_eq(out[n - 1], '\n');
	cr_expect_eq(memchr(out, '\n', n), out + n - 1, "one newline");
	const char *lead = "{\"ts\":\"2026-11-30T07:55:01.123Z\",\"client\":\"10.1.2.3\","
	                   "\"transport\":\"udp\",\"agent\":\"ci-42\",\"qname\":null,"
	                   "\"qtype\":null,\"qclass\":0,\"decision\":\"formerr\",\"reason\":\"";
	size_t k = strlen(lead);
	cr_assert(!memcmp(out, lead, k), "%.*s", (int)k, out);
	for (size_t i = k; i < n - 1; i++)
		cr_assert_eq(out[i], 'r', "byte %zu", i);
}

/* A reason given as text comes out as given, whatever the rule, even when it is near or equal
 * to the rule's own. Each case is written three times, so the rule's text is kept from the line
 * before. */
Test(log, given_reason_as_given)
{
	static const struct {
		const char *file;
		uint32_t line;
		const char *reason;
	} cases[] = {
	    {"allow/ci.txt", 12, "allowed by allow/ci.txt:12"},
	    {"allow/ci.txt", 12, "allowed by allow/ci.txt:13"},
	    {"allow/ci.txt", 12, "allowed by allow/ci.txt:1"},
	    {"allow/ci.txt", 12, "allowed by allow/ci.txt:12x"},
	    {"allow/ci.txt", 12, "allowed by allow/ci.txt:"},
	    {"allow/ci.txt", 12, "allowed by allow/ci.txt;12"},
	    {"allow/ci.txt", 12, "allowed by allow/ci.txt::12"},
	    {"allow/ci.txt", 12, "allowed by allow/ci.txt"},
	    {"allow/ci.txt", 12, "allowed by allow/ci.tx"},
	    {"allow/ci.txt", 12, "allowed by allow/other.txt:12"},
	    {"allow/ci.txt", 12, "allowed by "},
	    {"allow/ci.txt", 12, "Allowed by allow/ci.txt:12"},
	    {"allow/b.txt", 12, "allowed by allow/ci.txt:12"},
	    {"allow/ci.txt", 0, "allowed by allow/ci.txt:0"},
	    {"allow/ci.txt", 4294967295u, "allowed by allow/ci.txt:4294967295"},
	    {"al\"l\\ow\x01.txt", 7, "allowed by al\"l\\ow\x01.txt:7"},
	    {"al\"l\\ow\x01.txt", 7, "allowed by al\"l\\ow\x01.txt:8"},
	    {"allow/ci.txt", 12, "moat: not on the allowlist"},
	};
	struct sockaddr_in c = v4("10.0.0.1", 1);
	struct jobj o;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		for (int k = 0; k < 3; k++) {
			struct log_query e = plain_allow(&c);
			e.rule_file = cases[i].file;
			e.rule_line = cases[i].line;
			e.reason = cases[i].reason;
			write_and_read(&e, &o);
			EXPECT_STR(&o, "reason", cases[i].reason);
			char want[64];
			snprintf(want, sizeof(want), "%s:%u", cases[i].file, cases[i].line);
			EXPECT_STR(&o, "rule", want);
		}
}

/* A reason left to the rule (reason_rule, what policy_decide leaves for an allow by a listed
 * rule) is "allowed by FILE:LINE" of this line's rule: escaped as the rule is, right after a line
 * of another rule, for a file too long for the formatter to keep, and null without a rule. */
Test(log, reason_left_to_the_rule)
{
	/* Files the formatter keeps and does not (over 200 bytes), a reason cut in its line number
	 * (145) and in its file name (190), a long name of bytes escaped six for one. */
	char longf[400], cutl[146], cutf[191], wide[400] = "/srv/";
	memset(longf, 'f', sizeof(longf) - 1);
	longf[sizeof(longf) - 1] = 0;
	memset(cutl, 'g', sizeof(cutl) - 1);
	cutl[sizeof(cutl) - 1] = 0;
	memset(cutf, 'h', sizeof(cutf) - 1);
	cutf[sizeof(cutf) - 1] = 0;
	for (int i = 0; i < 175; i++)
		strcat(wide, "\xc3\xa9");
	strcat(wide, ".txt");
	const char *files[] = {"allow/ci.txt", "allow/b.txt", "al\"l\\ow\x01.txt", longf, cutl,
	                       cutf,           wide};
	enum { NF = sizeof(files) / sizeof(files[0]) };
	static const uint32_t lines[] = {12, 0, 4294967295u, 7};
	struct sockaddr_in c = v4("10.0.0.1", 1);
	struct jobj o;
	for (int round = 0; round < 2; round++)
		for (size_t i = 0; i < NF; i++)
			for (int k = 0; k < 2; k++) {
				const char *file = files[i];
				uint32_t line = lines[(i + (size_t)k + (size_t)round) % 4];
				struct log_query e = plain_allow(&c);
				e.rule_file = file;
				e.rule_line = line;
				e.reason = "not this";
				e.reason_rule = true;
				write_and_read(&e, &o);
				/* cut as a decision's reason is (policy_reason, moatctl explain) */
				char want[512], cut[sizeof(((struct policy_decision *)0)->reason)];
				snprintf(cut, sizeof(cut), "allowed by %s:%u", file, line);
				EXPECT_STR(&o, "reason", cut);
				snprintf(want, sizeof(want), "%s:%u", file, line);
				EXPECT_STR(&o, "rule", want);
				EXPECT_KIND(&o, "grant_lifetime", 'z',
				            NULL); /* the line's end is there */
			}
	struct log_query e = plain_allow(&c);
	e.rule_file = NULL;
	e.reason = NULL;
	e.reason_rule = true;
	write_and_read(&e, &o);
	EXPECT_KIND(&o, "reason", 'z', NULL);
	EXPECT_KIND(&o, "rule", 'z', NULL);
}
