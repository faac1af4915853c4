/* fuzz_fwproto: the firewall channel's messages (fwproto.c). moat-fw must not trust moatd and
 * moatd must not trust moat-fw, so both decoders run on arbitrary bytes:
 *   - a decoded GRANT or ACK re-encodes to exactly the input bytes (the format has one encoding
 *     per message, so anything the decoder accepts is canonical);
 *   - a rejected message leaves the caller's struct untouched (as fwproto.c promises);
 *   - a decoded GRANT has 1..FWPROTO_MAXADDR addresses of family 4 or 6, a terminated agent name
 *     of 1..63 bytes, a client of family 0, 4 or 6, and 0..FWPROTO_MAXPORT TCP/UDP ports (never
 *     port 0), strictly increasing;
 *   - a GRANT built from the input's bytes as a struct either encodes to a message that decodes
 *     to the same struct, or is refused with MOAT_EINVAL/MOAT_ESPACE;
 *   - a decoded HELLO (moatd reads it from moat-fw, which it does not trust either) re-encodes to
 *     the input bytes, has a known placement, no ranges in the netns placement, and ranges of
 *     family 4 or 6 with no bit set past their prefix. */
#include <string.h>

#include "fuzz_common.h"
#include "moat/err.h"
#include "moat/fwproto.h"

static void check_grant(const struct fwproto_grant *g)
{
	size_t al = strnlen(g->agent, sizeof(g->agent));
	FZ_CHECK(al >= 1 && al <= FWPROTO_AGENT_MAX, "agent length %zu", al);
	FZ_CHECK(g->naddr >= 1 && g->naddr <= FWPROTO_MAXADDR, "naddr %u", g->naddr);
	FZ_CHECK(g->client.family == 0 || g->client.family == 4 || g->client.family == 6,
	         "client family %u", g->client.family);
	for (unsigned i = 0; i < g->naddr; i++)
		FZ_CHECK(g->addr[i].family == 4 || g->addr[i].family == 6, "family %u",
		         g->addr[i].family);
	FZ_CHECK(g->nport <= FWPROTO_MAXPORT, "nport %u", g->nport);
	for (unsigned i = 0; i < g->nport; i++) {
		const struct fwproto_port *p = &g->port[i];
		FZ_CHECK((p->proto == 6 || p->proto == 17) && p->port != 0, "port %u/%u", p->proto,
		         p->port);
		FZ_CHECK(i == 0 || p[-1].proto < p->proto ||
		             (p[-1].proto == p->proto && p[-1].port < p->port),
		         "ports out of order at %u", i);
	}
}

static void check_hello(const struct fwproto_hello *h, const uint8_t *data, size_t size)
{
	static uint8_t out[FWPROTO_HELLO_MAXLEN + 8];
	FZ_CHECK(h->placement == FWPROTO_NETNS || h->placement == FWPROTO_FORWARD, "placement %u",
	         h->placement);
	FZ_CHECK(h->placement == FWPROTO_FORWARD || h->nrange == 0,
	         "ranges in the netns placement");
	FZ_CHECK(h->nrange <= FWPROTO_MAXRANGE, "nrange %u", h->nrange);
	for (unsigned i = 0; i < h->nrange; i++) {
		const struct fwproto_range *r = &h->range[i];
		unsigned width = r->family == 4 ? 32 : 128;
		FZ_CHECK((r->family == 4 || r->family == 6) && r->bits <= width, "range %u/%u",
		         r->family, r->bits);
		for (unsigned b = r->bits; b < 128; b++)
			FZ_CHECK(!(r->addr[b / 8] & (0x80u >> (b % 8))), "bit %u past the prefix",
			         b);
	}
	int n = fwproto_hello_encode(h, out, sizeof(out));
	FZ_CHECK(n > 0 && (size_t)n == size && memcmp(out, data, size) == 0,
	         "decoded HELLO does not re-encode to the same bytes (%d vs %zu)", n, size);
	FZ_CHECK(fwproto_hello_encode(h, out, size - 1) == MOAT_ESPACE, "short HELLO buffer");
}

