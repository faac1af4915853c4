/* fuzz_common.h: what every fuzz target shares. FZ_CHECK aborts with the failed property, which
 * libFuzzer reports as a crash (and the replay test as a failure): a differential mismatch is a
 * finding just like a sanitizer report. */
#ifndef MOAT_FUZZ_COMMON_H
#define MOAT_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_CHECK(cond, ...)                                                                        \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "%s:%d: property failed: %s: ", __FILE__, __LINE__,        \
			        #cond);                                                            \
			fprintf(stderr, __VA_ARGS__);                                              \
			fputc('\n', stderr);                                                       \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

static inline uint16_t fz_u16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

#endif
