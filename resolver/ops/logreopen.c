/* logreopen.c owns reopening the query log on SIGUSR1 (see logreopen.h): the helper process that
 * is the only one allowed to create a file once moatd has dropped its privileges, and moatd's
 * side of asking it.
 *
 * moatd's own system-call filter refuses every open for writing (privdrop.c): a filter cannot
 * read a path, so "only in the log's directory" cannot be said to it, and an absolute path or
 * ".." would pass any check on the directory descriptor alone. The helper is forked at start,
 * before any thread: it keeps the log's directory (O_PATH) and its name, drops to moatd's user,
 * loads a filter of its own (a request in, a descriptor out, one open), and for each request
 * opens that one name beneath that directory with openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
 * (a symbolic link out of the directory is refused too), sending the descriptor back over a
 * socket pair. Where openat2 is missing (Linux before 5.6) it opens with O_NOFOLLOW instead (a
 * link in the log's place is refused), and moatd says so at start. It exits when moatd's end
 * of the socket closes, or when moatd dies (PR_SET_PDEATHSIG). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "moat/err.h"
#include "moat/pathfd.h"
#include "ops/logreopen.h"
#include "serve/log_sink.h"

#define HELPER_SOCK 3 /* the helper's descriptors, after it closed all others */
#define HELPER_DIR 4

static int sock_ = -1;       /* moatd's end of the socket pair; -1: nothing to reopen */
static char base_[256];      /* the log's name in its directory */
static bool beneath_ = true; /* openat2 is there (else O_NOFOLLOW) */

/* The one open the helper does. */
static int open_log(int dirfd, const char *base)
{
	const int flags = O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY;
	struct open_how how = {.flags = (uint64_t)flags,
	                       .mode = 0640,
	                       .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
	if (beneath_)
		return (int)syscall(SYS_openat2, dirfd, base, &how, sizeof(how));
	return openat(dirfd, base, flags | O_NOFOLLOW, 0640);
}

/* The helper's filter: its requests and answers, its one open, and leaving. */
static int helper_filter(void)
{
	static const int calls[] = {
	    SCMP_SYS(read),
	    SCMP_SYS(write),
	    SCMP_SYS(sendmsg),
	    SCMP_SYS(close),
	    SCMP_SYS(openat),
	    SCMP_SYS(openat2),
	    SCMP_SYS(rt_sigreturn),
	    SCMP_SYS(exit),
	    SCMP_SYS(exit_group),
#ifdef MOAT_SANITIZE_BUILD
	    /* AddressSanitizer's leak check at exit (the sanitizer build never ships) */
	    SCMP_SYS(clone),
	    SCMP_SYS(clone3),
	    SCMP_SYS(ptrace),
	    SCMP_SYS(wait4),
	    SCMP_SYS(prctl),
	    SCMP_SYS(mmap),
	    SCMP_SYS(munmap),
	    SCMP_SYS(mprotect),
	    SCMP_SYS(sched_getaffinity),
	    SCMP_SYS(getpid),
	    SCMP_SYS(gettid),
	    SCMP_SYS(open),
	    SCMP_SYS(getdents64),
	    SCMP_SYS(getppid),
	    SCMP_SYS(readlink),
	    SCMP_SYS(rt_sigaction),
	    SCMP_SYS(madvise),
	    SCMP_SYS(futex),
	    SCMP_SYS(sigaltstack),
	    SCMP_SYS(newfstatat),
#endif
	};
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	int rc = ctx ? 0 : -1;
	for (size_t i = 0; !rc && i < sizeof(calls) / sizeof(calls[0]); i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, calls[i], 0);
	if (!rc)
		rc = seccomp_load(ctx);
	seccomp_release(ctx);
	return rc;
}

/* Become user (NULL: stay), with no way back and nothing more than the filter allows. */
static int helper_confine(const char *user)
{
	struct passwd *pw = user ? getpwnam(user) : NULL;
	if (user && (!pw || setgroups(0, NULL) < 0 || setgid(pw->pw_gid) < 0 ||
	             setuid(pw->pw_uid) < 0 || (pw->pw_uid && setuid(0) == 0)))
		return -1;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -1;
	return helper_filter();
}

/* The helper's life: a byte in, the log's descriptor (or the errno) out. */
static _Noreturn void helper_main(int sock, int dirfd, pid_t parent, const char *user)
{
	if (dup2(sock, 100) < 0 || dup2(dirfd, 101) < 0 || dup2(100, HELPER_SOCK) < 0 ||
	    dup2(101, HELPER_DIR) < 0 || close_range(HELPER_DIR + 1, ~0U, 0) < 0)
		_exit(1);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(0);
	if (helper_confine(user) < 0) {
		fprintf(stderr, "moatd: log reopen helper: cannot confine itself: %s\n",
		        strerror(errno));
		_exit(1);
	}
	for (;;) {
		char req;
		ssize_t n = read(HELPER_SOCK, &req, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0);
		int fd = open_log(HELPER_DIR, base_);
		int e = fd < 0 ? errno : 0;
		char cbuf[CMSG_SPACE(sizeof(int))] = {0};
		struct iovec iov = {&e, sizeof(e)};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
		if (fd >= 0) {
			m.msg_control = cbuf;
			m.msg_controllen = sizeof(cbuf);
			struct cmsghdr *c = CMSG_FIRSTHDR(&m);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int));
			memcpy(CMSG_DATA(c), &fd, sizeof(int));
		}
		ssize_t sent = sendmsg(HELPER_SOCK, &m, MSG_NOSIGNAL);
		if (fd >= 0)
			close(fd);
		if (sent < 0)
			_exit(0);
	}
}

