/* fwproto.c owns the wire format of the firewall channel (format version 3, see fwproto.h): the
 * GRANT, ACK and HELLO encoders and decoders. They are pure and allocate nothing, so both daemons
 * and the fuzzers can use them on untrusted bytes.
 *
 * The decoders are strict on purpose: moat-fw must not trust moatd, so anything the format does
 * not define exactly is rejected with MOAT_EFORMAT rather than guessed at. That includes the
 * padding of IPv4 addresses (bytes 4..15 must be zero), a client address given with family 0,
 * an agent name outside the config's name alphabet [A-Za-z0-9_.-] (it ends up in logs and the
 * ledger), a port list that is not strictly increasing or names another protocol or port 0
 * (so a port set has one encoding), trailing bytes, an unknown ACK status and a non-zero reserved
 * field, and a HELLO range with bits set past its prefix or ranges in the netns placement. The
 * encoders apply the same rules and answer MOAT_EINVAL, so what one side writes the
 * other side always reads. */
#include "moat/bytes.h"
#include "moat/fwproto.h"
#include "moat/err.h"

#include <string.h>

/* Fixed part of a GRANT before the agent name: version, type, naddr, seq, lifetime, agent_len. */
#define FWP_GRANT_HEAD 13
/* One address on the wire: family byte and 16 address bytes. */
#define FWP_ADDR_LEN 17
/* One port on the wire: protocol byte and a 16-bit port. */
#define FWP_PORT_LEN 3

static int fwp_agent_char_ok(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == '-';
}

/* Length of a valid agent name (1..FWPROTO_AGENT_MAX of the allowed bytes), or 0. */
static size_t fwp_agent_len(const char *agent)
{
	size_t n = 0;

	while (n <= FWPROTO_AGENT_MAX && agent[n] != '\0') {
		if (!fwp_agent_char_ok((unsigned char)agent[n]))
			return 0;
		n++;
	}
	return n > FWPROTO_AGENT_MAX ? 0 : n;
}

/* An address is valid for its family: 4 with zero padding, 6, or (when allow_none) family 0
 * with an all-zero address. */
static int fwp_addr_ok(uint8_t family, const uint8_t addr[16], int allow_none)
{
	static const uint8_t zero[16];

	switch (family) {
	case 4:
		return memcmp(addr + 4, zero, 12) == 0;
	case 6:
		return 1;
	case 0:
		return allow_none && memcmp(addr, zero, 16) == 0;
	default:
		return 0;
	}
}

/* A port list is 0..FWPROTO_MAXPORT pairs of TCP/UDP and 1..65535, strictly increasing. */
static int fwp_ports_ok(const struct fwproto_port *p, size_t n)
{
	if (n > FWPROTO_MAXPORT)
		return 0;
	for (size_t i = 0; i < n; i++) {
		if ((p[i].proto != 6 && p[i].proto != 17) || p[i].port == 0)
			return 0;
		uint32_t k = (uint32_t)p[i].proto << 16 | p[i].port;
		if (i && k <= ((uint32_t)p[i - 1].proto << 16 | p[i - 1].port))
			return 0;
	}
	return 1;
}

/* Total length of a GRANT with these counts. */
static size_t fwp_grant_len(size_t alen, size_t nport, size_t naddr)
{
	return FWP_GRANT_HEAD + alen + FWP_ADDR_LEN + 1 + FWP_PORT_LEN * nport +
	       FWP_ADDR_LEN * naddr;
}

