/* local.c owns the local answers (moat/local.h): parsing local_data lines and hosts(5) files
 * into records, the sorted table they are looked up in, and the answer packet built from it. */
#include "moat/local.h"

#include <arpa/inet.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/addrguard.h"
#include "moat/bytes.h"
#include "moat/err.h"
#include "moat/idn.h"
#include "moat/name.h"
#include "moat/policy_lint.h"
#include "moat/wire.h"
#include "wire/wire_writer.h"

#define LOCAL_MAXRDATA 1024
#define LOCAL_MAXCHAIN 8

struct local_rr {
	uint8_t name[NAME_MAXWIRE]; /* lower-cased wire */
	uint16_t type, rdlen;
	uint32_t ttl;
	uint8_t *rdata; /* owned */
	char *file;     /* owned */
	int line;
};

struct local_data {
	struct local_rr *rr;
	size_t n, cap;
};

struct local_data *local_data_new(void)
{
	return calloc(1, sizeof(struct local_data));
}

void local_data_free(struct local_data *ld)
{
	if (!ld)
		return;
	for (size_t i = 0; i < ld->n; i++) {
		free(ld->rr[i].rdata);
		free(ld->rr[i].file);
	}
	free(ld->rr);
	free(ld);
}

size_t local_data_count(const struct local_data *ld)
{
	return ld ? ld->n : 0;
}

static int push(struct local_data *ld, const uint8_t *name, uint16_t type, uint32_t ttl,
                const uint8_t *rdata, size_t rdlen, const char *file, int line)
{
	if (grow_one(&ld->rr, &ld->cap, ld->n, sizeof(*ld->rr), 16))
		return MOAT_ENOMEM;
	struct local_rr *r = &ld->rr[ld->n];
	memset(r, 0, sizeof(*r));
	memcpy(r->name, name, (size_t)name_wire_len(name, NAME_MAXWIRE));
	r->type = type;
	r->ttl = ttl;
	r->rdlen = (uint16_t)rdlen;
	r->line = line;
	if (!(r->rdata = malloc(rdlen ? rdlen : 1)) || !(r->file = strdup(file))) {
		free(r->rdata);
		return MOAT_ENOMEM;
	}
	memcpy(r->rdata, rdata, rdlen);
	ld->n++;
	return 0;
}

/* A name as the operator wrote it (UTF-8, A-labels) to wire form; why says what is wrong. */
static int user_name(const char *s, size_t len, uint8_t *wire, char *why, size_t whylen)
{
	char conv[IDN_MAXTEXT];
	int n = idn_from_user(s, len, conv, sizeof(conv), why, whylen);
	if (n < 0)
		return n;
	if (n > 0) {
		s = conv;
		len = (size_t)n;
	}
	int wl = name_from_text(s, len, wire);
	if (wl <= 1 || memchr(s, '*', len)) {
		snprintf(why, whylen, "'%.*s' is not a host name", (int)(len > 64 ? 64 : len), s);
		return MOAT_EINVAL;
	}
	return wl;
}

/* The next blank-separated token of s after *pos: sets tok/len, false at the end. */
static bool token(const char *s, size_t *pos, const char **tok, size_t *len)
{
	size_t i = *pos;
	while (s[i] == ' ' || s[i] == '\t')
		i++;
	size_t b = i;
	while (s[i] && s[i] != ' ' && s[i] != '\t')
		i++;
	*pos = i;
	*tok = s + b;
	*len = i - b;
	return i > b;
}

/* The rdata of TYPE from the rest of a line. */
static int parse_rdata(uint16_t type, const char *rest, uint8_t *rd, size_t *rdlen, char *why,
                       size_t whylen)
{
	char buf[INET6_ADDRSTRLEN + 1];
	size_t n = strlen(rest);
	while (n && (rest[n - 1] == ' ' || rest[n - 1] == '\t' || rest[n - 1] == '\r'))
		n--;
	if (type == WIRE_A || type == WIRE_AAAA) {
		int fam = type == WIRE_A ? AF_INET : AF_INET6;
		bool fits = n > 0 && n < sizeof(buf);
		if (fits) {
			memcpy(buf, rest, n);
			buf[n] = 0;
		}
		if (!fits || inet_pton(fam, buf, rd) != 1) {
			snprintf(why, whylen, "expected an %s address",
			         type == WIRE_A ? "IPv4" : "IPv6");
			return MOAT_EINVAL;
		}
		*rdlen = type == WIRE_A ? 4 : 16;
		return 0;
	}
	if (type == WIRE_CNAME) {
		int wl = user_name(rest, n, rd, why, whylen);
		if (wl < 0)
			return wl;
		*rdlen = (size_t)wl;
		return 0;
	}
	/* TXT: the rest of the line, quotes optional, in strings of at most 255 bytes. */
	if (n >= 2 && rest[0] == '"' && rest[n - 1] == '"') {
		rest++;
		n -= 2;
	}
	if (n > LOCAL_MAXRDATA - 8) {
		snprintf(why, whylen, "TXT data too long");
		return MOAT_EINVAL;
	}
	size_t o = 0;
	do {
		size_t k = n > 255 ? 255 : n;
		rd[o++] = (uint8_t)k;
		memcpy(rd + o, rest, k);
		o += k;
		rest += k;
		n -= k;
	} while (n);
	*rdlen = o;
	return 0;
}