/* Whether this kernel has openat2 (a probe that opens the directory itself, O_PATH). */
static bool have_openat2(int dirfd)
{
	struct open_how how = {.flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_BENEATH};
	int fd = (int)syscall(SYS_openat2, dirfd, ".", &how, sizeof(how));
	if (fd >= 0)
		close(fd);
	return fd >= 0 || errno != ENOSYS;
}

int logreopen_init(const char *path, const char *user)
{
	if (!path || !strcmp(path, "-"))
		return 0;
	char dir[4096];
	const char *b = pathfd_split(path, dir, sizeof(dir));
	if (!*b || strlen(b) >= sizeof(base_))
		return MOAT_EINVAL;
	snprintf(base_, sizeof(base_), "%s", b);
	int dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC), sv[2];
	if (dirfd < 0)
		return MOAT_EIO;
	if ((beneath_ = have_openat2(dirfd)) == false)
		fprintf(stderr,
		        "moatd: openat2 is missing (Linux before 5.6): the query log is reopened "
		        "with O_NOFOLLOW instead of RESOLVE_BENEATH\n");
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		close(dirfd);
		return MOAT_EIO;
	}
	pid_t parent = getpid(), pid = fork();
	if (pid == 0)
		helper_main(sv[1], dirfd, parent, user);
	close(sv[1]);
	close(dirfd);
	if (pid < 0) {
		close(sv[0]);
		return MOAT_EIO;
	}
	/* A helper that died or hangs must not hold SIGUSR1's handler (moatd's main loop). */
	struct timeval tv = {.tv_sec = 2};
	setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	sock_ = sv[0];
	return 0;
}

/* The helper's answer: the new descriptor, or -1 with errno. */
static int ask_helper(void)
{
	char req = 'o', cbuf[CMSG_SPACE(sizeof(int))];
	int e = 0, fd = -1;
	struct iovec iov = {&e, sizeof(e)};
	struct msghdr m = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	if (send(sock_, &req, 1, MSG_NOSIGNAL) != 1)
		return -1;
	ssize_t n;
	while ((n = recvmsg(sock_, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(e))
		return errno = n < 0 ? errno : EPIPE, -1;
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(c), sizeof(int));
	if (fd < 0)
		errno = e ? e : EIO;
	return fd;
}

int logreopen_now(struct log_sink *f, char *err, size_t errlen)
{
	if (sock_ < 0 || !f)
		return 0;
	int fd = ask_helper();
	if (fd < 0) {
		snprintf(err, errlen, "cannot reopen the log %s: %s", base_,
		         errno == EXDEV || errno == ELOOP
		             ? "a link out of the log's directory is refused"
		             : strerror(errno));
		return MOAT_EIO;
	}
	if (log_sink_reopen_fd(f, fd) < 0) {
		snprintf(err, errlen, "cannot reopen the log %s: %s", base_, strerror(errno));
		return MOAT_EIO;
	}
	return 0;
}

void logreopen_release(void)
{
	if (sock_ >= 0)
		close(sock_); /* the helper reads the end and exits */
	sock_ = -1;
}
