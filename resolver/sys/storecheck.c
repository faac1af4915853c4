/* storecheck.c owns checking a store in a child process and moving a damaged one aside (see
 * moat/storecheck.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "moat/err.h"
#include "moat/storecheck.h"

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The child's reason, read until it closes the pipe or the deadline. True: it closed in time. */
static bool read_reason(int fd, char *why, size_t whylen, uint64_t deadline)
{
	size_t got = 0;
	for (;;) {
		uint64_t now = mono_ms();
		if (now >= deadline)
			return false;
		struct pollfd p = {fd, POLLIN, 0};
		int n = poll(&p, 1, (int)(deadline - now));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false; /* the deadline, or poll failed: stop the child */
		char tmp[256];
		ssize_t r = read(fd, tmp, sizeof(tmp));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return true;
		size_t k = (size_t)r < whylen - 1 - got ? (size_t)r : whylen - 1 - got;
		memcpy(why + got, tmp, k);
		got += k;
		why[got] = '\0';
	}
}

int storecheck_run(const char *dir, storecheck_fn fn, void *arg, unsigned timeout_ms, char *why,
                   size_t whylen)
{
	int p[2];
	if (whylen < 2)
		return MOAT_EINVAL;
	why[0] = '\0';
	if (pipe2(p, O_CLOEXEC) < 0) {
		snprintf(why, whylen, "cannot start the check: %s", strerror(errno));
		return MOAT_EIO;
	}
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(why, whylen, "cannot start the check: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return MOAT_EIO;
	}
	if (pid == 0) {
		char msg[512] = "";
		close(p[0]);
		int rc = fn(dir, arg, msg, sizeof(msg));
		if (rc && !msg[0])
			snprintf(msg, sizeof(msg), "the check failed");
		if (rc && write(p[1], msg, strlen(msg)) < 0)
			_exit(2);
		_exit(rc ? 1 : 0);
	}
	close(p[1]);
	bool closed = read_reason(p[0], why, whylen, mono_ms() + timeout_ms);
	close(p[0]);
	int st = 0;
	if (!closed)
		kill(pid, SIGKILL); /* our own child, by its pid */
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!closed) {
		snprintf(why, whylen, "the check took longer than %u ms (stopped)", timeout_ms);
		return MOAT_EFORMAT;
	}
	if (WIFSIGNALED(st)) {
		const char *sig = sigabbrev_np(WTERMSIG(st));
		snprintf(why, whylen, "the check was killed by SIG%s (a damaged page)",
		         sig ? sig : "?");
		return MOAT_EFORMAT;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		if (!why[0])
			snprintf(why, whylen, "the check stopped (exit status %d)",
			         WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		return MOAT_EFORMAT;
	}
	return 0;
}

int storecheck_move_aside(const char *dir, const char *name, const char *lock, char *moved,
                          size_t cap)
{
	char from[4096], stamp[32];
	time_t now = time(NULL);
	struct tm tm;
	gmtime_r(&now, &tm);
	strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &tm);
	snprintf(from, sizeof(from), "%s/%s", dir, name);
	snprintf(moved, cap, "%s/%s.damaged-%s", dir, name, stamp);
	if (rename(from, moved) < 0)
		return MOAT_EIO;
	if (lock) {
		snprintf(from, sizeof(from), "%s/%s", dir, lock);
		if (unlink(from) < 0 && errno != ENOENT)
			return MOAT_EIO;
	}
	return 0;
}
