/* idn.c owns the step from a name as a user wrote it to the ASCII text moat parses: the checks
 * for what is not a host name (URLs, ports glued to the name, control bytes, NUL) and the IDNA
 * conversion of UTF-8 names and A-labels with libidn2. Plain ASCII names without "xn--" labels
 * (nearly every line of a large allowlist) pass with one scan and no copy. */
#include "moat/idn.h"

#include <arpa/inet.h>
#include <idn2.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/err.h"

/* The host part of a URL or "host:port", for the hint: after "scheme://" and any "user@", up
 * to the first '/', ':', '?' or '#'. */
static void host_hint(const char *s, size_t len, char *out, size_t cap)
{
	const char *p = s, *end = s + len;
	const char *sch = memmem(s, len, "://", 3);
	if (sch)
		p = sch + 3;
	const char *at = memchr(p, '@', (size_t)(end - p));
	const char *slash = memchr(p, '/', (size_t)(end - p));
	if (at && (!slash || at < slash))
		p = at + 1;
	size_t n = 0;
	while (p + n < end && !strchr("/:?#[]", p[n]))
		n++;
	if (n == 0 || n >= cap) {
		snprintf(out, cap, "example.com");
		return;
	}
	memcpy(out, p, n);
	out[n] = 0;
}

/* A whole IPv6 literal ("::1", "[2001:db8::1]"): the lint warns about those; it is no port. */
static bool is_v6_literal(const char *s, size_t len)
{
	char buf[64];
	struct in6_addr a;
	if (len >= 2 && s[0] == '[' && s[len - 1] == ']') {
		s++;
		len -= 2;
	}
	if (len == 0 || len >= sizeof(buf))
		return false;
	memcpy(buf, s, len);
	buf[len] = 0;
	return inet_pton(AF_INET6, buf, &a) == 1;
}

/* Refuse what is not a host name. Sets *plain when every byte is printable ASCII. */
static int check_text(const char *s, size_t len, bool *plain, char *why, size_t whylen)
{
	char host[256];
	bool slash = false, colon = false;
	*plain = true;
	/* One pass over the line (large allowlists are mostly this loop). */
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		slash |= c == '/';
		colon |= c == ':';
		if (c > 0x20 && c < 0x7f)
			continue;
		if (c == 0) {
			snprintf(why, whylen, "NUL byte in the name; write the host name only");
			return MOAT_EINVAL;
		}
		if (c < 0x20 || c == 0x7f) {
			snprintf(why, whylen,
			         "control byte 0x%02x in the name; write the host name only", c);
			return MOAT_EINVAL;
		}
		if (c >= 0x80)
			*plain = false;
	}
	if (slash) {
		host_hint(s, len, host, sizeof(host));
		snprintf(why, whylen, "a URL, not a name; write the host name only: %s", host);
		return MOAT_EINVAL;
	}
	if (colon && !is_v6_literal(s, len)) {
		host_hint(s, len, host, sizeof(host));
		snprintf(why, whylen, "a port or ':' in the name; write the host name only: %s",
		         host);
		return MOAT_EINVAL;
	}
	return 0;
}

/* True if some label starts with "xn--" (any case): an A-label, checked by libidn2 too. */
static bool has_alabel(const char *s, size_t len)
{
	for (size_t i = 0; i + 4 <= len; i++)
		if ((i == 0 || s[i - 1] == '.') && (s[i] | 0x20) == 'x' &&
		    (s[i + 1] | 0x20) == 'n' && s[i + 2] == '-' && s[i + 3] == '-')
			return true;
	return false;
}

int idn_from_user(const char *in, size_t len, char *out, size_t cap, char *why, size_t whylen)
{
	bool plain;
	int rc = check_text(in, len, &plain, why, whylen);
	if (rc)
		return rc;
	if (plain && !has_alabel(in, len))
		return 0;
	if (memchr(in, '\\', len)) {
		snprintf(why, whylen,
		         "escapes and international names do not mix; write the "
		         "name in UTF-8 or as A-labels");
		return MOAT_EINVAL;
	}
	size_t pre = len >= 2 && in[0] == '*' && in[1] == '.' ? 2 : 0;
	bool dot = len > pre && in[len - 1] == '.';
	size_t nlen = len - pre - (dot ? 1 : 0);
	char buf[IDN_MAXTEXT];
	if (nlen == 0 || nlen >= sizeof(buf)) {
		snprintf(why, whylen, "name too long");
		return MOAT_EINVAL;
	}
	memcpy(buf, in + pre, nlen);
	buf[nlen] = 0;
	char *a = NULL;
	int irc = idn2_to_ascii_8z(buf, &a, IDN2_NONTRANSITIONAL | IDN2_NFC_INPUT);
	if (irc != IDN2_OK) {
		snprintf(why, whylen, "invalid international name: %s", idn2_strerror(irc));
		return MOAT_EINVAL;
	}
	int n = snprintf(out, cap, "%s%s%s", pre ? "*." : "", a, dot ? "." : "");
	idn2_free(a);
	if (n < 0 || (size_t)n >= cap) {
		snprintf(why, whylen, "name too long");
		return MOAT_EINVAL;
	}
	return n;
}

void idn_quote(const char *in, size_t len, char *out, size_t cap)
{
	size_t o = 0;
	if (cap == 0)
		return;
	for (size_t i = 0; i < len && o + 4 < cap; i++) {
		unsigned char c = (unsigned char)in[i];
		if (i == 64) {
			memcpy(out + o, "...", 3);
			o += 3;
			break;
		}
		out[o++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
	}
	out[o] = 0;
}
