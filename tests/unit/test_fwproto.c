/* Unit tests for fwproto.c: GRANT and ACK round trips (IPv4, IPv6, unknown client, the largest
 * message), the exact byte layout of format version 3 (with and without ports), and every
 * malformed case the decoders must reject (version, type, length, naddr, agent_len, agent bytes,
 * family, IPv4 padding, nport, port order/protocol/zero, status, reserved), plus the encoders'
 * argument checks. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <string.h>

#include "moat/err.h"
#include "moat/fwproto.h"

static void set_addr(struct fwproto_addr *a, const char *text)
{
	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, text, a->addr) == 1) {
		a->family = 4;
		return;
	}
	cr_assert_eq(inet_pton(AF_INET6, text, a->addr), 1, "bad test address %s", text);
	a->family = 6;
}

static void sample(struct fwproto_grant *g)
{
	memset(g, 0, sizeof(*g));
	g->seq = 0x01020304;
	g->lifetime = 300;
	strcpy(g->agent, "ci-42");
	set_addr(&g->client, "10.0.0.7");
	g->naddr = 2;
	set_addr(&g->addr[0], "192.0.2.80");
	set_addr(&g->addr[1], "2001:db8::80");
}

static int encode(const struct fwproto_grant *g, uint8_t *buf)
{
	int n = fwproto_grant_encode(g, buf, FWPROTO_MAXMSG);
	cr_assert_gt(n, 0, "encode failed: %d", n);
	return n;
}

Test(fwproto, grant_round_trip)
{
	struct fwproto_grant g, d;
	uint8_t buf[FWPROTO_MAXMSG];
	sample(&g);
	int n = encode(&g, buf);
	cr_assert_eq(n, 13 + 5 + 17 + 1 + 2 * 17);
	memset(&d, 0xaa, sizeof(d));
	cr_assert_eq(fwproto_grant_decode(buf, (size_t)n, &d), 0);
	cr_assert_eq(d.seq, g.seq);
	cr_assert_eq(d.lifetime, 300);
	cr_assert_str_eq(d.agent, "ci-42");
	cr_assert_eq(d.client.family, 4);
	cr_assert_arr_eq(d.client.addr, g.client.addr, 16);
	cr_assert_eq(d.naddr, 2);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(d.addr[i].family, g.addr[i].family);
		cr_assert_arr_eq(d.addr[i].addr, g.addr[i].addr, 16);
	}
}

Test(fwproto, grant_byte_layout)
{
	struct fwproto_grant g;
	uint8_t buf[FWPROTO_MAXMSG];
	sample(&g);
	g.naddr = 1;
	g.lifetime = 0x0a0b0c0d;
	int n = encode(&g, buf);
	static const uint8_t head[] = {3, 1,   0,   1,   1,   2,   3, 4,  0x0a, 0x0b, 0x0c, 0x0d,
	                               5, 'c', 'i', '-', '4', '2', 4, 10, 0,    0,    7};
	cr_assert_eq(n, 13 + 5 + 17 + 1 + 17);
	cr_assert_arr_eq(buf, head, sizeof(head));
	cr_assert_eq(buf[35], 0, "nport 0: every port");
	cr_assert_eq(buf[36], 4);
	cr_assert_eq(buf[37], 192);
	cr_assert_eq(buf[40], 80);
	for (int i = 41; i < n; i++)
		cr_assert_eq(buf[i], 0, "IPv4 padding byte %d is %u", i, buf[i]);
	/* With ports: nport, then (proto, port big-endian) each, before the addresses. */
	g.nport = 2;
	g.port[0] = (struct fwproto_port){6, 443};
	g.port[1] = (struct fwproto_port){17, 0x1234};
	n = encode(&g, buf);
	static const uint8_t ports[] = {2, 6, 0x01, 0xbb, 17, 0x12, 0x34, 4, 192};
	cr_assert_eq(n, 13 + 5 + 17 + 1 + 2 * 3 + 17);
	cr_assert_arr_eq(buf + 35, ports, sizeof(ports));
}

