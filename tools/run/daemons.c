/* daemons.c owns the private mode's daemons: moat-fw in the netns placement inside the
 * sandbox's namespace (its table there, on the sandbox's only link, gone with the namespace)
 * and moatd in this namespace, listening on the veth's host end, with the run's allowlist as
 * its default agent and moat-fw as its firewall. Both are started by an init of their own, PID
 * 1 of a new PID namespace that dies with moat run (PR_SET_PDEATHSIG), so a kill -9 of moat run
 * takes the daemons with it even though they changed user (which clears their own death
 * signal). The init starts moatd, waits for its READY=1 (the systemd notify protocol both
 * daemons speak, on a socket in the slot directory; a datagram counts only from the daemon's
 * own PID), then moat-fw the same way, then tells moat run; on SIGTERM it stops both. moatd
 * first: it then connects to moat-fw at its first grant, as the user it dropped to, which is
 * the one moat-fw takes grants from.
 *
 * Why the netns placement here and not a private moat-fw in the forward placement on this
 * host: table inet moat is one per namespace, so a private moat-fw here would replace the
 * system's table or another run's. Inside the sandbox's namespace its packet-socket limit does
 * not apply: the command holds no capability at all. */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MOAT_RUN_SBINDIR
#define MOAT_RUN_SBINDIR "/usr/sbin"
#endif

#define DMN_READY_MS 15000 /* each daemon's start, at most */
#define DMN_STOP_MS 5000
#define DMN_ARGS 48

struct dmn_argv {
	char *v[DMN_ARGS];
	int n;
	char buf[4096];
	size_t used;
};

static void dmn_arg(struct dmn_argv *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void dmn_arg(struct dmn_argv *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *p = a->buf + a->used;
	int n = vsnprintf(p, sizeof(a->buf) - a->used, fmt, ap);
	va_end(ap);
	if (n < 0 || a->used + (size_t)n + 1 > sizeof(a->buf) || a->n >= DMN_ARGS - 1)
		return;
	a->used += (size_t)n + 1;
	a->v[a->n++] = p;
	a->v[a->n] = NULL;
}

/* A daemon's program: beside moat (a build tree), in ../sbin (an install), or the configured
 * sbin directory. */
static void dmn_program(const char *name, char *out, size_t cap)
{
	char self[512];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = 0;
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = 0;
			snprintf(out, cap, "%s/%s", self, name);
			if (access(out, X_OK) == 0)
				return;
			snprintf(out, cap, "%s/../sbin/%s", self, name);
			if (access(out, X_OK) == 0)
				return;
		}
	}
	snprintf(out, cap, "%s/%s", MOAT_RUN_SBINDIR, name);
}

/* The user moatd drops to when started as root (its default): moat, else nobody. */
static struct passwd *dmn_moatd_user(void)
{
	struct passwd *pw = getpwnam("moat");
	return pw ? pw : getpwnam("nobody");
}

