/* fuzz_name: domain names in wire and text form (name.c), which every other parser relies on.
 *
 * The input is used three ways:
 *   - as a message: name_unpack at the first offsets and at one chosen by the first byte, with
 *     ldns_wire2dname as the oracle (when both accept they read the same name, case kept, and
 *     leave the same offset); on success the name is valid, at most 255 bytes, and survives
 *     name_to_text -> name_from_text as its lower-cased self;
 *   - as a plain wire name: name_wire_len agrees with name_unpack on pointer-free bytes;
 *   - as presentation text: name_from_text gives a valid lower-cased name that round-trips
 *     through name_to_text, and agrees with ldns_str2rdf_dname whenever both accept.
 * name_to_text is also run with small buffers: it fails with MOAT_ESPACE or fits.
 *
 * Intentional differences from ldns (we reject, ldns accepts; allowed): compression pointers that
 * point forward (or at themselves: ldns only stops after 65535 jumps); more than 64 pointers.
 * ldns rejects a pointer to offset 0 (LDNS_STATUS_INVALID_POINTER) because in a DNS message that is
 * the header; name_unpack reads names in any buffer and allows it, name_unpack_msg (what the
 * message parsers use) refuses every pointer into the header, and is held to ldns strictly: what
 * it reads, ldns reads the same. Text: ldns accepts some text we refuse and vice versa (see the
 * comments at the text checks). */
#include <ctype.h>
#include <ldns/ldns.h>
#include <string.h>

#include "fuzz_common.h"
#include "moat/err.h"
#include "moat/name.h"

static void lower_bytes(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)tolower(p[i]);
}

/* Properties of any valid wire name (case kept) of length w. */
static void check_valid(const uint8_t *nm, int w, uint8_t cap_byte)
{
	FZ_CHECK(w >= 1 && w <= NAME_MAXWIRE, "length %d", w);
	FZ_CHECK(name_wire_len(nm, NAME_MAXWIRE) == w, "name_wire_len %d vs %d",
	         name_wire_len(nm, NAME_MAXWIRE), w);
	uint8_t lo[NAME_MAXWIRE];
	memcpy(lo, nm, (size_t)w);
	name_lower(lo);
	FZ_CHECK(name_equal(nm, lo), "name_equal with its lower-case self");

	/* Text and back: the lower-cased name. */
	char text[NAME_MAXTEXT + 1];
	int tl = name_to_text(nm, text, sizeof(text));
	FZ_CHECK(tl > 0 && (size_t)tl == strlen(text), "name_to_text %d", tl);
	uint8_t back[NAME_MAXWIRE];
	int bl = name_from_text(text, (size_t)tl, back);
	FZ_CHECK(bl == w && memcmp(back, lo, (size_t)w) == 0, "text round trip of '%s': %d", text,
	         bl);

	/* Small buffers: ESPACE or a complete string. */
	size_t cap = (size_t)cap_byte % (size_t)(tl + 3);
	char small[NAME_MAXTEXT + 1];
	memset(small, 'X', sizeof(small));
	int sl = name_to_text(nm, small, cap);
	if (sl == MOAT_ESPACE)
		FZ_CHECK(cap <= (size_t)tl, "ESPACE with room: cap %zu for %d", cap, tl);
	else
		FZ_CHECK(sl == tl && cap > (size_t)tl && memcmp(small, text, (size_t)tl + 1) == 0,
		         "name_to_text with cap %zu: %d", cap, sl);
	for (size_t i = cap; i < sizeof(small); i++)
		FZ_CHECK(small[i] == 'X', "name_to_text wrote past cap %zu", cap);

	/* Label walk. */
	int labels = name_count_labels(nm);
	FZ_CHECK(labels >= 0 && labels <= 127, "labels %d", labels);
	const uint8_t *p = nm;
	for (int i = 0; i < labels; i++) {
		FZ_CHECK(name_is_under(nm, p), "not under its own ancestor");
		FZ_CHECK(name_count_labels(p) == labels - i, "label count of ancestor");
		p = name_parent(p);
	}
	FZ_CHECK(*p == 0 && name_parent(p) == p, "root");
	FZ_CHECK(name_is_under(nm, p), "not under the root");
	if (labels > 0)
		FZ_CHECK(!name_is_under(name_parent(nm), nm), "parent under child");
}

