/* Address text shared by moatd and moat-fw: one parser for each form an address is written in.
 *   address        "192.0.2.1", "2001:db8::1" (numeric only: never a name lookup)
 *   address:port   "192.0.2.1:53", "[2001:db8::1]:53", "2001:db8::1" (bare IPv6: default port)
 *   prefix         "10.0.0.0/8", "2001:db8::/32", "192.0.2.1" (a host); host bits must be zero
 * A prefix is kept two ways: as written (struct netaddr_prefix: the family and bits within it,
 * what nftables wants) or in the IPv4-mapped form (struct cidr: IPv4 as ::ffff:a.b.c.d with bits
 * over 128, so one comparison serves both families and dual-stack sockets). */
#ifndef MOAT_NETADDR_H
#define MOAT_NETADDR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* An address range. IPv4 is stored IPv4-mapped (::ffff:a.b.c.d) with bits counted over 128. */
struct cidr {
	uint8_t addr[16];
	uint8_t bits;
};

/* A range as written: family 4 or 6, bits within the family, IPv4 in addr[0..3]. */
struct netaddr_prefix {
	uint8_t family;
	uint8_t addr[16];
	uint8_t bits;
};

/* Strict decimal of len bytes at s, at most max: digits only (no sign, space or hex), so "1e3"
 * or "0x10" are refused instead of being half-read by strtoul. */
bool netaddr_uint(const char *s, size_t len, uint64_t max, uint64_t *out);

/* A bare numeric address, IPv4 or IPv6, with the given port. 0 or MOAT_EINVAL. */
int netaddr_parse_addr(const char *s, uint16_t port, struct sockaddr_storage *out);

/* "1.2.3.4:53", "[2001:db8::1]:5353", "::1" (bare IPv6), "1.2.3.4" (default_port). A port
 * that is written must be 1..65535. 0 or MOAT_EINVAL. */
int netaddr_parse_addrport(const char *s, uint16_t default_port, struct sockaddr_storage *out);

/* True if s failed netaddr_parse_addrport only by its port 0 ("1.2.3.4:0", "[::1]:0"). */
bool netaddr_port_zero(const char *s);

/* Prefix lengths written without leading zeros ("/08" refused): moat-fw's ranges. */
#define NETADDR_CANONICAL 1u

/* A prefix as written. *host_bits (may be NULL) tells the one error worth its own message
 * ("10.0.0.1/8"). 0 or MOAT_EINVAL. */
int netaddr_parse_prefix(const char *s, unsigned flags, struct netaddr_prefix *out,
                         bool *host_bits);

/* The same in the mapped form. */
int netaddr_parse_cidr(const char *s, struct cidr *out);

/* The mapped form of a prefix as written. */
void netaddr_prefix_to_cidr(const struct netaddr_prefix *p, struct cidr *out);

/* ::ffff:a.b.c.d of an IPv4 address. */
void netaddr_v4_mapped(const uint8_t v4[4], uint8_t out[16]);

/* The range of addr under an interface netmask (len 4 or 16), in the mapped form. */
void netaddr_cidr_from_mask(const uint8_t *addr, const uint8_t *mask, size_t len, struct cidr *out);

/* A range as text: "10.0.0.0/24", "2001:db8::/64" (IPv4 without its mapped prefix). */
void netaddr_cidr_text(const struct cidr *c, char *out, size_t cap);

/* True if the address (AF_INET or AF_INET6 sockaddr) lies in the range. */
bool netaddr_cidr_contains(const struct cidr *c, const struct sockaddr *sa);

/* True if the two ranges share an address (one holds the other). */
bool netaddr_cidr_overlap(const struct cidr *a, const struct cidr *b);

/* True for a range that is the whole space of its family (0.0.0.0/0, ::/0). */
bool netaddr_cidr_whole(const struct cidr *c);

/* True if every address of c lies in one of the n ranges by (together, not only one alone). */
bool netaddr_cidr_covered(const struct cidr *c, const struct cidr *by, size_t n);

#endif
