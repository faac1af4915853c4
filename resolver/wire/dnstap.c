/* dnstap.c owns the dnstap encoder (schema and why by hand in moat/dnstap.h): protobuf varints,
 * length-delimited fields and fixed32, written into a caller's bounded buffer with a sticky
 * overflow flag checked once at the end. */
#include <netinet/in.h>
#include <string.h>

#include "moat/dnstap.h"
#include "moat/err.h"

/* protobuf wire types */
enum { PB_VARINT = 0, PB_LEN = 2, PB_FIXED32 = 5 };

/* dnstap.proto field numbers and enum values (the schema in moat/dnstap.h). */
enum {
	DT_IDENTITY = 1,
	DT_VERSION = 2,
	DT_MESSAGE = 14,
	DT_TYPE = 15,
	DT_TYPE_MESSAGE = 1,
};
enum {
	MSG_TYPE = 1,
	MSG_SOCKET_FAMILY = 2,
	MSG_SOCKET_PROTOCOL = 3,
	MSG_QUERY_ADDRESS = 4,
	MSG_RESPONSE_ADDRESS = 5,
	MSG_QUERY_PORT = 6,
	MSG_RESPONSE_PORT = 7,
	MSG_QUERY_TIME_SEC = 8,
	MSG_QUERY_TIME_NSEC = 9,
	MSG_QUERY_MESSAGE = 10,
	MSG_RESPONSE_TIME_SEC = 12,
	MSG_RESPONSE_TIME_NSEC = 13,
	MSG_RESPONSE_MESSAGE = 14,
	FAMILY_INET = 1,
	FAMILY_INET6 = 2,
	PROTOCOL_UDP = 1,
	PROTOCOL_TCP = 2,
};

struct pb {
	uint8_t *p;
	size_t n, cap;
	bool over;
};

static void pb_byte(struct pb *b, uint8_t v)
{
	if (b->n < b->cap)
		b->p[b->n++] = v;
	else
		b->over = true;
}

static void pb_varint(struct pb *b, uint64_t v)
{
	while (v >= 0x80) {
		pb_byte(b, (uint8_t)(v | 0x80));
		v >>= 7;
	}
	pb_byte(b, (uint8_t)v);
}

static void pb_tag(struct pb *b, unsigned field, unsigned wt)
{
	pb_varint(b, (uint64_t)field << 3 | wt);
}

static void pb_uint(struct pb *b, unsigned field, uint64_t v)
{
	pb_tag(b, field, PB_VARINT);
	pb_varint(b, v);
}

static void pb_bytes(struct pb *b, unsigned field, const void *v, size_t len)
{
	pb_tag(b, field, PB_LEN);
	pb_varint(b, len);
	if (len > b->cap - b->n || b->n > b->cap) {
		b->over = true;
		return;
	}
	memcpy(b->p + b->n, v, len);
	b->n += len;
}

static void pb_fixed32(struct pb *b, unsigned field, uint32_t v)
{
	pb_tag(b, field, PB_FIXED32);
	for (int i = 0; i < 4; i++)
		pb_byte(b, (uint8_t)(v >> (8 * i)));
}

static size_t varint_len(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* Address field (bytes) and port field of a socket address. */
static void pb_addr(struct pb *b, unsigned afield, unsigned pfield, const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)(const void *)sa;
		pb_bytes(b, afield, &s->sin_addr, 4);
		pb_uint(b, pfield, ntohs(s->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)(const void *)sa;
		pb_bytes(b, afield, &s->sin6_addr, 16);
		pb_uint(b, pfield, ntohs(s->sin6_port));
	}
}

/* The Message body. */
static void message(struct pb *b, const struct dnstap_msg *m)
{
	const struct sockaddr *fam = m->query_addr ? m->query_addr : m->response_addr;
	bool response = m->type == DNSTAP_CLIENT_RESPONSE || m->type == DNSTAP_FORWARDER_RESPONSE;
	pb_uint(b, MSG_TYPE, (uint64_t)m->type);
	if (fam)
		pb_uint(b, MSG_SOCKET_FAMILY,
		        fam->sa_family == AF_INET6 ? FAMILY_INET6 : FAMILY_INET);
	pb_uint(b, MSG_SOCKET_PROTOCOL, m->tcp ? PROTOCOL_TCP : PROTOCOL_UDP);
	if (m->query_addr)
		pb_addr(b, MSG_QUERY_ADDRESS, MSG_QUERY_PORT, m->query_addr);
	if (m->response_addr)
		pb_addr(b, MSG_RESPONSE_ADDRESS, MSG_RESPONSE_PORT, m->response_addr);
	pb_uint(b, response ? MSG_RESPONSE_TIME_SEC : MSG_QUERY_TIME_SEC, m->sec);
	pb_fixed32(b, response ? MSG_RESPONSE_TIME_NSEC : MSG_QUERY_TIME_NSEC, m->nsec);
	pb_bytes(b, response ? MSG_RESPONSE_MESSAGE : MSG_QUERY_MESSAGE, m->dns, m->len);
}

int dnstap_encode(const struct dnstap_msg *m, uint8_t *out, size_t cap)
{
	if (m->len > 65535)
		return MOAT_ESPACE;
	struct pb b = {out, 0, cap, false};
	if (m->identity)
		pb_bytes(&b, DT_IDENTITY, m->identity, strlen(m->identity));
	if (m->version)
		pb_bytes(&b, DT_VERSION, m->version, strlen(m->version));
	/* The Message is written after room for its tag and a length of up to 3 bytes (it is
	 * below 2^21), then moved down to sit right after its real header. */
	size_t at = b.n;
	struct pb mb = {out, at + 4, cap, b.over || at + 4 > cap};
	if (!mb.over)
		message(&mb, m);
	if (mb.over)
		return MOAT_ESPACE;
	size_t body = mb.n - (at + 4);
	size_t hdr = 1 + varint_len(body);
	memmove(out + at + hdr, out + at + 4, body);
	pb_tag(&b, DT_MESSAGE, PB_LEN);
	pb_varint(&b, body);
	b.n = at + hdr + body;
	pb_uint(&b, DT_TYPE, DT_TYPE_MESSAGE);
	return b.over ? MOAT_ESPACE : (int)b.n;
}
