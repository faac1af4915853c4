/* name.c owns wire-form domain names: parsing from and printing to presentation text, validation,
 * case folding, label walks and decompression of names inside messages. Everything that
 * compares names goes through here, label by label. */
#include <string.h>

#include "moat/err.h"
#include "moat/name.h"

static inline uint8_t lower(uint8_t c)
{
	return (c >= 'A' && c <= 'Z') ? (uint8_t)(c + 32) : c;
}

int name_from_text(const char *text, size_t len, uint8_t *wire)
{
	size_t w = 0;   /* bytes written */
	size_t lab = 0; /* offset of the current label's length byte */
	size_t i = 0;

	if (len == 1 && text[0] == '.') {
		wire[0] = 0;
		return 1;
	}
	if (len == 0)
		return MOAT_EINVAL;
	wire[w++] = 0;
	while (i < len) {
		uint8_t c = (uint8_t)text[i++];
		if (c == '.') {
			if (w - lab - 1 == 0)
				return MOAT_EINVAL; /* empty label */
			if (i == len)
				break; /* trailing dot: the root follows */
			lab = w;
			if (w >= NAME_MAXWIRE)
				return MOAT_EINVAL;
			wire[w++] = 0;
			continue;
		}
		if (c == '\\') {
			if (i >= len)
				return MOAT_EINVAL;
			if (text[i] >= '0' && text[i] <= '9') {
				if (i + 3 > len)
					return MOAT_EINVAL;
				unsigned v = 0;
				for (int k = 0; k < 3; k++) {
					if (text[i + k] < '0' || text[i + k] > '9')
						return MOAT_EINVAL;
					v = v * 10 + (unsigned)(text[i + k] - '0');
				}
				if (v > 255)
					return MOAT_EINVAL;
				c = (uint8_t)v;
				i += 3;
			} else {
				c = (uint8_t)text[i++];
			}
		}
		if (w - lab - 1 >= 63 || w + 1 >= NAME_MAXWIRE)
			return MOAT_EINVAL;
		wire[w++] = lower(c);
		wire[lab]++;
	}
	if (wire[lab] == 0)
		return MOAT_EINVAL;
	if (w >= NAME_MAXWIRE)
		return MOAT_EINVAL;
	wire[w++] = 0;
	return (int)w;
}

static int is_special(uint8_t c)
{
	return c == '.' || c == '\\' || c == '"' || c == ';' || c == '(' || c == ')' || c == '@' ||
	       c == '$';
}

int name_to_text(const uint8_t *wire, char *out, size_t cap)
{
	size_t o = 0;
	const uint8_t *p = wire;

	if (cap < 2)
		return MOAT_ESPACE;
	if (*p == 0) {
		out[0] = '.';
		out[1] = 0;
		return 1;
	}
	while (*p) {
		uint8_t n = *p++;
		for (uint8_t k = 0; k < n; k++, p++) {
			uint8_t c = *p;
			if (c <= 32 || c >= 127) {
				if (o + 4 >= cap)
					return MOAT_ESPACE;
				out[o++] = '\\';
				out[o++] = (char)('0' + c / 100);
				out[o++] = (char)('0' + c / 10 % 10);
				out[o++] = (char)('0' + c % 10);
			} else if (is_special(c)) {
				if (o + 2 >= cap)
					return MOAT_ESPACE;
				out[o++] = '\\';
				out[o++] = (char)c;
			} else {
				if (o + 1 >= cap)
					return MOAT_ESPACE;
				out[o++] = (char)c;
			}
		}
		if (o + 1 >= cap)
			return MOAT_ESPACE;
		out[o++] = '.';
	}
	out[o] = 0;
	return (int)o;
}

int name_wire_len(const uint8_t *wire, size_t max)
{
	/* One bound for both limits (the buffer's and a name's 255 bytes): one test a label, on a
	 * function called ten times a query. */
	size_t lim = max < NAME_MAXWIRE ? max : NAME_MAXWIRE;
	size_t o = 0;
	for (;;) {
		if (o >= lim)
			return MOAT_EFORMAT;
		uint8_t n = wire[o];
		if (n == 0)
			return (int)(o + 1);
		if (n > 63)
			return MOAT_EFORMAT; /* compression or extended label types */
		o += 1u + n;
	}
}

/* 'A'..'Z' to 'a'..'z' in each of 8 bytes at once: a byte's top bit of (b | 0x80) - c is set
 * when its low 7 bits are >= c, and no subtraction borrows from the next byte. */