int fwproto_grant_encode(const struct fwproto_grant *g, uint8_t *out, size_t cap)
{
	if (!g || !out)
		return MOAT_EINVAL;
	size_t alen = fwp_agent_len(g->agent);
	if (alen == 0 || g->naddr == 0 || g->naddr > FWPROTO_MAXADDR)
		return MOAT_EINVAL;
	if (!fwp_addr_ok(g->client.family, g->client.addr, 1) || !fwp_ports_ok(g->port, g->nport))
		return MOAT_EINVAL;
	for (size_t i = 0; i < g->naddr; i++)
		if (!fwp_addr_ok(g->addr[i].family, g->addr[i].addr, 0))
			return MOAT_EINVAL;
	size_t len = fwp_grant_len(alen, g->nport, g->naddr);
	if (cap < len)
		return MOAT_ESPACE;

	uint8_t *p = out;
	p[0] = FWPROTO_VERSION;
	p[1] = FWPROTO_GRANT;
	be16_put(p + 2, g->naddr);
	be32_put(p + 4, g->seq);
	be32_put(p + 8, g->lifetime);
	p[12] = (uint8_t)alen;
	memcpy(p + FWP_GRANT_HEAD, g->agent, alen);
	p += FWP_GRANT_HEAD + alen;
	p[0] = g->client.family;
	memcpy(p + 1, g->client.addr, 16);
	p += FWP_ADDR_LEN;
	*p++ = g->nport;
	for (size_t i = 0; i < g->nport; i++, p += FWP_PORT_LEN) {
		p[0] = g->port[i].proto;
		be16_put(p + 1, g->port[i].port);
	}
	for (size_t i = 0; i < g->naddr; i++, p += FWP_ADDR_LEN) {
		p[0] = g->addr[i].family;
		memcpy(p + 1, g->addr[i].addr, 16);
	}
	return (int)len;
}

int fwproto_grant_decode(const uint8_t *msg, size_t len, struct fwproto_grant *g)
{
	if (!msg || !g)
		return MOAT_EINVAL;
	if (len < FWP_GRANT_HEAD || len > FWPROTO_MAXMSG)
		return MOAT_EFORMAT;
	if (msg[0] != FWPROTO_VERSION || msg[1] != FWPROTO_GRANT)
		return MOAT_EFORMAT;
	uint16_t naddr = be16_get(msg + 2);
	size_t alen = msg[12];
	if (naddr == 0 || naddr > FWPROTO_MAXADDR || alen == 0 || alen > FWPROTO_AGENT_MAX)
		return MOAT_EFORMAT;
	/* The length is fully determined by the header and the port count: no trailing bytes, no
	 * short message. */
	if (len < fwp_grant_len(alen, 0, naddr))
		return MOAT_EFORMAT;
	const uint8_t *agent = msg + FWP_GRANT_HEAD;
	const uint8_t *p = agent + alen;
	size_t nport = p[FWP_ADDR_LEN];
	if (nport > FWPROTO_MAXPORT || len != fwp_grant_len(alen, nport, naddr))
		return MOAT_EFORMAT;
	for (size_t i = 0; i < alen; i++)
		if (!fwp_agent_char_ok(agent[i]))
			return MOAT_EFORMAT;
	if (!fwp_addr_ok(p[0], p + 1, 1))
		return MOAT_EFORMAT;
	const uint8_t *pp = p + FWP_ADDR_LEN + 1;
	struct fwproto_port ports[FWPROTO_MAXPORT];
	for (size_t i = 0; i < nport; i++)
		ports[i] = (struct fwproto_port){pp[FWP_PORT_LEN * i],
		                                 be16_get(pp + FWP_PORT_LEN * i + 1)};
	if (!fwp_ports_ok(ports, nport))
		return MOAT_EFORMAT;
	const uint8_t *addrs = pp + FWP_PORT_LEN * nport;
	for (size_t i = 0; i < naddr; i++) {
		const uint8_t *a = addrs + FWP_ADDR_LEN * i;
		if (!fwp_addr_ok(a[0], a + 1, 0))
			return MOAT_EFORMAT;
	}

	/* Valid: only now write the caller's struct, so a rejected message leaves it untouched. */
	g->seq = be32_get(msg + 4);
	g->lifetime = be32_get(msg + 8);
	memcpy(g->agent, agent, alen);
	g->agent[alen] = '\0';
	g->client.family = p[0];
	memcpy(g->client.addr, p + 1, 16);
	g->nport = (uint8_t)nport;
	memcpy(g->port, ports, nport * sizeof(ports[0]));
	g->naddr = naddr;
	for (size_t i = 0; i < naddr; i++) {
		const uint8_t *a = addrs + FWP_ADDR_LEN * i;
		g->addr[i].family = a[0];
		memcpy(g->addr[i].addr, a + 1, 16);
	}
	return 0;
}

int fwproto_ack_encode(const struct fwproto_ack *a, uint8_t *out, size_t cap)
{
	if (!a || !out || a->status > FWPROTO_BADMSG)
		return MOAT_EINVAL;
	if (cap < FWPROTO_ACKLEN)
		return MOAT_ESPACE;
	out[0] = FWPROTO_VERSION;
	out[1] = FWPROTO_ACK;
	be16_put(out + 2, a->status);
	be32_put(out + 4, a->seq);
	be32_put(out + 8, a->lifetime);
	be32_put(out + 12, 0);
	return FWPROTO_ACKLEN;
}

