/* sandbox.c owns the sandbox's processes: its init, PID 1 of new network, mount and PID
 * namespaces (killed with everything in them if moat run dies: PR_SET_PDEATHSIG), and the
 * command it runs.
 *
 * The init waits until moat run has built the links and the daemons, then makes its mount
 * namespace its own (slave of the host's, so nothing it mounts is seen outside), mounts a
 * fresh /proc, hides the host's resolver sockets (systemd-resolved's varlink and D-Bus
 * endpoints, nscd: a name asked through them would be resolved outside moat) and the sockets
 * of the user's processes outside that run commands (systemd --user, session bus, X, tmux,
 * screen), and binds the
 * run's resolv.conf, naming only moatd, over /etc/resolv.conf. Then it forks the command, which
 * drops to the invoking user with an empty capability bounding set, no inheritable or ambient
 * capability and no_new_privs before exec, keeping stdin/stdout/stderr, the environment and the
 * working directory. The init forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT that moat run sends
 * it (not the terminal's own, which reached the command already), reaps orphans, and when the
 * command ends reports its wait status and exits, which ends every process left in the PID
 * namespace. */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define SBX_MAX_GROUPS 256

/* What the children need, prepared before the clone (no name lookups in the sandbox). */
static struct {
	int go_r, status_w;
	uid_t uid;
	gid_t gid;
	gid_t groups[SBX_MAX_GROUPS];
	int ngroups;
	int last_cap;
	char resolv[300];
	char **argv;
	bool hup_ignored; /* moat run was started with SIGHUP ignored (nohup): so is the command */
} sbx;
static int go_w = -1, status_r = -1;

/* What the init reports: the command's wait status, or (exec_errno != 0) why exec failed. */
struct sbx_report {
	int status;
	int exec_errno;
};

static const int sbx_fwd[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

static void sbx_sigset(sigset_t *set)
{
	sigemptyset(set);
	for (size_t i = 0; i < sizeof(sbx_fwd) / sizeof(sbx_fwd[0]); i++)
		sigaddset(set, sbx_fwd[i]);
	sigaddset(set, SIGCHLD);
}

/* The first of a file's own mount point or its directory that exists, made inside a tmpfs
 * that now hides it: the resolv.conf target may live under a hidden directory. */
static int sbx_touch(const char *path)
{
	char d[300];
	snprintf(d, sizeof(d), "%s", path);
	for (char *p = d + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		if (mkdir(d, 0755) != 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

/* Hide a host directory behind an empty tmpfs, if it exists. */
static int sbx_hide(const char *dir)
{
	struct stat sb;
	if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
		return 0;
	return mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=64k");
}

static int sbx_mounts(void)
{
	/* Resolvers outside moat (systemd-resolved's varlink and D-Bus, nscd), and the sockets
	 * of processes outside the sandbox that run what they are told (the user's systemd and
	 * session bus under /run/user, an X server, tmux, screen): each a way around the
	 * sandbox's network. */
	static const char *const hidden[] = {
	    "/run/systemd/resolve", "/run/nscd",    "/var/run/nscd",  "/run/dbus",
	    "/var/run/dbus",        "/run/user",    "/tmp/.X11-unix", "/run/screen",
	    "/var/run/screen",      "/tmp/tmux-%u",
	};
	char target[300];
	if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) != 0)
		return -1;
	/* The real file behind /etc/resolv.conf (often a link into /run), before hiding. */
	if (!realpath("/etc/resolv.conf", target))
		snprintf(target, sizeof(target), "/etc/resolv.conf");
	if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0)
		return -1;
	for (size_t i = 0; i < sizeof(hidden) / sizeof(hidden[0]); i++) {
		char dir[64];
		const char *u = strstr(hidden[i], "%u");
		if (u)
			snprintf(dir, sizeof(dir), "%.*s%u", (int)(u - hidden[i]), hidden[i],
			         (unsigned)sbx.uid);
		else
			snprintf(dir, sizeof(dir), "%s", hidden[i]);
		if (sbx_hide(dir) != 0)
			return -1;
	}
	if (access(target, F_OK) != 0 && sbx_touch(target) != 0)
		return -1;
	if (mount(sbx.resolv, target, NULL, MS_BIND, NULL) != 0 ||
	    mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
	          NULL) != 0)
		return -1;
	return 0;
}

