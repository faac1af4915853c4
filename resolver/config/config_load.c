/* config_load.c owns reading moatd's YAML config file (version 1, described in moat/config.h)
 * with libfyaml: the file and its size cap, the document and libfyaml's errors, then the root
 * mapping to config_yaml_root.c. */
#include "moat/config_load.h"

#include <errno.h>
#include <libfyaml.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_yaml.h"
#include "moat/err.h"
#include "moat/pathfd.h"

/* A config file is a few kilobytes; anything far larger is not one. */
#define CONFIG_FILE_MAX (1024 * 1024)

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
	struct config_ctx c = {
	    cfg, label != NULL ? label : "<config>", basedir, err, errlen, cfg->check_max_errors,
	    0};
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
	if (c.nerrors > c.max_errors && c.max_errors > 1) {
		size_t used = strlen(err);
		if (used + 1 < errlen)
			snprintf(err + used, errlen - used, "\n... and %u more error(s)",
			         c.nerrors - c.max_errors);
	}
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
