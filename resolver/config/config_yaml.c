/* config_yaml.c owns reading moatd's YAML config file (version 1, described in moat/config.h)
 * with libfyaml: the file and its size cap, the document and libfyaml's errors, and the
 * helpers that read one node (a scalar, a number, a boolean, a path, a list of paths or of
 * addresses; the walk over a mapping's keys) with the file:line of every error, because an operator
 * fixing a resolver that refuses to start needs to know exactly which line to change. The keys are
 * read in config_yaml_root.c and config_yaml_agent.c. Paths are only recorded (resolved against the
 * config file's directory) for policy_load. */
#include "config_yaml.h"

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

/* A config file is a few kilobytes; anything far larger is not one. */
#define CONFIG_FILE_MAX (1024 * 1024)

int config_fail(struct config_ctx *c, int line, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	moat_errf(c->err, c->errlen, "%s:%d: %s", c->label, line, msg);
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
	int rc = 0;

	while (rc == 0 && (pair = fy_node_mapping_iterate(m, &it)) != NULL) {
		struct fy_node *k = fy_node_pair_key(pair);
		const char *ks = NULL;
		size_t klen = 0;

		rc = config_key(c, k, line, &ks, &klen);
		if (rc == 0)
			rc = fn(c, ks, klen, fy_node_pair_value(pair), config_node_line(k, line),
			        arg);
	}
	return rc;
}

int config_unknown(struct config_ctx *c, int line, const char *ks, size_t klen)
{
	char q[CONFIG_QUOTE_MAX + 8];

	config_quote(q, sizeof(q), ks, klen);
	return config_fail(c, line, "unknown key '%s'", q);
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
		moat_errf(err, errlen, "%s: out of memory", c.label);
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
		moat_errf(err, errlen, "%s: out of memory", c.label);
		return MOAT_ENOMEM;
	}
	if (fy_parser_set_string(fyp, text, len) != 0) {
		fy_parser_destroy(fyp);
		fy_diag_destroy(diag);
		moat_errf(err, errlen, "%s: out of memory", c.label);
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
		moat_errf(err, errlen, "%s: no config", label != NULL ? label : "<config>");
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
		moat_errf(err, errlen, "no config file given");
		return MOAT_EINVAL;
	}
	/* Read it ourselves: a clear I/O error, and a size cap before libfyaml sees anything. */
	f = pathfd_fopen(path); /* also after the privilege drop */
	if (f == NULL) {
		moat_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return MOAT_EIO;
	}
	buf = malloc(CONFIG_FILE_MAX + 1);
	if (buf == NULL) {
		fclose(f);
		moat_errf(err, errlen, "%s: out of memory", path);
		return MOAT_ENOMEM;
	}
	len = fread(buf, 1, CONFIG_FILE_MAX + 1, f);
	if (ferror(f)) {
		moat_errf(err, errlen, "%s: read failed: %s", path, strerror(errno));
		fclose(f);
		free(buf);
		return MOAT_EIO;
	}
	fclose(f);
	if (len > CONFIG_FILE_MAX) {
		moat_errf(err, errlen, "%s: larger than %d bytes; not a config file", path,
		          CONFIG_FILE_MAX);
		free(buf);
		return MOAT_EINVAL;
	}
	basedir = config_basedir(path);
	if (basedir == NULL) {
		free(buf);
		moat_errf(err, errlen, "%s: out of memory", path);
		return MOAT_ENOMEM;
	}
	rc = config_parse_text(cfg, buf, len, path, basedir, err, errlen);
	free(basedir);
	free(buf);
	return rc;
}
