/* Unit tests for fwproto_sandbox.c: SANDBOX_ADD/DEL and SANDBOX_REPLY round trips, their exact
 * byte layout, and the malformed cases the decoders refuse (version, type, length, flags,
 * family, prefix length, host bits, IPv4 padding, interface name, resolver port, reply text),
 * plus the encoders' argument checks. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <string.h>

#include "moat/err.h"
#include "moat/fwproto.h"
#include "moat/fwproto_sandbox.h"

static void sample(struct fwproto_sandbox *s)
{
	memset(s, 0, sizeof(*s));
	s->type = FWPROTO_SANDBOX_ADD;
	s->seq = 0x0a0b0c0d;
	s->family = 4;
	s->bits = 32;
	inet_pton(AF_INET, "10.77.0.2", s->addr);
	strcpy(s->ifname, "moat-3");
}

Test(fwproto_sandbox, layout_and_round_trip)
{
	struct fwproto_sandbox s, d;
	uint8_t buf[FWPROTO_SBX_MAXREQ];
	sample(&s);
	s.allow_private = true;
	int n = fwproto_sandbox_encode(&s, buf, sizeof(buf));
	cr_assert_eq(n, 27 + 6);
	static const uint8_t head[] = {
	    FWPROTO_VERSION, 16, 0, 1, 0x0a, 0x0b, 0x0c, 0x0d, 4, 32, 10, 77, 0, 2};
	cr_assert_eq(memcmp(buf, head, sizeof(head)), 0);
	cr_assert_eq(buf[26], 6);
	cr_assert_eq(memcmp(buf + 27, "moat-3", 6), 0);
	cr_assert(fwproto_is_sandbox(buf, (size_t)n));
	cr_assert_eq(fwproto_sandbox_decode(buf, (size_t)n, &d), 0);
	cr_assert_eq(d.type, FWPROTO_SANDBOX_ADD);
	cr_assert(d.allow_private);
	cr_assert_eq(d.seq, s.seq);
	cr_assert_eq(memcmp(d.addr, s.addr, 16), 0);
	cr_assert_str_eq(d.ifname, "moat-3");
	/* A buffer one byte short is refused. */
	cr_assert_eq(fwproto_sandbox_encode(&s, buf, (size_t)n - 1), MOAT_ESPACE);
}

Test(fwproto_sandbox, ipv6_del)
{
	struct fwproto_sandbox s, d;
	uint8_t buf[FWPROTO_SBX_MAXREQ];
	sample(&s);
	s.type = FWPROTO_SANDBOX_DEL;
	s.family = 6;
	s.bits = 64;
	memset(s.addr, 0, 16);
	inet_pton(AF_INET6, "2001:db8:7::", s.addr);
	int n = fwproto_sandbox_encode(&s, buf, sizeof(buf));
	cr_assert_gt(n, 0);
	cr_assert_eq(fwproto_sandbox_decode(buf, (size_t)n, &d), 0);
	cr_assert_eq(d.type, FWPROTO_SANDBOX_DEL);
	cr_assert_eq(d.bits, 64);
	cr_assert_not(d.allow_private);
}

Test(fwproto_sandbox, encoder_refuses)
{
	struct fwproto_sandbox s;
	uint8_t buf[64];
	sample(&s);
	s.bits = 30; /* 10.77.0.2 has host bits past /30 */
	cr_assert_eq(fwproto_sandbox_encode(&s, buf, sizeof(buf)), MOAT_EINVAL);
	sample(&s);
	s.bits = 33;
	cr_assert_eq(fwproto_sandbox_encode(&s, buf, sizeof(buf)), MOAT_EINVAL);
	sample(&s);
	strcpy(s.ifname, "bad name");
	cr_assert_eq(fwproto_sandbox_encode(&s, buf, sizeof(buf)), MOAT_EINVAL);
	sample(&s);
	memset(s.ifname, 'a', sizeof(s.ifname)); /* not terminated: 16 bytes */
	cr_assert_eq(fwproto_sandbox_encode(&s, buf, sizeof(buf)), MOAT_EINVAL);
	sample(&s);
	s.ifname[0] = 0;
	cr_assert_eq(fwproto_sandbox_encode(&s, buf, sizeof(buf)), MOAT_EINVAL);
	sample(&s);
	s.type = FWPROTO_SANDBOX_REPLY;
	cr_assert_eq(fwproto_sandbox_encode(&s, buf, sizeof(buf)), MOAT_EINVAL);
	sample(&s);
	s.family = 5;
	cr_assert_eq(fwproto_sandbox_encode(&s, buf, sizeof(buf)), MOAT_EINVAL);
	sample(&s);
	s.addr[4] = 1; /* IPv4 padding */
	cr_assert_eq(fwproto_sandbox_encode(&s, buf, sizeof(buf)), MOAT_EINVAL);
}