static inline uint64_t lower8(uint64_t x)
{
	const uint64_t hi = 0x8080808080808080ull;
	uint64_t ge_a = (x | hi) - 0x4141414141414141ull; /* >= 'A' */
	uint64_t gt_z = (x | hi) - 0x5b5b5b5b5b5b5b5bull; /* > 'Z' */
	return x | ((ge_a & ~gt_z & ~x & hi) >> 2);       /* ASCII capitals get 0x20 */
}

void name_lower(uint8_t *wire)
{
	/* Length bytes (0..63) are below 'A', so the whole name folds as one byte string: a word
	 * at a time, ~35 instructions for a 20-byte name against ~180 a byte at a time. */
	size_t len = 1;
	while (wire[len - 1])
		len += wire[len - 1] + 1u;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t v;
		memcpy(&v, wire + i, 8);
		v = lower8(v);
		memcpy(wire + i, &v, 8);
	}
	for (; i < len; i++)
		wire[i] = lower(wire[i]);
}

bool name_equal(const uint8_t *a, const uint8_t *b)
{
	for (;;) {
		if (*a != *b)
			return false;
		uint8_t n = *a;
		if (n == 0)
			return true;
		a++;
		b++;
		/* Names mostly agree byte for byte: fold case only where they do not. */
		for (uint8_t k = 0; k < n; k++)
			if (a[k] != b[k] && lower(a[k]) != lower(b[k]))
				return false;
		a += n;
		b += n;
	}
}

int name_count_labels(const uint8_t *wire)
{
	int n = 0;
	while (*wire) {
		wire += 1u + *wire;
		n++;
	}
	return n;
}

const uint8_t *name_parent(const uint8_t *wire)
{
	return *wire ? wire + 1 + *wire : wire;
}

bool name_is_under(const uint8_t *child, const uint8_t *parent)
{
	int lc = name_count_labels(child), lp = name_count_labels(parent);
	if (lc < lp)
		return false;
	for (int i = 0; i < lc - lp; i++)
		child = name_parent(child);
	return name_equal(child, parent);
}

/* name_unpack with a floor for pointer targets: 0 for any buffer, the header size in a message.
 * out NULL: checked and measured only (name_skip_msg). */
static int unpack(const uint8_t *msg, size_t msglen, size_t *off, uint8_t *out, size_t min_target)
{
	size_t p = *off;
	size_t w = 0;
	size_t end = 0; /* where the caller continues: after the first pointer or the root */
	int jumps = 0;

	for (;;) {
		size_t target;
		int n = name_step(msg, p, msglen, &target);
		if (n < 0)
			return n;
		if (n == NAME_POINTER) {
			if (!end)
				end = p + 2;
			if (target < min_target || ++jumps > 64)
				return MOAT_EFORMAT;
			p = target;
			continue;
		}
		/* A label needs room for the root after it; the root itself only for itself. */
		if (p + 1 + n > msglen || w + 1 + n + (n ? 1 : 0) > NAME_MAXWIRE)
			return MOAT_EFORMAT;
		if (out)
			memcpy(out + w, msg + p, 1u + n);
		w += 1u + n;
		p += 1u + n;
		if (n == 0)
			break;
	}
	*off = end ? end : p;
	return (int)w;
}

int name_unpack(const uint8_t *msg, size_t msglen, size_t *off, uint8_t *out)
{
	return unpack(msg, msglen, off, out, 0);
}

int name_unpack_msg(const uint8_t *msg, size_t msglen, size_t *off, uint8_t *out)
{
	return unpack(msg, msglen, off, out, NAME_MSG_HDR);
}

int name_skip_msg(const uint8_t *msg, size_t msglen, size_t *off)
{
	return unpack(msg, msglen, off, NULL, NAME_MSG_HDR);
}

int name_match_plain(const uint8_t *msg, size_t msglen, size_t off, const uint8_t *lname)
{
	size_t o = 0;
	for (;;) {
		uint8_t n = lname[o];
		if (off + o + 1u + n > msglen || msg[off + o] != n || o + 1u + n > NAME_MAXWIRE)
			return 0; /* cut short, another label (or a pointer), or too long */
		if (n == 0)
			return (int)(o + 1);
		for (uint8_t k = 1; k <= n; k++)
			if (lower(msg[off + o + k]) != lname[o + k])
				return 0;
		o += 1u + n;
	}
}
