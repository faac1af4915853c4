/* privdrop.c owns moatd's least-privilege step (see privdrop.h). The filter allows what
 * glibc, libuv (epoll, eventfd, timers, signals through a pipe) and moatd itself use: socket I/O
 * on already bound sockets, upstream sockets (socket/bind/connect), reading policy files again on
 * SIGHUP, memory management and clocks. The calls that could reach further are allowed only
 * with checked arguments: socket() only for AF_INET/AF_INET6 datagram or stream sockets and
 * AF_UNIX (the firewall channel, a control socket); openat() only read-only, or for writing
 * only relative to the log's directory (the reopen on SIGUSR1); kill()/tgkill() only to moatd
 * itself; ioctl() only the few requests libuv makes (FIONBIO, FIOCLEX, FIONCLEX, FIONREAD).
 * The runtime agents' LMDB store (agentstore.c) is opened before the filter and written after
 * it with calls already here (pwrite64/writev, lseek, fdatasync, futex). Anything else fails with
 * EPERM rather than killing the process: a forgotten rare call then fails that one operation,
 * closed, instead of taking the resolver down. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "moat/err.h"
#include "sys/privdrop.h"

static const char *const allowed_calls[] = {
    /* I/O and files (the log, policy files on reload) */
    "read",
    "write",
    "readv",
    "writev",
    "pread64",
    "pwrite64",
    "close",
    "fstat",
    "newfstatat",
    "statx",
    "lseek",
    "fcntl",
    "dup",
    "dup2",
    "dup3",
    "fsync",
    "fdatasync",
    /* sockets */
    "bind",
    "connect",
    "listen",
    "accept4",
    "getsockname",
    "getpeername",
    "setsockopt",
    "getsockopt",
    "sendto",
    "recvfrom",
    "sendmsg",
    "recvmsg",
    "sendmmsg",
    "recvmmsg",
    "shutdown",
    /* the event loop */
    "epoll_create1",
    "epoll_ctl",
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "poll",
    "ppoll",
    "eventfd2",
    "pipe2",
    "timerfd_create",
    "timerfd_settime",
    /* memory, time, randomness, threads' housekeeping */
    "mmap",
    "munmap",
    "mremap",
    "mprotect",
    "madvise",
    "brk",
    "getrandom",
    "clock_gettime",
    "clock_getres",
    "gettimeofday",
    "nanosleep",
    "clock_nanosleep",
    "futex",
    "sched_yield",
    "getpid",
    "gettid",
    "getuid",
    "geteuid",
    "getgid",
    "getegid",
    "uname",
    "prlimit64",
    "getrusage",
    /* a thread created just before the filter (libmicrohttpd's for the metrics endpoint,
     * libfstrm's dnstap writer) may register with the kernel only after it: harmless calls,
     * and glibc aborts the thread's start when rseq is refused */
    "rseq",
    "set_robust_list",
    /* signals and exit */
    "rt_sigaction",
    "rt_sigprocmask",
    "rt_sigreturn",
    "sigaltstack",
    "restart_syscall",
    "exit",
    "exit_group",
#ifdef MOAT_SANITIZE_BUILD
    /* AddressSanitizer's leak check at exit stops the world with a traced helper thread; the
     * sanitizer build is for tests only and never ships. */
    "clone",
    "clone3",
    "ptrace",
    "wait4",
    "waitpid",
    "readlink",
    "readlinkat",
    "prctl",
    "sched_getaffinity",
    "getppid",
    "sysinfo",
    "unlink",
    "mkdir",
    /* GCC's libsanitizer lists the threads with the legacy open/getdents on x86-64; without
     * them the leak check fails at exit ("Can't open /proc/N/task") and moatd exits 1. */
    "open",
    "getdents",
    "getdents64",
#endif
};

/* The calls allowed only with checked arguments (see the file comment). */
static int add_checked(scmp_filter_ctx ctx, int log_dirfd)
{
	const scmp_datum_t wflags = O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND;
	const scmp_datum_t pid = (scmp_datum_t)getpid();
	int rc = 0;
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
	                       SCMP_A2(SCMP_CMP_MASKED_EQ, wflags, 0));
	if (log_dirfd >= 0)
		rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
		                       SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)log_dirfd));
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
	                       SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
	static const int fams[] = {AF_INET, AF_INET6}, types[] = {SOCK_DGRAM, SOCK_STREAM};
	for (int f = 0; f < 2; f++)
		for (int t = 0; t < 2; t++)
			/* the type's low bits; SOCK_NONBLOCK and SOCK_CLOEXEC may be or-ed in */
			rc |= seccomp_rule_add(
			    ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2,
			    SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fams[f]),
			    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, (scmp_datum_t)types[t]));
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1, SCMP_A0(SCMP_CMP_EQ, pid));
	rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1, SCMP_A0(SCMP_CMP_EQ, pid));
	static const unsigned long ioctls[] = {FIONBIO, FIOCLEX, FIONCLEX, FIONREAD};
	for (size_t i = 0; i < sizeof(ioctls) / sizeof(ioctls[0]); i++)
		rc |= seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
		                       SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)ioctls[i]));
	return rc;
}