static bool grant_equal(const struct fwproto_grant *a, const struct fwproto_grant *b)
{
	if (a->seq != b->seq || a->lifetime != b->lifetime || strcmp(a->agent, b->agent) != 0 ||
	    a->naddr != b->naddr || a->client.family != b->client.family ||
	    memcmp(a->client.addr, b->client.addr, 16) != 0 || a->nport != b->nport)
		return false;
	for (unsigned i = 0; i < a->nport; i++)
		if (a->port[i].proto != b->port[i].proto || a->port[i].port != b->port[i].port)
			return false;
	for (unsigned i = 0; i < a->naddr; i++)
		if (a->addr[i].family != b->addr[i].family ||
		    memcmp(a->addr[i].addr, b->addr[i].addr, 16) != 0)
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct fwproto_grant g, g2, before;
	static uint8_t out[FWPROTO_MAXMSG + 64];
	struct fwproto_ack a, a2, abefore;

	/* GRANT */
	memset(&g, 0xA5, sizeof(g));
	memcpy(&before, &g, sizeof(g));
	int rc = fwproto_grant_decode(data, size, &g);
	FZ_CHECK(rc == 0 || rc == MOAT_EFORMAT, "grant_decode returned %d", rc);
	if (rc == 0) {
		check_grant(&g);
		int n = fwproto_grant_encode(&g, out, sizeof(out));
		FZ_CHECK(n > 0 && (size_t)n == size && memcmp(out, data, size) == 0,
		         "decoded GRANT does not re-encode to the same bytes (%d vs %zu)", n, size);
		/* A buffer one byte short is refused, never overrun. */
		FZ_CHECK(fwproto_grant_encode(&g, out, size - 1) == MOAT_ESPACE, "short buffer");
	} else {
		FZ_CHECK(memcmp(&g, &before, sizeof(g)) == 0, "rejected GRANT changed the struct");
	}

	/* ACK */
	memset(&a, 0x5A, sizeof(a));
	memcpy(&abefore, &a, sizeof(a));
	rc = fwproto_ack_decode(data, size, &a);
	FZ_CHECK(rc == 0 || rc == MOAT_EFORMAT, "ack_decode returned %d", rc);
	if (rc == 0) {
		FZ_CHECK(a.status <= FWPROTO_BADMSG, "status %u", a.status);
		FZ_CHECK(strcmp(fwproto_status_str(a.status), "UNKNOWN") != 0, "status name");
		int n = fwproto_ack_encode(&a, out, sizeof(out));
		FZ_CHECK(n == FWPROTO_ACKLEN && size == FWPROTO_ACKLEN &&
		             memcmp(out, data, size) == 0,
		         "decoded ACK does not re-encode to the same bytes");
		FZ_CHECK(fwproto_ack_decode(out, (size_t)n, &a2) == 0 && a2.status == a.status &&
		             a2.seq == a.seq && a2.lifetime == a.lifetime,
		         "ACK round trip");
	} else {
		FZ_CHECK(memcmp(&a, &abefore, sizeof(a)) == 0, "rejected ACK changed the struct");
	}

	/* HELLO */
	static struct fwproto_hello h, hbefore;
	memset(&h, 0x3C, sizeof(h));
	memcpy(&hbefore, &h, sizeof(h));
	rc = fwproto_hello_decode(data, size, &h);
	FZ_CHECK(rc == 0 || rc == MOAT_EFORMAT, "hello_decode returned %d", rc);
	if (rc == 0)
		check_hello(&h, data, size);
	else
		FZ_CHECK(memcmp(&h, &hbefore, sizeof(h)) == 0, "rejected HELLO changed the struct");

	/* The encoder on a struct made of the input: refuse or round-trip. */
	memset(&g, 0, sizeof(g));
	memcpy(&g, data, size < sizeof(g) ? size : sizeof(g));
	g.agent[FWPROTO_AGENT_MAX] = 0; /* the struct's contract: a terminated name */
	size_t cap = size ? (size_t)data[0] * 8 : sizeof(out);
	if (cap > sizeof(out))
		cap = sizeof(out);
	int n = fwproto_grant_encode(&g, out, cap);
	FZ_CHECK(n > 0 || n == MOAT_EINVAL || n == MOAT_ESPACE, "grant_encode returned %d", n);
	if (n > 0) {
		FZ_CHECK((size_t)n <= cap && (size_t)n <= FWPROTO_MAXMSG, "encoded %d into %zu", n,
		         cap);
		memset(&g2, 0, sizeof(g2));
		FZ_CHECK(fwproto_grant_decode(out, (size_t)n, &g2) == 0,
		         "own GRANT does not decode");
		FZ_CHECK(grant_equal(&g, &g2), "GRANT round trip changed the message");
	}
	return 0;
}
