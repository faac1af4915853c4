/* The address guard: which addresses may never appear in an answer handed to a sandbox.
 * Blocked ranges live in a binary prefix trie over 128-bit keys (IPv4 is keyed as the
 * IPv4-mapped IPv6 address ::ffff:a.b.c.d), so lookup costs at most 128 steps whatever the number
 * of ranges. IPv6 addresses that embed an IPv4 address (IPv4-mapped, IPv4-compatible, NAT64
 * 64:ff9b::/96 and 64:ff9b:1::/48, 6to4 2002::/16, Teredo 2001::/32 with its obfuscated client
 * address) are checked for the embedded IPv4 address too.
 * Build once, then read-only: lookups are thread-safe on a built guard. */
#ifndef MOAT_ADDRGUARD_H
#define MOAT_ADDRGUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How bad an address is. Higher wins when ranges overlap (the most severe class of every
 * matching range is reported, not only the longest prefix's). */
enum addr_class {
	ADDR_OK = 0,
	ADDR_PRIVATE =
	    1, /* private or shared space: refused unless the agent allows private answers */
	ADDR_ALWAYS =
	    2, /* loopback, link-local, metadata, unspecified, multicast: always refused */
};

struct addrguard;

/* A new, empty guard. Ownership: caller frees with addrguard_free. NULL on allocation failure. */
struct addrguard *addrguard_new(void);
void addrguard_free(struct addrguard *g);

/* Add one range in text ("169.254.0.0/16", "fd00:ec2::254", "10.0.0.0/8"; no prefix length
 * means a host route). Host bits beyond the prefix must be zero, as in netaddr_parse_cidr (it reads
 * them). Returns 0, MOAT_EINVAL or MOAT_ENOMEM. */
int addrguard_add(struct addrguard *g, const char *cidr, enum addr_class cls);

/* Load a ranges file. Format (version 1), one range per line:
 *     <cidr> <always|private>   # optional comment
 * Blank lines and lines starting with '#' are skipped. On error, err receives
 * "path:line: reason" (line 0 when the file cannot be opened: MOAT_EIO) and the guard may hold
 * part of the file (callers discard it). */
int addrguard_load_file(struct addrguard *g, const char *path, char *err, size_t errlen);

/* Class of one address: len is 4 (IPv4) or 16 (IPv6). For IPv6 the embedded IPv4 address of
 * every form listed above is checked as well and the most severe class is returned. Any other
 * len fails closed with ADDR_ALWAYS. */
enum addr_class addrguard_check(const struct addrguard *g, const uint8_t *addr, size_t len);

/* Add one host address (len 4 or 16) with a label naming what it is ("moatd's own listen
 * address"), apart from the ranges: addrguard_check does not see it, addrguard_label names it
 * and every form embedding it. Returns 0, MOAT_EINVAL or MOAT_ENOMEM. */
int addrguard_add_host(struct addrguard *g, const uint8_t *addr, size_t len, const char *label);

/* The label of the host address addr is, or embeds (IPv6 forms above); NULL when none. */
const char *addrguard_label(const struct addrguard *g, const uint8_t *addr, size_t len);

/* The IPv4 addresses the IPv6 address a may deliver packets to (IPv4-mapped, IPv4-compatible,
 * NAT64, 6to4, Teredo), at most max of them into out; returns how many. */
size_t addrguard_embedded_v4(const uint8_t a[16], uint8_t out[][4], size_t max);

/* Number of ranges added (for logs and tests). */
size_t addrguard_count(const struct addrguard *g);

/* Write the address as text (inet_ntop style) into out; returns out. cap >= 46. */
const char *addrguard_format(const uint8_t *addr, size_t len, char *out, size_t cap);

#endif