static int sbx_capset_zero(void)
{
	struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
	struct __user_cap_data_struct d[2];
	memset(d, 0, sizeof(d));
	return (int)syscall(SYS_capset, &h, d);
}

/* The command's process: the user, no capability at all, no_new_privs, then exec. */
static void sbx_exec(void)
{
	sigset_t none;
	sigemptyset(&none);
	for (size_t i = 0; i < sizeof(sbx_fwd) / sizeof(sbx_fwd[0]); i++)
		signal(sbx_fwd[i], sbx_fwd[i] == SIGHUP && sbx.hup_ignored ? SIG_IGN : SIG_DFL);
	signal(SIGCHLD, SIG_DFL);
	sigprocmask(SIG_SETMASK, &none, NULL);
	int rc = 0;
	for (int c = 0; c <= sbx.last_cap && rc == 0; c++)
		rc = prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0 && errno != EINVAL ? -1 : 0;
	if (rc == 0)
		rc = prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	if (rc == 0)
		rc = setgroups((size_t)sbx.ngroups, sbx.groups);
	if (rc == 0)
		rc = setresgid(sbx.gid, sbx.gid, sbx.gid);
	if (rc == 0)
		rc = setresuid(sbx.uid, sbx.uid, sbx.uid);
	if (rc == 0)
		rc = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	if (rc == 0)
		rc = sbx_capset_zero(); /* also for uid 0: nothing permitted, effective, inheritable
		                         */
	if (rc == 0)
		execvp(sbx.argv[0], sbx.argv);
	struct sbx_report r = {.status = 0, .exec_errno = errno ? errno : EPERM};
	if (write(sbx.status_w, &r, sizeof(r)) < 0) {
		/* nothing else to tell */
	}
	_exit(r.exec_errno == ENOENT ? 127 : 126);
}

/* PID 1 of the sandbox. Never returns. */
static void sbx_init(void)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	close(go_w);
	close(status_r);
	char c;
	/* moat run closes the pipe instead of writing when it gives up (or dies). */
	if (read(sbx.go_r, &c, 1) != 1)
		_exit(RUN_EXIT_FAIL);
	if (sbx_mounts() != 0) {
		fprintf(stderr, "moat run: sandbox mounts: %s\n", strerror(errno));
		struct sbx_report r = {.status = RUN_EXIT_FAIL << 8, .exec_errno = 0};
		if (write(sbx.status_w, &r, sizeof(r)) < 0)
			_exit(RUN_EXIT_FAIL);
		_exit(RUN_EXIT_FAIL);
	}
	pid_t cmd = fork();
	if (cmd == 0)
		sbx_exec();
	if (cmd < 0)
		_exit(RUN_EXIT_FAIL);
	sigset_t set;
	sbx_sigset(&set);
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&set, &si);
		if (sig == SIGCHLD) {
			int ws;
			pid_t p;
			while ((p = waitpid(-1, &ws, WNOHANG)) > 0) {
				if (p != cmd)
					continue; /* an orphan */
				struct sbx_report r = {.status = ws, .exec_errno = 0};
				if (write(sbx.status_w, &r, sizeof(r)) < 0)
					_exit(RUN_EXIT_FAIL);
				_exit(0);
			}
		} else if (sig > 0 && si.si_code != SI_KERNEL && cmd > 0) {
			kill(cmd, sig);
		}
	}
}

/* The invoking user's groups, looked up here, before the sandbox exists. */
static void sbx_groups(const struct run_opts *o)
{
	sbx.ngroups = 0;
	if (o->user) {
		int n = SBX_MAX_GROUPS;
		if (getgrouplist(o->user, o->gid, sbx.groups, &n) >= 0)
			sbx.ngroups = n;
	}
	if (sbx.ngroups == 0) {
		sbx.groups[0] = o->gid;
		sbx.ngroups = 1;
	}
}

static int sbx_last_cap(void)
{
	int v = CAP_LAST_CAP;
	FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = CAP_LAST_CAP;
		fclose(f);
	}
	return v < CAP_LAST_CAP ? CAP_LAST_CAP : v;
}

