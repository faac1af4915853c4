/* fuzz_svcb: two small parsers of name and answer bytes that decide what an agent may reach.
 *
 * svcb_each_hint (svcb.c) on arbitrary RDATA: the input is [off][stop][message...]; the RDATA is
 * the message from off to its end. Against a short reference walk written here from RFC 9460
 * (priority, target name, parameters with strictly increasing keys, ipv4hint/ipv6hint lengths a
 * multiple of 4/16): both accept or both reject, and they visit the same hints in the same order;
 * every hint lies inside the RDATA; validation without a callback says the same; a callback that
 * stops the walk has its value returned.
 *
 * iplit_is_literal / iplit_embedded_v4 (iplit.c) on a name made of the input: split at '.', empty
 * labels dropped, labels cut to 63 bytes, 255 bytes in all, lower-cased as moatd's lname is. When
 * every byte is a letter or a digit, the name joined with dots is compared with glibc's inet_aton,
 * which defines the IPv4 forms the resolver must treat as literals (decimal, octal, hex, 1 to 4
 * parts): both must agree on whether it is one and on the address. */
#include <arpa/inet.h>
#include <ctype.h>
#include <string.h>

#include "fuzz_common.h"
#include "moat/err.h"
#include "moat/iplit.h"
#include "moat/name.h"
#include "moat/svcb.h"

#define MAXHINTS 4096

struct hints {
	const uint8_t *lo, *hi; /* the RDATA */
	size_t n;
	size_t stop_at;
	size_t off[MAXHINTS];
	uint8_t len[MAXHINTS];
	const uint8_t *base;
};

static int on_hint(void *c, const uint8_t *addr, size_t len)
{
	struct hints *h = c;
	FZ_CHECK(len == 4 || len == 16, "hint length %zu", len);
	FZ_CHECK(addr >= h->lo && addr + len <= h->hi, "hint outside the RDATA");
	if (h->n < MAXHINTS) {
		h->off[h->n] = (size_t)(addr - h->base);
		h->len[h->n] = (uint8_t)len;
	}
	h->n++;
	return h->stop_at && h->n == h->stop_at ? 9 : 0;
}

/* The reference walk: returns 0 or -1, filling h with the hints. */
static int ref_walk(const uint8_t *m, size_t off, size_t end, struct hints *h)
{
	size_t p = off;
	if (end - off < 2)
		return -1;
	p += 2;
	size_t total = 0;
	for (;;) { /* target name: labels, ended by the root or by a backward pointer */
		if (p >= end)
			return -1;
		uint8_t c = m[p];
		if ((c & 0xC0) == 0xC0) {
			if (p + 2 > end || ((size_t)(c & 0x3F) << 8 | m[p + 1]) >= p)
				return -1;
			p += 2;
			break;
		}
		if (c > 63)
			return -1;
		total += 1u + c;
		if (total > 255 || p + 1 + c > end)
			return -1;
		p += 1u + c;
		if (c == 0)
			break;
	}
	long prev = -1;
	size_t n = 0;
	while (p < end) {
		if (p + 4 > end)
			return -1;
		unsigned key = (unsigned)m[p] << 8 | m[p + 1],
		         len = (unsigned)m[p + 2] << 8 | m[p + 3];
		p += 4;
		if (p + len > end || (long)key <= prev)
			return -1;
		prev = key;
		unsigned al = key == 4 ? 4 : key == 6 ? 16 : 0;
		if (al && len % al)
			return -1;
		for (unsigned i = 0; al && i < len; i += al, n++)
			if (n < MAXHINTS) {
				h->off[n] = p + i;
				h->len[n] = (uint8_t)al;
			}
		p += len;
	}
	h->n = n;
	return 0;
}

static void fuzz_svcb(const uint8_t *data, size_t size)
{
	static struct hints got, want;
	if (size < 2)
		return;
	const uint8_t *msg = data + 2;
	size_t msglen = size - 2;
	size_t off = data[0] % (msglen + 1), rdlen = msglen - off;

	memset(&got, 0, sizeof(got));
	got.lo = msg + off;
	got.hi = msg + off + rdlen;
	got.base = msg;
	int rc = svcb_each_hint(msg, msglen, off, rdlen, on_hint, &got);
	FZ_CHECK(rc == 0 || rc == MOAT_EFORMAT, "svcb_each_hint returned %d", rc);
	FZ_CHECK(svcb_each_hint(msg, msglen, off, rdlen, NULL, NULL) == rc, "validation differs");

	memset(&want, 0, sizeof(want));
	int ref = ref_walk(msg, off, off + rdlen, &want);
	FZ_CHECK((rc == 0) == (ref == 0), "svcb_each_hint %d, reference %d", rc, ref);
	if (rc == 0) {
		FZ_CHECK(got.n == want.n, "%zu hints, reference %zu", got.n, want.n);
		for (size_t i = 0; i < got.n && i < MAXHINTS; i++)
			FZ_CHECK(got.off[i] == want.off[i] && got.len[i] == want.len[i],
			         "hint %zu differs", i);
		if (got.n > 0) {
			struct hints stop = {msg + off, msg + off + rdlen, 0, 0, {0}, {0}, msg};
			stop.stop_at = 1 + data[1] % got.n;
			FZ_CHECK(svcb_each_hint(msg, msglen, off, rdlen, on_hint, &stop) == 9 &&
			             stop.n == stop.stop_at,
			         "stopping the walk");
		}
	}
	/* Offsets and lengths past the message are refused, not read. */
	FZ_CHECK(svcb_each_hint(msg, msglen, msglen + 1, 0, on_hint, &got) == MOAT_EFORMAT,
	         "offset past the end");
	FZ_CHECK(svcb_each_hint(msg, msglen, off, rdlen + 1, on_hint, &got) == MOAT_EFORMAT,
	         "length past the end");
}

static void fuzz_iplit(const uint8_t *data, size_t size)
{
	uint8_t wire[NAME_MAXWIRE];
	size_t w = 0, i = 0;
	bool alnum = true;
	while (i < size) {
		size_t b = i;
		while (i < size && data[i] != '.')
			i++;
		size_t l = i - b > 63 ? 63 : i - b;
		i++; /* the dot */
		if (l == 0)
			continue;
		if (w + 1 + l + 1 > NAME_MAXWIRE)
			break;
		wire[w++] = (uint8_t)l;
		for (size_t k = 0; k < l; k++) {
			if (!isalnum(data[b + k]))
				alnum = false;
			wire[w++] = data[b + k];
		}
	}
	wire[w++] = 0;
	name_lower(wire);

	uint8_t addr[16], emb[4];
	size_t alen = 0;
	bool lit = iplit_is_literal(wire, addr, &alen);
	if (lit)
		FZ_CHECK(alen == 4 || alen == 16, "literal of %zu bytes", alen);
	iplit_embedded_v4(wire, emb);

	if (alnum) {
		char text[NAME_MAXTEXT];
		size_t t = 0;
		for (const uint8_t *p = wire; *p; p = name_parent(p)) {
			if (t)
				text[t++] = '.';
			memcpy(text + t, p + 1, *p);
			t += *p;
		}
		text[t] = 0;
		struct in_addr in;
		bool aton = inet_aton(text, &in) != 0;
		FZ_CHECK(aton == (lit && alen == 4), "'%s': inet_aton %d, iplit %d (len %zu)", text,
		         aton, lit, alen);
		if (aton)
			FZ_CHECK(memcmp(addr, &in.s_addr, 4) == 0, "'%s': address differs", text);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > 65535)
		return 0;
	fuzz_svcb(data, size);
	fuzz_iplit(data, size);
	return 0;
}
