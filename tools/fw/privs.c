/* privs.c owns moat-fw's least-privilege step (see privs.h). It runs after the namespace is
 * entered (setns needs CAP_SYS_ADMIN), the socket is bound and the table is built. Capabilities
 * are set with the raw capset call, so no extra library is needed for three masks.
 *
 * The system-call filter is an allowlist, made by watching moat-fw (its libuv loop, LMDB and
 * libnftables' netlink talk) under strace through start-up, grants, purges and stop: anything
 * else fails with EPERM, and the calls that would change what the process is (execve,
 * io_uring, ptrace) kill it. Arguments are checked where a call could reach further: socket()
 * only Unix and netlink, openat() only read-only, ioctl() only libuv's four requests. */
#include "privs.h"

#include "moat/err.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

static int drop_bounding(char *err, size_t errlen)
{
	/* The bounding set first: nothing but CAP_NET_ADMIN can ever come back. */
	for (int cap = 0; cap <= 63; cap++) {
		/* Already gone (a unit's CapabilityBoundingSet=): dropping it again would need
		 * CAP_SETPCAP, which may be gone too. */
		if (cap == CAP_NET_ADMIN || prctl(PR_CAPBSET_READ, cap, 0, 0, 0) <= 0)
			continue;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL) {
			snprintf(err, errlen, "cannot drop capability %d from the bounding set: %m",
			         cap);
			return MOAT_EIO;
		}
	}
	return 0;
}

/* Become uid/gid, keeping the permitted capabilities across the change. */
static int become_user(uid_t uid, gid_t gid, char *err, size_t errlen)
{
	if (uid == 0 && gid == 0)
		return 0;
	if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0 || setgroups(0, NULL) != 0 ||
	    setresgid(gid, gid, gid) != 0 || setresuid(uid, uid, uid) != 0) {
		snprintf(err, errlen, "cannot become uid %u gid %u: %m", (unsigned)uid,
		         (unsigned)gid);
		return MOAT_EIO;
	}
	prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0);
	return 0;
}

static int keep_net_admin(char *err, size_t errlen)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof(d));
	d[CAP_TO_INDEX(CAP_NET_ADMIN)].effective = CAP_TO_MASK(CAP_NET_ADMIN);
	d[CAP_TO_INDEX(CAP_NET_ADMIN)].permitted = CAP_TO_MASK(CAP_NET_ADMIN);
	d[CAP_TO_INDEX(CAP_NET_ADMIN)].inheritable = CAP_TO_MASK(CAP_NET_ADMIN);
	if (syscall(SYS_capset, &h, d) < 0) {
		snprintf(err, errlen, "cannot keep only CAP_NET_ADMIN: %m");
		return MOAT_EIO;
	}
	/* Ambient too: the capability then belongs to the process as that user, not to uid 0. */
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_ADMIN, 0, 0) < 0) {
		snprintf(err, errlen, "cannot raise CAP_NET_ADMIN as an ambient capability: %m");
		return MOAT_EIO;
	}
	return 0;
}

static const int fwprivs_allowed[] = {
    SCMP_SYS(read),
    SCMP_SYS(write),
    SCMP_SYS(writev),
    SCMP_SYS(readv),
    SCMP_SYS(pread64),
    SCMP_SYS(pwrite64),
    SCMP_SYS(close),
    SCMP_SYS(lseek),
    SCMP_SYS(fstat),
    SCMP_SYS(newfstatat),
    SCMP_SYS(statx),
    SCMP_SYS(fcntl),
    SCMP_SYS(fsync),
    SCMP_SYS(fdatasync),
    SCMP_SYS(msync),
    SCMP_SYS(mmap),
    SCMP_SYS(munmap),
    SCMP_SYS(mremap),
    SCMP_SYS(mprotect),
    SCMP_SYS(madvise),
    SCMP_SYS(brk),
    SCMP_SYS(futex),
    SCMP_SYS(epoll_wait),
    SCMP_SYS(epoll_pwait),
    SCMP_SYS(epoll_ctl),
    SCMP_SYS(epoll_create1),
    SCMP_SYS(poll),
    SCMP_SYS(ppoll),
    SCMP_SYS(pipe2),
    SCMP_SYS(eventfd2),
    SCMP_SYS(accept4),
    SCMP_SYS(recvfrom),
    SCMP_SYS(recvmsg),
    SCMP_SYS(sendto),
    SCMP_SYS(sendmsg),
    SCMP_SYS(getsockopt),
    SCMP_SYS(setsockopt),
    SCMP_SYS(getsockname),
    SCMP_SYS(bind),
    SCMP_SYS(rt_sigaction),
    SCMP_SYS(rt_sigprocmask),
    SCMP_SYS(rt_sigreturn),
    SCMP_SYS(clock_gettime),
    SCMP_SYS(clock_nanosleep),
    SCMP_SYS(nanosleep),
    SCMP_SYS(gettimeofday),
    SCMP_SYS(getpid),
    SCMP_SYS(gettid),
    SCMP_SYS(getuid),
    SCMP_SYS(geteuid),
    SCMP_SYS(getgid),
    SCMP_SYS(getegid),
    SCMP_SYS(getrandom),
    SCMP_SYS(tgkill),
    SCMP_SYS(exit),
    SCMP_SYS(exit_group),
    SCMP_SYS(unlink),
    SCMP_SYS(uname),
    SCMP_SYS(sched_yield),
    SCMP_SYS(restart_syscall),
    SCMP_SYS(getdents64),
    SCMP_SYS(sysinfo),
    SCMP_SYS(pselect6),
    SCMP_SYS(select),
    SCMP_SYS(recvmmsg),
    SCMP_SYS(sendmmsg),
    SCMP_SYS(shutdown),
    SCMP_SYS(getpeername),
    SCMP_SYS(sigaltstack), /* ASan unpoisons the signal stack on noreturn calls */
    /* A new thread (the metrics server's) registers these itself, maybe after the filter. */
    SCMP_SYS(rseq),
    SCMP_SYS(set_robust_list),
#ifdef MOAT_SANITIZE_BUILD
    /* AddressSanitizer's leak check at exit stops the world with a traced helper thread and
     * lists threads with the legacy open/getdents; the sanitizer build never ships. */
    SCMP_SYS(clone),
    SCMP_SYS(clone3),
    SCMP_SYS(ptrace),
    SCMP_SYS(wait4),
    SCMP_SYS(readlink),
    SCMP_SYS(readlinkat),
    SCMP_SYS(prctl),
    SCMP_SYS(sched_getaffinity),
    SCMP_SYS(getppid),
    SCMP_SYS(open),
    SCMP_SYS(getdents),
    SCMP_SYS(kill),
#endif
};

