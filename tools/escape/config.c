/* config.c owns moat-escape's configuration: the defaults, the key=value file and the flags
 * (both go through escape_cfg_set, so a file key and a long flag are the same thing), the
 * resolver taken from resolv.conf when none is given, and the checks that make a run meaningful
 * (a control name is required: without it every "blocked" could be a resolver that is down).
 * It also writes addresses as text and an IPv4 address in its numeric forms. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "moat/config.h"
#include "moat/err.h"

/* Names the sandbox's cloud would answer with its metadata service. */
static const char *const escape_default_meta[] = {
    "metadata.google.internal",   "metadata",      "instance-data",
    "instance-data.ec2.internal", "metadata.goog",
};

/* Well-known public resolvers: the first thing an agent tries when its own resolver says no. */
static const char *const escape_default_others[] = {"1.1.1.1", "8.8.8.8", "9.9.9.9",
                                                    "2606:4700:4700::1111"};

/* Public rebinding services: they answer any embedded address, so a sandbox that lets them
 * through has handed out the metadata address. Operators should add an allowed name of their own
 * that points inside (`rebind NAME`): that is what tests the resolver's answer check. */
static const char *const escape_default_rebind[] = {"169.254.169.254.nip.io", "127.0.0.1.sslip.io"};

static int escape_set_name(char *dst, const char *value, const char *key, char *err, size_t errlen)
{
	uint8_t wire[NAME_MAXWIRE];
	size_t n = strlen(value);

	/* The root (".") would be a query for the root zone, which no test means. */
	if (n == 0 || n >= ESCAPE_NAMELEN || name_from_text(value, n, wire) <= 1) {
		snprintf(err, errlen, "%s: '%s' is not a domain name", key, value);
		return MOAT_EINVAL;
	}
	memcpy(dst, value, n + 1);
	return 0;
}

static int escape_set_uint(uint32_t *dst, const char *value, uint32_t lo, uint32_t hi,
                           const char *key, char *err, size_t errlen)
{
	char *end;
	unsigned long v;

	errno = 0;
	if (!isdigit((unsigned char)value[0]))
		goto bad;
	v = strtoul(value, &end, 10);
	if (errno != 0 || *end != '\0' || v < lo || v > hi)
		goto bad;
	*dst = (uint32_t)v;
	return 0;
bad:
	snprintf(err, errlen, "%s: '%s' is not a number from %u to %u", key, value, lo, hi);
	return MOAT_EINVAL;
}