int local_data_add(struct local_data *ld, const char *text, const char *file, int line, char *err,
                   size_t errlen)
{
	char why[200] = "", q[80];
	const char *tok;
	size_t len, pos = 0;
	uint8_t name[NAME_MAXWIRE], rd[LOCAL_MAXRDATA];
	size_t rdlen = 0;
	uint32_t ttl = LOCAL_TTL;
	uint16_t type = 0;
	int rc = MOAT_EINVAL;

	idn_quote(text, strlen(text), q, sizeof(q));
	if (!token(text, &pos, &tok, &len) || user_name(tok, len, name, why, sizeof(why)) < 0)
		goto bad;
	if (!token(text, &pos, &tok, &len))
		goto bad;
	if (tok[0] >= '0' && tok[0] <= '9') {
		char *end;
		unsigned long t = strtoul(tok, &end, 10);
		if (end != tok + len || t > 604800) {
			snprintf(why, sizeof(why), "bad TTL");
			goto bad;
		}
		ttl = (uint32_t)t;
		if (!token(text, &pos, &tok, &len))
			goto bad;
	}
	if (len == 1 && (tok[0] | 0x20) == 'a')
		type = WIRE_A;
	else if (len == 4 && !strncasecmp(tok, "aaaa", 4))
		type = WIRE_AAAA;
	else if (len == 5 && !strncasecmp(tok, "cname", 5))
		type = WIRE_CNAME;
	else if (len == 3 && !strncasecmp(tok, "txt", 3))
		type = WIRE_TXT;
	else {
		snprintf(why, sizeof(why), "type must be A, AAAA, CNAME or TXT");
		goto bad;
	}
	while (text[pos] == ' ' || text[pos] == '\t')
		pos++;
	if ((rc = parse_rdata(type, text + pos, rd, &rdlen, why, sizeof(why))) < 0)
		goto bad;
	if ((rc = push(ld, name, type, ttl, rd, rdlen, file, line)) < 0) {
		snprintf(err, errlen, "%s:%d: out of memory", file, line);
		return rc;
	}
	return 0;
bad:
	snprintf(err, errlen, "%s:%d: local_data: '%s': %s", file, line, q,
	         why[0] ? why : "expected 'NAME [TTL] TYPE DATA' (A, AAAA, CNAME or TXT)");
	return MOAT_EINVAL;
}

int local_data_load_hosts(struct local_data *ld, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		snprintf(err, errlen, "%s: cannot open: %m", path);
		return MOAT_EIO;
	}
	char *line = NULL;
	size_t cap = 0;
	int lineno = 0, rc = 0;
	while (!rc && getline(&line, &cap, f) >= 0) {
		char *hash = strchr(line, '#'), addr[INET6_ADDRSTRLEN], why[200] = "";
		const char *tok;
		size_t len, pos = 0;
		uint8_t rd[16], name[NAME_MAXWIRE];
		lineno++;
		if (hash)
			*hash = 0;
		line[strcspn(line, "\r\n")] = 0;
		if (!token(line, &pos, &tok, &len))
			continue;
		bool v6 = memchr(tok, ':', len) != NULL;
		if (len < sizeof(addr)) {
			memcpy(addr, tok, len);
			addr[len] = 0;
		}
		if (len >= sizeof(addr) || inet_pton(v6 ? AF_INET6 : AF_INET, addr, rd) != 1) {
			snprintf(err, errlen, "%s:%d: hosts: bad address '%.*s'", path, lineno,
			         (int)(len > 64 ? 64 : len), tok);
			rc = MOAT_EINVAL;
			break;
		}
		int names = 0;
		while (!rc && token(line, &pos, &tok, &len)) {
			names++;
			if (user_name(tok, len, name, why, sizeof(why)) < 0) {
				snprintf(err, errlen, "%s:%d: hosts: %s", path, lineno, why);
				rc = MOAT_EINVAL;
			} else if ((rc = push(ld, name, v6 ? WIRE_AAAA : WIRE_A, LOCAL_TTL, rd,
			                      v6 ? 16 : 4, path, lineno)) < 0) {
				snprintf(err, errlen, "%s:%d: out of memory", path, lineno);
			}
		}
		if (!rc && !names) {
			snprintf(err, errlen, "%s:%d: hosts: an address without a name", path,
			         lineno);
			rc = MOAT_EINVAL;
		}
	}
	free(line);
	fclose(f);
	return rc;
}

