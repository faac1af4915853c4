/* Unit tests for moatd's privilege drop: the default user, and the system-call filter's
 * argument checks, tried for real in a forked child under the very filter moatd loads (issue
 * 12: open(/etc/passwd, O_RDWR), socket(AF_PACKET), socket(AF_NETLINK) and kill(1, 0) used to
 * succeed under it; issue 23: openat(logdir, "/etc/x") and "../escaped" with O_CREAT did),
 * and the log's reopen helper, the one way left to create a file (its name, beneath the log's
 * directory, no link out). */
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

#include <linux/openat2.h>
#include <stdbool.h>

#include "moat/err.h"
#include "ops/logreopen.h"
#include "serve/log_sink.h"
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
static void probe(FILE *out, int logdir, struct log_sink *log)
{
	fprintf(out, "open-rdwr %d\n", opened("/etc/passwd", O_RDWR));
	fprintf(out, "open-wronly %d\n", opened("/etc/passwd", O_WRONLY | O_APPEND));
	fprintf(out, "open-creat %d\n", opened("/tmp/moat-privdrop-never", O_RDONLY | O_CREAT));
	fprintf(out, "open-rdonly %d\n", opened("/etc/passwd", O_RDONLY));
	/* moatd itself creates nothing once filtered: not in the log's directory, not by an
	 * absolute path or ".." from its descriptor (the helper reopens the log) */
	static const char *const names[] = {"log.jsonl", "/tmp/moat-privdrop-abs-never",
	                                    "../moat-privdrop-escaped-never"};
	static const char *const keys[] = {"openat-logdir-write", "openat-logdir-absolute",
	                                   "openat-logdir-dotdot"};
	for (int i = 0; i < 3; i++) {
		int fd = openat(logdir, names[i], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
		fprintf(out, "%s %d\n", keys[i], refused(fd));
		if (fd >= 0)
			close(fd);
	}
	int fd = openat(logdir, "tmp", O_TMPFILE | O_RDWR, 0600);
	fprintf(out, "openat-tmpfile %d\n", refused(fd));
	if (fd >= 0)
		close(fd);
	struct open_how how = {.flags = O_WRONLY | O_CREAT, .mode = 0600};
	fd = (int)syscall(SYS_openat2, logdir, "log.jsonl", &how, sizeof(how));
	fprintf(out, "openat2 %d\n", refused(fd));
	if (fd >= 0)
		close(fd);
	/* the helper, asked as on SIGUSR1, creates the log (the parent checks it is there) */
	char why[256] = "";
	int lr = logreopen_now(log, why, sizeof(why));
	fprintf(out, "logreopen-create %d\n", lr == 0 ? 0 : 2);
	if (lr)
		fprintf(out, "logreopen-why %s\n", why);
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
static bool log_created;

/* Fork, start the log's helper and install the filter in the child (no user change: the test
 * may not be root), probe. */
static void run_under_filter(void)
{
	char dir[] = "/tmp/moat-privdrop-XXXXXX", logpath[128];
	cr_assert_not_null(mkdtemp(dir));
	snprintf(logpath, sizeof(logpath), "%s/log.jsonl", dir);
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
		struct privdrop_opts o = {.user = "root", .filter = true};
		if (geteuid() != 0)
			o.user = NULL;
		/* what the reopen lands on: a log opened on another name (logpath must not exist
		 * until the helper creates it) */
		char first[160];
		snprintf(first, sizeof(first), "%s/first.jsonl", dir);
		struct log_sink *log = NULL;
		if (!out || log_sink_open(first, 1, &log) < 0 || !log || unlink(first) < 0 ||
		    logreopen_init(logpath, NULL) < 0 || privdrop_apply(&o, err, sizeof(err)) < 0)
			_exit(3);
		probe(out, logdir, log);
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
	log_created = access(logpath, F_OK) == 0;
	unlink(logpath);
	rmdir(dir);
	close(logdir);
	cr_assert_neq(access("/tmp/moat-privdrop-abs-never", F_OK), 0, "created by absolute path");
	cr_assert_neq(access("/tmp/moat-privdrop-escaped-never", F_OK), 0, "created through ..");
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
	    "open-rdwr",
	    "open-wronly",
	    "open-creat",
	    "socket-packet",
	    "socket-netlink",
	    "socket-inet-raw",
	    "socket-inet6-raw",
	    "kill-init",
	    "tgkill-other",
	    "ioctl-tiocsti",
	    "ioctl-tcgets",
	    "openat-logdir-write",
	    "openat-logdir-absolute",
	    "openat-logdir-dotdot",
	    "openat-tmpfile",
	    "openat2",
	};
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		cr_expect_eq(result_of(no[i]), 1, "%s was not refused with EPERM:\n%s", no[i],
		             results);
}

Test(privdrop, filter_allows_what_moatd_does)
{
	run_under_filter();
	static const char *const yes[] = {
	    "open-rdonly", "socket-inet-dgram", "socket-inet6-stream", "socket-unix",
	    "kill-self",   "tgkill-self",       "ioctl-fionbio",       "logreopen-create",
	};
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		cr_expect_eq(result_of(yes[i]), 0, "%s was refused:\n%s", yes[i], results);
	cr_expect(log_created, "the helper created the log in its directory");
}

/* The helper opens the log's name beneath its directory only: a symbolic link put in the log's
 * place, pointing out of the directory, is refused, and nothing is created where it points. */
Test(privdrop, log_helper_refuses_a_link_out)
{
	char dir[] = "/tmp/moat-privdrop-XXXXXX", logpath[128], out[128], why[256] = "";
	cr_assert_not_null(mkdtemp(dir));
	snprintf(logpath, sizeof(logpath), "%s/log.jsonl", dir);
	snprintf(out, sizeof(out), "%s-outside", dir);
	cr_assert_eq(symlink(out, logpath), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct privdrop_opts o = {.user = NULL, .filter = true};
		char first[160];
		snprintf(first, sizeof(first), "%s/first.jsonl", dir);
		struct log_sink *log = NULL; /* before the filter */
		if (log_sink_open(first, 1, &log) < 0 || !log || unlink(first) < 0 ||
		    logreopen_init(logpath, NULL) < 0 || privdrop_apply(&o, why, sizeof(why)) < 0)
			_exit(3);
		_exit(logreopen_now(log, why, sizeof(why)) < 0 ? 0 : 1);
	}
	int st;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the link was followed (status %d)", st);
	cr_expect_neq(access(out, F_OK), 0, "a file was created outside the log's directory");
	unlink(out);
	unlink(logpath);
	rmdir(dir);
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
