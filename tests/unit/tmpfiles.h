/* tmpfiles.h: a test's scratch directory (made by mkdtemp in the suite's init, removed in its
 * fini) and small file helpers, shared by the policy_file, policy_sig and store tests. Include
 * once per test file, after criterion.h; the file defines `static char dir[]` as a mkdtemp
 * template. */
#ifndef MOAT_TEST_TMPFILES_H
#define MOAT_TEST_TMPFILES_H

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* dir/name in one of 4 rotating buffers. */
static inline const char *P(const char *name)
{
	static char bufs[4][512];
	static int next;
	char *b = bufs[next++ & 3];
	snprintf(b, 512, "%s/%s", dir, name);
	return b;
}

static inline void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

static inline void tmpdir_make(void)
{
	cr_assert_not_null(mkdtemp(dir));
}

static inline void tmpdir_remove(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

/* Remove every file in dir (a store's, and any moved aside), leaving dir. */
static inline void tmpdir_clear(void)
{
	char p[512];
	DIR *d = opendir(dir);
	for (struct dirent *e; d && (e = readdir(d));)
		if (e->d_name[0] != '.') {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
	if (d)
		closedir(d);
}

/* Whether a file whose name starts with prefix is in dir (data.mdb.damaged-: moved aside). */
static inline bool tmpdir_has(const char *prefix)
{
	bool found = false;
	DIR *d = opendir(dir);
	for (struct dirent *e; d && (e = readdir(d));)
		found |= !strncmp(e->d_name, prefix, strlen(prefix));
	if (d)
		closedir(d);
	return found;
}

#endif
