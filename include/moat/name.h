/* Domain names in wire form: validation, case folding, label walking and text conversion.
 * Every comparison in moat is done here, label by label on wire form, lower-cased; never on
 * dotted strings (so "a\.example.com" is one label and never below "example.com").
 * All functions are pure and thread-safe. */
#ifndef MOAT_NAME_H
#define MOAT_NAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moat/err.h"

#define NAME_MAXWIRE 255  /* longest wire name, root label included */
#define NAME_MAXTEXT 1024 /* longest presentation form, every byte escaped as \DDD */

/* Parse presentation form ("www.Example.com", trailing dot optional, "." is the root,
 * \c and \DDD escapes) into lower-cased wire form in wire[NAME_MAXWIRE].
 * Returns the wire length, or MOAT_EINVAL (empty label, label > 63, name > 255, bad escape). */
int name_from_text(const char *text, size_t len, uint8_t *wire);

/* Write a wire name as presentation text with a trailing dot, escaping '.', '\\', '"', ';',
 * '(', ')', '@', '$', spaces and non-printable bytes as \DDD. Returns the text length (NUL
 * written), or MOAT_ESPACE. */
int name_to_text(const uint8_t *wire, char *out, size_t cap);

/* Length of the uncompressed wire name at wire[0..max), or MOAT_EFORMAT. */
int name_wire_len(const uint8_t *wire, size_t max);

/* Lower-case the ASCII letters of a valid wire name in place. */
void name_lower(uint8_t *wire);

/* Case-insensitive equality of two valid wire names. */
bool name_equal(const uint8_t *a, const uint8_t *b);

/* Number of labels, the root not counted ("." is 0, "example.com." is 2). */
int name_count_labels(const uint8_t *wire);

/* The name with its first label removed; the root returns itself. */
const uint8_t *name_parent(const uint8_t *wire);

/* True if child equals parent or lies below it (case-insensitive, label-aligned). */
bool name_is_under(const uint8_t *child, const uint8_t *parent);

/* Read a possibly compressed name at msg[*off] into out[NAME_MAXWIRE] (case kept) and move *off
 * past the name's bytes in place. Pointers must point backwards; at most 64 are followed, so
 * loops end. Returns the uncompressed length or MOAT_EFORMAT. */
int name_unpack(const uint8_t *msg, size_t msglen, size_t *off, uint8_t *out);

/* The same for a name inside a DNS message: a pointer into the message's 12-byte header is
 * refused too (no name starts there; ldns refuses a pointer to offset 0 for the same reason).
 * The message parsers use this one. */
#define NAME_MSG_HDR 12
int name_unpack_msg(const uint8_t *msg, size_t msglen, size_t *off, uint8_t *out);
/* name_unpack_msg's checks and result without the copy: a name the parser only steps over. */
int name_skip_msg(const uint8_t *msg, size_t msglen, size_t *off);
/* Whether msg holds lname (lower-cased wire form) at off written out in full, in any case:
 * its length, or 0 when it does not (another name, cut short, or a compression pointer
 * anywhere: then unpack it). No copy. */
int name_match_plain(const uint8_t *msg, size_t msglen, size_t off, const uint8_t *lname);

/* One step of both walks over a name in a message (name_unpack follows a pointer, svcb.c's
 * target skip stops at one): msg[p]'s label length (0..63, 0 the root), or NAME_POINTER with
 * *target set, or MOAT_EFORMAT: p at or past end, a pointer cut off at end or not pointing
 * backwards (backward only: with a jump bound, that ends every loop), a 0x40/0x80 label type. */
#define NAME_POINTER 64
static inline int name_step(const uint8_t *msg, size_t p, size_t end, size_t *target)
{
	if (p >= end)
		return MOAT_EFORMAT;
	uint8_t n = msg[p];
	if ((n & 0xC0) == 0xC0) {
		if (end - p < 2)
			return MOAT_EFORMAT;
		*target = ((size_t)(n & 0x3F) << 8) | msg[p + 1];
		return *target < p ? NAME_POINTER : MOAT_EFORMAT;
	}
	return n > 63 ? MOAT_EFORMAT : n;
}

#endif
