/* Unit tests for re-reading policy files through kept directory descriptors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moat/pathfd.h"

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

static char *read_all(FILE *f)
{
	static char buf[256];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

Test(pathfd, split)
{
	char dir[64];
	cr_expect_str_eq(pathfd_split("/etc/moat/allow.txt", dir, sizeof(dir)), "allow.txt");
	cr_expect_str_eq(dir, "/etc/moat");
	cr_expect_str_eq(pathfd_split("allow.txt", dir, sizeof(dir)), "allow.txt");
	cr_expect_str_eq(dir, ".");
	cr_expect_str_eq(pathfd_split("/x", dir, sizeof(dir)), "x");
	cr_expect_str_eq(dir, "/");
	cr_expect_str_eq(pathfd_split("conf/allow/a.txt", dir, sizeof(dir)), "a.txt");
	cr_expect_str_eq(dir, "conf/allow");
}

/* The file is found through the kept directory even when the path to it no longer leads there
 * (for moatd: when its user may not search a directory above it); a file replaced in that
 * directory is read anew; a directory not kept is opened by path. */
Test(pathfd, reads_through_the_kept_directory)
{
	char top[] = "/tmp/moat-pathfd-XXXXXX";
	cr_assert_not_null(mkdtemp(top));
	char dir[128], file[160], moved[128], tmp[160];
	snprintf(dir, sizeof(dir), "%s/a", top);
	snprintf(file, sizeof(file), "%s/a/allow.txt", top);
	snprintf(moved, sizeof(moved), "%s/b", top);
	cr_assert_eq(mkdir(dir, 0755), 0);
	write_file(file, "one\n");
	cr_assert_eq(pathfd_keep_dir(file), 0);
	cr_assert_eq(pathfd_keep_dir(file), 0, "a directory is kept once");
	cr_assert_eq(rename(dir, moved), 0);
	cr_assert_null(fopen(file, "r"), "the path itself is gone");
	FILE *f = pathfd_fopen(file);
	cr_assert_not_null(f, "not read through the kept directory");
	cr_expect_str_eq(read_all(f), "one\n");
	/* replaced by rename, as editors and config managers do */
	snprintf(tmp, sizeof(tmp), "%s/b/allow.new", top);
	write_file(tmp, "two\n");
	snprintf(file, sizeof(file), "%s/b/allow.txt", top);
	cr_assert_eq(rename(tmp, file), 0);
	snprintf(file, sizeof(file), "%s/a/allow.txt", top);
	f = pathfd_fopen(file);
	cr_assert_not_null(f);
	cr_expect_str_eq(read_all(f), "two\n");
	/* not kept: by path */
	snprintf(tmp, sizeof(tmp), "%s/b/other.txt", top);
	write_file(tmp, "three\n");
	f = pathfd_fopen(tmp);
	cr_assert_not_null(f);
	cr_expect_str_eq(read_all(f), "three\n");
	pathfd_release();
	snprintf(file, sizeof(file), "%s/a/allow.txt", top);
	cr_expect_null(pathfd_fopen(file), "released: by path again, and the path is gone");
	unlink(tmp);
	snprintf(file, sizeof(file), "%s/b/allow.txt", top);
	unlink(file);
	rmdir(moved);
	rmdir(top);
}