Test(fwproto, grant_ports_round_trip)
{
	struct fwproto_grant g, d;
	uint8_t buf[FWPROTO_MAXMSG];
	sample(&g);
	g.nport = FWPROTO_MAXPORT;
	for (int i = 0; i < FWPROTO_MAXPORT; i++)
		g.port[i] = (struct fwproto_port){i < 8 ? 6 : 17,
		                                  (uint16_t)(i < 8 ? 80 + i : 65535 - 15 + i)};
	int n = encode(&g, buf);
	cr_assert_eq(fwproto_grant_decode(buf, (size_t)n, &d), 0);
	cr_assert_eq(d.nport, FWPROTO_MAXPORT);
	for (int i = 0; i < FWPROTO_MAXPORT; i++) {
		cr_assert_eq(d.port[i].proto, g.port[i].proto);
		cr_assert_eq(d.port[i].port, g.port[i].port);
	}
	cr_assert_eq(d.port[15].port, 65535);
	cr_assert_eq(d.naddr, 2);
	cr_assert_arr_eq(d.addr[1].addr, g.addr[1].addr, 16);
	/* The encoder refuses what the decoder would refuse. */
	g.nport = FWPROTO_MAXPORT + 1;
	cr_expect_eq(fwproto_grant_encode(&g, buf, sizeof(buf)), MOAT_EINVAL, "too many ports");
	g.nport = 2;
	g.port[0] = (struct fwproto_port){6, 443};
	g.port[1] = (struct fwproto_port){6, 80};
	cr_expect_eq(fwproto_grant_encode(&g, buf, sizeof(buf)), MOAT_EINVAL, "out of order");
	g.port[1] = (struct fwproto_port){6, 443};
	cr_expect_eq(fwproto_grant_encode(&g, buf, sizeof(buf)), MOAT_EINVAL, "duplicate");
	g.port[1] = (struct fwproto_port){132, 443};
	cr_expect_eq(fwproto_grant_encode(&g, buf, sizeof(buf)), MOAT_EINVAL, "SCTP");
	g.nport = 1;
	g.port[0] = (struct fwproto_port){17, 0};
	cr_expect_eq(fwproto_grant_encode(&g, buf, sizeof(buf)), MOAT_EINVAL, "port 0");
}

Test(fwproto, grant_unknown_client_and_ipv6_client)
{
	struct fwproto_grant g, d;
	uint8_t buf[FWPROTO_MAXMSG];
	sample(&g);
	memset(&g.client, 0, sizeof(g.client));
	int n = encode(&g, buf);
	cr_assert_eq(fwproto_grant_decode(buf, (size_t)n, &d), 0);
	cr_assert_eq(d.client.family, 0);
	set_addr(&g.client, "2001:db8:1::7");
	n = encode(&g, buf);
	cr_assert_eq(fwproto_grant_decode(buf, (size_t)n, &d), 0);
	cr_assert_eq(d.client.family, 6);
	cr_assert_arr_eq(d.client.addr, g.client.addr, 16);
}

Test(fwproto, grant_max_size)
{
	struct fwproto_grant g, d;
	uint8_t buf[FWPROTO_MAXMSG];
	sample(&g);
	memset(g.agent, 'a', FWPROTO_AGENT_MAX);
	g.agent[FWPROTO_AGENT_MAX] = '\0';
	g.naddr = FWPROTO_MAXADDR;
	for (int i = 0; i < FWPROTO_MAXADDR; i++) {
		g.addr[i].family = 6;
		memset(g.addr[i].addr, 0x20, 16);
		g.addr[i].addr[15] = (uint8_t)i;
	}
	g.seq = UINT32_MAX;
	g.lifetime = UINT32_MAX;
	g.nport = FWPROTO_MAXPORT;
	for (int i = 0; i < FWPROTO_MAXPORT; i++)
		g.port[i] = (struct fwproto_port){6, (uint16_t)(1 + i)};
	int n = encode(&g, buf);
	cr_assert_eq(n, FWPROTO_MAXMSG);
	cr_assert_eq(fwproto_grant_decode(buf, (size_t)n, &d), 0);
	cr_assert_eq(strlen(d.agent), FWPROTO_AGENT_MAX);
	cr_assert_eq(d.naddr, FWPROTO_MAXADDR);
	cr_assert_eq(d.seq, UINT32_MAX);
	cr_assert_eq(d.lifetime, UINT32_MAX);
	cr_assert_eq(d.addr[63].addr[15], 63);
	/* One byte short of room: ESPACE, and nothing is written past cap. */
	uint8_t small[FWPROTO_MAXMSG];
	memset(small, 0x5a, sizeof(small));
	cr_assert_eq(fwproto_grant_encode(&g, small, FWPROTO_MAXMSG - 1), MOAT_ESPACE);
	cr_assert_eq(small[FWPROTO_MAXMSG - 1], 0x5a);
}

