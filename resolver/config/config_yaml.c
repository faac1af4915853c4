/* config_yaml.c owns the helpers of moatd's YAML reader that read one node with libfyaml (a
 * scalar, a number, a boolean, a path, a list of paths or of addresses; the walk over a
 * mapping's keys) with the file:line of every error, because an operator fixing a resolver that
 * refuses to start needs to know exactly which line to change. The file and the document are
 * config_load.c's; the keys are read in config_yaml_root.c and config_yaml_agent.c. Paths are
 * only recorded (resolved against the config file's directory) for policy_load. */
#include "config/config_yaml.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libfyaml.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "moat/err.h"
#include "moat/netaddr.h"
#include "moat/pathfd.h"

int config_fail(struct config_ctx *c, int line, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (c->max_errors <= 1) {
		moat_errf(c->err, c->errlen, "%s:%d: %s", c->label, line, msg);
		return MOAT_EINVAL;
	}
	size_t used = c->nerrors ? strlen(c->err) : 0;
	if (c->nerrors++ < c->max_errors && used + 1 < c->errlen)
		snprintf(c->err + used, c->errlen - used, "%s%s:%d: %s", used ? "\n" : "", c->label,
		         line, msg);
	return MOAT_EINVAL;
}

/* 1-based line of a node. libfyaml 0.7 only exposes marks on tokens, so a collection is placed
 * at its first scalar; an empty one (or a null value, which has no token) at the fallback, the
 * line of the key that owns it. */
int config_node_line(struct fy_node *n, int fallback)
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

bool config_is_alias(struct fy_node *n)
{
	return n != NULL && fy_node_get_type(n) == FYNT_SCALAR &&
	       fy_node_get_style(n) == FYNS_ALIAS;
}

/* YAML's null: an absent value or a plain ~ / null. */
bool config_is_null(struct fy_node *n)
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
int config_text(struct config_ctx *c, struct fy_node *v, int line, const char *key,
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
int config_scalar(struct config_ctx *c, struct fy_node *v, int line, const char *key,
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

int config_u32(struct config_ctx *c, struct fy_node *v, int line, const char *key, uint32_t min,
               uint32_t max, uint32_t *out)
{
	char buf[32];
	uint64_t n;
	int rc;

	rc = config_scalar(c, v, line, key, "a number", buf, sizeof(buf));
	if (rc != 0)
		return rc;
	line = config_node_line(v, line);
	if (!netaddr_uint(buf, strlen(buf), UINT32_MAX, &n)) {
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

/* A number within the range of the numeric setting named limit (config_limits.c). */
int config_u32_as(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                  const char *limit, uint32_t *out)
{
	const struct config_limit *l = config_limit_key(limit, strlen(limit));

	return config_u32(c, v, line, key, l->min, l->max, out);
}

int config_bool(struct config_ctx *c, struct fy_node *v, int line, const char *key, bool *out)
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
int config_path(struct config_ctx *c, struct fy_node *v, int line, const char *key,
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
		moat_errf(c->err, c->errlen, "%s: out of memory", c->label);
		return MOAT_ENOMEM;
	}
	*out = p;
	return 0;
}

/* The sequence under a key, or an error naming the key. */
int config_seq(struct config_ctx *c, struct fy_node *v, int line, const char *key)
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
int config_paths(struct config_ctx *c, struct fy_node *v, int line, const char *key, char ***outv,
                 size_t *outn, bool append, int **outlines)
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
			moat_errf(c->err, c->errlen, "%s: out of memory", c->label);
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
				moat_errf(c->err, c->errlen, "%s: out of memory", c->label);
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

int config_addrports(struct config_ctx *c, struct fy_node *v, int line, const char *key,
                     struct sockaddr_storage **outv, size_t *outn, int **outlines)
{
	size_t n = 0, count = 0;
	int rc = config_seq(c, v, line, key);
	struct sockaddr_storage *nv;
	struct fy_node *item;
	void *it = NULL;
	int *lines;

	if (rc != 0)
		return rc;
	count = (size_t)fy_node_sequence_item_count(v);
	nv = calloc(count > 0 ? count : 1, sizeof(*nv));
	lines = calloc(count > 0 ? count : 1, sizeof(*lines));
	if (nv == NULL || lines == NULL) {
		free(nv);
		free(lines);
		moat_errf(c->err, c->errlen, "%s: out of memory", c->label);
		return MOAT_ENOMEM;
	}
	while ((item = fy_node_sequence_iterate(v, &it)) != NULL && n < count) {
		char buf[INET6_ADDRSTRLEN + 16];

		rc = config_scalar(c, item, line, key, "an address", buf, sizeof(buf));
		if (rc != 0)
			goto fail;
		if (netaddr_parse_addrport(buf, 53, &nv[n]) != 0) {
			char q[CONFIG_QUOTE_MAX + 8];

			config_quote(q, sizeof(q), buf, strlen(buf));
			rc =
			    netaddr_port_zero(buf)
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
int config_dup_keys(struct config_ctx *c, struct fy_node *m, int line)
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
int config_key(struct config_ctx *c, struct fy_node *k, int line, const char **ks, size_t *klen)
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

int config_each_pair(struct config_ctx *c, struct fy_node *m, int line, config_pair_fn *fn,
                     void *arg)
{
	struct fy_node_pair *pair;
	void *it = NULL;
	int rc = 0, first = 0;

	while (rc == 0 && (pair = fy_node_mapping_iterate(m, &it)) != NULL) {
		struct fy_node *k = fy_node_pair_key(pair);
		const char *ks = NULL;
		size_t klen = 0;

		rc = config_key(c, k, line, &ks, &klen);
		config_key_tried_reset(); /* what fn compares the key with: config_unknown */
		if (rc == 0)
			rc = fn(c, ks, klen, fy_node_pair_value(pair), config_node_line(k, line),
			        arg);
		if (rc == MOAT_EINVAL && c->max_errors > 1) { /* --check: on to the next key */
			first = first ? first : rc;
			rc = 0;
		}
	}
	return rc ? rc : first;
}

int config_unknown(struct config_ctx *c, int line, const char *ks, size_t klen)
{
	char q[CONFIG_QUOTE_MAX + 8];

	config_quote(q, sizeof(q), ks, klen);
	const char *near = config_key_nearest(ks, klen);
	if (near)
		return config_fail(c, line, "unknown key '%s' (did you mean '%s'?)", q, near);
	return config_fail(c, line, "unknown key '%s'", q);
}
