/* main.c owns the `moat` program's command line (`moat run ...`, the one subcommand today) and
 * the order of one run (run.h lists it): options into struct run_opts, then slot, sandbox,
 * links, egress, daemons, command, and the clean-up in reverse on every way out. Signals
 * (SIGINT, SIGTERM, SIGHUP, SIGQUIT) are blocked from the start and read from a signalfd: one
 * that comes before the command runs stops the set-up and cleans up; one that comes while it
 * runs is forwarded to it. Exit status: the command's (128 + N when signal N ended it), 125
 * when moat run itself failed, 126/127 when the command could not be run or found, 2 for a
 * usage error. */
#include "run.h"

#include "moat/version.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

int allow_line(struct run_opts *o, const char *line);
int allow_file(struct run_opts *o, const char *path);
int allow_config(struct run_opts *o, const char *path, const char *agent);

void run_err(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("moat run: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

int run_in_netns(int netns, int back, int (*fn)(void *), void *arg)
{
	if (setns(netns, CLONE_NEWNET) != 0)
		return -1;
	int rc = fn(arg);
	if (setns(back, CLONE_NEWNET) != 0) {
		/* Never carry on in the wrong namespace. */
		run_err("cannot return to the host's network namespace: %s", strerror(errno));
		_exit(RUN_EXIT_FAIL);
	}
	return rc;
}

static void usage(FILE *f)
{
	fputs(
	    "usage: moat run [options] [--] COMMAND [ARGS...]\n"
	    "       moat run --gc [--state-dir DIR]\n"
	    "Runs COMMAND in a fresh network namespace whose only resolver is moatd and whose\n"
	    "only way out is what moatd's answers granted in moat-fw.\n"
	    "  --allow 'NAME [PORTS]'  one allowlist line: example.com, '*.pypi.org tcp/443',\n"
	    "                          'ntp.example.net udp/123' (repeatable)\n"
	    "  --allow-file FILE       allowlist lines from FILE (repeatable)\n"
	    "  --config FILE AGENT     the allowlists and deny form of AGENT in moatd config FILE\n"
	    "  --deny FORM             nxdomain (default), refused or sinkhole\n"
	    "  --user USER             run COMMAND as USER (default: $SUDO_UID/$SUDO_GID, else\n"
	    "                          the caller)\n"
	    "  --private               start a private moatd and moat-fw for this run\n"
	    "  --system                use the system's moatd and moat-fw (default when both\n"
	    "                          sockets answer)\n"
	    "  --rootless              refuse, saying why (see moat-run(1))\n"
	    "  --fw-socket PATH        the system moat-fw's socket (default " RUN_FW_SOCKET ")\n"
	    "  --control PATH          the system moatd's control socket (default " RUN_CTL_SOCKET
	    ")\n"
	    "  --moatd-log FILE        the system moatd's query log, for the summary (default\n"
	    "                          " RUN_MOATD_LOG ")\n"
	    "  --upstream ADDR[:PORT]  the private moatd's upstream (repeatable; default: the\n"
	    "                          nameservers of /etc/resolv.conf)\n"
	    "  --min-lifetime S        the private moat-fw's shortest grant (default 30)\n"
	    "  --pool CIDR             IPv4 range the runs' links take a /30 each from (default\n"
	    "                          " RUN_POOL ")\n"
	    "  --state-dir DIR         slots and records of the runs (default " RUN_STATE_DIR ")\n"
	    "  --report FILE           write the summary as JSON to FILE\n"
	    "  --quiet                 no summary on stderr\n"
	    "  --gc                    clean up what runs that died (kill -9) left, then exit\n"
	    "  --help, --version\n",
	    f);
}

/* --user NAME|UID, or $SUDO_UID/$SUDO_GID, or the caller. */
static int resolve_user(struct run_opts *o, const char *user)
{
	struct passwd *pw = NULL;
	if (user) {
		pw = getpwnam(user);
		char *end;
		unsigned long v = strtoul(user, &end, 10);
		if (!pw && *user >= '0' && *user <= '9' && *end == 0)
			pw = getpwuid((uid_t)v);
		if (!pw) {
			run_err("--user %s: no such user", user);
			return -1;
		}
	} else if (getenv("SUDO_UID") && getenv("SUDO_GID")) {
		o->uid = (uid_t)strtoul(getenv("SUDO_UID"), NULL, 10);
		o->gid = (gid_t)strtoul(getenv("SUDO_GID"), NULL, 10);
		pw = getpwuid(o->uid);
		o->user = pw ? strdup(pw->pw_name) : NULL;
		return 0;
	} else {
		pw = getpwuid(getuid());
		o->uid = getuid();
		o->gid = getgid();
		o->user = pw ? strdup(pw->pw_name) : NULL;
		return 0;
	}
	o->uid = pw->pw_uid;
	o->gid = pw->pw_gid;
	o->user = strdup(pw->pw_name);
	return 0;
}

static int parse_pool(struct run_opts *o, const char *s)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%s", s);
	char *slash = strchr(buf, '/');
	if (!slash)
		return -1;
	*slash = 0;
	char *end;
	unsigned long bits = strtoul(slash + 1, &end, 10);
	struct in_addr a;
	if (*end || bits < 8 || bits > 30 || inet_pton(AF_INET, buf, &a) != 1)
		return -1;
	uint32_t v = ntohl(a.s_addr);
	if (v & (bits ? 0xffffffffu >> bits : 0xffffffffu))
		return -1;
	memcpy(o->pool, &a.s_addr, 4);
	o->pool_bits = (unsigned)bits;
	return 0;
}

/* The host's nameservers, for the private moatd's upstreams. */
static void default_upstreams(struct run_opts *o)
{
	FILE *f = fopen("/etc/resolv.conf", "re");
	char line[256], addr[128];
	while (f && fgets(line, sizeof(line), f) && o->nupstream < RUN_MAX_LIST)
		if (sscanf(line, " nameserver %127s", addr) == 1)
			o->upstream[o->nupstream++] = strdup(addr);
	if (f)
		fclose(f);
}

enum {
	OPT_ALLOW = 256,
	OPT_ALLOW_FILE,
	OPT_CONFIG,
	OPT_DENY,
	OPT_USER,
	OPT_PRIVATE,
	OPT_SYSTEM,
	OPT_ROOTLESS,
	OPT_FW,
	OPT_CTL,
	OPT_LOG,
	OPT_UPSTREAM,
	OPT_MINLIFE,
	OPT_POOL,
	OPT_STATE,
	OPT_REPORT,
	OPT_QUIET,
	OPT_GC,
	OPT_HELP,
	OPT_VERSION,
};

/* The allowlist sources in their order, read once the user is known (files are read as the
 * user). */
struct run_src {
	int kind;
	const char *a, *b;
};
static struct run_src srcs[256];
static size_t nsrcs;

static int add_source(int kind, const char *a, const char *b)
{
	if (nsrcs == sizeof(srcs) / sizeof(srcs[0])) {
		run_err("too many --allow, --allow-file and --config");
		return 2;
	}
	srcs[nsrcs++] = (struct run_src){kind, a, b};
	return 0;
}

static int read_sources(struct run_opts *o)
{
	int rc = 0;
	for (size_t i = 0; i < nsrcs && rc == 0; i++)
		rc = srcs[i].kind == OPT_ALLOW        ? allow_line(o, srcs[i].a)
		     : srcs[i].kind == OPT_ALLOW_FILE ? allow_file(o, srcs[i].a)
		                                      : allow_config(o, srcs[i].a, srcs[i].b);
	return rc;
}

/* One option; 0, or 2 for a usage error (said). */
static int parse_one(struct run_opts *o, int c, char **argv, int argc, const char **user)
{
	switch (c) {
	case OPT_ALLOW:
	case OPT_ALLOW_FILE:
		return add_source(c, optarg, NULL);
	case OPT_CONFIG:
		/* --config FILE AGENT: the agent is the next word */
		if (optind >= argc || argv[optind][0] == '-') {
			run_err("--config wants FILE AGENT");
			return 2;
		}
		return add_source(c, optarg, argv[optind++]);
	case OPT_DENY:
		if (strcmp(optarg, "nxdomain") && strcmp(optarg, "refused") &&
		    strcmp(optarg, "sinkhole")) {
			run_err("--deny wants nxdomain, refused or sinkhole");
			return 2;
		}
		o->deny = optarg;
		return 0;
	case OPT_USER:
		*user = optarg;
		return 0;
	case OPT_PRIVATE:
	case OPT_SYSTEM:
	case OPT_ROOTLESS:
		o->mode = c == OPT_PRIVATE  ? RUN_PRIVATE
		          : c == OPT_SYSTEM ? RUN_SYSTEM
		                            : RUN_ROOTLESS;
		return 0;
	case OPT_FW:
		o->fw_socket = optarg;
		return 0;
	case OPT_CTL:
		o->ctl_socket = optarg;
		return 0;
	case OPT_LOG:
		o->moatd_log = optarg;
		return 0;
	case OPT_UPSTREAM:
		if (o->nupstream == RUN_MAX_LIST) {
			run_err("at most %d --upstream", RUN_MAX_LIST);
			return 2;
		}
		o->upstream[o->nupstream++] = optarg;
		return 0;
	case OPT_MINLIFE:
		o->min_lifetime = (unsigned)strtoul(optarg, NULL, 10);
		if (o->min_lifetime < 1 || o->min_lifetime > 3600) {
			run_err("--min-lifetime wants 1..3600 seconds");
			return 2;
		}
		return 0;
	case OPT_POOL:
		if (parse_pool(o, optarg) == 0)
			return 0;
		run_err("--pool wants an IPv4 CIDR between /8 and /30 with zero host bits");
		return 2;
	case OPT_STATE:
		o->state_dir = optarg;
		return 0;
	case OPT_REPORT:
		o->report = optarg;
		return 0;
	case OPT_QUIET:
		o->quiet = true;
		return 0;
	case OPT_GC:
		o->gc = true;
		return 0;
	default:
		usage(stderr);
		return 2;
	}
}

static int parse_args(struct run_opts *o, int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"allow", required_argument, NULL, OPT_ALLOW},
	    {"allow-file", required_argument, NULL, OPT_ALLOW_FILE},
	    {"config", required_argument, NULL, OPT_CONFIG},
	    {"deny", required_argument, NULL, OPT_DENY},
	    {"user", required_argument, NULL, OPT_USER},
	    {"private", no_argument, NULL, OPT_PRIVATE},
	    {"system", no_argument, NULL, OPT_SYSTEM},
	    {"rootless", no_argument, NULL, OPT_ROOTLESS},
	    {"fw-socket", required_argument, NULL, OPT_FW},
	    {"control", required_argument, NULL, OPT_CTL},
	    {"moatd-log", required_argument, NULL, OPT_LOG},
	    {"upstream", required_argument, NULL, OPT_UPSTREAM},
	    {"min-lifetime", required_argument, NULL, OPT_MINLIFE},
	    {"pool", required_argument, NULL, OPT_POOL},
	    {"state-dir", required_argument, NULL, OPT_STATE},
	    {"report", required_argument, NULL, OPT_REPORT},
	    {"quiet", no_argument, NULL, OPT_QUIET},
	    {"gc", no_argument, NULL, OPT_GC},
	    {"help", no_argument, NULL, OPT_HELP},
	    {"version", no_argument, NULL, OPT_VERSION},
	    {NULL, 0, NULL, 0},
	};
	const char *user = NULL;
	int c;
	/* "+": the first word that is not an option is the command; its options are its own. */
	while ((c = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
		if (c == OPT_HELP || c == 'h') {
			usage(stdout);
			exit(0);
		}
		if (c == OPT_VERSION) {
			printf("moat %s\n", MOAT_VERSION_FULL);
			exit(0);
		}
		int rc = parse_one(o, c, argv, argc, &user);
		if (rc)
			return rc;
	}
	if (o->gc)
		return optind == argc ? 0 : (run_err("--gc takes no command"), 2);
	if (optind == argc) {
		run_err("no command (moat run [options] -- COMMAND [ARGS...])");
		return 2;
	}
	o->argv = argv + optind;
	if (o->nupstream == 0)
		default_upstreams(o);
	if (resolve_user(o, user) < 0)
		return 2;
	return read_sources(o) < 0 ? RUN_EXIT_FAIL : 0;
}