Test(fwproto, grant_encode_rejects_bad_fields)
{
	struct fwproto_grant g;
	uint8_t buf[FWPROTO_MAXMSG];

	sample(&g);
	g.naddr = 0;
	cr_expect_eq(fwproto_grant_encode(&g, buf, sizeof(buf)), MOAT_EINVAL);
	sample(&g);
	g.naddr = FWPROTO_MAXADDR + 1;
	cr_expect_eq(fwproto_grant_encode(&g, buf, sizeof(buf)), MOAT_EINVAL);
	sample(&g);
	g.agent[0] = '\0';
	cr_expect_eq(fwproto_grant_encode(&g, buf, sizeof(buf)), MOAT_EINVAL);
	sample(&g);
	strcpy(g.agent, "bad agent");
	cr_expect_eq(fwproto_grant_encode(&g, buf, sizeof(buf)), MOAT_EINVAL);
	sample(&g);
	g.addr[1].family = 5;
	cr_expect_eq(fwproto_grant_encode(&g, buf, sizeof(buf)), MOAT_EINVAL);
	sample(&g);
	g.addr[0].family = 0; /* only the client may be unknown */
	cr_expect_eq(fwproto_grant_encode(&g, buf, sizeof(buf)), MOAT_EINVAL);
	sample(&g);
	g.addr[0].addr[4] = 1; /* IPv4 padding */
	cr_expect_eq(fwproto_grant_encode(&g, buf, sizeof(buf)), MOAT_EINVAL);
	sample(&g);
	g.client.family = 7;
	cr_expect_eq(fwproto_grant_encode(&g, buf, sizeof(buf)), MOAT_EINVAL);
	cr_expect_eq(fwproto_grant_encode(NULL, buf, sizeof(buf)), MOAT_EINVAL);
	cr_expect_eq(fwproto_grant_encode(&g, NULL, sizeof(buf)), MOAT_EINVAL);
}

/* Decode a mutated copy of the sample; it must fail and leave the output untouched. */
static void expect_bad(const uint8_t *msg, size_t len, const char *why)
{
	struct fwproto_grant d;
	memset(&d, 0x77, sizeof(d));
	cr_expect_eq(fwproto_grant_decode(msg, len, &d), MOAT_EFORMAT, "%s: accepted", why);
	cr_expect_eq(d.seq, 0x77777777u, "%s: output written", why);
}

