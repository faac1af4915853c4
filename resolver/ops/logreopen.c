/* logreopen.c owns reopening the query log on SIGUSR1 (see logreopen.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "moat/err.h"
#include "moat/pathfd.h"
#include "ops/logreopen.h"
#include "serve/log_sink.h"

static int dirfd_ = -1;
static char base[256];

int logreopen_init(const char *path)
{
	if (!path || !strcmp(path, "-"))
		return -1;
	char dir[4096];
	const char *b = pathfd_split(path, dir, sizeof(dir));
	if (!*b || strlen(b) >= sizeof(base))
		return MOAT_EINVAL;
	snprintf(base, sizeof(base), "%s", b);
	dirfd_ = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return dirfd_ >= 0 ? dirfd_ : MOAT_EIO;
}

int logreopen_now(struct log_sink *f, char *err, size_t errlen)
{
	if (dirfd_ < 0 || !f)
		return 0;
	int fd = openat(dirfd_, base, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0) {
		snprintf(err, errlen, "cannot reopen the log %s: %s", base, strerror(errno));
		return MOAT_EIO;
	}
	if (log_sink_reopen_fd(f, fd) < 0) {
		snprintf(err, errlen, "cannot reopen the log %s: %s", base, strerror(errno));
		return MOAT_EIO;
	}
	return 0;
}

void logreopen_release(void)
{
	if (dirfd_ >= 0)
		close(dirfd_);
	dirfd_ = -1;
}