/* Wire names in one total order (length, then bytes): only lookups depend on it. */
static int name_cmp(const uint8_t *a, const uint8_t *b)
{
	int la = name_wire_len(a, NAME_MAXWIRE), lb = name_wire_len(b, NAME_MAXWIRE);
	if (la != lb)
		return la < lb ? -1 : 1;
	return memcmp(a, b, (size_t)la);
}

static int rr_cmp(const void *x, const void *y)
{
	const struct local_rr *a = x, *b = y;
	int c = name_cmp(a->name, b->name);
	if (c)
		return c;
	if (a->line != b->line)
		return a->line < b->line ? -1 : 1;
	return strcmp(a->file, b->file);
}

int local_data_finish(struct local_data *ld, const struct addrguard *guard,
                      struct policy_lint *lint)
{
	char txt[64];
	qsort(ld->rr, ld->n, sizeof(*ld->rr), rr_cmp);
	for (size_t i = 0; guard && i < ld->n; i++) {
		const struct local_rr *r = &ld->rr[i];
		if ((r->type == WIRE_A || r->type == WIRE_AAAA) &&
		    addrguard_check(guard, r->rdata, r->rdlen) == ADDR_ALWAYS)
			policy_lint_add(
			    lint, r->file, (uint32_t)r->line,
			    "local address %s is in the always-denied ranges: it is never "
			    "answered",
			    addrguard_format(r->rdata, r->rdlen, txt, sizeof(txt)));
	}
	return 0;
}

/* The first record of lname, and through *n how many the name has. */
static const struct local_rr *find(const struct local_data *ld, const uint8_t *lname, size_t *n)
{
	size_t lo = 0, hi = ld->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (name_cmp(ld->rr[mid].name, lname) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t e = lo;
	while (e < ld->n && name_cmp(ld->rr[e].name, lname) == 0)
		e++;
	*n = e - lo;
	return *n ? &ld->rr[lo] : NULL;
}

static void put_rrs(struct wire_writer *w, const struct local_rr *r, size_t n, uint16_t qtype,
                    uint16_t *count)
{
	for (size_t i = 0; i < n; i++) {
		if (r[i].type != qtype)
			continue;
		ww_bytes(w, r[i].name, (size_t)name_wire_len(r[i].name, NAME_MAXWIRE));
		ww_u16(w, r[i].type);
		ww_u16(w, WIRE_CLASS_IN);
		ww_u32(w, r[i].ttl);
		ww_u16(w, r[i].rdlen);
		ww_bytes(w, r[i].rdata, r[i].rdlen);
		(*count)++;
	}
}

int local_data_answer(const struct local_data *ld, const uint8_t *lname, uint16_t qtype,
                      uint16_t id, uint8_t *out, size_t cap)
{
	size_t n;
	const struct local_rr *r = ld ? find(ld, lname, &n) : NULL;
	if (!r)
		return 0;
	struct wire_writer w = {out, cap, 0, 0};
	uint16_t an = 0;
	ww_u16(&w, id);
	ww_u16(&w, WIRE_FLAG_QR | WIRE_FLAG_AA | WIRE_FLAG_RD | WIRE_FLAG_RA); /* NOERROR */
	ww_u16(&w, 1);
	ww_u16(&w, 0);
	ww_u16(&w, 0);
	ww_u16(&w, 0);
	ww_bytes(&w, lname, (size_t)name_wire_len(lname, NAME_MAXWIRE));
	ww_u16(&w, qtype);
	ww_u16(&w, WIRE_CLASS_IN);
	/* A CNAME answers every type but CNAME with itself and whatever its target has here. */
	for (int step = 0; r && step < LOCAL_MAXCHAIN; step++) {
		size_t k;
		for (k = 0; k < n && r[k].type != WIRE_CNAME; k++)
			;
		if (k == n || qtype == WIRE_CNAME) {
			put_rrs(&w, r, n, qtype, &an);
			break;
		}
		put_rrs(&w, r + k, 1, WIRE_CNAME, &an);
		r = find(ld, r[k].rdata, &n);
	}
	if (w.err)
		return w.err;
	be16_put(out + 6, an);
	return (int)w.len;
}
