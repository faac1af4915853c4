/* Unit tests for the dnstap encoder (moat/dnstap.h): the bytes are read back by a small
 * protobuf reader written from the dnstap.proto field numbers (a second, independent reading
 * of the schema; e2e test_operable has dnstap-ldns read moatd's file), for queries and responses,
 * IPv4 and IPv6, UDP and TCP; every buffer shorter than the message is refused. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "moat/dnstap.h"
#include "moat/err.h"

struct field {
	unsigned num, wt;
	uint64_t v;       /* varint or fixed32 */
	const uint8_t *p; /* length-delimited */
	size_t len;
};

static uint64_t varint(const uint8_t **p, const uint8_t *end)
{
	uint64_t v = 0;
	for (int s = 0; *p < end && s < 64; s += 7) {
		uint8_t b = *(*p)++;
		v |= (uint64_t)(b & 0x7f) << s;
		if (!(b & 0x80))
			return v;
	}
	cr_assert_fail("bad varint");
	return 0;
}

/* Read every field of a message; returns the count. Field numbers must not repeat. */
static int fields(const uint8_t *p, size_t len, struct field *out, int max)
{
	const uint8_t *end = p + len;
	int n = 0;
	while (p < end) {
		cr_assert_lt(n, max);
		uint64_t tag = varint(&p, end);
		struct field *f = &out[n++];
		memset(f, 0, sizeof(*f));
		f->num = (unsigned)(tag >> 3);
		f->wt = (unsigned)(tag & 7);
		if (f->wt == 0) {
			f->v = varint(&p, end);
		} else if (f->wt == 2) {
			f->len = (size_t)varint(&p, end);
			cr_assert_leq(f->len, (size_t)(end - p));
			f->p = p;
			p += f->len;
		} else if (f->wt == 5) {
			cr_assert_leq(4, end - p);
			f->v = (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 |
			       (uint64_t)p[3] << 24;
			p += 4;
		} else {
			cr_assert_fail("wire type %u", f->wt);
		}
	}
	for (int i = 0; i < n; i++)
		for (int k = i + 1; k < n; k++)
			cr_expect_neq(out[i].num, out[k].num, "field %u twice", out[i].num);
	return n;
}

static const struct field *get(const struct field *f, int n, unsigned num)
{
	for (int i = 0; i < n; i++)
		if (f[i].num == num)
			return &f[i];
	return NULL;
}

static uint8_t dns[300];
static uint8_t out[DNSTAP_MAX(sizeof(dns))];

Test(dnstap, client_query_v4_udp)
{
	for (size_t i = 0; i < sizeof(dns); i++)
		dns[i] = (uint8_t)i;
	struct sockaddr_in c = {.sin_family = AF_INET, .sin_port = htons(40001)};
	inet_pton(AF_INET, "192.0.2.7", &c.sin_addr);
	struct dnstap_msg m = {.type = DNSTAP_CLIENT_QUERY,
	                       .query_addr = (struct sockaddr *)&c,
	                       .sec = 1796000000,
	                       .nsec = 123456789,
	                       .dns = dns,
	                       .len = sizeof(dns),
	                       .identity = "moatd",
	                       .version = "moatd 0.1.0"};
	int n = dnstap_encode(&m, out, sizeof(out));
	cr_assert_gt(n, 0);
	struct field top[8], msg[16];
	int nt = fields(out, (size_t)n, top, 8);
	cr_expect_eq(nt, 4);
	const struct field *f = get(top, nt, 1);
	cr_assert_not_null(f);
	cr_expect_eq(f->len, 5);
	cr_expect_eq(memcmp(f->p, "moatd", 5), 0);
	cr_expect_not_null(get(top, nt, 2));
	cr_expect_eq(get(top, nt, 15)->v, 1, "type MESSAGE");
	f = get(top, nt, 14);
	cr_assert_not_null(f);
	cr_assert_eq(f->wt, 2);
	int nm = fields(f->p, f->len, msg, 16);
	cr_expect_eq(get(msg, nm, 1)->v, 5, "CLIENT_QUERY");
	cr_expect_eq(get(msg, nm, 2)->v, 1, "INET");
	cr_expect_eq(get(msg, nm, 3)->v, 1, "UDP");
	cr_expect_eq(get(msg, nm, 4)->len, 4);
	cr_expect_eq(memcmp(get(msg, nm, 4)->p, &c.sin_addr, 4), 0);
	cr_expect_eq(get(msg, nm, 6)->v, 40001);
	cr_expect_eq(get(msg, nm, 8)->v, 1796000000);
	cr_expect_eq(get(msg, nm, 9)->wt, 5, "nsec is fixed32");
	cr_expect_eq(get(msg, nm, 9)->v, 123456789);
	cr_expect_eq(get(msg, nm, 10)->len, sizeof(dns));
	cr_expect_eq(memcmp(get(msg, nm, 10)->p, dns, sizeof(dns)), 0);
	cr_expect_null(get(msg, nm, 12), "a query has no response time");
	cr_expect_null(get(msg, nm, 14));
	cr_expect_null(get(msg, nm, 5));
	/* every shorter buffer is refused, and nothing is written past it (ASan) */
	for (int cap = 0; cap < n; cap++) {
		uint8_t *b = malloc((size_t)(cap ? cap : 1));
		cr_expect_eq(dnstap_encode(&m, b, (size_t)cap), MOAT_ESPACE, "cap %d", cap);
		free(b);
	}
}

Test(dnstap, forwarder_response_v6_tcp)
{
	struct sockaddr_in6 u = {.sin6_family = AF_INET6, .sin6_port = htons(53)};
	inet_pton(AF_INET6, "2001:db8::53", &u.sin6_addr);
	struct dnstap_msg m = {.type = DNSTAP_FORWARDER_RESPONSE,
	                       .tcp = true,
	                       .response_addr = (struct sockaddr *)&u,
	                       .sec = 7,
	                       .nsec = 8,
	                       .dns = dns,
	                       .len = 12};
	int n = dnstap_encode(&m, out, sizeof(out));
	cr_assert_gt(n, 0);
	struct field top[8], msg[16];
	int nt = fields(out, (size_t)n, top, 8);
	cr_expect_eq(nt, 2, "no identity, no version");
	const struct field *f = get(top, nt, 14);
	cr_assert_not_null(f);
	int nm = fields(f->p, f->len, msg, 16);
	cr_expect_eq(get(msg, nm, 1)->v, 8, "FORWARDER_RESPONSE");
	cr_expect_eq(get(msg, nm, 2)->v, 2, "INET6");
	cr_expect_eq(get(msg, nm, 3)->v, 2, "TCP");
	cr_expect_eq(get(msg, nm, 5)->len, 16);
	cr_expect_eq(get(msg, nm, 7)->v, 53);
	cr_expect_eq(get(msg, nm, 12)->v, 7);
	cr_expect_eq(get(msg, nm, 13)->v, 8);
	cr_expect_eq(get(msg, nm, 14)->len, 12);
	cr_expect_null(get(msg, nm, 4));
	cr_expect_null(get(msg, nm, 8));
}

Test(dnstap, large_message_length_prefix)
{
	/* a 64 KiB TCP answer: the Message length needs a 3-byte varint */
	static uint8_t big[65535], buf[DNSTAP_MAX(65535)];
	memset(big, 0xab, sizeof(big));
	struct dnstap_msg m = {.type = DNSTAP_CLIENT_RESPONSE, .dns = big, .len = sizeof(big)};
	int n = dnstap_encode(&m, buf, sizeof(buf));
	cr_assert_gt(n, 65535);
	struct field top[4], msg[8];
	int nt = fields(buf, (size_t)n, top, 4);
	const struct field *f = get(top, nt, 14);
	int nm = fields(f->p, f->len, msg, 8);
	cr_expect_eq(get(msg, nm, 14)->len, sizeof(big));
	cr_expect_eq(memcmp(get(msg, nm, 14)->p, big, sizeof(big)), 0);
	m.len = 65536;
	cr_expect_eq(dnstap_encode(&m, buf, sizeof(buf)), MOAT_ESPACE, "no DNS message is longer");
}