static void unpack_at(const uint8_t *data, size_t size, size_t at, uint8_t cap_byte)
{
	uint8_t out[NAME_MAXWIRE];
	size_t off = at;
	int w = name_unpack(data, size, &off, out);
	FZ_CHECK(w > 0 || w == MOAT_EFORMAT, "name_unpack returned %d", w);

	/* The message flavour: the same, or refused for a pointer into the header. */
	uint8_t mout[NAME_MAXWIRE];
	size_t moff = at;
	int mw = name_unpack_msg(data, size, &moff, mout);
	FZ_CHECK(mw > 0 || mw == MOAT_EFORMAT, "name_unpack_msg returned %d", mw);
	if (mw > 0)
		FZ_CHECK(mw == w && moff == off && memcmp(mout, out, (size_t)w) == 0,
		         "name_unpack_msg differs from name_unpack");
	else
		FZ_CHECK(moff == at, "offset moved on failure");

	ldns_rdf *rdf = NULL;
	size_t lpos = at;
	ldns_status ls = ldns_wire2dname(&rdf, data, size, &lpos);
	if (mw > 0)
		FZ_CHECK(ls == LDNS_STATUS_OK,
		         "name_unpack_msg reads a name ldns rejects at %zu: %s", at,
		         ldns_get_errorstr_by_id(ls));
	if (w > 0) {
		FZ_CHECK(off > at && off <= size, "offset moved to %zu from %zu", off, at);
		check_valid(out, w, cap_byte);
		if (ls == LDNS_STATUS_OK) {
			FZ_CHECK(ldns_rdf_size(rdf) == (size_t)w &&
			             memcmp(ldns_rdf_data(rdf), out, (size_t)w) == 0,
			         "name differs from ldns's at %zu", at);
			FZ_CHECK(lpos == off, "end offset %zu vs ldns %zu", off, lpos);
		} else {
			FZ_CHECK(ls == LDNS_STATUS_INVALID_POINTER,
			         "we read a name ldns rejects at %zu: %s", at,
			         ldns_get_errorstr_by_id(ls));
		}
	} else {
		FZ_CHECK(off == at, "offset moved on failure");
	}
	ldns_rdf_deep_free(rdf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0 || size > 4096)
		return 0;
	uint8_t cap_byte = size > 1 ? data[1] : 0;

	/* As a message. */
	for (size_t at = 0; at < size && at < 16; at++)
		unpack_at(data, size, at, cap_byte);
	if (data[0] < size)
		unpack_at(data, size, data[0], cap_byte);

	/* As a plain wire name. */
	int wl = name_wire_len(data, size);
	FZ_CHECK(wl > 0 || wl == MOAT_EFORMAT, "name_wire_len %d", wl);
	if (wl > 0) {
		uint8_t out[NAME_MAXWIRE];
		size_t off = 0;
		FZ_CHECK(name_unpack(data, size, &off, out) == wl && off == (size_t)wl,
		         "name_wire_len and name_unpack disagree");
	}

	/* As text. */
	uint8_t wire[NAME_MAXWIRE];
	int tl = name_from_text((const char *)data, size, wire);
	FZ_CHECK(tl > 0 || tl == MOAT_EINVAL, "name_from_text %d", tl);
	if (tl > 0) {
		check_valid(wire, tl, cap_byte);
		uint8_t lo[NAME_MAXWIRE];
		memcpy(lo, wire, (size_t)tl);
		name_lower(lo);
		FZ_CHECK(memcmp(lo, wire, (size_t)tl) == 0, "name_from_text did not lower-case");
	}
	if (!memchr(data, 0, size)) {
		char *s = malloc(size + 1);
		if (!s)
			return 0;
		memcpy(s, data, size);
		s[size] = 0;
		ldns_rdf *rdf = NULL;
		ldns_status ls = ldns_str2rdf_dname(&rdf, s);
		/* When both accept they mean the same name. Each accepts some text the other
		 * refuses (ldns: a trailing lone backslash, "\DDD" over 255 and such; we refuse
		 * those and accept nothing ldns would read as another name), so only the agreement
		 * is checked. */
		if (tl > 0 && ls == LDNS_STATUS_OK) {
			uint8_t lo[NAME_MAXWIRE];
			size_t n = ldns_rdf_size(rdf);
			FZ_CHECK(n == (size_t)tl, "text '%s': length %zu vs ldns %zu", s,
			         (size_t)tl, n);
			memcpy(lo, ldns_rdf_data(rdf), n);
			lower_bytes(lo, n);
			FZ_CHECK(memcmp(lo, wire, n) == 0, "text '%s' read differently by ldns", s);
		}
		ldns_rdf_deep_free(rdf);
		free(s);
	}
	return 0;
}