/* A bare address (no port) of the family asked for (AF_UNSPEC: either). */
static int escape_set_addr(struct sockaddr_storage *dst, const char *value, int family,
                           const char *key, char *err, size_t errlen)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (family != AF_INET6 &&
	    inet_pton(AF_INET, value, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
		ss.ss_family = AF_INET;
	} else if (family != AF_INET &&
	           inet_pton(AF_INET6, value, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
		ss.ss_family = AF_INET6;
	} else {
		snprintf(err, errlen, "%s: '%s' is not an %saddress", key, value,
		         family == AF_INET6 ? "IPv6 " : (family == AF_INET ? "IPv4 " : "IP "));
		return MOAT_EINVAL;
	}
	*dst = ss;
	return 0;
}

/* HOST[:PORT] where HOST is a name, an IPv4 address or [IPv6]; a bare IPv6 address has no port. */
/* "HOST[:PORT]" (a name, an IPv4 address or a bracketed IPv6 one) into out_host (ESCAPE_NAMELEN)
 * and *out_port (defport when not given). */
static int escape_set_hostport(const char *value, const char *key, uint32_t defport, char *out_host,
                               uint16_t *out_port, char *err, size_t errlen)
{
	char host[ESCAPE_NAMELEN];
	const char *colon = strrchr(value, ':');
	uint32_t port = defport;
	size_t hl;
	struct in6_addr a6;

	if (value[0] == '[') {
		const char *close = strchr(value, ']');
		if (close == NULL || (close[1] != '\0' && close[1] != ':'))
			goto bad;
		hl = (size_t)(close - value - 1);
		colon = close[1] == ':' ? close + 1 : NULL;
		if (hl >= sizeof(host))
			goto bad;
		memcpy(host, value + 1, hl);
		host[hl] = '\0';
		if (inet_pton(AF_INET6, host, &a6) != 1)
			goto bad;
	} else if (colon != NULL && strchr(value, ':') != colon) {
		/* Two colons or more: a bare IPv6 address. */
		if (strlen(value) >= sizeof(host) || inet_pton(AF_INET6, value, &a6) != 1)
			goto bad;
		strcpy(host, value);
		colon = NULL;
	} else {
		hl = colon ? (size_t)(colon - value) : strlen(value);
		if (hl == 0 || hl >= sizeof(host))
			goto bad;
		memcpy(host, value, hl);
		host[hl] = '\0';
		struct in_addr a4;
		uint8_t wire[NAME_MAXWIRE];
		if (inet_pton(AF_INET, host, &a4) != 1 && name_from_text(host, hl, wire) <= 1)
			goto bad;
	}
	if (colon != NULL && escape_set_uint(&port, colon + 1, 1, 65535, key, err, errlen) != 0)
		return MOAT_EINVAL;
	strcpy(out_host, host);
	*out_port = (uint16_t)port;
	return 0;
bad:
	snprintf(err, errlen, "%s: '%s' is not HOST:PORT", key, value);
	return MOAT_EINVAL;
}

static int escape_set_target(struct escape_cfg *c, const char *value, char *err, size_t errlen)
{
	return escape_set_hostport(value, "allowed-target", 443, c->target_host, &c->target_port,
	                           err, errlen);
}

static int escape_set_sink(struct escape_cfg *c, const char *value, char *err, size_t errlen)
{
	struct escape_addr *s;

	if (!c->set_sinks) {
		c->nsinks = 0;
		c->set_sinks = true;
	}
	if (c->nsinks >= ESCAPE_MAXLIST) {
		snprintf(err, errlen, "sinkhole: more than %d addresses", ESCAPE_MAXLIST);
		return MOAT_EINVAL;
	}
	s = &c->sinks[c->nsinks];
	if (inet_pton(AF_INET, value, s->b) == 1) {
		s->len = 4;
	} else if (inet_pton(AF_INET6, value, s->b) == 1) {
		s->len = 16;
	} else {
		snprintf(err, errlen, "sinkhole: '%s' is not an address", value);
		return MOAT_EINVAL;
	}
	c->nsinks++;
	return 0;
}

/* A list key: the first occurrence replaces the defaults, later ones add. */
static int escape_push_name(char (*list)[ESCAPE_NAMELEN], size_t *n, bool *set, const char *value,
                            const char *key, char *err, size_t errlen)
{
	if (!*set) {
		*n = 0;
		*set = true;
	}
	if (*n >= ESCAPE_MAXLIST) {
		snprintf(err, errlen, "%s: more than %d names", key, ESCAPE_MAXLIST);
		return MOAT_EINVAL;
	}
	if (escape_set_name(list[*n], value, key, err, errlen) != 0)
		return MOAT_EINVAL;
	(*n)++;
	return 0;
}

/* metadata-names takes a list separated by commas or blanks. */
static int escape_set_meta(struct escape_cfg *c, const char *value, char *err, size_t errlen)
{
	char buf[1024];
	char *save = NULL;
	int any = 0;

	if (strlen(value) >= sizeof(buf)) {
		snprintf(err, errlen, "metadata-names: list too long");
		return MOAT_EINVAL;
	}
	strcpy(buf, value);
	for (char *t = strtok_r(buf, ", \t", &save); t != NULL; t = strtok_r(NULL, ", \t", &save)) {
		if (escape_push_name(c->meta_names, &c->nmeta, &c->set_meta, t, "metadata-names",
		                     err, errlen) != 0)
			return MOAT_EINVAL;
		any = 1;
	}
	if (!any) {
		snprintf(err, errlen, "metadata-names: empty list");
		return MOAT_EINVAL;
	}
	return 0;
}

void escape_cfg_init(struct escape_cfg *c)
{
	memset(c, 0, sizeof(*c));
	for (size_t i = 0; i < sizeof(escape_default_meta) / sizeof(escape_default_meta[0]); i++)
		strcpy(c->meta_names[c->nmeta++], escape_default_meta[i]);
	c->meta_addr.sin_family = AF_INET;
	c->meta_addr.sin_port = htons(80);
	inet_pton(AF_INET, "169.254.169.254", &c->meta_addr.sin_addr);
	c->meta_addr6.sin6_family = AF_INET6;
	inet_pton(AF_INET6, "fd00:ec2::254", &c->meta_addr6.sin6_addr);
	for (size_t i = 0; i < sizeof(escape_default_others) / sizeof(escape_default_others[0]);
	     i++)
		netaddr_parse_addrport(escape_default_others[i], 53, &c->others[c->nothers++]);
	c->others_default = true;
	for (size_t i = 0; i < sizeof(escape_default_rebind) / sizeof(escape_default_rebind[0]);
	     i++)
		strcpy(c->rebind[c->nrebind++], escape_default_rebind[i]);
	c->rebind_default = true;
	/* Documentation addresses: nothing answers there on a real network, so these defaults
	 * prove little; the report says so, and operators set real hosts. */
	escape_set_addr(&c->unresolved, "192.0.2.1", AF_INET, "", NULL, 0);
	c->unresolved_default = true;
	c->v6_target.sin6_family = AF_INET6;
	inet_pton(AF_INET6, "2001:db8::1", &c->v6_target.sin6_addr);
	c->v6_default = true;
	c->expire_wait = ESCAPE_DEFAULT_EXPIRE_WAIT;
	c->grant_min = ESCAPE_DEFAULT_GRANT_MIN;
	strcpy(c->tunnel_domain, "example.net");
	c->timeout_ms = ESCAPE_DEFAULT_TIMEOUT_MS;
	c->inbound_port = ESCAPE_DEFAULT_INBOUND_PORT;
	/* moatd's default sinkhole answers, and 0.0.0.0 and :: (a configured sinkhole). */
	c->sinks[0].len = 4;
	memcpy(c->sinks[0].b, config_sink4_default, 4);
	c->sinks[1].len = 16;
	memcpy(c->sinks[1].b, config_sink6_default, 16);
	c->sinks[2].len = 4;  /* 0.0.0.0 */
	c->sinks[3].len = 16; /* :: */
	c->nsinks = 4;
	c->format = ESCAPE_FMT_TABLE;
}

/* escape_cfg_set's parts each know a group of keys and answer ESCAPE_KEY_OTHER for the rest. */
#define ESCAPE_KEY_OTHER 1

/* The keys whose value is an address (or a list of them). */
static int escape_set_addrs(struct escape_cfg *c, const char *key, const char *value, char *err,
                            size_t errlen)
{
	struct sockaddr_storage ss;

	if (strcmp(key, "resolver") == 0) {
		if (netaddr_parse_addrport(value, 53, &c->resolver) != 0)
			goto badaddr;
		c->has_resolver = true;
	} else if (strcmp(key, "metadata-addr") == 0) {
		if (netaddr_parse_addrport(value, 80, &ss) != 0 || ss.ss_family != AF_INET) {
			snprintf(err, errlen, "%s: '%s' is not IPv4ADDR[:PORT]", key, value);
			return MOAT_EINVAL;
		}
		memcpy(&c->meta_addr, &ss, sizeof(c->meta_addr));
	} else if (strcmp(key, "metadata-addr6") == 0) {
		if (escape_set_addr(&ss, value, AF_INET6, key, err, errlen) != 0)
			return MOAT_EINVAL;
		memcpy(&c->meta_addr6, &ss, sizeof(c->meta_addr6));
	} else if (strcmp(key, "other-resolver") == 0) {
		if (!c->set_others) {
			c->nothers = 0;
			c->set_others = true;
			c->others_default = false;
		}
		if (c->nothers >= ESCAPE_MAXLIST) {
			snprintf(err, errlen, "%s: more than %d resolvers", key, ESCAPE_MAXLIST);
			return MOAT_EINVAL;
		}
		if (netaddr_parse_addrport(value, 53, &c->others[c->nothers]) != 0)
			goto badaddr;
		c->nothers++;
	} else if (strcmp(key, "unresolved") == 0) {
		if (escape_set_addr(&c->unresolved, value, AF_UNSPEC, key, err, errlen) != 0)
			return MOAT_EINVAL;
		c->unresolved_default = false;
	} else if (strcmp(key, "v6-target") == 0) {
		if (escape_set_addr(&ss, value, AF_INET6, key, err, errlen) != 0)
			return MOAT_EINVAL;
		memcpy(&c->v6_target, &ss, sizeof(c->v6_target));
		c->v6_default = false;
	} else if (strcmp(key, "spoof-source") == 0) {
		if (c->nspoof >= ESCAPE_MAXLIST) {
			snprintf(err, errlen, "%s: more than %d sources", key, ESCAPE_MAXLIST);
			return MOAT_EINVAL;
		}
		if (escape_set_addr(&c->spoof[c->nspoof], value, AF_UNSPEC, key, err, errlen) != 0)
			return MOAT_EINVAL;
		c->nspoof++;
	} else {
		return strcmp(key, "sinkhole") == 0 ? escape_set_sink(c, value, err, errlen)
		                                    : ESCAPE_KEY_OTHER;
	}
	return 0;
badaddr:
	snprintf(err, errlen, "%s: '%s' is not ADDR[:PORT]", key, value);
	return MOAT_EINVAL;
}

/* The keys whose value is a name, a list of names or a HOST[:PORT]. */
static int escape_set_names(struct escape_cfg *c, const char *key, const char *value, char *err,
                            size_t errlen)
{
	if (strcmp(key, "allowed") == 0)
		return escape_set_name(c->allowed, value, key, err, errlen);
	if (strcmp(key, "allowed-target") == 0)
		return escape_set_target(c, value, err, errlen);
	if (strcmp(key, "rebind") == 0) {
		c->rebind_default = false;
		return escape_push_name(c->rebind, &c->nrebind, &c->set_rebind, value, key, err,
		                        errlen);
	}
	if (strcmp(key, "metadata-names") == 0)
		return escape_set_meta(c, value, err, errlen);
	if (strcmp(key, "expire-name") == 0)
		return escape_set_name(c->expire_name, value, key, err, errlen);
	if (strcmp(key, "scoped-name") == 0)
		return escape_set_name(c->scoped_name, value, key, err, errlen);
	if (strcmp(key, "witness") == 0)
		return escape_set_hostport(value, key, ESCAPE_DEFAULT_WITNESS_PORT, c->witness_host,
		                           &c->witness_port, err, errlen);
	if (strcmp(key, "tunnel-domain") != 0)
		return ESCAPE_KEY_OTHER;
	uint8_t wire[NAME_MAXWIRE];
	/* Three 63-byte labels must fit below it in 255 bytes. */
	if (escape_set_name(c->tunnel_domain, value, key, err, errlen) != 0)
		return MOAT_EINVAL;
	if (name_from_text(value, strlen(value), wire) > 255 - 3 * 64) {
		snprintf(err, errlen, "%s: '%s' is too long for three 63-byte labels", key, value);
		return MOAT_EINVAL;
	}
	return 0;
}

/* The keys whose value is a number (seconds, milliseconds, a port), and format. */
static int escape_set_numbers(struct escape_cfg *c, const char *key, const char *value, char *err,
                              size_t errlen)
{
	static const char *const formats[] = {
	    [ESCAPE_FMT_TABLE] = "table", [ESCAPE_FMT_TAP] = "tap", [ESCAPE_FMT_JSON] = "json"};
	uint16_t *port = strcmp(key, "expire-port") == 0     ? &c->expire_port
	                 : strcmp(key, "scoped-open") == 0   ? &c->scoped_open
	                 : strcmp(key, "scoped-closed") == 0 ? &c->scoped_closed
	                 : strcmp(key, "inbound-port") == 0  ? &c->inbound_port
	                                                     : NULL;
	uint32_t v;

	if (port) {
		if (escape_set_uint(&v, value, 1, 65535, key, err, errlen) != 0)
			return MOAT_EINVAL;
		*port = (uint16_t)v;
		return 0;
	}
	if (strcmp(key, "expire-wait") == 0)
		return escape_set_uint(&c->expire_wait, value, 0, 3600, key, err, errlen);
	if (strcmp(key, "grant-min") == 0)
		return escape_set_uint(&c->grant_min, value, 0, 3600, key, err, errlen);
	if (strcmp(key, "timeout") == 0)
		return escape_set_uint(&c->timeout_ms, value, 50, 60000, key, err, errlen);
	if (strcmp(key, "format") != 0)
		return ESCAPE_KEY_OTHER;
	for (size_t f = 0; f < sizeof(formats) / sizeof(formats[0]); f++)
		if (strcmp(value, formats[f]) == 0) {
			c->format = (enum escape_format)f;
			return 0;
		}
	snprintf(err, errlen, "format: '%s' is not table, tap or json", value);
	return MOAT_EINVAL;
}

int escape_cfg_set(struct escape_cfg *c, const char *key, const char *value, char *err,
                   size_t errlen)
{
	int rc = escape_set_addrs(c, key, value, err, errlen);
	if (rc == ESCAPE_KEY_OTHER)
		rc = escape_set_names(c, key, value, err, errlen);
	if (rc == ESCAPE_KEY_OTHER)
		rc = escape_set_numbers(c, key, value, err, errlen);
	if (rc == ESCAPE_KEY_OTHER) {
		snprintf(err, errlen, "unknown key '%s'", key);
		return MOAT_EINVAL;
	}
	return rc;
}

int escape_cfg_load_string(struct escape_cfg *c, const char *text, size_t len, const char *label,
                           char *err, size_t errlen)
{
	char line[2048];
	char why[512];
	size_t pos = 0;
	int lineno = 0;

	while (pos < len) {
		size_t end = pos;
		while (end < len && text[end] != '\n')
			end++;
		lineno++;
		if (end - pos >= sizeof(line)) {
			snprintf(err, errlen, "%s:%d: line too long", label, lineno);
			return MOAT_EINVAL;
		}
		memcpy(line, text + pos, end - pos);
		line[end - pos] = '\0';
		pos = end + 1;

		char *hash = strchr(line, '#');
		if (hash != NULL)
			*hash = '\0';
		char *p = line;
		while (isspace((unsigned char)*p))
			p++;
		size_t n = strlen(p);
		while (n > 0 && isspace((unsigned char)p[n - 1]))
			p[--n] = '\0';
		if (n == 0)
			continue;
		/* "key = value", "key=value" and "key value" are all accepted. */
		char *key = p;
		while (*p != '\0' && *p != '=' && !isspace((unsigned char)*p))
			p++;
		char *kend = p;
		while (isspace((unsigned char)*p))
			p++;
		if (*p == '=')
			p++;
		while (isspace((unsigned char)*p))
			p++;
		*kend = '\0';
		if (*p == '\0') {
			snprintf(err, errlen, "%s:%d: '%s' has no value", label, lineno, key);
			return MOAT_EINVAL;
		}
		if (escape_cfg_set(c, key, p, why, sizeof(why)) != 0) {
			snprintf(err, errlen, "%s:%d: %s", label, lineno, why);
			return MOAT_EINVAL;
		}
	}
	return 0;
}

int escape_cfg_load_file(struct escape_cfg *c, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "r");
	char buf[65536];
	size_t n;

	if (f == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return MOAT_EIO;
	}
	n = fread(buf, 1, sizeof(buf), f);
	int bad = ferror(f) || !feof(f);
	fclose(f);
	if (bad) {
		snprintf(err, errlen, "%s: unreadable or larger than %zu bytes", path,
		         sizeof(buf) - 1);
		return MOAT_EIO;
	}
	return escape_cfg_load_string(c, buf, n, path, err, errlen);
}

