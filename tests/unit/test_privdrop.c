/* Unit tests for moatd's privilege drop: the default user, and the system-call filter's
 * argument checks, tried for real in a forked child under the very filter moatd loads (issue
 * 12: open(/etc/passwd, O_RDWR), socket(AF_PACKET), socket(AF_NETLINK) and kill(1, 0) used to
 * succeed under it). */
#include <criterion/criterion.h>
#include <pwd.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "moat/err.h"
#include "sys/privdrop.h"

/* What one call did under the filter: 0 allowed, 1 refused with EPERM, 2 something else. */
static int refused(long rc)
{
	if (rc >= 0)
		return 0;
	return errno == EPERM ? 1 : 2;
}

static int sock(int fam, int type)
{
	int fd = socket(fam, type, 0);
	int r = refused(fd);
	if (fd >= 0)
		close(fd);
	return r;
}

static int opened(const char *path, int flags)
{
	int fd = open(path, flags, 0600);
	int r = refused(fd);
	if (fd >= 0)
		close(fd);
	return r;
}

/* Runs in the child: each line is "name result", result as refused() gives it. */
static void probe(FILE *out, int logdir)
{
	fprintf(out, "open-rdwr %d\n", opened("/etc/passwd", O_RDWR));
	fprintf(out, "open-wronly %d\n", opened("/etc/passwd", O_WRONLY | O_APPEND));
	fprintf(out, "open-creat %d\n", opened("/tmp/moat-privdrop-never", O_RDONLY | O_CREAT));
	fprintf(out, "open-rdonly %d\n", opened("/etc/passwd", O_RDONLY));
	int fd = openat(logdir, "log.jsonl", O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
	fprintf(out, "openat-logdir-write %d\n", refused(fd));
	if (fd >= 0)
		close(fd);
	fprintf(out, "socket-packet %d\n", sock(AF_PACKET, SOCK_RAW));
	fprintf(out, "socket-netlink %d\n", sock(AF_NETLINK, SOCK_RAW));
	fprintf(out, "socket-inet-raw %d\n", sock(AF_INET, SOCK_RAW));
	fprintf(out, "socket-inet6-raw %d\n", sock(AF_INET6, SOCK_RAW));
	fprintf(out, "socket-inet-dgram %d\n", sock(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK));
	fprintf(out, "socket-inet6-stream %d\n", sock(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC));
	fprintf(out, "socket-unix %d\n", sock(AF_UNIX, SOCK_SEQPACKET));
	fprintf(out, "kill-init %d\n", refused(kill(1, 0)));
	fprintf(out, "kill-self %d\n", refused(kill(getpid(), 0)));
	fprintf(out, "tgkill-other %d\n", refused(syscall(SYS_tgkill, 1, 1, 0)));
	fprintf(out, "tgkill-self %d\n", refused(syscall(SYS_tgkill, getpid(), gettid(), 0)));
	int one = 1;
	fprintf(out, "ioctl-fionbio %d\n", refused(ioctl(fileno(out), FIONBIO, &one)));
	char c = 'x';
	fprintf(out, "ioctl-tiocsti %d\n", refused(ioctl(0, TIOCSTI, &c)));
	struct termios t;
	fprintf(out, "ioctl-tcgets %d\n", refused(ioctl(0, TCGETS, &t)));
}

static char results[4096];

/* Fork, install the filter in the child (no user change: the test may not be root), probe. */
static void run_under_filter(void)
{
	char dir[] = "/tmp/moat-privdrop-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	int logdir = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cr_assert_geq(logdir, 0);
	int p[2];
	cr_assert_eq(pipe(p), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(p[0]);
		FILE *out = fdopen(p[1], "w");
		char err[256];
		struct privdrop_opts o = {.user = "root", .filter = true, .log_dirfd = logdir};
		if (geteuid() != 0)
			o.user = NULL;
		if (!out || privdrop_apply(&o, err, sizeof(err)) < 0)
			_exit(3);
		probe(out, logdir);
		fclose(out);
		_exit(0);
	}
	close(p[1]);
	size_t n = 0;
	ssize_t r;
	while ((r = read(p[0], results + n, sizeof(results) - 1 - n)) > 0)
		n += (size_t)r;
	results[n] = '\0';
	close(p[0]);
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d: %s", st, results);
	char f[256];
	snprintf(f, sizeof(f), "%s/log.jsonl", dir);
	unlink(f);
	rmdir(dir);
	close(logdir);
}

static int result_of(const char *name)
{
	char key[64];
	snprintf(key, sizeof(key), "%s ", name);
	for (const char *s = results; (s = strstr(s, key)); s++)
		if (s == results || s[-1] == '\n')
			return s[strlen(key)] - '0';
	cr_assert_fail("no result for %s in:\n%s", name, results);
	return -1;
}

Test(privdrop, filter_refuses_what_moatd_never_needs)
{
	run_under_filter();
	static const char *const no[] = {
	    "open-rdwr",      "open-wronly",     "open-creat",       "socket-packet",
	    "socket-netlink", "socket-inet-raw", "socket-inet6-raw", "kill-init",
	    "tgkill-other",   "ioctl-tiocsti",   "ioctl-tcgets",
	};
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		cr_expect_eq(result_of(no[i]), 1, "%s was not refused with EPERM:\n%s", no[i],
		             results);
}

Test(privdrop, filter_allows_what_moatd_does)
{
	run_under_filter();
	static const char *const yes[] = {
	    "open-rdonly", "openat-logdir-write", "socket-inet-dgram", "socket-inet6-stream",
	    "socket-unix", "kill-self",           "tgkill-self",       "ioctl-fionbio",
	};
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		cr_expect_eq(result_of(yes[i]), 0, "%s was refused:\n%s", yes[i], results);
}

Test(privdrop, default_user)
{
	const char *u = "x";
	char err[512];
	cr_expect_eq(privdrop_pick_user("root", true, &u, err, sizeof(err)), 0);
	cr_expect_null(u, "root asked for: stay");
	cr_expect_eq(privdrop_pick_user("daemon", true, &u, err, sizeof(err)), 0);
	cr_expect_str_eq(u, "daemon");
	if (geteuid() != 0) {
		cr_expect_eq(privdrop_pick_user(NULL, true, &u, err, sizeof(err)), 0);
		cr_expect_null(u, "not root: nothing to drop");
		return;
	}
	bool have = getpwnam(PRIVDROP_USER) != NULL;
	cr_expect_eq(privdrop_pick_user(NULL, false, &u, err, sizeof(err)), 0);
	cr_expect_str_eq(u, have ? PRIVDROP_USER : "nobody", "without a firewall");
	/* With a firewall channel never nobody: moat-fw would not admit it, or share it. */
	int rc = privdrop_pick_user(NULL, true, &u, err, sizeof(err));
	if (have) {
		cr_expect_eq(rc, 0);
		cr_expect_str_eq(u, PRIVDROP_USER);
	} else {
		cr_expect_eq(rc, MOAT_ENOENT);
		cr_expect(strstr(err, "useradd") != NULL, "%s", err);
	}
}
