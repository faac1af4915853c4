/* fwproto_sandbox.c owns the wire format of the firewall channel's runtime-sandbox messages
 * (SANDBOX_ADD, SANDBOX_DEL and SANDBOX_REPLY, see moat/fwproto_sandbox.h). Pure, no allocation,
 * strict like fwproto.c: a range with host bits set, IPv4 padding that is not zero, an
 * interface name outside [A-Za-z0-9_.-], an unknown flag, a resolver on port 0, reply text that
 * is not printable ASCII or a byte too many or too few is MOAT_EFORMAT (decoders) or MOAT_EINVAL
 * (encoders), so what one side writes the other side reads. */
#include "moat/bytes.h"
#include "moat/err.h"
#include "moat/fwproto.h"
#include "moat/fwproto_sandbox.h"

#include <string.h>

#define FWS_REQ_HEAD 27 /* version, type, flags, seq, family, bits, address, ifname_len */
#define FWS_RES_LEN 19  /* family, address, port */
#define FWS_FLAG_PRIVATE 1

static bool fws_ifname_ok(const char *s, size_t n)
{
	if (n == 0 || n >= FWPROTO_SBX_IFNAMSIZ)
		return false;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '.' || c == '-'))
			return false;
	}
	return true;
}

/* A prefix of its family with every bit past the prefix zero (IPv4 padding included). */
static bool fws_range_ok(uint8_t family, uint8_t bits, const uint8_t addr[16])
{
	unsigned width = family == 4 ? 32 : family == 6 ? 128 : 0;
	if (width == 0 || bits > width)
		return false;
	for (unsigned i = bits; i < 128; i++)
		if (addr[i / 8] & (0x80u >> (i % 8)))
			return false;
	return true;
}

static bool fws_res_ok(const struct fwproto_resolver *r)
{
	static const uint8_t zero[12];
	return r->port != 0 &&
	       (r->family == 6 || (r->family == 4 && memcmp(r->addr + 4, zero, 12) == 0));
}

static bool fws_text_ok(const char *s, size_t n)
{
	if (n > FWPROTO_SBX_TEXTMAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
			return false;
	return true;
}

bool fwproto_is_sandbox(const uint8_t *msg, size_t len)
{
	return msg && len >= 2 && msg[0] == FWPROTO_VERSION &&
	       (msg[1] == FWPROTO_SANDBOX_ADD || msg[1] == FWPROTO_SANDBOX_DEL);
}

int fwproto_sandbox_encode(const struct fwproto_sandbox *s, uint8_t *out, size_t cap)
{
	if (!s || !out)
		return MOAT_EINVAL;
	size_t n = strnlen(s->ifname, sizeof(s->ifname));
	if ((s->type != FWPROTO_SANDBOX_ADD && s->type != FWPROTO_SANDBOX_DEL) ||
	    !fws_ifname_ok(s->ifname, n) || !fws_range_ok(s->family, s->bits, s->addr))
		return MOAT_EINVAL;
	if (cap < FWS_REQ_HEAD + n)
		return MOAT_ESPACE;
	out[0] = FWPROTO_VERSION;
	out[1] = s->type;
	be16_put(out + 2, s->allow_private ? FWS_FLAG_PRIVATE : 0);
	be32_put(out + 4, s->seq);
	out[8] = s->family;
	out[9] = s->bits;
	memcpy(out + 10, s->addr, 16);
	out[26] = (uint8_t)n;
	memcpy(out + FWS_REQ_HEAD, s->ifname, n);
	return (int)(FWS_REQ_HEAD + n);
}

int fwproto_sandbox_decode(const uint8_t *msg, size_t len, struct fwproto_sandbox *s)
{
	if (!msg || !s)
		return MOAT_EINVAL;
	if (!fwproto_is_sandbox(msg, len) || len < FWS_REQ_HEAD ||
	    len != FWS_REQ_HEAD + (size_t)msg[26])
		return MOAT_EFORMAT;
	uint16_t flags = be16_get(msg + 2);
	if ((flags & ~FWS_FLAG_PRIVATE) || !fws_range_ok(msg[8], msg[9], msg + 10) ||
	    !fws_ifname_ok((const char *)msg + FWS_REQ_HEAD, msg[26]))
		return MOAT_EFORMAT;
	memset(s, 0, sizeof(*s));
	s->type = msg[1];
	s->allow_private = flags & FWS_FLAG_PRIVATE;
	s->seq = be32_get(msg + 4);
	s->family = msg[8];
	s->bits = msg[9];
	memcpy(s->addr, msg + 10, 16);
	memcpy(s->ifname, msg + FWS_REQ_HEAD, msg[26]);
	return 0;
}

int fwproto_sandbox_reply_encode(const struct fwproto_sandbox_reply *r, uint8_t *out, size_t cap)
{
	if (!r || !out || r->status > FWPROTO_BADMSG || r->nres > FWPROTO_SBX_MAXRES)
		return MOAT_EINVAL;
	size_t tn = strnlen(r->text, sizeof(r->text));
	if (!fws_text_ok(r->text, tn))
		return MOAT_EINVAL;
	for (size_t i = 0; i < r->nres; i++)
		if (!fws_res_ok(&r->res[i]))
			return MOAT_EINVAL;
	size_t len = 10 + FWS_RES_LEN * (size_t)r->nres + tn;
	if (cap < len)
		return MOAT_ESPACE;
	out[0] = FWPROTO_VERSION;
	out[1] = FWPROTO_SANDBOX_REPLY;
	be16_put(out + 2, r->status);
	be32_put(out + 4, r->seq);
	out[8] = r->nres;
	uint8_t *p = out + 9;
	for (size_t i = 0; i < r->nres; i++, p += FWS_RES_LEN) {
		p[0] = r->res[i].family;
		memcpy(p + 1, r->res[i].addr, 16);
		be16_put(p + 17, r->res[i].port);
	}
	*p++ = (uint8_t)tn;
	memcpy(p, r->text, tn);
	return (int)len;
}

int fwproto_sandbox_reply_decode(const uint8_t *msg, size_t len, struct fwproto_sandbox_reply *r)
{
	if (!msg || !r)
		return MOAT_EINVAL;
	if (len < 10 || msg[0] != FWPROTO_VERSION || msg[1] != FWPROTO_SANDBOX_REPLY ||
	    be16_get(msg + 2) > FWPROTO_BADMSG || msg[8] > FWPROTO_SBX_MAXRES)
		return MOAT_EFORMAT;
	size_t nres = msg[8], head = 9 + FWS_RES_LEN * nres;
	if (len < head + 1 || len != head + 1 + msg[head] ||
	    !fws_text_ok((const char *)msg + head + 1, msg[head]))
		return MOAT_EFORMAT;
	struct fwproto_resolver res[FWPROTO_SBX_MAXRES];
	for (size_t i = 0; i < nres; i++) {
		const uint8_t *p = msg + 9 + FWS_RES_LEN * i;
		res[i].family = p[0];
		memcpy(res[i].addr, p + 1, 16);
		res[i].port = be16_get(p + 17);
		if (!fws_res_ok(&res[i]))
			return MOAT_EFORMAT;
	}
	memset(r, 0, sizeof(*r));
	r->status = be16_get(msg + 2);
	r->seq = be32_get(msg + 4);
	r->nres = (uint8_t)nres;
	memcpy(r->res, res, nres * sizeof(res[0]));
	memcpy(r->text, msg + head + 1, msg[head]);
	return 0;
}