static int dmn_args(const struct run_state *st, const struct run_opts *o, struct dmn_argv *fw,
                    struct dmn_argv *md)
{
	char host[20];
	snprintf(host, sizeof(host), "%u.%u.%u.%u", st->host4[0], st->host4[1], st->host4[2],
	         st->host4[3]);
	struct passwd *pw = dmn_moatd_user();
	if (!pw) {
		run_err("no user moat or nobody for moatd to run as");
		return -1;
	}
	char prog[600];
	dmn_program("moat-fw", prog, sizeof(prog));
	dmn_arg(fw, "%s", prog);
	dmn_arg(fw, "--socket=%s/fw.sock", st->dir);
	dmn_arg(fw, "--netns=/proc/%ld/ns/net", (long)st->sandbox_pid);
	dmn_arg(fw, "--resolver=%s", host);
	dmn_arg(fw, "--state=%s/fw", st->dir);
	dmn_arg(fw, "--moatd-user=%u", (unsigned)pw->pw_uid);
	dmn_arg(fw, "--socket-group=%u", (unsigned)pw->pw_gid);
	/* The two never share a user (moat-fw refuses to run as the one it admits): without the
	 * users the install creates, this run's moat-fw stays root with CAP_NET_ADMIN alone. */
	if (strcmp(pw->pw_name, "moat") != 0)
		dmn_arg(fw, "--user=root");
	if (o->min_lifetime)
		dmn_arg(fw, "--min-lifetime=%u", o->min_lifetime);
	dmn_program("moatd", prog, sizeof(prog));
	dmn_arg(md, "%s", prog);
	dmn_arg(md, "--listen=%s:53", host);
	for (size_t i = 0; i < o->nupstream; i++)
		dmn_arg(md, "--upstream=%s", o->upstream[i]);
	dmn_arg(md, "--allow=%s/allow.txt", st->dir);
	dmn_arg(md, "--firewall=%s/fw.sock", st->dir);
	dmn_arg(md, "--log=%s/queries.jsonl", st->dir);
	dmn_arg(md, "--user=%s", pw->pw_name); /* named: moatd refuses to guess beside a firewall */
	if (o->deny)
		dmn_arg(md, "--deny=%s", o->deny);
	return 0;
}

static int dmn_allowlist(const struct run_state *st, const struct run_opts *o)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/allow.txt", st->dir);
	FILE *f = fopen(path, "we");
	if (!f)
		return -1;
	/* Line N is the run's line N: the summary names rules by it (summary.c). */
	for (size_t i = 0; i < o->nlines; i++)
		fprintf(f, "%s\n", o->lines[i]);
	return fclose(f);
}

static pid_t dmn_spawn(struct dmn_argv *a, const char *log, const char *notify)
{
	int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		int null = open("/dev/null", O_RDONLY);
		if (null < 0 || dup2(null, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			_exit(127);
		setenv("NOTIFY_SOCKET", notify, 1);
		execv(a->v[0], a->v);
		fprintf(stderr, "moat run: %s: %s\n", a->v[0], strerror(errno));
		_exit(127);
	}
	close(fd);
	return pid;
}

static long dmn_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait until pid says READY=1 on ns (a datagram whose sender is pid). 0, or -1 when it exited
 * or the time ran out. */
static int dmn_ready(int ns, int sigfd, pid_t pid)
{
	long end = dmn_now_ms() + DMN_READY_MS;
	for (long now; (now = dmn_now_ms()) < end;) {
		struct pollfd p[2] = {{.fd = ns, .events = POLLIN},
		                      {.fd = sigfd, .events = POLLIN}};
		if (poll(p, 2, (int)(end - now)) < 0 && errno != EINTR)
			return -1;
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(sigfd, &si, sizeof(si)) == sizeof(si) && si.ssi_signo == SIGCHLD &&
			    waitpid(pid, NULL, WNOHANG) == pid)
				return -1;
		}
		if (!(p[0].revents & POLLIN))
			continue;
		char buf[512], cbuf[CMSG_SPACE(sizeof(struct ucred))];
		struct iovec iov = {buf, sizeof(buf) - 1};
		struct msghdr mh = {.msg_iov = &iov,
		                    .msg_iovlen = 1,
		                    .msg_control = cbuf,
		                    .msg_controllen = sizeof(cbuf)};
		ssize_t n = recvmsg(ns, &mh, MSG_DONTWAIT);
		if (n <= 0)
			continue;
		buf[n] = 0;
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		struct ucred cr;
		if (!c || c->cmsg_type != SCM_CREDENTIALS)
			continue;
		memcpy(&cr, CMSG_DATA(c), sizeof(cr));
		if (cr.pid == pid && strstr(buf, "READY=1"))
			return 0;
	}
	return -1;
}