/* Routing through this host is needed for the sandbox's egress; say so when it had to be
 * switched on (the only host setting a run changes, and it stays: other runs may need it). */
static int ensure_forwarding(const struct run_opts *o)
{
	const char *path = "/proc/sys/net/ipv4/ip_forward";
	char v = '0';
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || read(fd, &v, 1) != 1) {
		if (fd >= 0)
			close(fd);
		run_err("%s: %s", path, strerror(errno));
		return -1;
	}
	int rc = 0;
	if (v == '0') {
		rc = pwrite(fd, "1\n", 2, 0) == 2 ? 0 : -1;
		if (rc == 0 && !o->quiet)
			run_err(
			    "note: net.ipv4.ip_forward was 0; set to 1 for the sandbox's egress");
	}
	close(fd);
	return rc;
}

/* A signal for moat run before the command started: its status (128 + N), or 0. */
static int pending_stop(int sigfd)
{
	struct signalfd_siginfo si;
	while (read(sigfd, &si, sizeof(si)) == sizeof(si))
		if (si.ssi_signo != SIGCHLD)
			return 128 + (int)si.ssi_signo;
	return 0;
}

/* Links, egress, daemons: everything before the command. 0, or the exit status to give. */
static int run_setup(struct run_state *st, const struct run_opts *o, int *dropfd)
{
	char err[512];
	if (slot_record(st, o) < 0 || sandbox_start(st, o) < 0 || rtnl_setup(st) < 0 ||
	    ensure_forwarding(o) < 0)
		return RUN_EXIT_FAIL;
	if (hostnft_add(st, st->mode == RUN_SYSTEM, err, sizeof(err)) < 0) {
		run_err("table inet %s: %s", st->table, err);
		return RUN_EXIT_FAIL;
	}
	st->made_table = true;
	if (st->mode == RUN_SYSTEM) {
		if (system_attach(st, o) < 0)
			return RUN_EXIT_FAIL;
		*dropfd = drops_open(-1, st->host_ns, rtnl_ifindex(-1, st->ifname));
	} else {
		snprintf(st->resolver, sizeof(st->resolver), "%u.%u.%u.%u", st->host4[0],
		         st->host4[1], st->host4[2], st->host4[3]);
		if (daemons_start(st, o) < 0)
			return RUN_EXIT_FAIL;
		if (hostnft_sandbox_trace(st, err, sizeof(err)) < 0) {
			run_err("sandbox's trace table: %s", err);
			return RUN_EXIT_FAIL;
		}
		*dropfd = drops_open(st->sbx_ns, st->host_ns, 0);
	}
	if (*dropfd < 0 && !o->quiet)
		run_err("note: cannot follow the firewall's drops: %s", strerror(errno));
	return 0;
}

