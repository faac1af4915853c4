/* bytes.h: big-endian (network order) loads and stores, and the one grow-an-array helper. Every
 * wire format moat reads or writes (DNS, the firewall protocol, the control protocol, the agent
 * store) uses these, so a byte-order or bounds slip has one place to be fixed. Header-only. */
#ifndef MOAT_BYTES_H
#define MOAT_BYTES_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline uint16_t be16_get(const uint8_t *p)
{
	return (uint16_t)((unsigned)p[0] << 8 | p[1]);
}

static inline uint32_t be32_get(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void be16_put(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static inline void be32_put(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* Make room for one more element in the realloc'd array whose pointer is at arrp (a T **), holding
 * *cap elements of elem bytes of which n are used: doubles the capacity (first: the capacity of an
 * empty array). 0, or -1 when out of memory or the size would overflow (array and *cap unchanged,
 * still owned by the caller). The pointer is read and written with memcpy, so any T works. */
static inline int grow_one(void *arrp, size_t *cap, size_t n, size_t elem, size_t first)
{
	if (n < *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : first;
	if (nc < *cap || nc > SIZE_MAX / elem)
		return -1;
	void *v;
	memcpy(&v, arrp, sizeof(v));
	void *nv = realloc(v, nc * elem);
	if (!nv)
		return -1;
	memcpy(arrp, &nv, sizeof(nv));
	*cap = nc;
	return 0;
}

#endif
