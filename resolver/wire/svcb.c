/* svcb.c owns the walk over the address hints of SVCB and HTTPS RDATA (RFC 9460): the ipv4hint
 * and ipv6hint parameters, whose addresses a client may connect to without ever asking for A or
 * AAAA, so the address guard has to see them.
 *
 * The RDATA is checked in full before the first callback (a two-pass walk), so a malformed record
 * is reported as MOAT_EFORMAT without the caller having seen half of its hints. Every read is
 * bounded by the RDATA end; nothing allocates. */
#include "moat/svcb.h"
#include "moat/bytes.h"
#include "moat/err.h"
#include "moat/name.h"

#include <stdbool.h>

#define SVCB_KEY_IPV4HINT 4
#define SVCB_KEY_IPV6HINT 6

/* Skip the target name at msg[*pos], never reading at or past end. The target must be
 * uncompressed (RFC 9460 section 2.2), but a compression pointer is skipped rather than followed
 * (it ends the name); it must at least point backwards into the message. Returns 0 or
 * MOAT_EFORMAT. (Its own walk over name.h's name_step, not name_unpack, because of that pointer
 * case.) */
static int svcb_skip_target(const uint8_t *msg, size_t *pos, size_t end)
{
	size_t p = *pos, wirelen = 0, target;
	int c;

	while ((c = name_step(msg, p, end, &target)) != NAME_POINTER) {
		if (c < 0)
			return c;
		wirelen += 1u + c;
		if (wirelen > 255)
			return MOAT_EFORMAT;
		if (c == 0) {
			*pos = p + 1;
			return 0;
		}
		if (end - p < 1u + c)
			return MOAT_EFORMAT;
		p += 1u + c;
	}
	*pos = p + 2; /* the pointer ends the name */
	return 0;
}

/* One pass over the parameters. With fn NULL it only validates; otherwise it calls fn for every
 * hint address (the RDATA is already known to be well formed). */
static int svcb_walk_params(const uint8_t *msg, size_t p, size_t end, svcb_hint_fn fn, void *ctx)
{
	bool first = true;
	uint16_t prev = 0;

	while (p < end) {
		if (end - p < 4)
			return MOAT_EFORMAT;
		uint16_t key = be16_get(msg + p);
		uint16_t vlen = be16_get(msg + p + 2);
		p += 4;
		if (end - p < vlen)
			return MOAT_EFORMAT;
		/* RFC 9460 section 2.2: keys in strictly increasing order, else the RR is
		 * malformed. */
		if (!first && key <= prev)
			return MOAT_EFORMAT;
		first = false;
		prev = key;

		size_t alen = key == SVCB_KEY_IPV4HINT ? 4 : key == SVCB_KEY_IPV6HINT ? 16 : 0;
		if (alen) {
			/* An empty hint list carries no address: nothing to check, so it is let
			 * through rather than turned into a failure. */
			if (vlen % alen)
				return MOAT_EFORMAT;
			for (size_t i = 0; fn && i < vlen; i += alen) {
				int rc = fn(ctx, msg + p + i, alen);
				if (rc)
					return rc;
			}
		}
		p += vlen;
	}
	return 0;
}

int svcb_each_hint(const uint8_t *msg, size_t msglen, size_t off, size_t rdlen, svcb_hint_fn fn,
                   void *ctx)
{
	if (!msg || off > msglen || rdlen > msglen - off)
		return MOAT_EFORMAT;
	size_t end = off + rdlen;
	if (rdlen < 2)
		return MOAT_EFORMAT; /* SvcPriority */
	size_t p = off + 2;
	int rc = svcb_skip_target(msg, &p, end);
	if (rc < 0)
		return rc;
	/* AliasMode (priority 0) should carry no parameters, but whatever is there is walked:
	 * a client that reads them anyway must not find an unchecked address. */
	rc = svcb_walk_params(msg, p, end, NULL, NULL);
	if (rc < 0)
		return rc;
	if (!fn)
		return 0;
	return svcb_walk_params(msg, p, end, fn, ctx);
}