int fwproto_ack_decode(const uint8_t *msg, size_t len, struct fwproto_ack *a)
{
	if (!msg || !a)
		return MOAT_EINVAL;
	if (len != FWPROTO_ACKLEN || msg[0] != FWPROTO_VERSION || msg[1] != FWPROTO_ACK)
		return MOAT_EFORMAT;
	uint16_t status = be16_get(msg + 2);
	if (status > FWPROTO_BADMSG || be32_get(msg + 12) != 0)
		return MOAT_EFORMAT;
	a->status = status;
	a->seq = be32_get(msg + 4);
	a->lifetime = be32_get(msg + 8);
	return 0;
}

const char *fwproto_status_str(uint16_t status)
{
	static const char *const names[] = {
	    [FWPROTO_OK] = "OK",
	    [FWPROTO_DENIED] = "DENIED",
	    [FWPROTO_FAILED] = "FAILED",
	    [FWPROTO_BADMSG] = "BADMSG",
	};
	return status < sizeof(names) / sizeof(names[0]) ? names[status] : "UNKNOWN";
}

/* One HELLO range on the wire: family, bits and 16 address bytes. */
#define FWP_RANGE_LEN 18

/* A range is valid: family 4 or 6, bits within it, every bit past them zero (IPv4 padding
 * included), so a range has one encoding. */
static int fwp_range_ok(const struct fwproto_range *r)
{
	unsigned width = r->family == 4 ? 32 : r->family == 6 ? 128 : 0;
	if (!width || r->bits > width)
		return 0;
	for (unsigned i = r->bits; i < 128; i++)
		if (r->addr[i / 8] & (0x80u >> (i % 8)))
			return 0;
	return 1;
}

static int fwp_hello_head_ok(uint8_t placement, size_t nrange)
{
	if (placement == FWPROTO_NETNS)
		return nrange == 0;
	return placement == FWPROTO_FORWARD && nrange <= FWPROTO_MAXRANGE;
}

int fwproto_hello_encode(const struct fwproto_hello *h, uint8_t *out, size_t cap)
{
	if (!h || !out || !fwp_hello_head_ok(h->placement, h->nrange))
		return MOAT_EINVAL;
	for (size_t i = 0; i < h->nrange; i++)
		if (!fwp_range_ok(&h->range[i]))
			return MOAT_EINVAL;
	size_t len = 4 + FWP_RANGE_LEN * (size_t)h->nrange;
	if (cap < len)
		return MOAT_ESPACE;
	out[0] = FWPROTO_VERSION;
	out[1] = FWPROTO_HELLO;
	out[2] = h->placement;
	out[3] = h->nrange;
	for (size_t i = 0; i < h->nrange; i++) {
		uint8_t *p = out + 4 + FWP_RANGE_LEN * i;
		p[0] = h->range[i].family;
		p[1] = h->range[i].bits;
		memcpy(p + 2, h->range[i].addr, 16);
	}
	return (int)len;
}

int fwproto_hello_decode(const uint8_t *msg, size_t len, struct fwproto_hello *h)
{
	if (!msg || !h)
		return MOAT_EINVAL;
	if (len < 4 || msg[0] != FWPROTO_VERSION || msg[1] != FWPROTO_HELLO ||
	    !fwp_hello_head_ok(msg[2], msg[3]) || len != 4 + FWP_RANGE_LEN * (size_t)msg[3])
		return MOAT_EFORMAT;
	struct fwproto_range r[FWPROTO_MAXRANGE];
	for (size_t i = 0; i < msg[3]; i++) {
		const uint8_t *p = msg + 4 + FWP_RANGE_LEN * i;
		r[i].family = p[0];
		r[i].bits = p[1];
		memcpy(r[i].addr, p + 2, 16);
		if (!fwp_range_ok(&r[i]))
			return MOAT_EFORMAT;
	}
	/* Valid: only now write the caller's struct (a rejected message leaves it untouched). */
	h->placement = msg[2];
	h->nrange = msg[3];
	memcpy(h->range, r, msg[3] * sizeof(r[0]));
	return 0;
}