Test(fwproto_sandbox, decoder_refuses)
{
	struct fwproto_sandbox s, d, before;
	uint8_t good[FWPROTO_SBX_MAXREQ], buf[FWPROTO_SBX_MAXREQ + 1];
	sample(&s);
	int n = fwproto_sandbox_encode(&s, good, sizeof(good));
	cr_assert_gt(n, 0);
	memset(&d, 0x5a, sizeof(d));
	before = d;
	struct {
		size_t off;
		uint8_t val;
	} bad[] = {{0, 1},    {0, 2},    {1, 1},  {1, 18}, {2, 1},
	           {3, 2},    {8, 0},    {8, 5},  {9, 33}, {14, 1} /* IPv4 padding */,
	           {27, ' '}, {27, '/'}, {26, 7}, {26, 0}};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memcpy(buf, good, (size_t)n);
		buf[bad[i].off] = bad[i].val;
		cr_assert_eq(fwproto_sandbox_decode(buf, (size_t)n, &d), MOAT_EFORMAT, "case %zu",
		             i);
		cr_assert_eq(memcmp(&d, &before, sizeof(d)), 0, "case %zu changed the struct", i);
	}
	memcpy(buf, good, (size_t)n);
	buf[9] = 30; /* 10.77.0.2/30: host bits set */
	cr_assert_eq(fwproto_sandbox_decode(buf, (size_t)n, &d), MOAT_EFORMAT);
	memcpy(buf, good, (size_t)n);
	cr_assert_eq(fwproto_sandbox_decode(buf, (size_t)n - 1, &d), MOAT_EFORMAT);
	buf[n] = 'x';
	cr_assert_eq(fwproto_sandbox_decode(buf, (size_t)n + 1, &d), MOAT_EFORMAT);
	cr_assert_eq(fwproto_sandbox_decode(buf, 26, &d), MOAT_EFORMAT);
	/* A GRANT is not a sandbox message. */
	buf[1] = FWPROTO_GRANT;
	cr_assert_not(fwproto_is_sandbox(buf, (size_t)n));
}

Test(fwproto_sandbox, reply_round_trip)
{
	struct fwproto_sandbox_reply r = {.status = FWPROTO_DENIED, .seq = 7, .nres = 2}, d;
	uint8_t buf[FWPROTO_SBX_MAXREPLY];
	r.res[0].family = 4;
	inet_pton(AF_INET, "192.0.2.1", r.res[0].addr);
	r.res[0].port = 53;
	r.res[1].family = 6;
	inet_pton(AF_INET6, "2001:db8::1", r.res[1].addr);
	r.res[1].port = 5353;
	strcpy(r.text, "overlaps 10.77.0.0/30 on moat-1");
	int n = fwproto_sandbox_reply_encode(&r, buf, sizeof(buf));
	cr_assert_eq(n, 10 + 2 * 19 + (int)strlen(r.text));
	cr_assert_eq(buf[1], FWPROTO_SANDBOX_REPLY);
	cr_assert_eq(fwproto_sandbox_reply_decode(buf, (size_t)n, &d), 0);
	cr_assert_eq(d.status, FWPROTO_DENIED);
	cr_assert_eq(d.seq, 7);
	cr_assert_eq(d.nres, 2);
	cr_assert_eq(d.res[1].port, 5353);
	cr_assert_str_eq(d.text, r.text);
	cr_assert_eq(fwproto_sandbox_reply_encode(&r, buf, (size_t)n - 1), MOAT_ESPACE);
	/* refusals: port 0, control bytes in the text, a bad status, a short or long message */
	uint8_t b2[FWPROTO_SBX_MAXREPLY + 1];
	memcpy(b2, buf, (size_t)n);
	b2[9 + 17] = 0;
	b2[9 + 18] = 0;
	cr_assert_eq(fwproto_sandbox_reply_decode(b2, (size_t)n, &d), MOAT_EFORMAT);
	memcpy(b2, buf, (size_t)n);
	b2[n - 1] = '\n';
	cr_assert_eq(fwproto_sandbox_reply_decode(b2, (size_t)n, &d), MOAT_EFORMAT);
	memcpy(b2, buf, (size_t)n);
	b2[3] = 9;
	cr_assert_eq(fwproto_sandbox_reply_decode(b2, (size_t)n, &d), MOAT_EFORMAT);
	cr_assert_eq(fwproto_sandbox_reply_decode(buf, (size_t)n - 1, &d), MOAT_EFORMAT);
	memcpy(b2, buf, (size_t)n);
	b2[n] = 'x';
	cr_assert_eq(fwproto_sandbox_reply_decode(b2, (size_t)n + 1, &d), MOAT_EFORMAT);
	r.res[0].port = 0;
	cr_assert_eq(fwproto_sandbox_reply_encode(&r, buf, sizeof(buf)), MOAT_EINVAL);
}
