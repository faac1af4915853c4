/* allow.c owns the run's allowlist: the lines of --allow (each one allowlist line, "NAME" or
 * "NAME tcp/443,udp/123"), of --allow-file FILE and of the text allowlists of an agent of a
 * moatd config (--config FILE AGENT, with its deny form), in that order, each with where it
 * came from so the summary can name the rule as the user wrote it. moatd checks the lines
 * (names, ports, the lint) as it checks any allowlist. Files are opened with the invoking
 * user's file-system identity (setfsuid): moat run runs as root, and a user who may run it must
 * not read through it what they could not read themselves. */
#include "run.h"

#include "moat/bytes.h"

#include "moat/config.h"
#include "moat/config_load.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>

/* Where line i came from: "--allow 'a.test tcp/80'", "list.txt:3". */
static char **allow_origin;

const char *allow_origin_of(size_t i)
{
	return allow_origin ? allow_origin[i] : "";
}

static int allow_push(struct run_opts *o, const char *line, const char *origin)
{
	/* The two arrays grow together: origins have the lines' capacity. */
	size_t cap = o->caplines;
	if (grow_one(&o->lines, &o->caplines, o->nlines, sizeof(*o->lines), 16) < 0 ||
	    (cap != o->caplines &&
	     !(allow_origin = realloc(allow_origin, o->caplines * sizeof(*allow_origin)))))
		return -1;
	o->lines[o->nlines] = strdup(line);
	allow_origin[o->nlines] = strdup(origin);
	if (!o->lines[o->nlines] || !allow_origin[o->nlines])
		return -1;
	o->nlines++;
	return 0;
}

int allow_line(struct run_opts *o, const char *line)
{
	char origin[1100];
	if (strchr(line, '\n')) {
		run_err("--allow '%s': one allowlist line, no newline", line);
		return -1;
	}
	snprintf(origin, sizeof(origin), "--allow '%s'", line);
	return allow_push(o, line, origin);
}

/* Run fn with the invoking user's file-system identity. */
static void allow_as_user(const struct run_opts *o, bool on)
{
	setfsgid(on ? o->gid : 0);
	setfsuid(on ? o->uid : 0);
}

static int allow_file_read(struct run_opts *o, const char *path)
{
	allow_as_user(o, true);
	FILE *f = fopen(path, "re");
	int e = errno;
	allow_as_user(o, false);
	if (!f) {
		run_err("%s: %s", path, strerror(e));
		return -1;
	}
	char *line = NULL, origin[1100];
	size_t cap = 0;
	ssize_t k;
	int rc = 0;
	for (unsigned n = 1; rc == 0 && (k = getline(&line, &cap, f)) >= 0; n++) {
		while (k > 0 && (line[k - 1] == '\n' || line[k - 1] == '\r'))
			line[--k] = 0;
		if (k == 0)
			continue;
		snprintf(origin, sizeof(origin), "%s:%u", path, n);
		rc = allow_push(o, line, origin);
	}
	free(line);
	fclose(f);
	return rc;
}

int allow_file(struct run_opts *o, const char *path)
{
	size_t n = strlen(path);
	if (n > 5 && strcmp(path + n - 5, ".mpol") == 0) {
		run_err("%s: a compiled list cannot be a run's allowlist (the system moatd takes "
		        "it in an agent of its config)",
		        path);
		return -1;
	}
	return allow_file_read(o, path);
}

int allow_config(struct run_opts *o, const char *path, const char *agent)
{
	static struct config cfg;
	char err[600];
	config_init(&cfg);
	allow_as_user(o, true);
	int rc = config_load_file(&cfg, path, err, sizeof(err));
	allow_as_user(o, false);
	if (rc < 0) {
		run_err("%s", err);
		config_free(&cfg);
		return -1;
	}
	const struct config_agent *a = NULL;
	for (size_t i = 0; i < cfg.nagents && !a; i++)
		if (strcmp(cfg.agents[i].name, agent) == 0)
			a = &cfg.agents[i];
	if (!a) {
		run_err("%s: no agent '%s'", path, agent);
		config_free(&cfg);
		return -1;
	}
	if (a->nallow_rpz) {
		run_err("%s: agent %s takes RPZ zones, which a run cannot", path, agent);
		config_free(&cfg);
		return -1;
	}
	rc = 0;
	for (size_t i = 0; i < a->nallow && rc == 0; i++)
		rc = allow_file(o, a->allow_files[i]);
	static const char *const forms[] = {"nxdomain", "refused", "sinkhole"};
	if (rc == 0 && !o->deny && (size_t)a->deny < sizeof(forms) / sizeof(forms[0]))
		o->deny = forms[a->deny];
	config_free(&cfg);
	return rc;
}
