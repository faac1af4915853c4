/* SVCB and HTTPS records (RFC 9460) carry addresses in their ipv4hint (key 4) and ipv6hint
 * (key 6) parameters. A client may connect to a hint without ever asking for A or AAAA, so every
 * hint is an address of the answer. Pure, bounds-checked, no allocation. */
#ifndef MOAT_SVCB_H
#define MOAT_SVCB_H

#include <stddef.h>
#include <stdint.h>

/* Called once per hint address: len is 4 or 16. Return nonzero to stop the walk. */
typedef int (*svcb_hint_fn)(void *ctx, const uint8_t *addr, size_t len);

/* Walk the hints of one SVCB/HTTPS RDATA (priority, uncompressed target name, params).
 * msg/msglen is the whole message so a (non-standard) compressed target is still skipped safely;
 * rdata starts at msg[off] and is rdlen long.
 * Returns 0 when every hint was visited, the callback's nonzero value if it stopped the walk,
 * or MOAT_EFORMAT if the RDATA is malformed (callers treat that as a bad answer). The callback
 * must return a positive value to stop, so the two cannot be confused. */
int svcb_each_hint(const uint8_t *msg, size_t msglen, size_t off, size_t rdlen, svcb_hint_fn fn,
                   void *ctx);

#endif
