/* Query names that are really IP addresses. A sandboxed agent can ask for "169.254.169.254",
 * "2852039166", "0xa9fea9fe" or "0251.0376.0251.0376" and a lenient stub resolver or library may
 * turn that into a connection to the metadata service; names of the nip.io kind
 * ("169-254-169-254.nip.io", "app.169.254.169.254.sslip.io", "a9fea9fe.nip.io") carry an address
 * inside a real name. Pure functions on lower-cased wire names. */
#ifndef MOAT_IPLIT_H
#define MOAT_IPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* True if the whole name is an IP literal in any form inet_aton(3) or a browser accepts:
 * 1 to 4 dot-separated parts, each decimal, octal (leading 0) or hex (0x), the last part filling
 * the remaining bytes ("169.254.43518", "169.16689662", "2852039166"); a trailing root is ignored.
 * Also IPv6 literals as one label ("::1", "fd00:ec2::254", "[::1]") and any label sequence that
 * parses as IPv6 once joined. On true, the address is written to addr (4 or 16 bytes) and its
 * length to *len. Look-alikes that are not literals ("1.2.3.4.5", "0x", "08.1.1.1" is not octal
 * and so not a literal, "1e3") return false. */
bool iplit_is_literal(const uint8_t *wire, uint8_t addr[16], size_t *len);

/* True if some label or run of labels of the name embeds an IPv4 address in the forms used by
 * wildcard-DNS services: four decimal labels in a row ("app.10.0.0.1.nip.io"), one label of four
 * dash-separated decimals ("10-0-0-1.sslip.io", also with a prefix "app-10-0-0-1"), or one label of
 * 8 hex digits ("0a000001.nip.io"). As the services themselves do, dots and dashes may mix
 * ("10-0.0-1") and any '-'-separated piece of a label counts ("app-0a000001"). Writes the first
 * (leftmost) such address found (4 bytes), the one the services answer with. Callers decide
 * with the address guard whether it matters. */
bool iplit_embedded_v4(const uint8_t *wire, uint8_t addr[4]);

/* Every embedded IPv4 address of the name, left to right, in the forms iplit_embedded_v4
 * knows (up to max of them, into addrs). Returns how many. A policy must check them all:
 * "1-2-3-4.127-0-0-1.example.com" carries a harmless address first and a blocked one next,
 * and a service or a client may take either. */
#define IPLIT_EMBEDDED_MAX 64
size_t iplit_embedded_v4_all(const uint8_t *wire, uint8_t (*addrs)[4], size_t max);

#endif