static const int fwprivs_fatal[] = {
    SCMP_SYS(execve),
    SCMP_SYS(execveat),
    SCMP_SYS(io_uring_setup),
    SCMP_SYS(io_uring_enter),
    SCMP_SYS(io_uring_register),
#ifndef MOAT_SANITIZE_BUILD
    SCMP_SYS(ptrace),
#endif
    SCMP_SYS(process_vm_writev),
};

int fwprivs_filter(char *err, size_t errlen)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	if (!ctx) {
		snprintf(err, errlen, "seccomp: cannot create a filter");
		return MOAT_ENOMEM;
	}
	int rc = 0;
	for (size_t i = 0; i < sizeof(fwprivs_allowed) / sizeof(fwprivs_allowed[0]) && rc == 0; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, fwprivs_allowed[i], 0);
	for (size_t i = 0; i < sizeof(fwprivs_fatal) / sizeof(fwprivs_fatal[0]) && rc == 0; i++)
		rc = seccomp_rule_add(ctx, SCMP_ACT_KILL_PROCESS, fwprivs_fatal[i], 0);
	/* Sockets: only Unix (the grant socket) and netlink (nftables). Spelled out rather than
	 * SCMP_A0(), whose expansion leaves datum_b to clang's missing-initializer warning. */
	static const int families[] = {AF_UNIX, AF_NETLINK};
	for (size_t i = 0; i < 2 && rc == 0; i++) {
		struct scmp_arg_cmp cmp = {.arg = 0,
		                           .op = SCMP_CMP_EQ,
		                           .datum_a = (scmp_datum_t)families[i],
		                           .datum_b = 0};
		rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1, &cmp);
	}
	/* ioctl: only what libuv asks (non-blocking, close-on-exec, bytes waiting), as in moatd's
	 * filter; a terminal's or a device's requests (TIOCSTI, ...) are refused. */
	static const unsigned long ioctls[] = {FIONBIO, FIOCLEX, FIONCLEX, FIONREAD};
	for (size_t i = 0; i < sizeof(ioctls) / sizeof(ioctls[0]) && rc == 0; i++) {
		struct scmp_arg_cmp cmp = {
		    .arg = 1, .op = SCMP_CMP_EQ, .datum_a = (scmp_datum_t)ioctls[i], .datum_b = 0};
		rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1, &cmp);
	}
	/* Files: read-only opens (libnftables and glibc may read a table), nothing written. */
	if (rc == 0) {
		struct scmp_arg_cmp cmp = {.arg = 2,
		                           .op = SCMP_CMP_MASKED_EQ,
		                           .datum_a = O_ACCMODE | O_CREAT | O_TRUNC,
		                           .datum_b = O_RDONLY};
		rc = seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1, &cmp);
	}
	/* Every thread: the metrics server's runs beside the loop. */
	if (rc == 0)
		rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
	if (rc == 0)
		rc = seccomp_load(ctx);
	seccomp_release(ctx);
	if (rc < 0) {
		snprintf(err, errlen, "seccomp: %s", strerror(-rc));
		return MOAT_EIO;
	}
	return 0;
}

int fwprivs_drop_caps(uid_t uid, gid_t gid, char *err, size_t errlen)
{
	int rc = drop_bounding(err, errlen);
	if (rc == 0)
		rc = become_user(uid, gid, err, errlen);
	if (rc == 0)
		rc = keep_net_admin(err, errlen);
	if (rc)
		return rc;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		snprintf(err, errlen, "cannot set no_new_privs: %m");
		return MOAT_EIO;
	}
	return 0;
}