static int install_filter(int log_dirfd, char *err, size_t errlen)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	if (!ctx) {
		snprintf(err, errlen, "seccomp: cannot create a filter");
		return MOAT_ENOMEM;
	}
	/* Every thread gets the filter at once (the workers wait at a barrier meanwhile). */
	if (seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1) < 0) {
		snprintf(err, errlen, "seccomp: cannot filter every thread");
		seccomp_release(ctx);
		return MOAT_EINVAL;
	}
	for (size_t i = 0; i < sizeof(allowed_calls) / sizeof(allowed_calls[0]); i++) {
		int nr = seccomp_syscall_resolve_name(allowed_calls[i]);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not a call on this architecture */
		if (seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0) < 0) {
			snprintf(err, errlen, "seccomp: cannot allow %s", allowed_calls[i]);
			seccomp_release(ctx);
			return MOAT_EINVAL;
		}
	}
	if (add_checked(ctx, log_dirfd) != 0) {
		snprintf(err, errlen, "seccomp: cannot add the argument checks");
		seccomp_release(ctx);
		return MOAT_EINVAL;
	}
	int rc = seccomp_load(ctx);
	seccomp_release(ctx);
	if (rc < 0) {
		snprintf(err, errlen, "seccomp: cannot load the filter: %s", strerror(-rc));
		return MOAT_EIO;
	}
	return 0;
}

int privdrop_pick_user(const char *configured, bool firewall, const char **user, char *err,
                       size_t errlen)
{
	*user = NULL;
	if (configured) {
		*user = strcmp(configured, "root") == 0 ? NULL : configured;
		return 0;
	}
	if (geteuid() != 0)
		return 0; /* nothing to drop */
	if (getpwnam(PRIVDROP_USER)) {
		*user = PRIVDROP_USER;
		return 0;
	}
	/* moat-fw admits only moat by default, and nobody may be moat-fw's own user (or any other
	 * daemon's): with a firewall channel, falling back to it would either not work or share. */
	if (firewall) {
		snprintf(err, errlen,
		         "no user '" PRIVDROP_USER "' to drop to (moat-fw admits it by default): "
		         "create it (useradd --system --user-group --no-create-home --shell "
		         "/usr/sbin/nologin " PRIVDROP_USER "; the install's sysusers.d does), or "
		         "name moatd's user with user: / --user and moat-fw's --moatd-user");
		return MOAT_ENOENT;
	}
	fprintf(stderr,
	        "moatd: warning: no user '" PRIVDROP_USER "': dropping to nobody, a user "
	        "other daemons share; create " PRIVDROP_USER " (README: without systemd)\n");
	*user = "nobody";
	return 0;
}

static int become(const char *user, char *err, size_t errlen)
{
	struct passwd *pw = getpwnam(user);
	if (!pw) {
		snprintf(err, errlen, "no such user '%s'", user);
		return MOAT_EINVAL;
	}
	/* Groups first: after setuid there is no permission left to change them. */
	if (setgroups(0, NULL) < 0 || setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0) {
		snprintf(err, errlen, "cannot become user '%s': %m", user);
		return MOAT_EIO;
	}
	if (pw->pw_uid != 0 && setuid(0) == 0) {
		snprintf(err, errlen, "could regain root after dropping to '%s'", user);
		return MOAT_EIO;
	}
	return 0;
}

int privdrop_apply(const struct privdrop_opts *o, char *err, size_t errlen)
{
	const char *user;
	int rc = privdrop_pick_user(o->user, o->firewall, &user, err, errlen);
	if (rc < 0)
		return rc;
	if (o->user && !user && geteuid() == 0)
		fprintf(stderr, "moatd: warning: --user root: staying root (the system-call filter "
		                "still applies)\n");
	if (user && (rc = become(user, err, errlen)) < 0)
		return rc;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		snprintf(err, errlen, "cannot set no_new_privs: %m");
		return MOAT_EIO;
	}
	return o->filter ? install_filter(o->log_dirfd, err, errlen) : 0;
}