int escape_resolv_conf(const char *path, struct sockaddr_storage *out)
{
	FILE *f = fopen(path, "r");
	char line[512];
	int rc = MOAT_ENOENT;

	if (f == NULL)
		return MOAT_EIO;
	while (fgets(line, sizeof(line), f) != NULL) {
		char word[32], addr[128];
		if (sscanf(line, "%31s %127s", word, addr) != 2 || strcmp(word, "nameserver") != 0)
			continue;
		/* A scoped IPv6 nameserver (fe80::1%eth0) is skipped: no scope support here. */
		if (escape_set_addr(out, addr, AF_UNSPEC, "", NULL, 0) == 0) {
			if (out->ss_family == AF_INET)
				((struct sockaddr_in *)out)->sin_port = htons(53);
			else
				((struct sockaddr_in6 *)out)->sin6_port = htons(53);
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

int escape_cfg_finish(struct escape_cfg *c, const char *resolv_path, char *err, size_t errlen)
{
	if (!c->has_resolver) {
		if (escape_resolv_conf(resolv_path, &c->resolver) != 0) {
			snprintf(err, errlen,
			         "no resolver: give --resolver ADDR or a nameserver in %s",
			         resolv_path);
			return MOAT_EINVAL;
		}
		c->has_resolver = true;
	}
	if (c->allowed[0] == '\0') {
		snprintf(err, errlen,
		         "no control: give --allowed NAME, a name the sandbox must "
		         "resolve (without it a dead resolver would look like a "
		         "sandbox that holds)");
		return MOAT_EINVAL;
	}
	if (c->target_host[0] == '\0') {
		strcpy(c->target_host, c->allowed);
		c->target_port = 443;
	}
	if (c->expire_name[0] == '\0')
		strcpy(c->expire_name, c->allowed);
	if (c->expire_port == 0)
		c->expire_port = c->target_port;
	c->meta_addr6.sin6_port = c->meta_addr.sin_port;
	return 0;
}

const char *escape_sa_str(const struct sockaddr *sa, bool port, char *out, size_t cap)
{
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
	bool v6 = sa->sa_family == AF_INET6;
	char a[INET6_ADDRSTRLEN];

	if (sa->sa_family != AF_INET && !v6) {
		snprintf(out, cap, "?");
		return out;
	}
	inet_ntop(sa->sa_family, v6 ? (const void *)&s6->sin6_addr : (const void *)&s4->sin_addr, a,
	          sizeof(a));
	if (port)
		snprintf(out, cap, v6 ? "[%s]:%u" : "%s:%u", a,
		         ntohs(v6 ? s6->sin6_port : s4->sin_port));
	else
		snprintf(out, cap, "%s", a);
	return out;
}

void escape_numeric_forms(struct in_addr a, char forms[ESCAPE_NFORMS][32])
{
	uint32_t v = ntohl(a.s_addr);
	unsigned o[4] = {v >> 24, (v >> 16) & 0xFF, (v >> 8) & 0xFF, v & 0xFF};

	snprintf(forms[ESCAPE_FORM_DOTTED], 32, "%u.%u.%u.%u", o[0], o[1], o[2], o[3]);
	snprintf(forms[ESCAPE_FORM_DECIMAL], 32, "%u", v);
	snprintf(forms[ESCAPE_FORM_HEX], 32, "0x%08x", v);
	/* Every octet with a leading 0 (inet_aton's octal), also 0 itself ("00"). */
	snprintf(forms[ESCAPE_FORM_OCTAL], 32, "0%o.0%o.0%o.0%o", o[0], o[1], o[2], o[3]);
}
