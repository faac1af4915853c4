/* wire_writer.h: a bounded byte writer with a sticky error, shared by the builders in
 * wire_build.c, wire_resp.c and local.c (byte order: moat/bytes.h). Writers never write past cap;
 * callers check w->err once. */
#ifndef MOAT_WIRE_WRITER_H
#define MOAT_WIRE_WRITER_H

#include <stdint.h>
#include <string.h>

#include "moat/bytes.h"
#include "moat/err.h"

struct wire_writer {
	uint8_t *buf;
	size_t cap, len;
	int err;
};

static inline void ww_bytes(struct wire_writer *w, const void *p, size_t n)
{
	if (w->err)
		return; /* sticky: the first error stays (an MOAT_EFORMAT must not turn into ESPACE)
		         */
	if (n > w->cap - w->len) {
		w->err = MOAT_ESPACE;
		return;
	}
	memcpy(w->buf + w->len, p, n);
	w->len += n;
}

static inline void ww_u8(struct wire_writer *w, uint8_t v)
{
	ww_bytes(w, &v, 1);
}

static inline void ww_u16(struct wire_writer *w, uint16_t v)
{
	uint8_t b[2];
	be16_put(b, v);
	ww_bytes(w, b, 2);
}

static inline void ww_u32(struct wire_writer *w, uint32_t v)
{
	uint8_t b[4];
	be32_put(b, v);
	ww_bytes(w, b, 4);
}

#endif