Test(fwproto, grant_decode_rejects_malformed)
{
	struct fwproto_grant g;
	uint8_t good[FWPROTO_MAXMSG + 8], m[FWPROTO_MAXMSG + 8];
	sample(&g);
	g.nport = 2;
	g.port[0] = (struct fwproto_port){6, 80};
	g.port[1] = (struct fwproto_port){17, 53};
	size_t n = (size_t)encode(&g, good);
	size_t agent_off = 13, client_off = 13 + 5, np = client_off + 17, p0 = np + 1, p1 = p0 + 3,
	       a0 = p1 + 3, a1 = a0 + 17;

#define MUT(stmt, len, why)                                                                        \
	do {                                                                                       \
		memcpy(m, good, n);                                                                \
		stmt;                                                                              \
		expect_bad(m, len, why);                                                           \
	} while (0)

	MUT(m[0] = 1, n, "version 1");
	MUT(m[0] = 2, n, "version 2");
	MUT(m[0] = 0, n, "version 0");
	MUT(m[1] = FWPROTO_ACK, n, "type ACK");
	MUT(m[1] = 9, n, "type 9");
	MUT((void)0, n - 1, "one byte short");
	MUT(m[n] = 0, n + 1, "trailing byte");
	MUT((void)0, 0, "empty");
	MUT((void)0, 12, "header cut before agent_len");
	MUT((void)0, 13, "header only");
	MUT(m[3] = 0, n, "naddr 0");
	MUT(m[3] = 3, n, "naddr larger than the message");
	MUT(m[3] = 1, n, "naddr smaller than the message");
	MUT((m[2] = 0, m[3] = FWPROTO_MAXADDR + 1), n, "naddr above max");
	MUT(m[12] = 0, n, "agent_len 0");
	MUT(m[12] = FWPROTO_AGENT_MAX + 1, n, "agent_len 64");
	MUT(m[12] = 6, n, "agent_len too long for the message");
	MUT(m[12] = 4, n, "agent_len too short for the message");
	MUT(m[agent_off + 2] = ' ', n, "space in agent");
	MUT(m[agent_off + 2] = '\0', n, "NUL in agent");
	MUT(m[agent_off] = '/', n, "slash in agent");
	MUT(m[agent_off] = 0xc3, n, "non-ASCII agent");
	MUT(m[client_off] = 5, n, "client family 5");
	MUT(m[client_off + 5] = 1, n, "client IPv4 padding");
	MUT((m[client_off] = 0, m[client_off + 1] = 1), n, "unknown client with an address");
	MUT(m[np] = 3, n, "nport larger than the message");
	MUT(m[np] = 1, n, "nport smaller than the message");
	MUT(m[np] = FWPROTO_MAXPORT + 1, n, "nport above max");
	MUT(m[p0] = 17, n, "ports out of order");
	MUT((m[p1] = 6, m[p1 + 1] = 0, m[p1 + 2] = 80), n, "duplicate port");
	MUT(m[p0] = 132, n, "SCTP port");
	MUT(m[p0] = 0, n, "protocol 0");
	MUT((m[p1 + 1] = 0, m[p1 + 2] = 0), n, "port 0");
	MUT(m[a0] = 0, n, "address family 0");
	MUT(m[a0] = 16, n, "address family 16");
	MUT(m[a0 + 16] = 1, n, "address IPv4 padding");
	MUT(m[a1] = 4, n, "IPv6 bytes labelled IPv4");
	MUT((void)0, FWPROTO_MAXMSG + 1, "above FWPROTO_MAXMSG");
#undef MUT
	/* The unmutated message is fine: the cases above fail for their own reason. */
	struct fwproto_grant d;
	cr_assert_eq(fwproto_grant_decode(good, n, &d), 0);
	cr_assert_eq(fwproto_grant_decode(NULL, n, &d), MOAT_EINVAL);
}

Test(fwproto, ack_round_trip_and_layout)
{
	uint8_t buf[FWPROTO_ACKLEN];
	struct fwproto_ack a = {.status = FWPROTO_DENIED, .seq = 0xdeadbeef, .lifetime = 3600}, d;
	cr_assert_eq(fwproto_ack_encode(&a, buf, sizeof(buf)), FWPROTO_ACKLEN);
	static const uint8_t want[] = {3, 2, 0,    1,    0xde, 0xad, 0xbe, 0xef,
	                               0, 0, 0x0e, 0x10, 0,    0,    0,    0};
	cr_assert_arr_eq(buf, want, sizeof(want));
	cr_assert_eq(fwproto_ack_decode(buf, sizeof(buf), &d), 0);
	cr_assert_eq(d.status, FWPROTO_DENIED);
	cr_assert_eq(d.seq, 0xdeadbeef);
	cr_assert_eq(d.lifetime, 3600);
	for (uint16_t s = FWPROTO_OK; s <= FWPROTO_BADMSG; s++) {
		a.status = s;
		cr_assert_eq(fwproto_ack_encode(&a, buf, sizeof(buf)), FWPROTO_ACKLEN);
		cr_assert_eq(fwproto_ack_decode(buf, sizeof(buf), &d), 0);
		cr_assert_eq(d.status, s);
	}
}