int sandbox_start(struct run_state *st, const struct run_opts *o)
{
	int go[2], status[2];
	if (pipe2(go, O_CLOEXEC) != 0)
		return -1;
	if (pipe2(status, O_CLOEXEC) != 0) {
		close(go[0]);
		close(go[1]);
		return -1;
	}
	sbx.go_r = go[0];
	sbx.status_w = status[1];
	go_w = go[1];
	status_r = status[0];
	sbx.uid = o->uid;
	sbx.gid = o->gid;
	sbx.argv = o->argv;
	sbx.last_cap = sbx_last_cap();
	struct sigaction hup;
	sbx.hup_ignored = sigaction(SIGHUP, NULL, &hup) == 0 && hup.sa_handler == SIG_IGN;
	snprintf(sbx.resolv, sizeof(sbx.resolv), "%s/resolv.conf", st->dir);
	sbx_groups(o);
	/* A raw clone works as fork does here (no stack given: the child runs on a copy). */
	long pid = syscall(SYS_clone, CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWPID | SIGCHLD, NULL,
	                   NULL, NULL, NULL);
	if (pid == 0)
		sbx_init();
	close(sbx.go_r);
	close(sbx.status_w);
	if (pid < 0) {
		run_err("cannot create the sandbox's namespaces: %s", strerror(errno));
		return -1;
	}
	st->sandbox_pid = (pid_t)pid;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%ld/ns/net", pid);
	st->sbx_ns = open(path, O_RDONLY | O_CLOEXEC);
	return st->sbx_ns < 0 ? -1 : 0;
}

void sandbox_close_fds(void)
{
	if (go_w >= 0)
		close(go_w);
	if (status_r >= 0)
		close(status_r);
	go_w = status_r = -1;
}

int sandbox_go(struct run_state *st)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/resolv.conf", st->dir);
	FILE *f = fopen(path, "we");
	if (!f)
		return -1;
	fprintf(f, "# moat run: the sandbox's only resolver is moatd\nnameserver %s\n",
	        st->resolver);
	if (fclose(f) != 0)
		return -1;
	chmod(path, 0644);
	ssize_t n = write(go_w, "g", 1);
	close(go_w);
	go_w = -1;
	return n == 1 ? 0 : -1;
}

void sandbox_abort(struct run_state *st)
{
	if (go_w >= 0)
		close(go_w); /* the init exits on the closed pipe */
	go_w = -1;
	if (st->sandbox_pid > 0) {
		kill(st->sandbox_pid, SIGKILL);
		waitpid(st->sandbox_pid, NULL, 0);
		st->sandbox_pid = 0;
	}
}

/* A signal for moat run while the command runs: forward it (unless the terminal sent it, and
 * so to the command as well). */
static void sbx_forward(struct run_state *st, const struct signalfd_siginfo *si)
{
	if ((int)si->ssi_code != SI_KERNEL && st->sandbox_pid > 0)
		kill(st->sandbox_pid, (int)si->ssi_signo);
}

int sandbox_wait(struct run_state *st, int sigfd, int dropfd, int *exec_errno)
{
	struct sbx_report r = {.status = RUN_EXIT_FAIL << 8};
	bool got = false;
	*exec_errno = 0;
	for (;;) {
		struct pollfd p[2] = {{.fd = sigfd, .events = POLLIN},
		                      {.fd = dropfd, .events = POLLIN}};
		if (poll(p, dropfd >= 0 ? 2 : 1, -1) < 0 && errno != EINTR)
			break;
		if (dropfd >= 0 && (p[1].revents & POLLIN))
			drops_read(dropfd);
		if (!(p[0].revents & POLLIN))
			continue;
		struct signalfd_siginfo si;
		if (read(sigfd, &si, sizeof(si)) != sizeof(si))
			continue;
		if (si.ssi_signo != SIGCHLD) {
			sbx_forward(st, &si);
			continue;
		}
		int ws;
		if (waitpid(st->sandbox_pid, &ws, WNOHANG) != st->sandbox_pid)
			continue;
		st->sandbox_pid = 0;
		struct sbx_report x;
		while (read(status_r, &x, sizeof(x)) == sizeof(x)) {
			if (x.exec_errno)
				*exec_errno = x.exec_errno;
			else
				r = x;
			got = true;
		}
		break;
	}
	if (dropfd >= 0)
		drops_read(dropfd);
	close(status_r);
	status_r = -1;
	if (!got)
		return RUN_EXIT_FAIL << 8;
	return r.status;
}
