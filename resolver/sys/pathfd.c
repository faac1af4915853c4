/* pathfd.c owns the directory descriptors moatd keeps to re-read its policy files after the
 * privilege drop (see moat/pathfd.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moat/err.h"
#include "moat/pathfd.h"

static struct {
	char *dir; /* owned: the directory part of the path as given ("." for none) */
	int fd;
} kept[PATHFD_MAX];
static int nkept;

const char *pathfd_split(const char *path, char *dir, size_t cap)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	if (!slash)
		snprintf(dir, cap, ".");
	else if (n == 0)
		snprintf(dir, cap, "/");
	else
		snprintf(dir, cap, "%.*s", (int)n, path);
	return slash ? slash + 1 : path;
}

static int find(const char *dir)
{
	for (int i = 0; i < nkept; i++)
		if (!strcmp(kept[i].dir, dir))
			return i;
	return -1;
}

int pathfd_keep_dir(const char *path)
{
	char dir[4096];
	if (!path)
		return MOAT_EINVAL;
	pathfd_split(path, dir, sizeof(dir));
	if (find(dir) >= 0)
		return 0;
	if (nkept == PATHFD_MAX)
		return MOAT_ELIMIT;
	int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return MOAT_EIO;
	if (!(kept[nkept].dir = strdup(dir))) {
		close(fd);
		return MOAT_ENOMEM;
	}
	kept[nkept++].fd = fd;
	return 0;
}

FILE *pathfd_fopen(const char *path)
{
	char dir[4096];
	const char *base = pathfd_split(path, dir, sizeof(dir));
	int i = find(dir);
	if (i < 0 || !*base)
		return fopen(path, "re");
	int fd = openat(kept[i].fd, base, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	FILE *f = fdopen(fd, "r");
	if (!f) {
		int e = errno;
		close(fd);
		errno = e;
	}
	return f;
}

void pathfd_release(void)
{
	while (nkept > 0) {
		nkept--;
		close(kept[nkept].fd);
		free(kept[nkept].dir);
	}
}
