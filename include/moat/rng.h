/* Random numbers for the hot path: upstream query IDs and source ports. A ChaCha20 keystream
 * (libsodium's randombytes_buf_deterministic) under a key from the kernel, with fast key erasure:
 * every refill draws the next key from the same stream, so a later memory read cannot rebuild
 * numbers already handed out, and the key is refreshed from the kernel every RNG_RESEED refills.
 * It costs no system call per number (the kernel's getrandom costs one each, which was ~1.3% of
 * a forwarded query). State is per thread; no locking. Call sodium_init() first. */
#ifndef MOAT_RNG_H
#define MOAT_RNG_H

#include <stddef.h>
#include <stdint.h>

/* Fill out with n random bytes. */
void rng_buf(void *out, size_t n);

/* A uniform number in [0, upper) (0 when upper < 2), without modulo bias. */
uint32_t rng_uniform(uint32_t upper);

#endif
