/* config.c owns moatd's configuration: the defaults, the YAML file format (version 1, described
 * in moat/config.h) read with libfyaml, the address and address-range syntax shared with the
 * command-line flags, and the checks that a loaded configuration is complete. Every error names
 * the file and line it comes from, because an operator fixing a resolver that refuses to start
 * needs to know exactly which line to change. Nothing here opens sockets or reads policy files;
 * paths are only recorded (resolved against the config file's directory) for policy_load. */
#include "moat/config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libfyaml.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "moat/err.h"
#include "moat/idn.h"
#include "moat/name.h"
#include "moat/policy_sig.h"
#include "moat/pathfd.h"
#include "moat/zonesdir.h"

/* Limits on numeric keys. Values outside them are almost certainly typos (a timeout in seconds
 * written into a millisecond key), so they are rejected rather than clamped. */
#define CONFIG_TIMEOUT_MIN 1u
#define CONFIG_TIMEOUT_MAX 60000u
#define CONFIG_ATTEMPTS_MIN 1u
#define CONFIG_ATTEMPTS_MAX 16u
#define CONFIG_IDLE_MIN 100u
#define CONFIG_IDLE_MAX 3600000u
#define CONFIG_CLIENTS_MIN 1u
#define CONFIG_CLIENTS_MAX 1000000u
#define CONFIG_WORKERS_MAX 64u
#define CONFIG_STALE_MAX 604800u /* a week; RFC 8767 suggests 1 to 3 days */
#define CONFIG_TTL_MAX 86400u

/* A config file is a few kilobytes; anything far larger is not one. */
#define CONFIG_FILE_MAX (1024 * 1024)

/* How much of an offending value an error message quotes. */
#define CONFIG_QUOTE_MAX 64

static const uint8_t config_v4mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* --- small helpers ------------------------------------------------------------------------- */

static void config_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void config_errf(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Copy untrusted text into an error message: errors end up in terminals and logs, so control
 * bytes and overly long values are not passed through. */
static void config_quote(char *out, size_t outlen, const char *s, size_t len)
{
	size_t i, o = 0;

	for (i = 0; i < len && o + 4 < outlen; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (i == CONFIG_QUOTE_MAX) {
			out[o++] = '.';
			out[o++] = '.';
			out[o++] = '.';
			break;
		}
		out[o++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
	}
	out[o] = '\0';
}

int config_strv_push(char ***v, size_t *n, const char *s)
{
	char **nv;
	char *copy;

	copy = strdup(s);
	if (copy == NULL)
		return MOAT_ENOMEM;
	nv = realloc(*v, (*n + 1) * sizeof(*nv));
	if (nv == NULL) {
		free(copy);
		return MOAT_ENOMEM;
	}
	nv[*n] = copy;
	*v = nv;
	(*n)++;
	return 0;
}

static void config_strv_free(char ***v, size_t *n)
{
	size_t i;

	for (i = 0; i < *n; i++)
		free((*v)[i]);
	free(*v);
	*v = NULL;
	*n = 0;
}

/* Strict decimal: digits only (no sign, no spaces, no hex), so "1e3" or "0x10" are refused
 * instead of being half-read by strtoul. */
static bool config_parse_uint(const char *s, size_t len, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	if (len == 0 || len > 20)
		return false;
	for (i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (uint64_t)(s[i] - '0');
		if (v > max)
			return false;
	}
	*out = v;
	return true;
}

static bool config_key_is(const char *k, size_t klen, const char *want)
{
	return klen == strlen(want) && memcmp(k, want, klen) == 0;
}

/* --- addresses ----------------------------------------------------------------------------- */

/* A bare numeric address, IPv4 or IPv6. inet_pton is used rather than getaddrinfo because it
 * never resolves names and refuses the inet_aton shorthands ("127.1", "0x7f.1"). */
static int config_parse_addr(const char *s, struct sockaddr_storage *out, uint16_t port)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)out;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)out;

	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, s, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		return 0;
	}
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET6, s, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		return 0;
	}
	memset(out, 0, sizeof(*out));
	return MOAT_EINVAL;
}

int config_parse_addrport(const char *s, uint16_t default_port, struct sockaddr_storage *out)
{
	char host[INET6_ADDRSTRLEN];
	const char *port_text = NULL;
	const char *colon;
	size_t hostlen;
	uint64_t port = default_port;

	if (s == NULL || out == NULL)
		return MOAT_EINVAL;
	if (s[0] == '[') {
		/* "[v6]" or "[v6]:port": the brackets are what lets a port follow an IPv6 address.
		 */
		const char *close = strchr(s, ']');

		if (close == NULL)
			return MOAT_EINVAL;
		hostlen = (size_t)(close - s - 1);
		if (close[1] == ':')
			port_text = close + 2;
		else if (close[1] != '\0')
			return MOAT_EINVAL;
		if (hostlen == 0 || hostlen >= sizeof(host))
			return MOAT_EINVAL;
		memcpy(host, s + 1, hostlen);
		host[hostlen] = '\0';
		if (port_text != NULL &&
		    !config_parse_uint(port_text, strlen(port_text), 65535, &port))
			return MOAT_EINVAL;
		if (port_text != NULL && port == 0)
			return MOAT_EINVAL;
		memset(out, 0, sizeof(*out));
		if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)out)->sin6_addr) != 1)
			return MOAT_EINVAL;
		out->ss_family = AF_INET6;
		((struct sockaddr_in6 *)out)->sin6_port = htons((uint16_t)port);
		return 0;
	}

	colon = strchr(s, ':');
	if (colon != NULL && strchr(colon + 1, ':') != NULL) {
		/* Two or more colons and no brackets: a bare IPv6 address, default port. */
		if (strlen(s) >= sizeof(host))
			return MOAT_EINVAL;
		memset(out, 0, sizeof(*out));
		if (inet_pton(AF_INET6, s, &((struct sockaddr_in6 *)out)->sin6_addr) != 1)
			return MOAT_EINVAL;
		out->ss_family = AF_INET6;
		((struct sockaddr_in6 *)out)->sin6_port = htons(default_port);
		return 0;
	}

	/* IPv4, with or without ":port". */
	hostlen = colon != NULL ? (size_t)(colon - s) : strlen(s);
	if (hostlen == 0 || hostlen >= sizeof(host))
		return MOAT_EINVAL;
	memcpy(host, s, hostlen);
	host[hostlen] = '\0';
	if (colon != NULL) {
		if (!config_parse_uint(colon + 1, strlen(colon + 1), 65535, &port) || port == 0)
			return MOAT_EINVAL;
	}
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, host, &((struct sockaddr_in *)out)->sin_addr) != 1)
		return MOAT_EINVAL;
	out->ss_family = AF_INET;
	((struct sockaddr_in *)out)->sin_port = htons((uint16_t)port);
	return 0;
}

/* Parse a range; *host_bits reports the one error worth a specific message ("10.0.0.1/8"),
 * since that usually means the operator meant a single host or a different prefix. */
static int config_cidr_parse(const char *s, struct cidr *out, bool *host_bits)
{
	char addr[INET6_ADDRSTRLEN];
	const char *slash;
	size_t alen;
	unsigned max, offset, bits, i;
	uint64_t prefix;
	struct in_addr a4;

	*host_bits = false;
	if (s == NULL || out == NULL)
		return MOAT_EINVAL;
	slash = strchr(s, '/');
	alen = slash != NULL ? (size_t)(slash - s) : strlen(s);
	if (alen == 0 || alen >= sizeof(addr))
		return MOAT_EINVAL;
	memcpy(addr, s, alen);
	addr[alen] = '\0';

	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, addr, &a4) == 1) {
		memcpy(out->addr, config_v4mapped_prefix, sizeof(config_v4mapped_prefix));
		memcpy(out->addr + 12, &a4, 4);
		max = 32;
		offset = 96;
	} else if (inet_pton(AF_INET6, addr, out->addr) == 1) {
		max = 128;
		offset = 0;
	} else {
		return MOAT_EINVAL;
	}

	if (slash == NULL) {
		prefix = max;
	} else if (!config_parse_uint(slash + 1, strlen(slash + 1), max, &prefix)) {
		return MOAT_EINVAL;
	}
	bits = offset + (unsigned)prefix;

	for (i = bits; i < 128; i++) {
		if (out->addr[i / 8] & (0x80u >> (i % 8))) {
			*host_bits = true;
			return MOAT_EINVAL;
		}
	}
	out->bits = (uint8_t)bits;
	return 0;
}

int config_parse_cidr(const char *s, struct cidr *out)
{
	bool host_bits;

	return config_cidr_parse(s, out, &host_bits);
}

void config_cidr_text(const struct cidr *c, char *out, size_t cap)
{
	char a[INET6_ADDRSTRLEN];

	if (c->bits >= 96 && memcmp(c->addr, config_v4mapped_prefix, 12) == 0) {
		inet_ntop(AF_INET, c->addr + 12, a, sizeof(a));
		snprintf(out, cap, "%s/%u", a, c->bits - 96u);
	} else {
		inet_ntop(AF_INET6, c->addr, a, sizeof(a));
		snprintf(out, cap, "%s/%u", a, (unsigned)c->bits);
	}
}