Test(fwproto, ack_rejects_malformed)
{
	uint8_t good[FWPROTO_ACKLEN + 1], m[FWPROTO_ACKLEN + 1];
	struct fwproto_ack a = {.status = FWPROTO_OK, .seq = 7, .lifetime = 30}, d;
	cr_assert_eq(fwproto_ack_encode(&a, good, FWPROTO_ACKLEN), FWPROTO_ACKLEN);
	good[FWPROTO_ACKLEN] = 0;
	size_t n = FWPROTO_ACKLEN;

#define MUT(stmt, len, why)                                                                        \
	do {                                                                                       \
		memcpy(m, good, sizeof(good));                                                     \
		stmt;                                                                              \
		cr_expect_eq(fwproto_ack_decode(m, len, &d), MOAT_EFORMAT, "%s: accepted", why);   \
	} while (0)

	MUT(m[0] = 1, n, "version 1");
	MUT(m[1] = FWPROTO_GRANT, n, "type GRANT");
	MUT((void)0, n - 1, "short");
	MUT((void)0, n + 1, "long");
	MUT(m[3] = 4, n, "status 4");
	MUT(m[2] = 1, n, "status 256");
	MUT(m[15] = 1, n, "reserved not zero");
	MUT(m[12] = 0x80, n, "reserved high byte");
#undef MUT
	a.status = 4;
	cr_expect_eq(fwproto_ack_encode(&a, m, sizeof(m)), MOAT_EINVAL);
	a.status = FWPROTO_OK;
	cr_expect_eq(fwproto_ack_encode(&a, m, FWPROTO_ACKLEN - 1), MOAT_ESPACE);
}

Test(fwproto, status_text)
{
	cr_expect_str_eq(fwproto_status_str(FWPROTO_OK), "OK");
	cr_expect_str_eq(fwproto_status_str(FWPROTO_DENIED), "DENIED");
	cr_expect_str_eq(fwproto_status_str(FWPROTO_FAILED), "FAILED");
	cr_expect_str_eq(fwproto_status_str(FWPROTO_BADMSG), "BADMSG");
	cr_expect_str_eq(fwproto_status_str(99), "UNKNOWN");
}

static struct fwproto_range range4(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint8_t bits)
{
	struct fwproto_range r = {.family = 4, .bits = bits, .addr = {a, b, c, d}};
	return r;
}

