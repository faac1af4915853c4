/* rng.c owns moat's user-space random stream (see moat/rng.h). */
#include <sodium.h>
#include <string.h>

#include "moat/rng.h"

#define RNG_BLOCK 512   /* bytes handed out per refill */
#define RNG_RESEED 4096 /* refills between fresh keys from the kernel */

struct rng_state {
	uint8_t key[randombytes_SEEDBYTES];
	uint8_t buf[RNG_BLOCK];
	size_t pos;       /* next unused byte of buf; RNG_BLOCK = empty */
	unsigned refills; /* 0: never keyed */
};

static _Thread_local struct rng_state st = {.pos = RNG_BLOCK};

static void rng_refill(void)
{
	uint8_t block[randombytes_SEEDBYTES + RNG_BLOCK];
	if (st.refills % RNG_RESEED == 0)
		randombytes_buf(st.key, sizeof(st.key));
	st.refills++;
	randombytes_buf_deterministic(block, sizeof(block), st.key);
	memcpy(st.key, block, sizeof(st.key)); /* the old key is gone */
	memcpy(st.buf, block + sizeof(st.key), RNG_BLOCK);
	sodium_memzero(block, sizeof(block));
	st.pos = 0;
}

void rng_buf(void *out, size_t n)
{
	uint8_t *o = out;
	while (n > 0) {
		if (st.pos == RNG_BLOCK)
			rng_refill();
		size_t k = RNG_BLOCK - st.pos < n ? RNG_BLOCK - st.pos : n;
		memcpy(o, st.buf + st.pos, k);
		sodium_memzero(st.buf + st.pos, k); /* handed out once */
		st.pos += k;
		o += k;
		n -= k;
	}
}

uint32_t rng_uniform(uint32_t upper)
{
	if (upper < 2)
		return 0;
	uint32_t min = (1U + ~upper) % upper; /* 2^32 mod upper: values below it are biased */
	uint32_t r;
	do
		rng_buf(&r, sizeof(r));
	while (r < min);
	return r % upper;
}