static int dmn_notify_socket(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path))
		return -1;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0), one = 1;
	unlink(path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* The daemons' init. Never returns. */
static void dmn_init(const struct run_state *st, struct dmn_argv *fw, struct dmn_argv *md,
                     int res_w)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	sandbox_close_fds();
	char notify[300], flog[300], mlog[300];
	snprintf(notify, sizeof(notify), "%s/notify", st->dir);
	snprintf(flog, sizeof(flog), "%s/moat-fw.log", st->dir);
	snprintf(mlog, sizeof(mlog), "%s/moatd.log", st->dir);
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	int sigfd = signalfd(-1, &set, SFD_CLOEXEC);
	int ns = dmn_notify_socket(notify);
	pid_t fpid = -1, mpid = -1;
	char what = 'm'; /* moatd did not start */
	if (sigfd >= 0 && ns >= 0 && (mpid = dmn_spawn(md, mlog, notify)) > 0 &&
	    dmn_ready(ns, sigfd, mpid) == 0) {
		what = 'f';
		if ((fpid = dmn_spawn(fw, flog, notify)) > 0 && dmn_ready(ns, sigfd, fpid) == 0)
			what = 'R';
	}
	if (write(res_w, &what, 1) != 1 || what != 'R') {
		/* PID 1's exit ends both daemons. */
		_exit(1);
	}
	close(res_w);
	for (int left = 2;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&set, &si);
		if (sig == SIGTERM || sig == SIGINT) {
			kill(fpid, SIGTERM);
			kill(mpid, SIGTERM);
			continue;
		}
		pid_t p;
		while ((p = waitpid(-1, NULL, WNOHANG)) > 0)
			if (p == fpid || p == mpid)
				left--;
		if (left <= 0)
			_exit(0);
	}
}

static void dmn_tail(const char *dir, const char *name)
{
	char path[300], line[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	char *last[8] = {0};
	int n = 0;
	while (fgets(line, sizeof(line), f)) {
		free(last[n % 8]);
		last[n++ % 8] = strdup(line);
	}
	fclose(f);
	for (int i = n > 8 ? n - 8 : 0; i < n; i++) {
		fprintf(stderr, "  %s: %s", name, last[i % 8] ? last[i % 8] : "\n");
		free(last[i % 8]);
	}
}

int daemons_start(struct run_state *st, const struct run_opts *o)
{
	static struct dmn_argv fw, md;
	memset(&fw, 0, sizeof(fw));
	memset(&md, 0, sizeof(md));
	if (dmn_allowlist(st, o) != 0 || dmn_args(st, o, &fw, &md) != 0)
		return -1;
	int res[2];
	if (pipe2(res, O_CLOEXEC) != 0)
		return -1;
	long pid = syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, NULL, NULL, NULL, NULL);
	if (pid == 0) {
		close(res[0]);
		dmn_init(st, &fw, &md, res[1]);
	}
	close(res[1]);
	if (pid < 0) {
		close(res[0]);
		run_err("cannot start the daemons: %s", strerror(errno));
		return -1;
	}
	st->daemons_pid = (pid_t)pid;
	char what = 0;
	struct pollfd p = {.fd = res[0], .events = POLLIN};
	if (poll(&p, 1, 2 * DMN_READY_MS + 1000) != 1 || read(res[0], &what, 1) != 1)
		what = 0;
	close(res[0]);
	if (what == 'R')
		return 0;
	run_err("the private %s did not start:", what == 'm' ? "moatd" : "moat-fw");
	dmn_tail(st->dir, what == 'm' ? "moatd.log" : "moat-fw.log");
	return -1;
}

void daemons_stop(struct run_state *st)
{
	if (st->daemons_pid <= 0)
		return;
	kill(st->daemons_pid, SIGTERM);
	long end = dmn_now_ms() + DMN_STOP_MS;
	while (waitpid(st->daemons_pid, NULL, WNOHANG) != st->daemons_pid) {
		if (dmn_now_ms() > end) {
			kill(st->daemons_pid, SIGKILL);
			waitpid(st->daemons_pid, NULL, 0);
			break;
		}
		struct timespec ts = {0, 5 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	st->daemons_pid = 0;
}