Test(fwproto, hello_round_trip_and_layout)
{
	struct fwproto_hello h = {.placement = FWPROTO_FORWARD, .nrange = 2}, d;
	uint8_t buf[FWPROTO_HELLO_MAXLEN];
	h.range[0] = range4(10, 77, 0, 0, 24);
	h.range[1] =
	    (struct fwproto_range){.family = 6, .bits = 64, .addr = {0x20, 0x01, 0x0d, 0xb8}};
	int n = fwproto_hello_encode(&h, buf, sizeof(buf));
	cr_assert_eq(n, 4 + 2 * 18);
	static const uint8_t head[] = {3, 3, 2, 2, 4, 24, 10, 77, 0, 0};
	cr_assert_arr_eq(buf, head, sizeof(head));
	cr_assert_eq(buf[22], 6);
	cr_assert_eq(buf[23], 64);
	memset(&d, 0, sizeof(d));
	cr_assert_eq(fwproto_hello_decode(buf, (size_t)n, &d), 0);
	cr_assert_eq(d.placement, FWPROTO_FORWARD);
	cr_assert_eq(d.nrange, 2);
	cr_assert_eq(d.range[0].bits, 24);
	cr_assert_arr_eq(d.range[1].addr, h.range[1].addr, 16);
	/* netns: no ranges */
	struct fwproto_hello ns = {.placement = FWPROTO_NETNS};
	cr_assert_eq(fwproto_hello_encode(&ns, buf, sizeof(buf)), 4);
	cr_assert_eq(fwproto_hello_decode(buf, 4, &d), 0);
	cr_assert_eq(d.placement, FWPROTO_NETNS);
	cr_assert_eq(d.nrange, 0);
	/* the largest */
	h.nrange = FWPROTO_MAXRANGE;
	for (int i = 0; i < FWPROTO_MAXRANGE; i++)
		h.range[i] = range4(10, 0, 0, (uint8_t)i, 32);
	cr_assert_eq(fwproto_hello_encode(&h, buf, sizeof(buf)), FWPROTO_HELLO_MAXLEN);
	cr_assert_eq(fwproto_hello_decode(buf, FWPROTO_HELLO_MAXLEN, &d), 0);
	cr_assert_eq(d.range[63].addr[3], 63);
	cr_assert_eq(fwproto_hello_encode(&h, buf, FWPROTO_HELLO_MAXLEN - 1), MOAT_ESPACE);
}

Test(fwproto, hello_rejects_malformed)
{
	struct fwproto_hello h = {.placement = FWPROTO_FORWARD, .nrange = 1}, d;
	uint8_t good[64], m[64];
	h.range[0] = range4(10, 77, 0, 0, 24);
	cr_assert_eq(fwproto_hello_encode(&h, good, sizeof(good)), 22);
	size_t n = 22;
	good[n] = 0;

#define MUT(stmt, len, why)                                                                        \
	do {                                                                                       \
		memcpy(m, good, sizeof(good));                                                     \
		stmt;                                                                              \
		memset(&d, 0x55, sizeof(d));                                                       \
		cr_expect_eq(fwproto_hello_decode(m, len, &d), MOAT_EFORMAT, "%s: accepted", why); \
		cr_expect_eq(d.placement, 0x55, "%s: output written", why);                        \
	} while (0)

	MUT(m[0] = 2, n, "version 2");
	MUT(m[1] = FWPROTO_ACK, n, "type ACK");
	MUT(m[2] = 0, n, "placement 0");
	MUT(m[2] = 3, n, "placement 3");
	MUT(m[2] = FWPROTO_NETNS, n, "ranges in the netns placement");
	MUT(m[3] = 2, n, "nrange larger than the message");
	MUT(m[3] = 0, n, "nrange smaller than the message");
	MUT((void)0, n - 1, "one byte short");
	MUT((void)0, n + 1, "trailing byte");
	MUT((void)0, 3, "header cut");
	MUT(m[4] = 5, n, "family 5");
	MUT(m[5] = 33, n, "IPv4 bits 33");
	MUT(m[9] = 1, n, "host bit set");
	MUT(m[21] = 1, n, "IPv4 padding");
#undef MUT
	h.range[0].addr[3] = 1;
	cr_expect_eq(fwproto_hello_encode(&h, m, sizeof(m)), MOAT_EINVAL, "host bits");
	h.range[0].addr[3] = 0;
	h.placement = FWPROTO_NETNS;
	cr_expect_eq(fwproto_hello_encode(&h, m, sizeof(m)), MOAT_EINVAL, "netns with ranges");
	h.placement = FWPROTO_FORWARD;
	h.nrange = FWPROTO_MAXRANGE + 1;
	cr_expect_eq(fwproto_hello_encode(&h, m, sizeof(m)), MOAT_EINVAL, "too many ranges");
	/* bits 0 is a valid (if useless) range: moat-fw refuses such a --sandbox itself */
	h.nrange = 1;
	h.range[0] = range4(0, 0, 0, 0, 0);
	cr_expect_eq(fwproto_hello_encode(&h, m, sizeof(m)), 22);
}