bool config_cidr_contains(const struct cidr *c, const struct sockaddr *sa)
{
	uint8_t a[16];
	unsigned full, rest;

	if (c == NULL || sa == NULL || c->bits > 128)
		return false;
	if (sa->sa_family == AF_INET) {
		/* Compare in the mapped form the ranges are stored in. */
		memcpy(a, config_v4mapped_prefix, sizeof(config_v4mapped_prefix));
		memcpy(a + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		/* A v4 client on a dual-stack socket arrives as ::ffff:a.b.c.d, which is exactly
		 * the stored form of IPv4 ranges, so it needs no special case. */
		memcpy(a, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	} else {
		return false;
	}
	full = c->bits / 8;
	rest = c->bits % 8;
	if (memcmp(a, c->addr, full) != 0)
		return false;
	if (rest != 0) {
		uint8_t mask = (uint8_t)(0xffu << (8 - rest));

		if ((a[full] & mask) != (c->addr[full] & mask))
			return false;
	}
	return true;
}

/* --- defaults, free, validate -------------------------------------------------------------- */

static void config_agent_init(struct config_agent *a)
{
	memset(a, 0, sizeof(*a));
	a->deny = DENY_NXDOMAIN;
	/* sink4 0.0.0.0 and sink6 :: are the zeroes memset left. */
	a->sink_ttl = 60;
	a->strict_chain = false;
	a->allow_private = false;
}

static void config_forwards_free(struct config_forward **v, size_t *n)
{
	for (size_t i = 0; i < *n; i++)
		free((*v)[i].upstreams);
	free(*v);
	*v = NULL;
	*n = 0;
}

static void config_agent_free(struct config_agent *a)
{
	free(a->client_lines);
	free(a->allow_lines);
	a->client_lines = a->allow_lines = NULL;
	config_forwards_free(&a->forwards, &a->nforwards);
	free(a->clients);
	a->clients = NULL;
	a->nclients = 0;
	config_strv_free(&a->allow_files, &a->nallow);
	config_strv_free(&a->allow_rpz, &a->nallow_rpz);
	free(a->allow_rpz_lines);
	a->allow_rpz_lines = NULL;
}

static void config_rpz_free(struct config *cfg)
{
	for (size_t i = 0; i < cfg->nrpz; i++) {
		free(cfg->rpz[i].file);
		if (cfg->rpz[i].tsig_secret)
			explicit_bzero(cfg->rpz[i].tsig_secret, strlen(cfg->rpz[i].tsig_secret));
		free(cfg->rpz[i].tsig_secret);
	}
	free(cfg->rpz);
	cfg->rpz = NULL;
	cfg->nrpz = 0;
	config_strv_free(&cfg->highrisk_rpz, &cfg->nhighrisk_rpz);
	free(cfg->highrisk_rpz_lines);
	cfg->highrisk_rpz_lines = NULL;
}

static void config_agents_free(struct config *cfg)
{
	size_t i;

	for (i = 0; i < cfg->nagents; i++)
		config_agent_free(&cfg->agents[i]);
	free(cfg->agents);
	cfg->agents = NULL;
	cfg->nagents = 0;
}

void config_init(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->upstream_timeout_ms = 1000;
	cfg->upstream_attempts = 3;
	cfg->tcp_idle_ms = 10000;
	cfg->tcp_max_clients = 1024;
	cfg->tcp_max_queued = 64 * 1024;
	cfg->tcp_max_inflight = 64;
	cfg->inflight_max = 2048;
	cfg->inflight_per_client = 256;
	cfg->workers = 1;
	cfg->fw_timeout_ms = 1000;
	cfg->seccomp = true;
	cfg->cache_bytes = (size_t)32 << 20;
	cfg->cache_min_ttl = 0;
	cfg->cache_max_ttl = 86400;
	/* Failing to record the shipped deny lists must not silently start a resolver without
	 * them, and config_init has no way to report it: out of memory this early is fatal. The
	 * placeholders are pointed at the shipped-lists directory right away. */
	if (config_strv_push(&cfg->highrisk_files, &cfg->nhighrisk, "") != 0 ||
	    config_strv_push(&cfg->range_files, &cfg->nranges, "") != 0 ||
	    zonesdir_apply(cfg, zonesdir_default()) != 0)
		abort();
}

void config_free(struct config *cfg)
{
	if (cfg == NULL)
		return;
	free(cfg->listen);
	free(cfg->upstreams);
	free(cfg->log_file);
	free(cfg->fw_socket);
	free(cfg->user);
	free(cfg->where.file);
	free(cfg->where.listen_lines);
	free(cfg->where.upstream_lines);
	config_forwards_free(&cfg->forwards, &cfg->nforwards);
	config_strv_free(&cfg->local_data, &cfg->nlocal);
	free(cfg->local_lines);
	free(cfg->hosts_lines);
	config_strv_free(&cfg->hosts_files, &cfg->nhosts);
	free(cfg->control_path);
	free(cfg->control_group);
	free(cfg->dnstap_path);
	free(cfg->state_dir);
	config_strv_free(&cfg->highrisk_files, &cfg->nhighrisk);
	config_strv_free(&cfg->range_files, &cfg->nranges);
	config_agents_free(cfg);
	config_rpz_free(cfg);
	memset(cfg, 0, sizeof(*cfg));
}

bool config_name_ok(const char *s, size_t len)
{
	size_t i;

	if (len == 0 || len >= CONFIG_NAME_MAX)
		return false;
	for (i = 0; i < len; i++) {
		char ch = s[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-'))
			return false;
	}
	return true;
}

int config_validate(const struct config *cfg, char *err, size_t errlen)
{
	size_t i, j;

	if (cfg->nlisten == 0) {
		config_errf(err, errlen, "no listen address configured");
		return MOAT_EINVAL;
	}
	if (cfg->nupstreams == 0) {
		config_errf(err, errlen, "no upstream resolver configured");
		return MOAT_EINVAL;
	}
	if (cfg->nagents == 0) {
		config_errf(err, errlen,
		            "no agents configured: without one every client is refused");
		return MOAT_EINVAL;
	}
	/* Flags can set these too, so the file's ranges are checked again here. */
	if (cfg->upstream_timeout_ms < CONFIG_TIMEOUT_MIN ||
	    cfg->upstream_timeout_ms > CONFIG_TIMEOUT_MAX) {
		config_errf(err, errlen, "upstream_timeout_ms must be %u..%u", CONFIG_TIMEOUT_MIN,
		            CONFIG_TIMEOUT_MAX);
		return MOAT_EINVAL;
	}
	if (cfg->upstream_attempts < CONFIG_ATTEMPTS_MIN ||
	    cfg->upstream_attempts > CONFIG_ATTEMPTS_MAX) {
		config_errf(err, errlen, "upstream_attempts must be %u..%u", CONFIG_ATTEMPTS_MIN,
		            CONFIG_ATTEMPTS_MAX);
		return MOAT_EINVAL;
	}
	if (cfg->tcp_idle_ms < CONFIG_IDLE_MIN || cfg->tcp_idle_ms > CONFIG_IDLE_MAX) {
		config_errf(err, errlen, "tcp_idle_ms must be %u..%u", CONFIG_IDLE_MIN,
		            CONFIG_IDLE_MAX);
		return MOAT_EINVAL;
	}
	if (cfg->tcp_max_clients < CONFIG_CLIENTS_MIN ||
	    cfg->tcp_max_clients > CONFIG_CLIENTS_MAX) {
		config_errf(err, errlen, "tcp_max_clients must be %u..%u", CONFIG_CLIENTS_MIN,
		            CONFIG_CLIENTS_MAX);
		return MOAT_EINVAL;
	}
	for (i = 0; i < cfg->nagents; i++) {
		const struct config_agent *a = &cfg->agents[i];
		size_t len = strnlen(a->name, CONFIG_NAME_MAX);

		if (!config_name_ok(a->name, len)) {
			config_errf(err, errlen, "agent %zu has no valid name", i + 1);
			return MOAT_EINVAL;
		}
		if (a->nclients == 0) {
			config_errf(err, errlen, "agent '%s' has no client ranges", a->name);
			return MOAT_EINVAL;
		}
		for (j = 0; j < i; j++) {
			if (strcmp(cfg->agents[j].name, a->name) == 0) {
				config_errf(err, errlen, "duplicate agent name '%s'", a->name);
				return MOAT_EINVAL;
			}
		}
	}
	return config_check_sanity(cfg, err, errlen);
}

/* --- YAML ---------------------------------------------------------------------------------- */

struct config_ctx {
	struct config *cfg;
	const char *label;   /* file name (or caller's label) for errors */
	const char *basedir; /* relative policy paths are joined to it; NULL keeps them as given */
	char *err;
	size_t errlen;
};

static int config_fail(struct config_ctx *c, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int config_allow_rpz(struct config_ctx *c, struct config_agent *a, struct fy_node *v,
                            int line);
static int config_rpz_list(struct config_ctx *c, struct fy_node *v, int line);
static int config_rpz_names(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                            char ***outv, int **lines, size_t *n);

static int config_fail(struct config_ctx *c, int line, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	config_errf(c->err, c->errlen, "%s:%d: %s", c->label, line, msg);
	return MOAT_EINVAL;
}

/* 1-based line of a node. libfyaml 0.7 only exposes marks on tokens, so a collection is placed
 * at its first scalar; an empty one (or a null value, which has no token) at the fallback, the
 * line of the key that owns it. */
static int config_node_line(struct fy_node *n, int fallback)
{
	while (n != NULL) {
		void *it = NULL;

		switch (fy_node_get_type(n)) {
		case FYNT_SCALAR: {
			struct fy_token *t = fy_node_get_scalar_token(n);
			const struct fy_mark *m = t != NULL ? fy_token_start_mark(t) : NULL;

			return m != NULL ? m->line + 1 : fallback;
		}
		case FYNT_SEQUENCE:
			n = fy_node_sequence_iterate(n, &it);
			break;
		case FYNT_MAPPING: {
			struct fy_node_pair *p = fy_node_mapping_iterate(n, &it);

			n = p != NULL ? fy_node_pair_key(p) : NULL;
			break;
		}
		default:
			return fallback;
		}
	}
	return fallback;
}

static bool config_is_alias(struct fy_node *n)
{
	return n != NULL && fy_node_get_type(n) == FYNT_SCALAR &&
	       fy_node_get_style(n) == FYNS_ALIAS;
}

/* YAML's null: an absent value or a plain ~ / null. */
static bool config_is_null(struct fy_node *n)
{
	const char *s = NULL;
	size_t len = 0;

	if (n == NULL)
		return true;
	if (fy_node_get_type(n) != FYNT_SCALAR || fy_node_get_style(n) != FYNS_PLAIN)
		return false;
	s = fy_node_get_scalar(n, &len);
	if (s == NULL || len == 0)
		return true;
	return (len == 1 && s[0] == '~') ||
	       (len == 4 && (memcmp(s, "null", 4) == 0 || memcmp(s, "Null", 4) == 0 ||
	                     memcmp(s, "NULL", 4) == 0));
}

/* The text of a scalar value (not NUL-terminated). `what` completes "expected ...". Aliases are
 * refused everywhere: a config gains nothing from them, and not expanding them keeps a hostile
 * file from growing exponentially. */
static int config_text(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                       const char *what, const char **text, size_t *len)
{
	line = config_node_line(v, line);
	if (config_is_alias(v))
		return config_fail(c, line, "%s: aliases are not supported", key);
	if (config_is_null(v) || fy_node_get_type(v) != FYNT_SCALAR)
		return config_fail(c, line, "%s: expected %s", key, what);
	*text = fy_node_get_scalar(v, len);
	if (*text == NULL)
		return config_fail(c, line, "%s: expected %s", key, what);
	if (memchr(*text, '\0', *len) != NULL)
		return config_fail(c, line, "%s: value contains a NUL byte", key);
	return 0;
}

/* The same as a NUL-terminated copy in buf, for the C parsers that want one. */
static int config_scalar(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                         const char *what, char *buf, size_t buflen)
{
	const char *s = NULL;
	size_t len = 0;
	int rc;

	rc = config_text(c, v, line, key, what, &s, &len);
	if (rc != 0)
		return rc;
	if (len >= buflen)
		return config_fail(c, config_node_line(v, line),
		                   "%s: value too long (%zu bytes, at most %zu)", key, len,
		                   buflen - 1);
	memcpy(buf, s, len);
	buf[len] = '\0';
	return 0;
}

static int config_u32(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                      uint32_t min, uint32_t max, uint32_t *out)
{
	char buf[32];
	uint64_t n;
	int rc;

	rc = config_scalar(c, v, line, key, "a number", buf, sizeof(buf));
	if (rc != 0)
		return rc;
	line = config_node_line(v, line);
	if (!config_parse_uint(buf, strlen(buf), UINT32_MAX, &n)) {
		char q[CONFIG_QUOTE_MAX + 8];

		config_quote(q, sizeof(q), buf, strlen(buf));
		return config_fail(c, line, "%s: expected a number from %u to %u, not '%s'", key,
		                   min, max, q);
	}
	if (n < min || n > max)
		return config_fail(c, line, "%s: %llu is out of range %u..%u", key,
		                   (unsigned long long)n, min, max);
	*out = (uint32_t)n;
	return 0;
}

static int config_bool(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                       bool *out)
{
	static const char *const yes[] = {"true", "True", "TRUE"};
	static const char *const no[] = {"false", "False", "FALSE"};
	const char *s = NULL;
	size_t len, i;
	int rc;

	rc = config_text(c, v, line, key, "true or false", &s, &len);
	if (rc != 0)
		return rc;
	/* Only YAML 1.2's plain booleans: "yes", "on" or a quoted "true" are the sort of thing
	 * that should be spelled out in a security tool's config. */
	if (fy_node_get_style(v) == FYNS_PLAIN) {
		for (i = 0; i < 3; i++) {
			if (len == strlen(yes[i]) && memcmp(s, yes[i], len) == 0) {
				*out = true;
				return 0;
			}
			if (len == strlen(no[i]) && memcmp(s, no[i], len) == 0) {
				*out = false;
				return 0;
			}
		}
	}
	return config_fail(c, config_node_line(v, line), "%s: expected true or false", key);
}

/* A file path from the config. Relative paths are relative to the config file, so a config and
 * its allowlists can be moved together and the daemon's working directory does not matter. */
static int config_path(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                       bool relative_to_config, char **out)
{
	char buf[PATH_MAX];
	char *p;
	int rc;

	rc = config_scalar(c, v, line, key, "a file name", buf, sizeof(buf));
	if (rc != 0)
		return rc;
	if (buf[0] == '\0')
		return config_fail(c, config_node_line(v, line), "%s: empty file name", key);
	if (buf[0] != '/' && relative_to_config && c->basedir != NULL) {
		size_t need = strlen(c->basedir) + 1 + strlen(buf) + 1;

		if (need > PATH_MAX)
			return config_fail(c, config_node_line(v, line), "%s: path too long", key);
		p = malloc(need);
		if (p != NULL)
			snprintf(p, need, "%s/%s", c->basedir, buf);
	} else {
		p = strdup(buf);
	}
	if (p == NULL) {
		config_errf(c->err, c->errlen, "%s: out of memory", c->label);
		return MOAT_ENOMEM;
	}
	*out = p;
	return 0;
}

/* The sequence under a key, or an error naming the key. */
static int config_seq(struct config_ctx *c, struct fy_node *v, int line, const char *key)
{
	if (config_is_alias(v))
		return config_fail(c, config_node_line(v, line), "%s: aliases are not supported",
		                   key);
	if (v == NULL || fy_node_get_type(v) != FYNT_SEQUENCE)
		return config_fail(c, config_node_line(v, line), "%s: expected a list", key);
	return 0;
}

/* A list of file paths. With append, the file's paths come after what is there: the shipped
 * high-risk names and blocked ranges can be extended by operators but never dropped by a typo. */
static int config_paths(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                        char ***outv, size_t *outn, bool append, int **outlines)
{
	char **nv = NULL;
	int *lines = NULL;
	size_t n = 0;
	struct fy_node *item;
	void *it = NULL;
	int rc;

	rc = config_seq(c, v, line, key);
	if (rc != 0)
		return rc;
	while ((item = fy_node_sequence_iterate(v, &it)) != NULL) {
		char *p;
		char **grown;

		rc = config_path(c, item, line, key, true, &p);
		if (rc != 0)
			goto fail;
		grown = realloc(nv, (n + 1) * sizeof(*nv));
		if (grown == NULL) {
			free(p);
			config_errf(c->err, c->errlen, "%s: out of memory", c->label);
			rc = MOAT_ENOMEM;
			goto fail;
		}
		nv = grown;
		int *gl = outlines ? realloc(lines, (n + 1) * sizeof(*lines)) : NULL;
		if (gl)
			(lines = gl)[n] = config_node_line(item, line);
		nv[n++] = p;
	}
	if (append) {
		for (size_t i = 0; i < n; i++) {
			rc = config_strv_push(outv, outn, nv[i]);
			if (rc != 0) {
				config_errf(c->err, c->errlen, "%s: out of memory", c->label);
				goto fail;
			}
		}
		config_strv_free(&nv, &n);
		return 0;
	}
	config_strv_free(outv, outn);
	*outv = nv;
	*outn = n;
	if (outlines) {
		free(*outlines);
		*outlines = lines; /* NULL (lines unknown) if it could not grow */
	}
	return 0;
fail:
	free(lines);
	config_strv_free(&nv, &n);
	return rc;
}

/* An address that failed to parse only because its port is 0 ("1.2.3.4:0", "[::1]:0"): worth
 * its own message, since "bad address" sends the operator looking at the address. */
static bool config_port_zero(const char *s)
{
	size_t n = strlen(s);
	if (n < 3 || strcmp(s + n - 2, ":0") != 0)
		return false;
	return s[n - 3] == ']' || memchr(s, ':', n - 2) == NULL;
}

static int config_addrports(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                            struct sockaddr_storage **outv, size_t *outn, int **outlines)
{
	struct sockaddr_storage *nv;
	int *lines;
	size_t n = 0, count;
	struct fy_node *item;
	void *it = NULL;
	int rc;

	rc = config_seq(c, v, line, key);
	if (rc != 0)
		return rc;
	count = (size_t)fy_node_sequence_item_count(v);
	nv = calloc(count > 0 ? count : 1, sizeof(*nv));
	lines = calloc(count > 0 ? count : 1, sizeof(*lines));
	if (nv == NULL || lines == NULL) {
		free(nv);
		free(lines);
		config_errf(c->err, c->errlen, "%s: out of memory", c->label);
		return MOAT_ENOMEM;
	}
	while ((item = fy_node_sequence_iterate(v, &it)) != NULL && n < count) {
		char buf[INET6_ADDRSTRLEN + 16];

		rc = config_scalar(c, item, line, key, "an address", buf, sizeof(buf));
		if (rc != 0)
			goto fail;
		if (config_parse_addrport(buf, 53, &nv[n]) != 0) {
			char q[CONFIG_QUOTE_MAX + 8];

			config_quote(q, sizeof(q), buf, strlen(buf));
			rc =
			    config_port_zero(buf)
			        ? config_fail(c, config_node_line(item, line),
			                      "%s: '%s': port 0 is not a port (1 to 65535)", key, q)
			        : config_fail(c, config_node_line(item, line),
			                      "%s: bad address '%s' (expected IP, IP:PORT or "
			                      "[IPv6]:PORT)",
			                      key, q);
			goto fail;
		}
		lines[n] = config_node_line(item, line);
		n++;
	}
	free(*outv);
	*outv = nv;
	*outn = n;
	free(*outlines);
	*outlines = lines;
	return 0;
fail:
	free(nv);
	free(lines);
	return rc;
}

/* A key given twice in one mapping: named, with both lines (libfyaml is told to allow them so
 * that this message, not its bare "duplicate key", is what the operator sees). */
static int config_dup_keys(struct config_ctx *c, struct fy_node *m, int line)
{
	struct fy_node_pair *a, *b;
	void *ia = NULL;

	/* Pairs are compared with each other: bound the work (no moatd mapping has 100 keys). */
	if (fy_node_mapping_item_count(m) > 100)
		return config_fail(c, config_node_line(m, line),
		                   "a mapping of %d keys: not a moatd config",
		                   fy_node_mapping_item_count(m));

	while ((a = fy_node_mapping_iterate(m, &ia)) != NULL) {
		struct fy_node *ka = fy_node_pair_key(a);
		size_t la = 0, lb = 0;
		const char *sa =
		    ka && fy_node_get_type(ka) == FYNT_SCALAR ? fy_node_get_scalar(ka, &la) : NULL;
		void *ib = NULL;

		if (sa == NULL)
			continue;
		while ((b = fy_node_mapping_iterate(m, &ib)) != NULL && b != a) {
			struct fy_node *kb = fy_node_pair_key(b);
			const char *sb = kb && fy_node_get_type(kb) == FYNT_SCALAR
			                     ? fy_node_get_scalar(kb, &lb)
			                     : NULL;
			if (sb != NULL && la == lb && memcmp(sa, sb, la) == 0) {
				char q[CONFIG_QUOTE_MAX + 8];

				config_quote(q, sizeof(q), sa, la);
				return config_fail(c, config_node_line(ka, line),
				                   "duplicate key '%s' (first at line %d)", q,
				                   config_node_line(kb, line));
			}
		}
	}
	return 0;
}

/* Read a mapping key as text; non-scalar keys get an error. */
static int config_key(struct config_ctx *c, struct fy_node *k, int line, const char **ks,
                      size_t *klen)
{
	if (k == NULL || fy_node_get_type(k) != FYNT_SCALAR || config_is_alias(k))
		return config_fail(c, config_node_line(k, line), "expected a key name");
	*ks = fy_node_get_scalar(k, klen);
	if (*ks == NULL) {
		*ks = "";
		*klen = 0;
	}
	return 0;
}

static int config_unknown(struct config_ctx *c, int line, const char *ks, size_t klen)
{
	char q[CONFIG_QUOTE_MAX + 8];

	config_quote(q, sizeof(q), ks, klen);
	return config_fail(c, line, "unknown key '%s'", q);
}

static int config_log(struct config_ctx *c, struct fy_node *v, int line)
{
	struct fy_node_pair *pair;
	void *it = NULL;

	if (config_is_null(v))
		return 0;
	if (config_is_alias(v))
		return config_fail(c, config_node_line(v, line), "log: aliases are not supported");
	if (fy_node_get_type(v) != FYNT_MAPPING)
		return config_fail(c, config_node_line(v, line), "log: expected a mapping");
	if (config_dup_keys(c, v, line) != 0)
		return MOAT_EINVAL;
	while ((pair = fy_node_mapping_iterate(v, &it)) != NULL) {
		struct fy_node *k = fy_node_pair_key(pair);
		struct fy_node *val = fy_node_pair_value(pair);
		int kline = config_node_line(k, line);
		const char *ks = NULL;
		size_t klen = 0;
		int rc;

		rc = config_key(c, k, line, &ks, &klen);
		if (rc != 0)
			return rc;
		if (config_key_is(ks, klen, "file")) {
			char *p;

			free(c->cfg->log_file);
			c->cfg->log_file = NULL;
			if (config_is_null(val))
				continue;
			/* The log file is kept as written: it is an output the service manager
			 * usually places, not data that travels with the config. */
			rc = config_path(c, val, kline, "log.file", false, &p);
			if (rc != 0)
				return rc;
			if (strcmp(p, "-") == 0) {
				free(p);
				continue;
			}
			c->cfg->log_file = p;
			continue;
		}
		return config_unknown(c, kline, ks, klen);
	}
	return 0;
}

/* state_dir: where moatd keeps the agents added at runtime (agentstore.c), relative to the
 * config like the lists. */
static int config_state_dir(struct config_ctx *c, struct fy_node *v, int line)
{
	free(c->cfg->state_dir);
	c->cfg->state_dir = NULL;
	return config_path(c, v, line, "state_dir", true, &c->cfg->state_dir);
}

/* dnstap: {file: PATH} or {socket: PATH}; exactly one of them. */
static int config_dnstap(struct config_ctx *c, struct fy_node *v, int line)
{
	struct fy_node_pair *pair;
	void *it = NULL;
	if (config_is_alias(v) || fy_node_get_type(v) != FYNT_MAPPING ||
	    fy_node_mapping_item_count(v) != 1)
		return config_fail(c, config_node_line(v, line),
		                   "dnstap: expected {file: PATH} or {socket: PATH}");
	pair = fy_node_mapping_iterate(v, &it);
	struct fy_node *k = fy_node_pair_key(pair);
	int kline = config_node_line(k, line);
	const char *ks = NULL;
	size_t klen = 0;
	int rc = config_key(c, k, line, &ks, &klen);
	if (rc != 0)
		return rc;
	bool sock = config_key_is(ks, klen, "socket");
	if (!sock && !config_key_is(ks, klen, "file"))
		return config_unknown(c, kline, ks, klen);
	free(c->cfg->dnstap_path);
	c->cfg->dnstap_path = NULL;
	c->cfg->dnstap_socket = sock;
	return config_path(c, fy_node_pair_value(pair), kline,
	                   sock ? "dnstap.socket" : "dnstap.file", false, &c->cfg->dnstap_path);
}

static int config_sinkhole(struct config_ctx *c, struct config_agent *a, struct fy_node *v,
                           int line)
{
	struct fy_node *item;
	void *it = NULL;
	bool have4 = false, have6 = false;
	uint8_t s4[4], s6[16];
	int rc;

	rc = config_seq(c, v, line, "sinkhole");
	if (rc != 0)
		return rc;
	if (fy_node_sequence_item_count(v) < 1)
		return config_fail(c, config_node_line(v, line),
		                   "sinkhole: expected one IPv4 and/or one IPv6 address");
	while ((item = fy_node_sequence_iterate(v, &it)) != NULL) {
		char buf[INET6_ADDRSTRLEN];
		int iline = config_node_line(item, line);

		rc = config_scalar(c, item, line, "sinkhole", "an address", buf, sizeof(buf));
		if (rc != 0)
			return rc;
		if (inet_pton(AF_INET, buf, s4) == 1) {
			if (have4)
				return config_fail(c, iline,
				                   "sinkhole: more than one IPv4 address "
				                   "(expected one IPv4 and/or one IPv6)");
			have4 = true;
		} else if (inet_pton(AF_INET6, buf, s6) == 1) {
			if (have6)
				return config_fail(c, iline,
				                   "sinkhole: more than one IPv6 address "
				                   "(expected one IPv4 and/or one IPv6)");
			have6 = true;
		} else {
			char q[CONFIG_QUOTE_MAX + 8];

			config_quote(q, sizeof(q), buf, strlen(buf));
			return config_fail(c, iline, "sinkhole: bad address '%s'", q);
		}
	}
	/* A family left out keeps its default (0.0.0.0 or ::). */
	if (have4)
		memcpy(a->sink4, s4, sizeof(s4));
	if (have6)
		memcpy(a->sink6, s6, sizeof(s6));
	return 0;
}

static int config_clients(struct config_ctx *c, struct config_agent *a, struct fy_node *v, int line)
{
	struct cidr *nv;
	size_t n = 0, count;
	struct fy_node *item;
	void *it = NULL;
	int rc;

	rc = config_seq(c, v, line, "clients");
	if (rc != 0)
		return rc;
	count = (size_t)fy_node_sequence_item_count(v);
	nv = calloc(count > 0 ? count : 1, sizeof(*nv));
	if (nv == NULL) {
		config_errf(c->err, c->errlen, "%s: out of memory", c->label);
		return MOAT_ENOMEM;
	}
	free(a->client_lines);
	a->client_lines = calloc(count > 0 ? count : 1, sizeof(int));
	while ((item = fy_node_sequence_iterate(v, &it)) != NULL && n < count) {
		char buf[INET6_ADDRSTRLEN + 8];
		char q[CONFIG_QUOTE_MAX + 8];
		bool host_bits;

		rc = config_scalar(c, item, line, "clients", "an address range", buf, sizeof(buf));
		if (rc != 0)
			goto fail;
		if (config_cidr_parse(buf, &nv[n], &host_bits) != 0) {
			config_quote(q, sizeof(q), buf, strlen(buf));
			rc = config_fail(c, config_node_line(item, line),
			                 host_bits ? "clients: '%s' has host bits set"
			                           : "clients: bad address range '%s'",
			                 q);
			goto fail;
		}
		if (a->client_lines)
			a->client_lines[n] = config_node_line(item, line);
		n++;
	}
	free(a->clients);
	a->clients = nv;
	a->nclients = n;
	return 0;
fail:
	free(nv);
	return rc;
}

/* --- forward zones and local answers ------------------------------------------------------ */

static int config_forward_one(struct config_ctx *c, struct fy_node *m, int line,
                              struct config_forward *f)
{
	struct fy_node_pair *pair;
	void *it = NULL;
	int fline = config_node_line(m, line), rc;
	bool zoned = false;

	if (config_is_alias(m) || m == NULL || fy_node_get_type(m) != FYNT_MAPPING)
		return config_fail(c, fline, "forward: expected {zone: NAME, upstreams: [...]}");
	if (config_dup_keys(c, m, fline) != 0)
		return MOAT_EINVAL;
	f->line = fline;
	while ((pair = fy_node_mapping_iterate(m, &it)) != NULL) {
		struct fy_node *k = fy_node_pair_key(pair), *v = fy_node_pair_value(pair);
		int kline = config_node_line(k, fline);
		const char *ks = NULL;
		size_t klen = 0;
		int *lines = NULL;

		if ((rc = config_key(c, k, fline, &ks, &klen)) != 0)
			return rc;
		if (config_key_is(ks, klen, "zone")) {
			char buf[IDN_MAXTEXT], conv[IDN_MAXTEXT], why[160], q[CONFIG_QUOTE_MAX + 8];
			const char *t = buf;
			if ((rc = config_scalar(c, v, kline, "zone", "a domain name", buf,
			                        sizeof(buf))) != 0)
				return rc;
			int n =
			    idn_from_user(buf, strlen(buf), conv, sizeof(conv), why, sizeof(why));
			config_quote(q, sizeof(q), buf, strlen(buf));
			if (n < 0)
				return config_fail(c, config_node_line(v, kline), "zone: '%s': %s",
				                   q, why);
			if (n > 0)
				t = conv;
			if (name_from_text(t, strlen(t), f->zone) <= 1)
				return config_fail(c, config_node_line(v, kline),
				                   "zone: '%s' is not a domain name below the root",
				                   q);
			zoned = true;
		} else if (config_key_is(ks, klen, "upstreams")) {
			rc = config_addrports(c, v, kline, "forward.upstreams", &f->upstreams,
			                      &f->nupstreams, &lines);
			free(lines);
		} else if (config_key_is(ks, klen, "timeout_ms")) {
			rc = config_u32(c, v, kline, "timeout_ms", CONFIG_TIMEOUT_MIN,
			                CONFIG_TIMEOUT_MAX, &f->timeout_ms);
		} else if (config_key_is(ks, klen, "attempts")) {
			rc = config_u32(c, v, kline, "attempts", CONFIG_ATTEMPTS_MIN,
			                CONFIG_ATTEMPTS_MAX, &f->attempts);
		} else if (config_key_is(ks, klen, "allow_private")) {
			rc = config_bool(c, v, kline, "allow_private", &f->allow_private);
		} else {
			return config_unknown(c, kline, ks, klen);
		}
		if (rc != 0)
			return rc;
	}
	if (!zoned)
		return config_fail(c, fline, "forward: entry without a zone");
	if (f->nupstreams == 0)
		return config_fail(c, fline, "forward: zone without upstreams");
	return 0;
}

/* forward: at the top level or in an agent. The same zone twice in one list is an error (which
 * one would win is not obvious); the same zone in an agent and at the top is the agent's. */
static int config_forwards(struct config_ctx *c, struct fy_node *v, int line,
                           struct config_forward **outv, size_t *outn)
{
	struct fy_node *item;
	void *it = NULL;
	int rc = config_seq(c, v, line, "forward");
	size_t count;

	if (rc != 0)
		return rc;
	config_forwards_free(outv, outn);
	count = (size_t)fy_node_sequence_item_count(v);
	if (count == 0)
		return 0;
	if ((*outv = calloc(count, sizeof(**outv))) == NULL)
		return config_fail(c, line, "out of memory");
	while ((item = fy_node_sequence_iterate(v, &it)) != NULL && *outn < count) {
		struct config_forward *f = &(*outv)[(*outn)++];
		if ((rc = config_forward_one(c, item, line, f)) != 0)
			return rc;
		for (size_t i = 0; i + 1 < *outn; i++)
			if (name_equal((*outv)[i].zone, f->zone))
				return config_fail(c, f->line,
				                   "forward: zone listed twice (first at "
				                   "line %d)",
				                   (*outv)[i].line);
	}
	return 0;
}

/* A list of strings with their lines (local_data lines, hosts files). */
static int config_lines_list(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                             bool paths, char ***outv, int **outlines, size_t *outn)
{
	struct fy_node *item;
	void *it = NULL;
	int rc = config_seq(c, v, line, key);

	if (rc != 0)
		return rc;
	while ((item = fy_node_sequence_iterate(v, &it)) != NULL) {
		char buf[1024], *p = NULL;
		int *nl = realloc(*outlines, (*outn + 1) * sizeof(**outlines));
		if (nl == NULL)
			return config_fail(c, line, "out of memory");
		*outlines = nl;
		if (paths)
			rc = config_path(c, item, line, key, true, &p);
		else if ((rc = config_scalar(c, item, line, key, "a record", buf, sizeof(buf))) ==
		         0)
			p = strdup(buf);
		if (rc != 0)
			return rc;
		nl[*outn] = config_node_line(item, line);
		size_t n = *outn;
		rc = p ? config_strv_push(outv, &n, p) : MOAT_ENOMEM;
		free(p);
		if (rc != 0)
			return config_fail(c, line, "out of memory");
		*outn = n;
	}
	return 0;
}

static int config_agent(struct config_ctx *c, struct config_agent *a, size_t index,
                        struct fy_node *m, int line)
{
	struct fy_node_pair *pair;
	void *it = NULL;
	bool named = false;
	int aline = config_node_line(m, line);
	int rc;

	a->line = aline;
	if (config_is_alias(m))
		return config_fail(c, aline, "agents: aliases are not supported");
	if (m == NULL || fy_node_get_type(m) != FYNT_MAPPING)
		return config_fail(c, aline, "agents: each agent must be a mapping with a name");
	if (config_dup_keys(c, m, aline) != 0)
		return MOAT_EINVAL;

	while ((pair = fy_node_mapping_iterate(m, &it)) != NULL) {
		struct fy_node *k = fy_node_pair_key(pair);
		struct fy_node *v = fy_node_pair_value(pair);
		int kline = config_node_line(k, aline);
		const char *ks = NULL;
		size_t klen = 0;

		rc = config_key(c, k, aline, &ks, &klen);
		if (rc != 0)
			return rc;
		if (config_key_is(ks, klen, "name")) {
			char buf[CONFIG_NAME_MAX + 1];
			size_t i;

			rc = config_scalar(c, v, kline, "name", "an agent name", buf, sizeof(buf));
			if (rc != 0)
				return rc;
			if (!config_name_ok(buf, strlen(buf))) {
				char q[CONFIG_QUOTE_MAX + 8];

				config_quote(q, sizeof(q), buf, strlen(buf));
				return config_fail(c, config_node_line(v, kline),
				                   "name: bad agent name '%s' (1 to %d of "
				                   "A-Z a-z 0-9 _ . -)",
				                   q, CONFIG_NAME_MAX - 1);
			}
			/* Agent names key logs and decisions; two agents with one name would make
			 * both ambiguous. */
			for (i = 0; i < index; i++) {
				if (strcmp(c->cfg->agents[i].name, buf) == 0)
					return config_fail(c, config_node_line(v, kline),
					                   "duplicate agent name '%s'", buf);
			}
			memcpy(a->name, buf, strlen(buf) + 1);
			named = true;
		} else if (config_key_is(ks, klen, "clients")) {
			rc = config_clients(c, a, v, kline);
		} else if (config_key_is(ks, klen, "allow")) {
			rc = config_paths(c, v, kline, "allow", &a->allow_files, &a->nallow, false,
			                  &a->allow_lines);
			if (rc == 0)
				rc = config_allow_rpz(c, a, v, kline);
		} else if (config_key_is(ks, klen, "deny")) {
			const char *s = NULL;
			size_t len = 0;

			rc = config_text(c, v, kline, "deny", "nxdomain, refused or sinkhole", &s,
			                 &len);
			if (rc != 0)
				return rc;
			if (config_key_is(s, len, "nxdomain"))
				a->deny = DENY_NXDOMAIN;
			else if (config_key_is(s, len, "refused"))
				a->deny = DENY_REFUSED;
			else if (config_key_is(s, len, "sinkhole"))
				a->deny = DENY_SINKHOLE;
			else
				return config_fail(c, config_node_line(v, kline),
				                   "deny: expected nxdomain, refused or sinkhole");
		} else if (config_key_is(ks, klen, "sinkhole")) {
			rc = config_sinkhole(c, a, v, kline);
			a->sink_line = config_node_line(v, kline);
		} else if (config_key_is(ks, klen, "sinkhole_ttl")) {
			rc = config_u32(c, v, kline, "sinkhole_ttl", 0, CONFIG_TTL_MAX,
			                &a->sink_ttl);
		} else if (config_key_is(ks, klen, "strict_chain")) {
			rc = config_bool(c, v, kline, "strict_chain", &a->strict_chain);
		} else if (config_key_is(ks, klen, "allow_private")) {
			rc = config_bool(c, v, kline, "allow_private", &a->allow_private);
		} else if (config_key_is(ks, klen, "forward")) {
			rc = config_forwards(c, v, kline, &a->forwards, &a->nforwards);
		} else {
			return config_unknown(c, kline, ks, klen);
		}
		if (rc != 0)
			return rc;
	}
	if (!named)
		return config_fail(c, aline, "agents: agent without a name");
	/* Checked here as well as in config_validate so the error carries a line number. */
	if (a->nclients == 0)
		return config_fail(c, aline, "agent '%s' has no clients", a->name);
	return 0;
}

static int config_agents(struct config_ctx *c, struct fy_node *v, int line)
{
	struct config *cfg = c->cfg;
	struct fy_node *item;
	void *it = NULL;
	size_t count;
	int rc;

	rc = config_seq(c, v, line, "agents");
	if (rc != 0)
		return rc;
	config_agents_free(cfg);
	count = (size_t)fy_node_sequence_item_count(v);
	if (count == 0)
		return 0;
	cfg->agents = calloc(count, sizeof(*cfg->agents));
	if (cfg->agents == NULL) {
		config_errf(c->err, c->errlen, "%s: out of memory", c->label);
		return MOAT_ENOMEM;
	}
	while ((item = fy_node_sequence_iterate(v, &it)) != NULL && cfg->nagents < count) {
		struct config_agent *a = &cfg->agents[cfg->nagents];

		config_agent_init(a);
		/* Counted before parsing so config_free releases a half-read agent. */
		cfg->nagents++;
		rc = config_agent(c, a, cfg->nagents - 1, item, line);
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* The keys of compiled and signed policy (moat/policy_file.h, moat/policy_sig.h). True if ks is
 * one of them; *rc is then its result. The public key is read here so a bad one is an error at
 * its line. */
static bool config_policy_file_key(struct config_ctx *c, struct fy_node *v, int line,
                                   const char *ks, size_t klen, int *rc)
{
	struct config *cfg = c->cfg;
	if (config_key_is(ks, klen, "policy_pubkey")) {
		char *path = NULL, why[512];
		*rc = config_path(c, v, line, "policy_pubkey", true, &path);
		if (*rc == 0 && policy_sig_read_key(path, cfg->policy_pubkey, 32, why, sizeof(why)))
			*rc = config_fail(c, config_node_line(v, line), "policy_pubkey: %s", why);
		cfg->has_policy_pubkey = *rc == 0;
		free(path);
		return true;
	}
	if (config_key_is(ks, klen, "policy_verify")) {
		char mode[16];
		*rc = config_scalar(c, v, line, "policy_verify", "lazy, full or quick", mode,
		                    sizeof(mode));
		if (*rc == 0 && strcmp(mode, "lazy") && strcmp(mode, "full") && strcmp(mode, "quick"))
			*rc = config_fail(c, config_node_line(v, line),
			                  "policy_verify: expected lazy, full or quick");
		cfg->policy_verify_quick = *rc == 0 && strcmp(mode, "quick") == 0;
		cfg->policy_verify_full = *rc == 0 && strcmp(mode, "full") == 0;
		return true;
	}
	return false;
}

static int config_root(struct config_ctx *c, struct fy_node *root)
{
	struct config *cfg = c->cfg;
	struct fy_node_pair *pair;
	void *it = NULL;
	int rc;

	/* An empty file is a config of defaults; config_validate will say what is missing. */
	if (config_is_null(root))
		return 0;
	if (config_is_alias(root) || fy_node_get_type(root) != FYNT_MAPPING)
		return config_fail(c, config_node_line(root, 1), "expected a mapping of keys");
	if (config_dup_keys(c, root, 1) != 0)
		return MOAT_EINVAL;
	free(cfg->where.file);
	if ((cfg->where.file = strdup(c->label)) == NULL)
		return config_fail(c, 1, "out of memory");

	while ((pair = fy_node_mapping_iterate(root, &it)) != NULL) {
		struct fy_node *k = fy_node_pair_key(pair);
		struct fy_node *v = fy_node_pair_value(pair);
		int line = config_node_line(k, 1);
		const char *ks = NULL;
		size_t klen = 0;

		rc = config_key(c, k, 1, &ks, &klen);
		if (rc != 0)
			return rc;
		if (config_key_is(ks, klen, "listen")) {
			rc = config_addrports(c, v, line, "listen", &cfg->listen, &cfg->nlisten,
			                      &cfg->where.listen_lines);
			cfg->where.listen_for = cfg->listen;
		} else if (config_key_is(ks, klen, "upstreams")) {
			rc = config_addrports(c, v, line, "upstreams", &cfg->upstreams,
			                      &cfg->nupstreams, &cfg->where.upstream_lines);
			cfg->where.upstream_for = cfg->upstreams;
		} else if (config_key_is(ks, klen, "upstream_source")) {
			char buf[INET6_ADDRSTRLEN];

			/* An address only: the source port stays kernel-chosen and random, which
			 * is part of what makes forged upstream answers hard to land. */
			rc = config_scalar(c, v, line, "upstream_source", "an address", buf,
			                   sizeof(buf));
			if (rc == 0 && config_parse_addr(buf, &cfg->upstream_source, 0) != 0) {
				char q[CONFIG_QUOTE_MAX + 8];

				config_quote(q, sizeof(q), buf, strlen(buf));
				rc =
				    config_fail(c, config_node_line(v, line),
				                "upstream_source: bad address '%s' (an IP address, "
				                "no port)",
				                q);
			}
			if (rc == 0)
				cfg->has_upstream_source = true;
		} else if (config_key_is(ks, klen, "upstream_timeout_ms")) {
			rc = config_u32(c, v, line, "upstream_timeout_ms", CONFIG_TIMEOUT_MIN,
			                CONFIG_TIMEOUT_MAX, &cfg->upstream_timeout_ms);
		} else if (config_key_is(ks, klen, "upstream_attempts")) {
			rc = config_u32(c, v, line, "upstream_attempts", CONFIG_ATTEMPTS_MIN,
			                CONFIG_ATTEMPTS_MAX, &cfg->upstream_attempts);
		} else if (config_key_is(ks, klen, "tcp_idle_ms")) {
			rc = config_u32(c, v, line, "tcp_idle_ms", CONFIG_IDLE_MIN, CONFIG_IDLE_MAX,
			                &cfg->tcp_idle_ms);
		} else if (config_key_is(ks, klen, "tcp_max_clients")) {
			rc = config_u32(c, v, line, "tcp_max_clients", CONFIG_CLIENTS_MIN,
			                CONFIG_CLIENTS_MAX, &cfg->tcp_max_clients);
		} else if (config_key_is(ks, klen, "tcp_max_queued")) {
			rc = config_u32(c, v, line, "tcp_max_queued", 1024, 16u << 20,
			                &cfg->tcp_max_queued);
		} else if (config_key_is(ks, klen, "tcp_max_inflight")) {
			rc = config_u32(c, v, line, "tcp_max_inflight", 1, 65535,
			                &cfg->tcp_max_inflight);
		} else if (config_key_is(ks, klen, "inflight_max")) {
			rc = config_u32(c, v, line, "inflight_max", 1, 1000000, &cfg->inflight_max);
		} else if (config_key_is(ks, klen, "inflight_per_client")) {
			rc = config_u32(c, v, line, "inflight_per_client", 1, 1000000,
			                &cfg->inflight_per_client);
		} else if (config_key_is(ks, klen, "user")) {
			char u[64];
			rc = config_scalar(c, v, line, "user", "a user name", u, sizeof(u));
			cfg->where.user = config_node_line(v, line);
			if (rc == 0) {
				free(cfg->user);
				if (!(cfg->user = strdup(u)))
					rc = config_fail(c, line, "out of memory");
			}
		} else if (config_key_is(ks, klen, "serve_stale")) {
			rc = config_u32(c, v, line, "serve_stale", 0, CONFIG_STALE_MAX,
			                &cfg->serve_stale);
		} else if (config_key_is(ks, klen, "workers")) {
			rc =
			    config_u32(c, v, line, "workers", 1, CONFIG_WORKERS_MAX, &cfg->workers);
		} else if (config_key_is(ks, klen, "seccomp")) {
			rc = config_bool(c, v, line, "seccomp", &cfg->seccomp);
		} else if (config_key_is(ks, klen, "ratelimit_qps")) {
			rc = config_u32(c, v, line, "ratelimit_qps", 0, 10000000, &cfg->rl_qps);
		} else if (config_key_is(ks, klen, "ratelimit_burst")) {
			rc = config_u32(c, v, line, "ratelimit_burst", 0, 10000000, &cfg->rl_burst);
		} else if (config_key_is(ks, klen, "ratelimit_action")) {
			char act[16];
			rc = config_scalar(c, v, line, "ratelimit_action", "refuse or drop", act,
			                   sizeof(act));
			if (rc == 0 && strcmp(act, "drop") == 0)
				cfg->rl_drop = true;
			else if (rc == 0 && strcmp(act, "refuse") == 0)
				cfg->rl_drop = false;
			else if (rc == 0)
				rc = config_fail(c, config_node_line(v, line),
				                 "ratelimit_action: expected refuse or drop");
		} else if (config_key_is(ks, klen, "cache_size_mb")) {
			uint32_t mb;
			rc = config_u32(c, v, line, "cache_size_mb", 0, 65536, &mb);
			if (rc == 0)
				cfg->cache_bytes = (size_t)mb << 20;
		} else if (config_key_is(ks, klen, "cache_min_ttl")) {
			rc =
			    config_u32(c, v, line, "cache_min_ttl", 0, 604800, &cfg->cache_min_ttl);
			cfg->where.cache_min_ttl = config_node_line(v, line);
		} else if (config_key_is(ks, klen, "cache_max_ttl")) {
			rc =
			    config_u32(c, v, line, "cache_max_ttl", 0, 604800, &cfg->cache_max_ttl);
		} else if (config_key_is(ks, klen, "firewall_socket")) {
			free(cfg->fw_socket);
			cfg->fw_socket = NULL;
			rc = config_path(c, v, line, "firewall_socket", false, &cfg->fw_socket);
		} else if (config_key_is(ks, klen, "firewall_timeout_ms")) {
			rc = config_u32(c, v, line, "firewall_timeout_ms", 10, 60000,
			                &cfg->fw_timeout_ms);
		} else if (config_key_is(ks, klen, "firewall_fail_open")) {
			rc = config_bool(c, v, line, "firewall_fail_open", &cfg->fw_fail_open);
		} else if (config_key_is(ks, klen, "log")) {
			rc = config_log(c, v, line);
			cfg->where.log = config_node_line(v, line);
		} else if (config_key_is(ks, klen, "control")) {
			free(cfg->control_path);
			cfg->control_path = NULL;
			rc = config_path(c, v, line, "control", false, &cfg->control_path);
		} else if (config_key_is(ks, klen, "control_group")) {
			char g[CONFIG_NAME_MAX];
			rc = config_scalar(c, v, line, "control_group", "a group name", g,
			                   sizeof(g));
			free(cfg->control_group);
			cfg->control_group = rc == 0 ? strdup(g) : NULL;
		} else if (config_key_is(ks, klen, "metrics")) {
			char a[INET6_ADDRSTRLEN + 16];
			rc = config_scalar(c, v, line, "metrics", "ADDR:PORT", a, sizeof(a));
			if (rc == 0 && config_parse_addrport(a, 0, &cfg->metrics_addr) < 0)
				rc = config_fail(c, config_node_line(v, line),
				                 "metrics: expected ADDR:PORT");
			cfg->has_metrics = rc == 0;
		} else if (config_key_is(ks, klen, "dnstap")) {
			rc = config_dnstap(c, v, line);
		} else if (config_key_is(ks, klen, "state_dir")) {
			rc = config_state_dir(c, v, line);
		} else if (config_key_is(ks, klen, "highrisk")) {
			rc = config_paths(c, v, line, "highrisk", &cfg->highrisk_files,
			                  &cfg->nhighrisk, true, NULL);
		} else if (config_key_is(ks, klen, "blocked_ranges")) {
			rc = config_paths(c, v, line, "blocked_ranges", &cfg->range_files,
			                  &cfg->nranges, true, NULL);
		} else if (config_key_is(ks, klen, "zones_dir")) {
			char *dir = NULL;
			rc = config_path(c, v, line, "zones_dir", true, &dir);
			if (rc == 0 && zonesdir_apply(cfg, dir) != 0)
				rc = config_fail(c, line, "out of memory");
			free(dir);
		} else if (config_key_is(ks, klen, "agents")) {
			rc = config_agents(c, v, line);
		} else if (config_key_is(ks, klen, "forward")) {
			rc = config_forwards(c, v, line, &cfg->forwards, &cfg->nforwards);
		} else if (config_policy_file_key(c, v, line, ks, klen, &rc)) {
			/* policy_pubkey, policy_verify */
		} else if (config_key_is(ks, klen, "local_data")) {
			rc = config_lines_list(c, v, line, "local_data", false, &cfg->local_data,
			                       &cfg->local_lines, &cfg->nlocal);
		} else if (config_key_is(ks, klen, "rpz")) {
			rc = config_rpz_list(c, v, line);
		} else if (config_key_is(ks, klen, "highrisk_rpz")) {
			rc = config_rpz_names(c, v, line, "highrisk_rpz", &cfg->highrisk_rpz,
			                      &cfg->highrisk_rpz_lines, &cfg->nhighrisk_rpz);
		} else if (config_key_is(ks, klen, "hosts")) {
			rc = config_lines_list(c, v, line, "hosts", true, &cfg->hosts_files,
			                       &cfg->hosts_lines, &cfg->nhosts);
		} else {
			return config_unknown(c, line, ks, klen);
		}
		if (rc != 0)
			return rc;
	}
	return 0;
}

/* --- RPZ zones ------------------------------------------------------------------------------ */

/* Append a zone name to a list (the zones are matched by name at policy load). */
static int config_rpz_push(struct config_ctx *c, const char *name, int line, char ***v, int **lines,
                           size_t *n)
{
	int *nl = realloc(*lines, (*n + 1) * sizeof(**lines));
	if (!nl)
		return config_fail(c, line, "out of memory");
	*lines = nl;
	nl[*n] = line;
	if (config_strv_push(v, n, name) != 0)
		return config_fail(c, line, "out of memory");
	return 0;
}

/* highrisk_rpz: [NAME...] */
static int config_rpz_names(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                            char ***outv, int **lines, size_t *n)
{
	struct fy_node *item;
	void *it = NULL;
	int rc = config_seq(c, v, line, key);
	while (!rc && (item = fy_node_sequence_iterate(v, &it)) != NULL) {
		char buf[CONFIG_NAME_MAX];
		int l = config_node_line(item, line);
		rc = config_scalar(c, item, line, key, "an rpz zone name", buf, sizeof(buf));
		if (!rc)
			rc = config_rpz_push(c, buf, l, outv, lines, n);
	}
	return rc;
}

/* An allow: entry "rpz:NAME" names an RPZ zone, not a file: config_paths made it a path, which
 * is taken back out of the agent's files here (the list is walked in the same order). */
static int config_allow_rpz(struct config_ctx *c, struct config_agent *a, struct fy_node *v,
                            int line)
{
	struct fy_node *item;
	void *it = NULL;
	size_t k = 0, keep = 0;
	while ((item = fy_node_sequence_iterate(v, &it)) != NULL && k < a->nallow) {
		size_t len = 0;
		const char *s = fy_node_get_scalar(item, &len);
		if (s && len > 4 && !memcmp(s, "rpz:", 4)) {
			char name[CONFIG_NAME_MAX];
			int l = config_node_line(item, line);
			if (len - 4 >= sizeof(name) || !config_name_ok(s + 4, len - 4))
				return config_fail(c, l, "allow: bad rpz zone name");
			memcpy(name, s + 4, len - 4);
			name[len - 4] = 0;
			free(a->allow_files[k++]);
			if (config_rpz_push(c, name, l, &a->allow_rpz, &a->allow_rpz_lines,
			                    &a->nallow_rpz))
				return MOAT_EINVAL;
			continue;
		}
		if (a->allow_lines)
			a->allow_lines[keep] = a->allow_lines[k];
		a->allow_files[keep++] = a->allow_files[k++];
	}
	a->nallow = keep;
	return 0;
}

static int config_rpz_tsig(struct config_ctx *c, struct fy_node *m, int line, struct config_rpz *z)
{
	struct fy_node_pair *pair;
	void *it = NULL;
	int rc = 0;
	if (m == NULL || fy_node_get_type(m) != FYNT_MAPPING || config_is_alias(m))
		return config_fail(c, line, "tsig: expected {name, algorithm, secret}");
	snprintf(z->tsig_alg, sizeof(z->tsig_alg), "hmac-sha256");
	while (!rc && (pair = fy_node_mapping_iterate(m, &it)) != NULL) {
		struct fy_node *k = fy_node_pair_key(pair), *v = fy_node_pair_value(pair);
		int kline = config_node_line(k, line);
		const char *ks = NULL;
		size_t klen = 0;
		char buf[1024];
		if ((rc = config_key(c, k, line, &ks, &klen)) != 0)
			return rc;
		if (config_key_is(ks, klen, "name"))
			rc = config_scalar(c, v, kline, "tsig.name", "a key name", z->tsig_name,
			                   sizeof(z->tsig_name));
		else if (config_key_is(ks, klen, "algorithm"))
			rc = config_scalar(c, v, kline, "tsig.algorithm", "hmac-sha256 or the like",
			                   z->tsig_alg, sizeof(z->tsig_alg));
		else if (config_key_is(ks, klen, "secret")) {
			rc = config_scalar(c, v, kline, "tsig.secret", "a base64 secret", buf,
			                   sizeof(buf));
			free(z->tsig_secret);
			if (!rc && !(z->tsig_secret = strdup(buf)))
				rc = config_fail(c, kline, "out of memory");
			explicit_bzero(buf, sizeof(buf));
		} else
			return config_unknown(c, kline, ks, klen);
	}
	if (!rc && (!z->tsig_name[0] || !z->tsig_secret))
		rc = config_fail(c, line, "tsig: name and secret are required");
	/* the HMACs ldns signs with; a typo must fail here, not at the first transfer */
	static const char *const algs[] = {"hmac-md5.sig-alg.reg.int",
	                                   "hmac-sha1",
	                                   "hmac-sha224",
	                                   "hmac-sha256",
	                                   "hmac-sha384",
	                                   "hmac-sha512"};
	bool known = false;
	size_t al = strlen(z->tsig_alg);
	if (al && z->tsig_alg[al - 1] == '.')
		z->tsig_alg[--al] = 0;
	for (size_t i = 0; i < sizeof(algs) / sizeof(algs[0]); i++)
		known |= strcasecmp(z->tsig_alg, algs[i]) == 0;
	if (!rc && !known)
		rc = config_fail(c, line,
		                 "tsig.algorithm: expected hmac-sha256 (or hmac-sha1, -sha224, "
		                 "-sha384, -sha512, hmac-md5.sig-alg.reg.int)");
	return rc;
}

static int config_rpz_key(struct config_ctx *c, struct fy_node *k, struct fy_node *v, int zline,
                          struct config_rpz *z)
{
	int kline = config_node_line(k, zline), rc;
	const char *ks = NULL;
	size_t klen = 0;
	char buf[PATH_MAX];
	if ((rc = config_key(c, k, zline, &ks, &klen)) != 0)
		return rc;
	if (config_key_is(ks, klen, "name")) {
		rc = config_scalar(c, v, kline, "rpz.name", "a zone name", buf, CONFIG_NAME_MAX);
		if (!rc && !config_name_ok(buf, strlen(buf)))
			rc = config_fail(c, kline, "rpz.name: 1 to %d of A-Z a-z 0-9 _ . -",
			                 CONFIG_NAME_MAX - 1);
		if (!rc)
			snprintf(z->name, sizeof(z->name), "%s", buf);
	} else if (config_key_is(ks, klen, "file")) {
		free(z->file);
		z->file = NULL;
		rc = config_path(c, v, kline, "rpz.file", true, &z->file);
	} else if (config_key_is(ks, klen, "zone")) {
		rc = config_scalar(c, v, kline, "rpz.zone", "a domain name", buf, sizeof(buf));
		if (!rc && name_from_text(buf, strlen(buf), z->zone) <= 1)
			rc = config_fail(c, kline, "rpz.zone: not a domain name below the root");
	} else if (config_key_is(ks, klen, "primary")) {
		rc = config_scalar(c, v, kline, "rpz.primary", "ADDR:PORT", buf, sizeof(buf));
		if (!rc && config_parse_addrport(buf, 53, &z->primary) != 0)
			rc = config_fail(c, kline, "rpz.primary: expected ADDR[:PORT]");
	} else if (config_key_is(ks, klen, "tsig")) {
		rc = config_rpz_tsig(c, v, kline, z);
	} else {
		return config_unknown(c, kline, ks, klen);
	}
	return rc;
}

/* rpz: [{name, file} | {name, primary, zone, tsig}] */
static int config_rpz_list(struct config_ctx *c, struct fy_node *v, int line)
{
	struct config *cfg = c->cfg;
	struct fy_node *m;
	void *it = NULL;
	int rc = config_seq(c, v, line, "rpz");
	if (rc)
		return rc;
	config_rpz_free(cfg);
	size_t count = (size_t)fy_node_sequence_item_count(v);
	if (count && !(cfg->rpz = calloc(count, sizeof(*cfg->rpz))))
		return config_fail(c, line, "out of memory");
	while ((m = fy_node_sequence_iterate(v, &it)) != NULL && cfg->nrpz < count) {
		struct config_rpz *z = &cfg->rpz[cfg->nrpz++];
		struct fy_node_pair *pair;
		void *mit = NULL;
		z->line = config_node_line(m, line);
		if (config_is_alias(m) || fy_node_get_type(m) != FYNT_MAPPING)
			return config_fail(c, z->line,
			                   "rpz: expected {name, file} or {name, primary, zone}");
		if (config_dup_keys(c, m, z->line) != 0)
			return MOAT_EINVAL;
		while ((pair = fy_node_mapping_iterate(m, &mit)) != NULL)
			if ((rc = config_rpz_key(c, fy_node_pair_key(pair),
			                         fy_node_pair_value(pair), z->line, z)))
				return rc;
		if (!z->name[0])
			return config_fail(c, z->line, "rpz: zone without a name");
		for (size_t i = 0; i + 1 < cfg->nrpz; i++)
			if (!strcmp(cfg->rpz[i].name, z->name))
				return config_fail(c, z->line, "rpz: duplicate name '%s'", z->name);
		if (!z->file == !z->primary.ss_family)
			return config_fail(c, z->line, "rpz '%s': give either file or primary",
			                   z->name);
		if (z->primary.ss_family && !z->zone[0])
			return config_fail(c, z->line, "rpz '%s': primary needs zone", z->name);
	}
	return 0;
}

/* libfyaml reports syntax errors through its diagnostic object as formatted text
 * ("<memory-@...>:3:1: error: duplicate key"). The first error is captured here and re-labelled
 * with our file name instead of being printed to stderr. */
struct config_diag {
	bool have;
	int line;
	char msg[160];
};

static void config_diag_output(struct fy_diag *diag, void *user, const char *buf, size_t len)
{
	static const char tag[] = ": error: ";
	struct config_diag *d = user;
	const char *e, *p, *end;
	size_t mlen;
	int line = 0, mul = 1;

	(void)diag;
	if (d->have || buf == NULL)
		return;
	e = memmem(buf, len, tag, sizeof(tag) - 1);
	if (e == NULL)
		return;
	/* Walk back over ":LINE:COL" before the tag. */
	p = e;
	while (p > buf && p[-1] >= '0' && p[-1] <= '9')
		p--;
	if (p > buf && p[-1] == ':') {
		p--;
		while (p > buf && p[-1] >= '0' && p[-1] <= '9' && mul < 100000000) {
			p--;
			line += (*p - '0') * mul;
			mul *= 10;
		}
	}
	p = e + sizeof(tag) - 1;
	end = memchr(p, '\n', len - (size_t)(p - buf));
	if (end == NULL)
		end = buf + len;
	mlen = (size_t)(end - p);
	config_quote(d->msg, sizeof(d->msg), p, mlen);
	d->line = line;
	d->have = true;
}

/* YAML text is UTF-8, and libfyaml 0.7.12 loops forever on some that is not (a '%' directive line
 * with a stray continuation byte; found by fuzzing): refuse it before libfyaml sees it.
 * Returns 0, or the 1-based line of the first byte that is not well-formed UTF-8. */
static int config_utf8_bad_line(const char *text, size_t len)
{
	const unsigned char *s = (const unsigned char *)text;
	int line = 1;
	size_t i = 0;

	while (i < len) {
		unsigned char ch = s[i];
		size_t n, k;
		uint32_t cp;

		if (ch < 0x80) {
			line += ch == '\n';
			i++;
			continue;
		}
		if (ch >= 0xC2 && ch <= 0xDF) {
			n = 1;
			cp = ch & 0x1Fu;
		} else if (ch >= 0xE0 && ch <= 0xEF) {
			n = 2;
			cp = ch & 0x0Fu;
		} else if (ch >= 0xF0 && ch <= 0xF4) {
			n = 3;
			cp = ch & 0x07u;
		} else {
			return line;
		}
		if (len - i - 1 < n)
			return line;
		for (k = 1; k <= n; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return line;
			cp = cp << 6 | (s[i + k] & 0x3Fu);
		}
		if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10FFFF)) ||
		    (cp >= 0xD800 && cp <= 0xDFFF))
			return line; /* overlong, out of range, or a surrogate */
		i += 1 + n;
	}
	return 0;
}

static int config_parse_text(struct config *cfg, const char *text, size_t len, const char *label,
                             const char *basedir, char *err, size_t errlen)
{
	struct config_ctx c = {cfg, label != NULL ? label : "<config>", basedir, err, errlen};
	struct config_diag d = {false, 0, {0}};
	struct fy_diag_cfg dcfg;
	struct fy_parse_cfg pcfg;
	struct fy_diag *diag;
	struct fy_parser *fyp;
	struct fy_document *doc, *extra;
	int rc, bad;

	if ((bad = config_utf8_bad_line(text, len)) != 0)
		return config_fail(&c, bad, "not valid UTF-8");
	fy_diag_cfg_default(&dcfg);
	dcfg.fp = NULL;
	dcfg.output_fn = config_diag_output;
	dcfg.user = &d;
	dcfg.colorize = false;
	dcfg.level = FYET_ERROR;
	diag = fy_diag_create(&dcfg);
	if (diag == NULL) {
		config_errf(err, errlen, "%s: out of memory", c.label);
		return MOAT_ENOMEM;
	}
	memset(&pcfg, 0, sizeof(pcfg));
	/* Not FYPCF_RESOLVE_DOCUMENT: aliases are refused rather than expanded (see
	 * config_scalar); duplicate keys stay an error, named by config_dup_keys. */
	pcfg.flags = FYPCF_QUIET | FYPCF_ALLOW_DUPLICATE_KEYS;
	pcfg.diag = diag;
	fyp = fy_parser_create(&pcfg);
	if (fyp == NULL) {
		fy_diag_destroy(diag);
		config_errf(err, errlen, "%s: out of memory", c.label);
		return MOAT_ENOMEM;
	}
	if (fy_parser_set_string(fyp, text, len) != 0) {
		fy_parser_destroy(fyp);
		fy_diag_destroy(diag);
		config_errf(err, errlen, "%s: out of memory", c.label);
		return MOAT_ENOMEM;
	}

	doc = fy_parse_load_document(fyp);
	if (doc == NULL && !fy_parser_get_stream_error(fyp)) {
		rc = 0; /* an empty stream: defaults only */
	} else if (doc == NULL) {
		rc = d.have ? config_fail(&c, d.line, "%s", d.msg)
		            : config_fail(&c, 1, "not valid YAML");
	} else {
		rc = config_root(&c, fy_document_root(doc));
		if (rc == 0) {
			/* A second document would be silently ignored; an operator who appended
			 * one expects it to count, so say it does not. */
			extra = fy_parse_load_document(fyp);
			if (extra != NULL) {
				rc = config_fail(&c, config_node_line(fy_document_root(extra), 1),
				                 "only one YAML document is allowed");
				fy_parse_document_destroy(fyp, extra);
			} else if (fy_parser_get_stream_error(fyp)) {
				rc = d.have ? config_fail(&c, d.line, "%s", d.msg)
				            : config_fail(&c, 1, "not valid YAML");
			}
		}
		fy_parse_document_destroy(fyp, doc);
	}
	fy_parser_destroy(fyp);
	fy_diag_destroy(diag);
	return rc;
}

int config_load_string(struct config *cfg, const char *text, size_t len, const char *label,
                       char *err, size_t errlen)
{
	if (cfg == NULL || (text == NULL && len > 0)) {
		config_errf(err, errlen, "%s: no config", label != NULL ? label : "<config>");
		return MOAT_EINVAL;
	}
	return config_parse_text(cfg, text != NULL ? text : "", len, label, NULL, err, errlen);
}

/* The directory relative paths in the file are joined to: the file's own directory, made
 * absolute so that a later chdir (daemons do) cannot change what they name. */
static char *config_basedir(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir, *abs;

	if (slash == NULL)
		dir = strdup(".");
	else if (slash == path)
		dir = strdup("/");
	else
		dir = strndup(path, (size_t)(slash - path));
	if (dir == NULL)
		return NULL;
	abs = realpath(dir, NULL);
	if (abs != NULL) {
		free(dir);
		return abs;
	}
	return dir;
}

int config_load_file(struct config *cfg, const char *path, char *err, size_t errlen)
{
	FILE *f;
	char *buf, *basedir;
	size_t len = 0;
	int rc;

	if (cfg == NULL || path == NULL) {
		config_errf(err, errlen, "no config file given");
		return MOAT_EINVAL;
	}
	/* Read it ourselves: a clear I/O error, and a size cap before libfyaml sees anything. */
	f = pathfd_fopen(path); /* also after the privilege drop */
	if (f == NULL) {
		config_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return MOAT_EIO;
	}
	buf = malloc(CONFIG_FILE_MAX + 1);
	if (buf == NULL) {
		fclose(f);
		config_errf(err, errlen, "%s: out of memory", path);
		return MOAT_ENOMEM;
	}
	len = fread(buf, 1, CONFIG_FILE_MAX + 1, f);
	if (ferror(f)) {
		config_errf(err, errlen, "%s: read failed: %s", path, strerror(errno));
		fclose(f);
		free(buf);
		return MOAT_EIO;
	}
	fclose(f);
	if (len > CONFIG_FILE_MAX) {
		config_errf(err, errlen, "%s: larger than %d bytes; not a config file", path,
		            CONFIG_FILE_MAX);
		free(buf);
		return MOAT_EINVAL;
	}
	basedir = config_basedir(path);
	if (basedir == NULL) {
		free(buf);
		config_errf(err, errlen, "%s: out of memory", path);
		return MOAT_ENOMEM;
	}
	rc = config_parse_text(cfg, buf, len, path, basedir, err, errlen);
	free(basedir);
	free(buf);
	return rc;
}
