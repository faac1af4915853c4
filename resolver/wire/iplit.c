/* iplit.c owns the recognition of IP addresses written as query names: whole-name literals in
 * every form inet_aton(3) and browsers accept (including the decimal, octal and hex shorthands
 * people use to sneak past string filters) and IPv6 literals, plus addresses embedded in names
 * of the nip.io / sslip.io kind.
 *
 * Names arrive as wire names. The IPv4 literal parser works label by label (a label is one part);
 * only IPv6 literals and the embedded-address scan copy the labels into a local text buffer,
 * because there the separators ('.', ':', '-') matter more than the label boundaries. Nothing
 * allocates; a name that is not a valid wire name is simply not a literal. */
#include "moat/iplit.h"
#include "moat/bytes.h"

#include <arpa/inet.h>
#include <string.h>

#define IPLIT_MAXWIRE 255 /* as NAME_MAXWIRE; kept local so this file stands on its own */

static bool il_is_dec(uint8_t c)
{
	return c >= '0' && c <= '9';
}

static int il_hexval(uint8_t c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* One inet_aton part: decimal, octal after a leading 0, hex after 0x. At least one digit after
 * "0x" ("0x" alone is no number here), no sign, no suffix; values above 2^32-1 are refused while
 * parsing so nothing overflows. */
static bool il_parse_part(const uint8_t *p, size_t n, uint32_t *out)
{
	uint64_t v = 0;
	size_t i = 0;
	unsigned base = 10;

	if (n == 0)
		return false;
	if (n >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
		base = 16;
		i = 2;
		if (n == 2)
			return false;
	} else if (n >= 2 && p[0] == '0') {
		base = 8;
		i = 1;
	}
	for (; i < n; i++) {
		int d = il_hexval(p[i]);
		if (d < 0 || (unsigned)d >= base)
			return false;
		v = v * base + (unsigned)d;
		if (v > UINT32_MAX)
			return false;
	}
	*out = (uint32_t)v;
	return true;
}

/* Walk a wire name's labels defensively: returns the label count, or -1 if the bytes are not a
 * plain (uncompressed, bounded) wire name. */
static int il_check_wire(const uint8_t *wire)
{
	size_t pos = 0;
	int labels = 0;
	while (wire[pos]) {
		if (wire[pos] > 63)
			return -1;
		pos += 1u + wire[pos];
		if (pos >= IPLIT_MAXWIRE)
			return -1;
		labels++;
	}
	return labels;
}

/* The length of a wire name that il_check_wire accepted, its root byte included. */
static size_t il_wire_len(const uint8_t *wire)
{
	size_t pos = 0;
	while (wire[pos])
		pos += 1u + wire[pos];
	return pos + 1;
}

/* The labels joined with '.' into buf (no trailing dot). A '.' inside a label (escaped in text)
 * becomes '\x01' so that it never acts as a separator. Returns the text length. */
static size_t il_join(const uint8_t *wire, char buf[IPLIT_MAXWIRE + 1])
{
	size_t pos = 0, n = 0;
	while (wire[pos]) {
		uint8_t l = wire[pos++];
		if (n)
			buf[n++] = '.';
		for (uint8_t i = 0; i < l; i++) {
			uint8_t c = wire[pos++];
			buf[n++] = (c == '.' || c == '\0') ? '\x01' : (char)c;
		}
	}
	buf[n] = '\0';
	return n;
}

static bool il_v4_literal(const uint8_t *wire, uint8_t addr[4])
{
	uint32_t part[4];
	size_t pos = 0;
	int n = 0;

	while (wire[pos]) {
		if (n == 4)
			return false; /* "1.2.3.4.5" */
		uint8_t l = wire[pos];
		if (!il_parse_part(wire + pos + 1, l, &part[n]))
			return false;
		n++;
		pos += 1u + l;
	}
	if (n == 0)
		return false;
	/* Every part but the last is one byte; the last fills the remaining 5 - n bytes. */
	uint32_t v = 0;
	for (int i = 0; i < n - 1; i++) {
		if (part[i] > 0xff)
			return false;
		v |= part[i] << (24 - 8 * i);
	}
	uint32_t last = part[n - 1];
	if (n > 1 && last > (UINT32_MAX >> (8 * (n - 1))))
		return false;
	v |= last;
	be32_put(addr, v);
	return true;
}

/* An IPv6 literal: one or more labels that, joined with dots, read as an IPv6 address
 * ("::ffff:169.254.169.254" arrives as four labels). Brackets around it ("[::1]") and a zone
 * ("fe80::1%eth0", "%25eth0" as in URLs) are accepted as a browser or getaddrinfo would. */
static bool il_v6_literal(const uint8_t *wire, uint8_t addr[16])
{
	char buf[IPLIT_MAXWIRE + 1];
	size_t n = il_join(wire, buf);
	char *s = buf;

	if (!memchr(buf, ':', n))
		return false;
	if (s[0] == '[') {
		if (n < 2 || s[n - 1] != ']')
			return false;
		s[n - 1] = '\0';
		s++;
	}
	char *zone = strchr(s, '%');
	if (zone) {
		if (zone[1] == '\0')
			return false;
		*zone = '\0';
	}
	return inet_pton(AF_INET6, s, addr) == 1;
}

bool iplit_is_literal(const uint8_t *wire, uint8_t addr[16], size_t *len)
{
	int labels = wire && addr && len ? il_check_wire(wire) : -1;
	if (labels <= 0)
		return false;
	if (il_v4_literal(wire, addr)) {
		*len = 4;
		return true;
	}
	/* Every IPv6 literal has a ':'; looked for in the wire bytes, where a length byte of 58
	 * only sends a name down the full parse. Nearly every name stops here. */
	if (!memchr(wire, ':', il_wire_len(wire)))
		return false;
	if (il_v6_literal(wire, addr)) {
		*len = 16;
		return true;
	}
	return false;
}

static bool il_is_sep(char c)
{
	return c == '.' || c == '-';
}

/* A decimal octet of 1 to 3 digits at s, at most 255. Returns its length or 0. */
static size_t il_octet(const char *s, uint8_t *out)
{
	unsigned v = 0;
	size_t i = 0;
	while (i < 3 && il_is_dec((uint8_t)s[i]))
		v = v * 10 + (unsigned)(s[i++] - '0');
	if (i == 0 || il_is_dec((uint8_t)s[i]) || v > 255)
		return 0;
	*out = (uint8_t)v;
	return i;
}

/* Four decimal octets separated by '.' or '-' at s, ending at a separator or the end.
 * Separators may mix ("10-0.0-1"), as sslip.io accepts. */
static bool il_dec4_at(const char *s, uint8_t addr[4])
{
	size_t i = 0;
	for (int k = 0; k < 4; k++) {
		if (k > 0) {
			if (!il_is_sep(s[i]))
				return false;
			i++;
		}
		size_t n = il_octet(s + i, &addr[k]);
		if (!n)
			return false;
		i += n;
	}
	return s[i] == '\0' || il_is_sep(s[i]);
}

/* The address of 8 hex digits. */
static void il_hex8_val(const uint8_t *p, uint8_t addr[4])
{
	for (int i = 0; i < 4; i++)
		addr[i] = (uint8_t)(il_hexval(p[2 * i]) << 4 | il_hexval(p[2 * i + 1]));
}

/* A label of exactly 8 hex digits at s ("a9fea9fe", nip.io's hex form), ending at a '.' or
 * the end. Only a whole label: names of object stores and CDNs end their labels in hashes
 * ("bucket-e386fb85"), and reading those would deny one benign name in seven (the guard's ranges
 * cover that share of the space); the services that also take "app-a9fea9fe" are high-risk
 * names anyway (zones/highrisk.txt), and the answer's own check refuses what they return. */
static bool il_hex8_at(const char *s, uint8_t addr[4])
{
	for (int i = 0; i < 8; i++)
		if (il_hexval((uint8_t)s[i]) < 0)
			return false;
	if (s[8] != '\0' && s[8] != '.')
		return false;
	il_hex8_val((const uint8_t *)s, addr);
	return true;
}

/* The scan below reads one class a byte from a table: 1 digit, 2 separator ('-'; '.' between
 * labels is one too), 4 hex. */
enum { IL_DIGIT = 1, IL_SEP = 2, IL_HEX = 4 };
#define D (IL_DIGIT | IL_HEX)
#define H IL_HEX
static const uint8_t il_class[256] = {
    ['0'] = D, ['1'] = D, ['2'] = D, ['3'] = D, ['4'] = D, ['5'] = D, ['6'] = D,      ['7'] = D,
    ['8'] = D, ['9'] = D, ['a'] = H, ['b'] = H, ['c'] = H, ['d'] = H, ['e'] = H,      ['f'] = H,
    ['A'] = H, ['B'] = H, ['C'] = H, ['D'] = H, ['E'] = H, ['F'] = H, ['-'] = IL_SEP,
};
#undef D
#undef H

/* The digit-'-'-digit places inside one label of l bytes (a label with a '-'). */
static unsigned il_dashes(const uint8_t *p, uint8_t l)
{
	unsigned n = 0;
	for (unsigned i = 1; i + 1u < l; i++)
		n += p[i] == '-' && (il_class[p[i - 1]] & IL_DIGIT) &&
		     (il_class[p[i + 1]] & IL_DIGIT);
	return n;
}

/* One pass over the wire name for what every match needs: a dotted or dashed quad has three
 * separators ('.' between labels, '-' inside one) each between two digits, a hex form is a
 * label of exactly 8 hex digits. Returns the number of digit-separator-digit places (3 or more
 * means a quad may be there), or -1 if the bytes are not a plain bounded wire name, and
 * collects the hex labels' addresses, left to right, when no quad is possible (then they are
 * the whole answer). It runs on every query name, so a byte costs two operations on its class
 * (any and all of a label's); the places are counted at each label's ends, and inside only a
 * label that has a '-' (14 instructions a byte before, 7 now, -O2 and -O3 alike). */
static int il_scan(const uint8_t *wire, uint8_t (*addrs)[4], size_t max, size_t *nhex)
{
	unsigned dsd = 0, last_digit = 0;
	*nhex = 0;
	for (size_t pos = 0; wire[pos]; pos += 1u + wire[pos]) {
		uint8_t l = wire[pos];
		if (l > 63 || pos + 1u + l >= IPLIT_MAXWIRE)
			return -1;
		const uint8_t *p = wire + pos + 1;
		unsigned any = 0, all = IL_HEX;
		for (uint8_t i = 0; i < l; i++) {
			unsigned f = il_class[p[i]];
			any |= f;
			all &= f;
		}
		/* the '.' before this label, between two digits (a label is never empty here) */
		dsd += last_digit & il_class[p[0]] & IL_DIGIT;
		if (any & IL_SEP)
			dsd += il_dashes(p, l);
		last_digit = il_class[p[l - 1]] & IL_DIGIT;
		if (l == 8 && all && *nhex < max)
			il_hex8_val(p, addrs[(*nhex)++]);
	}
	return (int)dsd;
}

/* Matches start at the start of the name or right after a '.' or '-'; they are collected left
 * to right, overlapping ones too ("1-2-3-4.127-0-0-1" also reads 2.3.4.127, ..., 127.0.0.1). */
size_t iplit_embedded_v4_all(const uint8_t *wire, uint8_t (*addrs)[4], size_t max)
{
	char buf[IPLIT_MAXWIRE + 1];
	size_t found = 0;

	if (!wire || !addrs)
		return 0;
	int dsd = il_scan(wire, addrs, max, &found);
	if (dsd < 0)
		return 0; /* not a wire name */
	if (dsd < 3)
		return found; /* no quad anywhere: only whole hex labels, found already */
	found = 0;
	size_t n = il_join(wire, buf);
	for (size_t i = 0; i < n && found < max; i++) {
		if (i > 0 && !il_is_sep(buf[i - 1]))
			continue;
		if (il_dec4_at(buf + i, addrs[found]) ||
		    ((i == 0 || buf[i - 1] == '.') && il_hex8_at(buf + i, addrs[found])))
			found++;
	}
	return found;
}

/* The leftmost match wins, as in the services' own regular expressions: that is the address
 * they answer with. */
bool iplit_embedded_v4(const uint8_t *wire, uint8_t addr[4])
{
	uint8_t one[1][4];
	if (!addr || iplit_embedded_v4_all(wire, one, 1) == 0)
		return false;
	memcpy(addr, one[0], 4);
	return true;
}