static int run_exit_code(int status, int exec_errno, const struct run_opts *o)
{
	if (exec_errno) {
		run_err("%s: %s", o->argv[0], strerror(exec_errno));
		return exec_errno == ENOENT ? 127 : 126;
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return RUN_EXIT_FAIL;
}

static int run(struct run_opts *o, int sigfd)
{
	struct run_state st = {.lock_fd = -1, .host_ns = -1, .sbx_ns = -1, .fw_fd = -1};
	st.host_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (st.host_ns < 0)
		return RUN_EXIT_FAIL;
	if (o->mode == RUN_AUTO)
		o->mode = system_present(o) ? RUN_SYSTEM : RUN_PRIVATE;
	if (o->mode == RUN_PRIVATE && hostnft_moat_here()) {
		/* Its forward rules would drop all the private sandbox sends: say so, not that. */
		run_err(
		    "this namespace has moat-fw's table inet moat, which drops what a link it was "
		    "not told about sends: use the system's daemons (--system, with moatd's "
		    "control "
		    "socket), or remove a stale table with moat-fw --remove");
		close(st.host_ns);
		return RUN_EXIT_FAIL;
	}
	st.mode = o->mode;
	int rc = slot_take(o, &st);
	if (rc)
		return rc;
	int dropfd = -1, status = 0, exec_errno = 0, code;
	rc = run_setup(&st, o, &dropfd);
	if (rc == 0)
		rc = pending_stop(sigfd);
	if (rc == 0 && sandbox_go(&st) < 0)
		rc = RUN_EXIT_FAIL;
	if (rc == 0) {
		status = sandbox_wait(&st, sigfd, dropfd, &exec_errno);
		code = run_exit_code(status, exec_errno, o);
	} else {
		code = rc;
	}
	/* Clean-up, in reverse: the sandbox's processes, the daemons or the system's agent and
	 * range, the link, the table; the summary before the slot's files go. */
	sandbox_abort(&st);
	drops_close(dropfd);
	if (st.sbx_ns >= 0)
		close(st.sbx_ns);
	st.sbx_ns = -1;
	if (st.mode == RUN_SYSTEM)
		system_detach(&st, o, false);
	else
		daemons_stop(&st);
	if (rc == 0) {
		char log[300];
		snprintf(log, sizeof(log), "%s/queries.jsonl", st.dir);
		summary_write(&st, o, st.mode == RUN_SYSTEM ? o->moatd_log : log, status, code);
	}
	slot_clean(&st, o, false);
	slot_release(&st);
	close(st.host_ns);
	return code;
}

int main(int argc, char **argv)
{
	static struct run_opts o = {
	    .fw_socket = RUN_FW_SOCKET,
	    .ctl_socket = RUN_CTL_SOCKET,
	    .moatd_log = RUN_MOATD_LOG,
	    .state_dir = RUN_STATE_DIR,
	};
	if (argc < 2 || strcmp(argv[1], "run") != 0) {
		if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
			usage(stdout);
			return 0;
		}
		if (argc >= 2 && !strcmp(argv[1], "--version")) {
			printf("moat %s\n", MOAT_VERSION_FULL);
			return 0;
		}
		usage(stderr);
		return 2;
	}
	parse_pool(&o, RUN_POOL);
	int rc = parse_args(&o, argc - 1, argv + 1);
	if (rc)
		return rc;
	if (o.mode == RUN_ROOTLESS)
		return rootless_refuse();
	if (geteuid() != 0)
		return rootless_refuse(); /* namespaces, links and rules need root; it says why */
	/* Blocked for good: read from the signalfd (and by the sandbox's init). An ignored
	 * signal never reaches a signalfd, so SIGINT, SIGTERM and SIGQUIT are taken back from
	 * an inherited SIG_IGN (a shell's background job has SIGINT ignored): moat run forwards
	 * them. SIGHUP stays ignored when it was (nohup). */
	sigset_t set;
	sigemptyset(&set);
	int sigs[] = {SIGINT, SIGTERM, SIGQUIT, SIGCHLD, SIGHUP};
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction sa;
		if (sigs[i] == SIGHUP && sigaction(SIGHUP, NULL, &sa) == 0 &&
		    sa.sa_handler == SIG_IGN)
			continue;
		signal(sigs[i], SIG_DFL);
		sigaddset(&set, sigs[i]);
	}
	sigprocmask(SIG_BLOCK, &set, NULL);
	int sigfd = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sigfd < 0)
		return RUN_EXIT_FAIL;
	if (o.gc) {
		unsigned left = 0;
		int n = slot_gc(&o, &left);
		if (n >= 0 && !o.quiet)
			run_err("--gc: %d slot(s) cleaned", n);
		if (left)
			run_err("--gc: %u slot(s) not cleaned (why above)", left);
		return n < 0 || left ? RUN_EXIT_FAIL : 0;
	}
	return run(&o, sigfd);
}
