/* policy_ports.c owns the port part of an allowlist line: `tcp/443`, `tcp/80,443 udp/123`. It
 * parses the text after the pattern into a sorted, duplicate-free list of (protocol, port) pairs
 * and merges the lists of a pattern listed on several lines. A line without ports means any port
 * and carries no list at all. Pure: no allocation, no I/O. */
#include <stdio.h>
#include <string.h>

#include "moat/err.h"
#include "moat/policy.h"

static int pp_cmp(const struct policy_port *a, const struct policy_port *b)
{
	if (a->proto != b->proto)
		return a->proto < b->proto ? -1 : 1;
	return a->port < b->port ? -1 : a->port > b->port;
}

/* Insert p keeping the list sorted and unique. MOAT_ELIMIT when the list is full. */
static int pp_insert(struct policy_ports *l, struct policy_port p)
{
	unsigned i = 0;
	while (i < l->n && pp_cmp(&l->p[i], &p) < 0)
		i++;
	if (i < l->n && pp_cmp(&l->p[i], &p) == 0)
		return 0;
	if (l->n >= POLICY_PORTS_MAX)
		return MOAT_ELIMIT;
	memmove(&l->p[i + 1], &l->p[i], (l->n - i) * sizeof(l->p[0]));
	l->p[i] = p;
	l->n++;
	return 0;
}

/* One "proto/port[,port...]" token of len bytes. */
static int pp_token(const char *t, size_t len, struct policy_ports *out, char *why, size_t whylen)
{
	uint8_t proto;
	size_t i;
	if (len > 4 && memcmp(t, "tcp/", 4) == 0)
		proto = POLICY_PROTO_TCP;
	else if (len > 4 && memcmp(t, "udp/", 4) == 0)
		proto = POLICY_PROTO_UDP;
	else {
		snprintf(why, whylen,
		         "bad port spec '%.*s' (expected tcp/PORT[,PORT...] or "
		         "udp/PORT[,PORT...])",
		         (int)len, t);
		return MOAT_EINVAL;
	}
	for (i = 4; i <= len;) {
		size_t b = i;
		unsigned long v = 0;
		while (i < len && t[i] >= '0' && t[i] <= '9' && i - b < 6)
			v = v * 10 + (unsigned long)(t[i++] - '0');
		if (i == b || (i < len && t[i] != ',') || v < 1 || v > 65535 || t[b] == '0') {
			snprintf(why, whylen,
			         "bad port in '%.*s' (ports are 1-65535, comma-separated)",
			         (int)len, t);
			return MOAT_EINVAL;
		}
		if (pp_insert(out, (struct policy_port){proto, (uint16_t)v}) < 0) {
			snprintf(why, whylen, "more than %d ports on one line", POLICY_PORTS_MAX);
			return MOAT_ELIMIT;
		}
		i++; /* past the comma (or the end) */
	}
	return 0;
}

int policy_ports_parse(const char *text, size_t len, struct policy_ports *out, char *why,
                       size_t whylen)
{
	memset(out, 0, sizeof(*out));
	size_t i = 0;
	while (i < len) {
		while (i < len && (text[i] == ' ' || text[i] == '\t'))
			i++;
		size_t b = i;
		while (i < len && text[i] != ' ' && text[i] != '\t')
			i++;
		if (i > b) {
			int rc = pp_token(text + b, i - b, out, why, whylen);
			if (rc < 0)
				return rc;
		}
	}
	if (out->n == 0) {
		snprintf(why, whylen, "no ports given");
		return MOAT_EINVAL;
	}
	return 0;
}

int policy_ports_union(struct policy_ports *into, const struct policy_ports *add)
{
	for (unsigned i = 0; i < add->n; i++) {
		int rc = pp_insert(into, add->p[i]);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int policy_ports_format(const struct policy_ports *l, char *out, size_t cap)
{
	size_t n = 0;
	if (cap == 0)
		return MOAT_ESPACE;
	out[0] = '\0';
	if (!l) {
		int k = snprintf(out, cap, "any");
		return k < 0 || (size_t)k >= cap ? MOAT_ESPACE : k;
	}
	for (unsigned i = 0; i < l->n; i++) {
		bool same = i > 0 && l->p[i - 1].proto == l->p[i].proto;
		const char *name = l->p[i].proto == POLICY_PROTO_TCP ? "tcp" : "udp";
		int k =
		    same ? snprintf(out + n, cap - n, ",%u", l->p[i].port)
		         : snprintf(out + n, cap - n, "%s%s/%u", n ? " " : "", name, l->p[i].port);
		if (k < 0 || (size_t)k >= cap - n)
			return MOAT_ESPACE;
		n += (size_t)k;
	}
	return (int)n;
}
