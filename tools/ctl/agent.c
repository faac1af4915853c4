/* agent.c owns moatctl's runtime agent commands: `agent add NAME --clients CIDR...
 * (--allow FILE | --pattern P...) [--deny FORM] [--audit] [--force]`, `agent del NAME`, and `batch`
 * (those lines on stdin, sent on one connection: what an orchestrator starting many sandboxes at
 * once runs). The request line is built and checked with the daemon's own parser (ctlproto). An
 * --allow FILE is read here, by the client, and its lines sent after the request: moatd runs as an
 * unprivileged user under a system-call filter and should not open paths a control client
 * names (the client may read files moatd must not, and the reverse), and the store keeps the
 * patterns themselves, so a restart does not depend on the file still being there. Every line
 * of the file is sent as is, so the daemon's "runtime:NAME:N" is line N of the file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/agentstore.h"
#include "moat/bytes.h"
#include "moat/ctlproto.h"
#include "moat/err.h"
#include "ctl.h"

struct text {
	char *p;
	size_t len, cap;
};

static int text_add(struct text *t, const char *s, size_t n)
{
	while (t->len + n + 1 > t->cap)
		if (grow_one(&t->p, &t->cap, t->cap, 1, 4096) < 0)
			return MOAT_ENOMEM;
	memcpy(t->p + t->len, s, n);
	t->len += n;
	t->p[t->len] = 0;
	return 0;
}

/* Append one pattern line (checked for what the protocol cannot carry). */
static int pattern_add(struct text *t, const char *s, size_t n, const char *where, size_t line)
{
	if (n > AGENT_LINE_MAX || memchr(s, 0, n)) {
		fprintf(stderr, "moatctl: %s:%zu: %s\n", where, line,
		        n > AGENT_LINE_MAX ? "line longer than 1024 bytes" : "NUL byte");
		return MOAT_EINVAL;
	}
	return text_add(t, s, n) || text_add(t, "\n", 1) ? MOAT_ENOMEM : 0;
}

static int file_add(struct text *t, const char *path, unsigned *n)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		fprintf(stderr, "moatctl: --allow %s: %m\n", path);
		return MOAT_EIO;
	}
	char *line = NULL;
	size_t cap = 0;
	ssize_t k;
	int rc = 0;
	while (!rc && (k = getline(&line, &cap, f)) >= 0) {
		while (k > 0 && (line[k - 1] == '\n' || line[k - 1] == '\r'))
			k--;
		rc = pattern_add(t, line, (size_t)k, path, ++*n);
	}
	free(line);
	fclose(f);
	return rc;
}

/* The request words and the pattern lines of one `agent ...` command into req and body. */
static int parse_args(int argc, char **argv, struct text *req, struct text *body, unsigned *np,
                      bool *raw)
{
	char w[CTLPROTO_MAXLINE + 64];
	bool file = false, pats = false;
	int rc = 0;
	for (int i = 0; i < argc && !rc; i++) {
		const char *a = argv[i];
		int mode = !strcmp(a, "--clients")   ? 1
		           : !strcmp(a, "--pattern") ? 2
		           : !strcmp(a, "--allow")   ? 3
		           : !strcmp(a, "--deny")    ? 4
		                                     : 0;
		if (!strcmp(a, "--json")) {
			*raw = true;
			continue;
		}
		if (!strcmp(a, "--audit")) { /* audit mode: would-deny names are answered */
			rc = text_add(req, " mode=audit", 11);
			continue;
		}
		if (!strcmp(a, "--force")) { /* a range may overlap a config agent's */
			rc = text_add(req, " force", 6);
			continue;
		}
		if (!mode && !strncmp(a, "--", 2)) {
			fprintf(stderr, "moatctl: agent: unknown option %s\n", a);
			return MOAT_EINVAL;
		}
		if (!mode) {
			rc = text_add(req, " ", 1) || text_add(req, a, strlen(a));
			continue;
		}
		int got = 0;
		while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) && !rc && (mode < 3 || !got)) {
			const char *v = argv[++i];
			got++;
			if (mode == 1 || mode == 4) {
				snprintf(w, sizeof(w), " %s=%s", mode == 1 ? "client" : "deny", v);
				rc = text_add(req, w, strlen(w));
			} else if (mode == 2) {
				rc = pattern_add(body, v, strlen(v), "--pattern", ++*np);
			} else {
				rc = file_add(body, v, np);
			}
		}
		if (!got) {
			fprintf(stderr, "moatctl: agent: %s needs a value\n", a);
			return MOAT_EINVAL;
		}
		file |= mode == 3;
		pats |= mode == 2;
	}
	if (!rc && file && pats) {
		fprintf(stderr, "moatctl: agent: --allow FILE or --pattern P, not both\n");
		return MOAT_EINVAL;
	}
	return rc;
}

