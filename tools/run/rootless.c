/* rootless.c owns moat run's answer to --rootless, and to a run by a user who is not root: a
 * refusal that says why, with what this machine offers for an unprivileged mode (user
 * namespaces, a user-mode network helper and the tap device it needs). There is no rootless
 * mode: it has not been shown to hold moat-escape's tests, so moat run does not run at all
 * rather than run unprotected (README, "moat run", says what such a mode needs). */
#include "run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A program on PATH. */
static bool rootless_have(const char *name)
{
	const char *path = getenv("PATH");
	char dir[512], p[700];
	for (const char *s = path ? path : "/usr/bin:/bin"; *s;) {
		size_t n = strcspn(s, ":");
		snprintf(dir, sizeof(dir), "%.*s", (int)n, s);
		snprintf(p, sizeof(p), "%s/%s", dir, name);
		if (n && access(p, X_OK) == 0)
			return true;
		s += n + (s[n] == ':');
	}
	return false;
}

static long rootless_userns_max(void)
{
	long v = -1;
	FILE *f = fopen("/proc/sys/user/max_user_namespaces", "re");
	if (f) {
		if (fscanf(f, "%ld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

int rootless_refuse(void)
{
	struct stat sb;
	bool tun = stat("/dev/net/tun", &sb) == 0 && (sb.st_mode & 0006) == 0006;
	long userns = rootless_userns_max();
	run_err("no rootless mode: refused. moat run has not been shown to hold moat-escape's "
	        "tests without root, and does not run unprotected. Run it as root (sudo moat "
	        "run ...): the command still runs as you.");
	fprintf(stderr,
	        "  this machine: unprivileged user namespaces %s; pasta %s, slirp4netns %s; "
	        "/dev/net/tun %s\n",
	        userns > 0 ? "allowed" : "not allowed",
	        rootless_have("pasta") ? "found" : "missing",
	        rootless_have("slirp4netns") ? "found" : "missing",
	        tun ? "open to users" : "root only (the user-mode helpers cannot make a tap)");
	return RUN_EXIT_FAIL;
}
