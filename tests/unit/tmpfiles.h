/* tmpfiles.h: a test's scratch directory (made by mkdtemp in the suite's init, removed in its
 * fini) and small file helpers, shared by the policy_file and policy_sig tests. Include once
 * per test file, after criterion.h; the file defines `static char dir[]` as a mkdtemp template. */
#ifndef MOAT_TEST_TMPFILES_H
#define MOAT_TEST_TMPFILES_H

#include <stdio.h>
#include <stdlib.h>

/* dir/name in one of 4 rotating buffers. */
static const char *P(const char *name)
{
	static char bufs[4][512];
	static int next;
	char *b = bufs[next++ & 3];
	snprintf(b, 512, "%s/%s", dir, name);
	return b;
}

static void put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

static void tmpdir_make(void)
{
	cr_assert_not_null(mkdtemp(dir));
}

static void tmpdir_remove(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

#endif