/* One `agent ...` command (argv after "agent") as the text to send into out. */
static int agent_text(int argc, char **argv, struct text *out, bool *raw)
{
	struct text req = {0}, body = {0};
	unsigned np = 0;
	char line[CTLPROTO_MAXLINE + 2], err[256], n[32];
	int rc = text_add(&req, "agent", 5) || parse_args(argc, argv, &req, &body, &np, raw);
	if (!rc && argc > 0 && !strcmp(argv[0], "add")) {
		snprintf(n, sizeof(n), " patterns=%u", np);
		rc = text_add(&req, n, strlen(n));
	}
	struct ctl_request r;
	if (!rc && ctlproto_parse(req.p, req.len, &r, err, sizeof(err)) < 0) {
		fprintf(stderr, "moatctl: %s\n", err);
		rc = MOAT_EINVAL;
	}
	if (!rc && ctlproto_format(&r, line, sizeof(line)) < 0) {
		fprintf(stderr, "moatctl: request too long\n");
		rc = MOAT_EINVAL;
	}
	if (!rc)
		rc = text_add(out, line, strlen(line)) ||
		     (body.len && text_add(out, body.p, body.len));
	free(req.p);
	free(body.p);
	return rc;
}

/* Print each of n reply lines; the exit status (1 when any said not ok). */
static int print_replies(char *reply, size_t n, bool raw)
{
	int st = 0;
	char *p = reply;
	for (size_t i = 0; i < n && p && *p; i++) {
		char *nl = strchr(p, '\n');
		if (nl)
			*nl = 0;
		if (!strncmp(p, "{\"v\":1,\"ok\":true", 16)) {
			ctl_print_json(p, raw);
		} else {
			ctl_print_reply_error(p, raw);
			st = 1;
		}
		p = nl ? nl + 1 : NULL;
	}
	return st;
}

int ctl_agent(int argc, char **argv, const char *sock, bool raw)
{
	struct text t = {0};
	if (argc < 2 || agent_text(argc, argv, &t, &raw)) {
		if (argc < 2)
			fprintf(stderr, "moatctl: agent add NAME ... or agent del NAME\n");
		free(t.p);
		return 2;
	}
	char *reply = ctl_ask(sock, t.p, t.len, 1);
	free(t.p);
	if (!reply)
		return 2;
	int st = print_replies(reply, 1, raw);
	free(reply);
	return st;
}

int ctl_batch(const char *sock, bool raw)
{
	struct text t = {0};
	char *line = NULL, *words[CTLPROTO_WORDS_MAX + 8];
	size_t cap = 0, n = 0, lineno = 0;
	ssize_t k;
	int rc = 0;
	while (!rc && (k = getline(&line, &cap, stdin)) >= 0) {
		lineno++;
		int nw = 0;
		for (char *s = strtok(line, " \t\r\n");
		     s && nw < (int)(sizeof(words) / sizeof(*words)); s = strtok(NULL, " \t\r\n"))
			words[nw++] = s;
		if (!nw || words[0][0] == '#')
			continue;
		if (strcmp(words[0], "agent") || nw < 3) {
			fprintf(stderr, "moatctl: batch: line %zu: expected agent add|del ...\n",
			        lineno);
			rc = MOAT_EINVAL;
		} else if ((rc = agent_text(nw - 1, words + 1, &t, &raw))) {
			fprintf(stderr, "moatctl: batch: line %zu refused\n", lineno);
		}
		n++;
	}
	free(line);
	if (rc || !n) {
		free(t.p);
		return rc ? 2 : 0;
	}
	char *reply = ctl_ask(sock, t.p, t.len, n);
	free(t.p);
	if (!reply)
		return 2;
	int st = print_replies(reply, n, raw);
	free(reply);
	return st;
}
