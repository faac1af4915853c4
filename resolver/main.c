/* main.c: moatd's command line, start-up order, signals and shutdown; nothing else.
 * Start-up: flags and config -> validation -> policy snapshot -> log -> workers (listeners
 * bound) -> privileges dropped -> loops. SIGHUP reloads the policy and hands it to every worker
 * (a bad file leaves the running policy in place); SIGUSR1 reopens the query log (logrotate);
 * SIGUSR2 is ignored (reserved); SIGTERM and SIGINT stop cleanly: listeners
 * close, in-flight queries are dropped, the log is flushed. */
#include <arpa/inet.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "moat/agent_edit.h"
#include "moat/agent_restore.h"
#include "moat/agentstore.h"
#include "moat/check.h"
#include "moat/config.h"
#include "moat/err.h"
#include "moat/log.h"
#include "moat/pathfd.h"
#include "moat/metrics.h"
#include "moat/policy.h"
#include "moat/inflight.h"
#include "moat/policy_lint.h"
#include "moat/ratelimit.h"
#include "moat/sdnotify.h"
#include "moat/version.h"
#include "moat/zonesdir.h"
#include "control.h"
#include "control_agents.h"
#include "dnstap_out.h"
#include "fetch.h"
#include "fwchan.h"
#include "limits.h"
#include "logreopen.h"
#include "metrics_http.h"
#include "privdrop.h"
#include "rpz_feed.h"
#include "server.h"
#include "worker.h"

static void usage(FILE *f)
{
	fputs(
	    "usage: moatd --listen ADDR:PORT --upstream ADDR:PORT [--upstream-source ADDR]\n"
	    "             --allow FILE [--allow FILE...] [--deny nxdomain|refused|sinkhole]\n"
	    "             [--strict-chain] [--allow-private] [--log FILE] [--firewall PATH]\n"
	    "             [--zones-dir DIR] [--check [--strict]]\n"
	    "       moatd -c CONFIG [--check [--strict]]\n"
	    "\n"
	    "  --listen ADDR:PORT     answer on UDP and TCP there (repeatable; IPv4 or [IPv6])\n"
	    "  --upstream ADDR:PORT   forward allowed names there (repeatable)\n"
	    "  --upstream-source ADDR source address of upstream queries\n"
	    "  --upstream-timeout MS  per-attempt timeout (default 1000)\n"
	    "  --cache-size MB        answer cache size (default 32; 0: no cache)\n"
	    "  --serve-stale SECONDS  answer from expired cache entries up to this long past\n"
	    "                         expiry when no upstream answers (RFC 8767; default 0: off)\n"
	    "  --ratelimit QPS        queries per second per client (0: off, the default)\n"
	    "  --workers N            threads sharing the port (SO_REUSEPORT); default 1\n"
	    "  --tcp-max-queued BYTES answers queued per TCP connection before moatd stops\n"
	    "                         reading it (default 65536)\n"
	    "  --inflight-max N       questions waiting for an upstream, in all (default 2048)\n"
	    "  --inflight-per-client N  of them per client (default 256); over a cap: SERVFAIL\n"
	    "  --user NAME            drop to this user once the sockets are bound (default:\n"
	    "                         moat if it exists, else nobody; root stays root)\n"
	    "  --no-seccomp           skip the system-call filter (for debugging)\n"
	    "  --allow FILE           allowlist: one name or *.name per line (repeatable)\n"
	    "  --deny FORM            nxdomain (default), refused or sinkhole\n"
	    "  --strict-chain         every CNAME/DNAME target must be allowed too\n"
	    "  --allow-private        private and shared answers are not refused\n"
	    "  --log FILE             query log (JSON lines); default stdout\n"
	    "  --firewall PATH        grant answers' addresses through moat-fw at PATH first\n"
	    "  -c CONFIG              YAML config with agents (see zones/moatd.example.yaml)\n"
	    "  --check                validate config and policy, print the result, exit\n"
	    "  --strict               with --check: lint warnings are errors (exit 1)\n"
	    "  --control PATH         control socket for moatctl (mode 0660)\n"
	    "  --metrics ADDR:PORT    Prometheus metrics endpoint (off by default)\n"
	    "  --state-dir DIR        keep agents added with moatctl agent add there (LMDB)\n"
	    "  --zones-dir DIR        where the shipped lists are (highrisk.txt,\n"
	    "                         blocked-ranges.txt); default: the install's share/moat\n"
	    "  --version              print the version and exit\n"
	    "Without -c, one agent named 'default' serves loopback clients and the networks of\n"
	    "the listen addresses.\n",
	    f);
}

/* The address bytes of an AF_INET or AF_INET6 sockaddr (*len 4 or 16); NULL for others. */
static const uint8_t *sockaddr_bytes(const struct sockaddr *sa, size_t *len)
{
	if (sa->sa_family == AF_INET) {
		*len = 4;
		return (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
	}
	if (sa->sa_family == AF_INET6) {
		*len = 16;
		return (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
	}
	return NULL;
}

/* Client ranges of the flag-mode agent: loopback, and the networks the listen addresses are
 * on (an unspecified listen address means every local network of that family). */
static int flag_mode_clients(struct config_agent *a, const struct config *cfg)
{
	static const uint8_t zero[16];
	size_t max = 2 + 64;
	a->clients = calloc(max, sizeof(*a->clients));
	if (!a->clients)
		return MOAT_ENOMEM;
	netaddr_parse_cidr("127.0.0.0/8", &a->clients[a->nclients++]);
	netaddr_parse_cidr("::1", &a->clients[a->nclients++]);
	struct ifaddrs *ifs = NULL, *i;
	if (getifaddrs(&ifs) < 0)
		return 0;
	for (i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr || !i->ifa_netmask)
			continue;
		int fam = i->ifa_addr->sa_family;
		size_t n;
		const uint8_t *ia = sockaddr_bytes(i->ifa_addr, &n);
		const uint8_t *ma = sockaddr_bytes(i->ifa_netmask, &n);
		if (!ia || !ma)
			continue;
		for (size_t k = 0; k < cfg->nlisten && a->nclients < max; k++) {
			const struct sockaddr *l = (const struct sockaddr *)&cfg->listen[k];
			size_t ln;
			const uint8_t *la = sockaddr_bytes(l, &ln);
			if (l->sa_family != fam || !la ||
			    (memcmp(la, zero, n) != 0 && memcmp(la, ia, n) != 0))
				continue;
			netaddr_cidr_from_mask(ia, ma, n, &a->clients[a->nclients++]);
		}
	}
	freeifaddrs(ifs);
	return 0;
}

struct options {
	const char *config_path;
	bool check, strict;
	bool strict_chain, allow_private;
	const char *deny;
	const char *log;
	const char *firewall;
	long cache_mb;  /* -1: not given */
	long ratelimit; /* -1: not given */
	const char *user;
	const char *zones_dir;
	bool no_seccomp;
	char **allow; /* owned until handed to the flag-mode agent */
	size_t nallow;
	struct sockaddr_storage *listen, *up; /* owned until handed to the config */
	size_t nlisten, nup;
	long timeout_ms;
	long workers;                                   /* -1: not given */
	long serve_stale;                               /* -1: not given */
	long tcp_queued, inflight_max, inflight_client; /* -1: not given */
	const char *control;
	const char *metrics;
	const char *state_dir;
};

static int add_addr(struct sockaddr_storage **v, size_t *n, const char *s, uint16_t port)
{
	struct sockaddr_storage ss;
	if (netaddr_parse_addrport(s, port, &ss) < 0)
		return MOAT_EINVAL;
	struct sockaddr_storage *nv = realloc(*v, (*n + 1) * sizeof(**v));
	if (!nv)
		return MOAT_ENOMEM;
	nv[(*n)++] = ss;
	*v = nv;
	return 0;
}

static void options_free(struct options *o)
{
	free(o->listen);
	free(o->up);
	for (size_t i = 0; i < o->nallow; i++)
		free(o->allow[i]);
	free(o->allow);
	o->listen = o->up = NULL;
	o->allow = NULL;
	o->nallow = 0;
}

/* A whole decimal number in [lo, hi] for a flag, or a message and MOAT_EINVAL. */
static int opt_number(const char *arg, long lo, long hi, const char *flag, const char *range,
                      long *out)
{
	char *end;
	long v = strtol(arg, &end, 10);
	if (*end || !*arg || v < lo || v > hi) {
		fprintf(stderr, "moatd: %s: %s\n", flag, range);
		return MOAT_EINVAL;
	}
	*out = v;
	return 0;
}

/* Build the configuration from -c and the flags. Returns 0 or exits with a message. */
static int build_config(int argc, char **argv, struct config *cfg, struct options *o)
{
	enum {
		O_LISTEN = 256,
		O_UPSTREAM,
		O_SOURCE,
		O_ALLOW,
		O_DENY,
		O_CHECK,
		O_STRICT_CHECK,
		O_STRICT,
		O_PRIVATE,
		O_LOG,
		O_TIMEOUT,
		O_VERSION,
		O_FIREWALL,
		O_CACHE,
		O_RATELIMIT,
		O_USER,
		O_NOSECCOMP,
		O_WORKERS,
		O_STALE,
		O_TCPQ,
		O_INFL,
		O_INFLC,
		O_CONTROL,
		O_METRICS,
		O_ZONES,
		O_STATE,
	};
	static const struct option longopts[] = {
	    {"listen", required_argument, 0, O_LISTEN},
	    {"upstream", required_argument, 0, O_UPSTREAM},
	    {"upstream-source", required_argument, 0, O_SOURCE},
	    {"upstream-timeout", required_argument, 0, O_TIMEOUT},
	    {"allow", required_argument, 0, O_ALLOW},
	    {"deny", required_argument, 0, O_DENY},
	    {"check", no_argument, 0, O_CHECK},
	    {"strict", no_argument, 0, O_STRICT_CHECK},
	    {"strict-chain", no_argument, 0, O_STRICT},
	    {"allow-private", no_argument, 0, O_PRIVATE},
	    {"log", required_argument, 0, O_LOG},
	    {"firewall", required_argument, 0, O_FIREWALL},
	    {"cache-size", required_argument, 0, O_CACHE},
	    {"ratelimit", required_argument, 0, O_RATELIMIT},
	    {"user", required_argument, 0, O_USER},
	    {"no-seccomp", no_argument, 0, O_NOSECCOMP},
	    {"workers", required_argument, 0, O_WORKERS},
	    {"serve-stale", required_argument, 0, O_STALE},
	    {"tcp-max-queued", required_argument, 0, O_TCPQ},
	    {"inflight-max", required_argument, 0, O_INFL},
	    {"inflight-per-client", required_argument, 0, O_INFLC},
	    {"control", required_argument, 0, O_CONTROL},
	    {"metrics", required_argument, 0, O_METRICS},
	    {"zones-dir", required_argument, 0, O_ZONES},
	    {"state-dir", required_argument, 0, O_STATE},
	    {"config", required_argument, 0, 'c'},
	    {"help", no_argument, 0, 'h'},
	    {"version", no_argument, 0, O_VERSION},
	    {0, 0, 0, 0},
	};
	struct sockaddr_storage source;
	bool has_source = false;
	char err[512];
	int ch;

	memset(o, 0, sizeof(*o));
	o->timeout_ms = -1;
	o->cache_mb = -1;
	o->ratelimit = -1;
	o->workers = -1;
	o->serve_stale = -1;
	o->tcp_queued = o->inflight_max = o->inflight_client = -1;
	while ((ch = getopt_long(argc, argv, "c:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 'c':
			o->config_path = optarg;
			break;
		case O_LISTEN:
			if (add_addr(&o->listen, &o->nlisten, optarg, 53) < 0) {
				fprintf(stderr, "moatd: --listen %s: expected ADDR:PORT\n", optarg);
				return MOAT_EINVAL;
			}
			break;
		case O_UPSTREAM:
			if (add_addr(&o->up, &o->nup, optarg, 53) < 0) {
				fprintf(stderr, "moatd: --upstream %s: expected ADDR:PORT\n",
				        optarg);
				return MOAT_EINVAL;
			}
			break;
		case O_SOURCE:
			if (netaddr_parse_addrport(optarg, 0, &source) < 0) {
				fprintf(stderr,
				        "moatd: --upstream-source %s: expected an address\n",
				        optarg);
				return MOAT_EINVAL;
			}
			has_source = true;
			break;
		case O_TIMEOUT:
			if (opt_number(optarg, 10, 60000, "--upstream-timeout", "10 to 60000 ms",
			               &o->timeout_ms) < 0)
				return MOAT_EINVAL;
			break;
		case O_ALLOW:
			if (config_strv_push(&o->allow, &o->nallow, optarg) < 0)
				return MOAT_ENOMEM;
			break;
		case O_DENY:
			o->deny = optarg;
			break;
		case O_CHECK:
			o->check = true;
			break;
		case O_STRICT_CHECK:
			o->strict = true;
			break;
		case O_STRICT:
			o->strict_chain = true;
			break;
		case O_PRIVATE:
			o->allow_private = true;
			break;
		case O_LOG:
			o->log = optarg;
			break;
		case O_FIREWALL:
			o->firewall = optarg;
			break;
		case O_USER:
			o->user = optarg;
			break;
		case O_NOSECCOMP:
			o->no_seccomp = true;
			break;
		case O_ZONES:
			o->zones_dir = optarg;
			break;
		case O_RATELIMIT:
			if (opt_number(optarg, 0, 10000000, "--ratelimit",
			               "0 to 10000000 (queries/s)", &o->ratelimit) < 0)
				return MOAT_EINVAL;
			break;
		case O_WORKERS:
			if (opt_number(optarg, 1, 64, "--workers", "1 to 64", &o->workers) < 0)
				return MOAT_EINVAL;
			break;
		case O_STALE:
			if (opt_number(optarg, 0, 604800, "--serve-stale", "0 to 604800 (seconds)",
			               &o->serve_stale) < 0)
				return MOAT_EINVAL;
			break;
		case O_TCPQ:
			if (opt_number(optarg, 1024, 16 << 20, "--tcp-max-queued",
			               "1024 to 16777216 (bytes)", &o->tcp_queued) < 0)
				return MOAT_EINVAL;
			break;
		case O_INFL:
			if (opt_number(optarg, 1, 1000000, "--inflight-max", "1 to 1000000",
			               &o->inflight_max) < 0)
				return MOAT_EINVAL;
			break;
		case O_INFLC:
			if (opt_number(optarg, 1, 1000000, "--inflight-per-client", "1 to 1000000",
			               &o->inflight_client) < 0)
				return MOAT_EINVAL;
			break;
		case O_CONTROL:
			o->control = optarg;
			break;
		case O_METRICS:
			o->metrics = optarg;
			break;
		case O_STATE:
			o->state_dir = optarg;
			break;
		case O_CACHE:
			if (opt_number(optarg, 0, 65536, "--cache-size", "0 to 65536 (MB)",
			               &o->cache_mb) < 0)
				return MOAT_EINVAL;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case O_VERSION:
			printf("moatd %s\n", MOAT_VERSION_FULL);
			exit(0);
		default:
			usage(stderr);
			return MOAT_EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "moatd: unexpected argument '%s'\n", argv[optind]);
		return MOAT_EINVAL;
	}
	if (o->strict && !o->check) {
		fprintf(stderr, "moatd: --strict goes with --check\n");
		return MOAT_EINVAL;
	}

	config_init(cfg);
	if (o->config_path) {
		if (config_load_file(cfg, o->config_path, err, sizeof(err)) < 0) {
			fprintf(stderr, "moatd: %s\n", err);
			return MOAT_EINVAL;
		}
		if (o->nallow || o->deny) {
			fprintf(stderr,
			        "moatd: --allow and --deny are for flag mode; with -c, agents "
			        "come from the config\n");
			return MOAT_EINVAL;
		}
	}
	/* Flags given beside a config replace its lists. */
	if (o->nlisten) {
		free(cfg->listen);
		cfg->listen = o->listen;
		cfg->nlisten = o->nlisten;
		o->listen = NULL;
	}
	if (o->nup) {
		free(cfg->upstreams);
		cfg->upstreams = o->up;
		cfg->nupstreams = o->nup;
		o->up = NULL;
	}
	if (has_source) {
		cfg->upstream_source = source;
		cfg->has_upstream_source = true;
	}
	if (o->timeout_ms > 0)
		cfg->upstream_timeout_ms = (uint32_t)o->timeout_ms;
	if (o->log) {
		free(cfg->log_file);
		cfg->log_file = strdup(o->log);
	}
	if (o->user) {
		free(cfg->user);
		cfg->user = strdup(o->user);
	}
	if (o->no_seccomp)
		cfg->seccomp = false;
	if (o->zones_dir && zonesdir_apply(cfg, o->zones_dir) < 0)
		return MOAT_ENOMEM;
	if (o->ratelimit >= 0)
		cfg->rl_qps = (uint32_t)o->ratelimit;
	if (o->workers > 0)
		cfg->workers = (uint32_t)o->workers;
	if (o->serve_stale >= 0)
		cfg->serve_stale = (uint32_t)o->serve_stale;
	if (o->cache_mb >= 0)
		cfg->cache_bytes = (size_t)o->cache_mb << 20;
	if (o->tcp_queued > 0)
		cfg->tcp_max_queued = (uint32_t)o->tcp_queued;
	if (o->inflight_max > 0)
		cfg->inflight_max = (uint32_t)o->inflight_max;
	if (o->inflight_client > 0)
		cfg->inflight_per_client = (uint32_t)o->inflight_client;
	if (o->firewall) {
		free(cfg->fw_socket);
		cfg->fw_socket = strdup(o->firewall);
	}
	if (o->control) {
		free(cfg->control_path);
		cfg->control_path = strdup(o->control);
	}
	if (o->state_dir) {
		free(cfg->state_dir);
		cfg->state_dir = strdup(o->state_dir);
	}
	if (o->metrics) {
		if (netaddr_parse_addrport(o->metrics, 0, &cfg->metrics_addr) < 0) {
			fprintf(stderr, "moatd: --metrics %s: expected ADDR:PORT\n", o->metrics);
			return MOAT_EINVAL;
		}
		cfg->has_metrics = true;
	}
	if (!o->config_path) {
		struct config_agent *a = calloc(1, sizeof(*a));
		if (!a)
			return MOAT_ENOMEM;
		cfg->agents = a;
		cfg->nagents = 1;
		snprintf(a->name, sizeof(a->name), "default");
		a->deny = DENY_NXDOMAIN;
		a->sink_ttl = 60;
		if (o->deny) {
			if (!strcmp(o->deny, "nxdomain"))
				a->deny = DENY_NXDOMAIN;
			else if (!strcmp(o->deny, "refused"))
				a->deny = DENY_REFUSED;
			else if (!strcmp(o->deny, "sinkhole"))
				a->deny = DENY_SINKHOLE;
			else {
				fprintf(stderr,
				        "moatd: --deny %s: expected nxdomain, refused or "
				        "sinkhole\n",
				        o->deny);
				return MOAT_EINVAL;
			}
		}
		a->allow_files = o->allow;
		a->nallow = o->nallow;
		o->allow = NULL;
		o->nallow = 0;
		if (flag_mode_clients(a, cfg) < 0)
			return MOAT_ENOMEM;
	}
	for (size_t i = 0; i < cfg->nagents; i++) {
		if (o->strict_chain)
			cfg->agents[i].strict_chain = true;
		if (o->allow_private)
			cfg->agents[i].allow_private = true;
	}
	if (config_validate(cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "moatd: %s\n", err);
		return MOAT_EINVAL;
	}
	return 0;
}

static struct server *workers; /* cfg.workers of them; workers[0] runs on this thread */
static unsigned nworkers;
static struct ratelimit *limiter; /* shared by the workers; NULL: no rate limit */
static struct inflight *inflight; /* caps on questions in flight, shared by the workers */
static struct config cfg;
static struct options opts;
static uv_signal_t sig_term, sig_int, sig_hup;
static FILE *qlog; /* the query log (SIGUSR1 reopens it) */
static uv_timer_t stats_timer;
static struct rpz_feed *feed; /* RPZ transfers; NULL until started */

/* The feed's way to hand a snapshot to every worker (with its lock held). */
static void publish_policy(void *ctx, struct policy *p)
{
	(void)ctx;
	for (unsigned i = 0; i < nworkers; i++)
		worker_post_policy(&workers[i], p);
}
static struct agentstore *store; /* runtime agents (state_dir); NULL: none */

/* The lint at start-up and reload: every pattern of lists up to this size (about 0.1 s); larger
 * ones are linted by --check. */
#define LINT_AT_START_MAX 100000

static void lint_report(struct policy *p)
{
	policy_lint_print(p->lint, stderr, "moatd: ");
	if (p->lint_skipped)
		fprintf(stderr,
		        "moatd: more than %d allow patterns: not linted at start-up; "
		        "moatd --check lints them\n",
		        LINT_AT_START_MAX);
}

/* The running policy's size, for the metrics. */
static void policy_measured(const struct policy *p, bool ok)
{
	metrics_set(&metrics_global.policy_agents, p->nagents);
	metrics_set(&metrics_global.policy_patterns, policy_allow_count(p));
	metrics_set(&metrics_global.last_reload_unix, (uint64_t)time(NULL));
	metrics_set(&metrics_global.last_reload_ok, ok);
}

static void reload_failed(void)
{
	metrics_inc(&metrics_global.reloads_failed);
	metrics_set(&metrics_global.last_reload_unix, (uint64_t)time(NULL));
	metrics_set(&metrics_global.last_reload_ok, 0);
}

/* Load the policy again (SIGHUP, moatctl reload) and hand it to every worker; a bad file
 * changes nothing. Returns 0, or < 0 with "file:line: reason" in err. */
static int reload(char *err, size_t errlen)
{
	struct config ncfg;
	struct policy *np = NULL;

	config_init(&ncfg);
	if (opts.config_path) {
		if (config_load_file(&ncfg, opts.config_path, err, errlen) < 0 ||
		    (opts.zones_dir && zonesdir_apply(&ncfg, opts.zones_dir) < 0) ||
		    config_validate(&ncfg, err, errlen) < 0) {
			fprintf(stderr, "moatd: reload failed, running policy kept: %s\n", err);
			config_free(&ncfg);
			reload_failed();
			return MOAT_EINVAL;
		}
		for (size_t i = 0; i < ncfg.nagents; i++) {
			ncfg.agents[i].strict_chain |= opts.strict_chain;
			ncfg.agents[i].allow_private |= opts.allow_private;
		}
	}
	ncfg.lint_max_patterns = cfg.lint_max_patterns;
	int rc = policy_load(opts.config_path ? &ncfg : &cfg, &np, err, errlen);
	if (rc == 0 && workers[0].policy->nagents > workers[0].policy->nconfig) {
		struct policy *loaded = np; /* the runtime agents stay, on top of the new files */
		rc = agent_edit_rebase(loaded, workers[0].policy, &np, err, errlen);
		policy_unref(loaded);
	}
	if (rc < 0) {
		config_free(&ncfg);
		fprintf(stderr, "moatd: reload failed, running policy kept: %s\n", err);
		reload_failed();
		return rc;
	}
	lint_report(np);
	/* The feed fills np's transferred zones before anyone sees np, and hands it on itself. */
	if (feed)
		rpz_feed_adopt(feed, opts.config_path ? &ncfg : &cfg, np);
	else if (rpz_feed_wanted(&ncfg))
		fprintf(stderr, "moatd: rpz: transferred zones need a restart (none at start-up, "
		                "so no transfer thread); they stay empty until then\n");
	config_free(&ncfg);
	/* Worker 0 is this thread: it takes the snapshot now, so a control reply that follows
	 * (explain) already sees it. */
	policy_unref(workers[0].policy);
	workers[0].policy = policy_ref(np);
	for (unsigned i = 1; i < nworkers; i++)
		worker_post_policy(&workers[i], np);
	fprintf(stderr, "moatd: policy reloaded (%zu agents)\n", np->nagents);
	metrics_inc(&metrics_global.reloads_ok);
	policy_measured(np, true);
	sdnotify_send("STATUS=serving; policy reloaded");
	policy_unref(np);
	return 0;
}

/* ---- logrotate: SIGUSR1 reopens the query log (kept apart from the other signals) ---- */
static uv_signal_t sig_usr1;

static void on_usr1(uv_signal_t *s, int signum)
{
	(void)s;
	(void)signum;
	/* Relative to the log's directory kept from start-up: moatd's user may not reach the
	 * path, and its filter allows opening for writing only there. */
	char err[256];
	if (logreopen_now(qlog, err, sizeof(err)) < 0)
		fprintf(stderr, "moatd: %s; still writing to the old file\n", err);
	else
		fprintf(stderr, "moatd: query log reopened\n");
}

static void usr1_start(uv_loop_t *loop)
{
	uv_signal_init(loop, &sig_usr1);
	uv_signal_start(&sig_usr1, on_usr1, SIGUSR1);
}

static void usr1_stop(void)
{
	uv_close((uv_handle_t *)&sig_usr1, NULL);
}

/* Rate-limited queries are not logged one by one; this says how many there were. */
static void on_stats(uv_timer_t *t)
{
	static uint64_t last;
	(void)t;
	uint64_t now = limiter ? ratelimit_limited(limiter) : 0;
	if (now != last) {
		fprintf(stderr, "moatd: rate limit: %llu queries over the limit in the last 10 s\n",
		        (unsigned long long)(now - last));
		last = now;
	}
}

/* Keep a descriptor of every policy file's directory, to read them again after the drop. */
static void keep_policy_dirs(const struct config *c, const char *config_path)
{
	if (config_path)
		pathfd_keep_dir(config_path);
	for (size_t i = 0; i < c->nagents; i++)
		for (size_t k = 0; k < c->agents[i].nallow; k++)
			pathfd_keep_dir(c->agents[i].allow_files[k]);
	for (size_t k = 0; k < c->nhighrisk; k++)
		pathfd_keep_dir(c->highrisk_files[k]);
	for (size_t k = 0; k < c->nranges; k++)
		pathfd_keep_dir(c->range_files[k]);
	for (size_t k = 0; k < c->nrpz; k++)
		if (c->rpz[k].file)
			pathfd_keep_dir(c->rpz[k].file);
}

static void on_signal(uv_signal_t *s, int signum)
{
	(void)s;
	if (signum == SIGHUP) {
		char err[512];
		reload(err, sizeof(err));
		return;
	}
	if (workers[0].stopping)
		return;
	sdnotify_send("STOPPING=1");
	for (unsigned i = 1; i < nworkers; i++)
		worker_post_stop(&workers[i]);
	worker_stop(&workers[0]);
	uv_close((uv_handle_t *)&stats_timer, NULL);
	uv_close((uv_handle_t *)&sig_term, NULL);
	uv_close((uv_handle_t *)&sig_int, NULL);
	uv_close((uv_handle_t *)&sig_hup, NULL);
	usr1_stop();
	control_stop();
}

/* The state store, opened as root before the filter (its files stay open for the writes of
 * agent add/del), and the runtime agents it holds added to the policy. */
static int agents_restore(struct policy **p, char *err, size_t errlen)
{
	size_t n = 0;
	if (!cfg.state_dir)
		return 0;
	if (agentstore_open(cfg.state_dir, &store, err, errlen) < 0 ||
	    agent_restore(store, p, &n, err, errlen) < 0)
		return MOAT_EIO;
	if (n)
		fprintf(stderr, "moatd: %zu runtime agent(s) from %s\n", n, cfg.state_dir);
	return 0;
}

/* The control socket and the metrics endpoint: bound as root, before the filter. */
static int start_ops(uv_loop_t *loop, char *err, size_t errlen)
{
	struct control_ops ops = {workers, nworkers, reload, MOAT_VERSION, opts.config_path, store};
	if (cfg.control_path &&
	    control_start(loop, cfg.control_path, cfg.control_group, &ops, err, errlen) < 0)
		return MOAT_EIO;
	if (cfg.has_metrics && metrics_http_start((const struct sockaddr *)&cfg.metrics_addr,
	                                          workers, nworkers, MOAT_VERSION, err, errlen) < 0)
		return MOAT_EIO;
	return 0;
}

int main(int argc, char **argv)
{
	char err[512];
	uint64_t t0 = uv_hrtime();
	struct policy *policy = NULL;

	if (sodium_init() < 0) {
		fprintf(stderr, "moatd: libsodium failed to start\n");
		return 1;
	}
	if (build_config(argc, argv, &cfg, &opts) < 0) {
		options_free(&opts); /* nothing left behind, even on a usage error */
		config_free(&cfg);
		return 2;
	}
	options_free(&opts);
	if (!opts.check)
		cfg.lint_max_patterns = LINT_AT_START_MAX;
	if (policy_load(&cfg, &policy, err, sizeof(err)) < 0) {
		fprintf(stderr, "moatd: %s\n", err);
		return 1;
	}
	if (opts.check) {
		int st = check_report(&cfg, policy, opts.strict, stdout, stderr);
		policy_unref(policy);
		config_free(&cfg);
		return st;
	}
	lint_report(policy);
	if (agents_restore(&policy, err, sizeof(err)) < 0) {
		fprintf(stderr, "moatd: %s\n", err);
		return 1;
	}

	FILE *log = qlog = log_open(cfg.log_file);
	if (!log) {
		fprintf(stderr, "moatd: cannot open log %s: %m\n", cfg.log_file);
		return 1;
	}
	int log_dirfd = logreopen_init(cfg.log_file);
	if (log_dirfd < -1) {
		fprintf(stderr, "moatd: warning: the query log cannot be reopened on SIGUSR1\n");
		log_dirfd = -1;
	}
	keep_policy_dirs(&cfg, opts.config_path);
	if (cfg.rl_qps && !(limiter = ratelimit_new(cfg.rl_qps, cfg.rl_burst, 65536))) {
		fprintf(stderr, "moatd: out of memory for the rate limiter\n");
		return 1;
	}
	if (limits_fit_nofile(&cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "moatd: %s\n", err);
		return 1;
	}
	if (err[0])
		fprintf(stderr, "moatd: %s\n", err);
	if (!(inflight = inflight_new(cfg.inflight_max, cfg.inflight_per_client, 4096))) {
		fprintf(stderr, "moatd: out of memory for the in-flight caps\n");
		return 1;
	}
	nworkers = cfg.workers;
	metrics_global.start_unix = (uint64_t)time(NULL);
	metrics_global.workers = nworkers;
	policy_measured(policy, true);
	if (dnstap_out_start(&cfg, nworkers, "moatd", "moatd " MOAT_VERSION, err, sizeof(err)) <
	    0) {
		fprintf(stderr, "moatd: %s\n", err);
		return 1;
	}
	if (!(workers = calloc(nworkers, sizeof(*workers)))) {
		fprintf(stderr, "moatd: out of memory\n");
		return 1;
	}
	for (unsigned i = 0; i < nworkers; i++)
		if (worker_init(&workers[i], i, nworkers, &cfg, policy, log, limiter, err,
		                sizeof(err)) < 0) {
			fprintf(stderr, "moatd: %s\n", err);
			return 1;
		}
	for (unsigned i = 0; i < nworkers; i++)
		workers[i].inflight = inflight;
	/* The transfer thread starts before the system-call filter (which has no clone). */
	if (rpz_feed_wanted(&cfg) &&
	    rpz_feed_start(&feed, &cfg, policy, publish_policy, NULL) < 0) {
		fprintf(stderr, "moatd: cannot start the RPZ transfer thread\n");
		return 1;
	}
	for (unsigned i = 0; i < nworkers; i++)
		workers[i].feed = feed;
	control_agents_feed(feed);
	policy_unref(policy); /* the workers hold theirs */
	uv_loop_t *loop = workers[0].loop;
	uv_timer_init(loop, &stats_timer);
	uv_timer_start(&stats_timer, on_stats, 10000, 10000);
	uv_unref((uv_handle_t *)&stats_timer);
	uv_signal_init(loop, &sig_term);
	uv_signal_init(loop, &sig_int);
	uv_signal_init(loop, &sig_hup);
	uv_signal_start(&sig_term, on_signal, SIGTERM);
	uv_signal_start(&sig_int, on_signal, SIGINT);
	uv_signal_start(&sig_hup, on_signal, SIGHUP);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGUSR2, SIG_IGN); /* reserved; never fatal */
	usr1_start(loop);
	if (start_ops(loop, err, sizeof(err)) < 0) {
		fprintf(stderr, "moatd: %s\n", err);
		return 1;
	}

	/* The other workers' threads wait at a barrier until the whole process has dropped its
	 * privileges and every thread carries the system-call filter. */
	if (worker_spawn(workers, nworkers) < 0) {
		fprintf(stderr, "moatd: cannot start worker threads\n");
		return 1;
	}
	/* The service manager's socket is opened while socket() and connect() of any kind are
	 * still allowed; READY=1 goes out on it once every worker serves. */
	if (sdnotify_open() < 0)
		fprintf(stderr, "moatd: NOTIFY_SOCKET: cannot reach the service manager\n");
	/* Everything privileged is done: sockets bound, files open. */
	struct privdrop_opts drop = {cfg.user, cfg.seccomp, log_dirfd};
	if (privdrop_apply(&drop, err, sizeof(err)) < 0) {
		fprintf(stderr, "moatd: %s\n", err);
		_exit(1); /* the waiting threads go with the process */
	}
	worker_release(nworkers);
	fprintf(stderr,
	        "moatd %s: serving %zu agent(s) on %zu address(es), %zu upstream(s), %u "
	        "worker(s); ready in %.1f ms\n",
	        MOAT_VERSION, workers[0].policy->nagents, cfg.nlisten, cfg.nupstreams, nworkers,
	        (double)(uv_hrtime() - t0) / 1e6);
	sdnotify_send("READY=1\nSTATUS=serving");
	uv_run(loop, UV_RUN_DEFAULT);
	worker_join(workers, nworkers);
	metrics_http_stop();
	dnstap_out_stop();
	rpz_feed_stop(feed);

	struct server_stats t = {0};
	for (unsigned i = 0; i < nworkers; i++) {
		const struct server_stats *s = &workers[i].stats;
		t.queries += s->queries;
		t.answered += s->answered;
		t.denied += s->denied;
		t.forwarded += s->forwarded;
		t.servfail += s->servfail;
		t.formerr += s->formerr;
		t.dropped += s->dropped;
		t.refused_clients += s->refused_clients;
		t.upstream_mismatch += s->upstream_mismatch;
		t.ratelimited += s->ratelimited;
		t.inflight_refused += s->inflight_refused;
	}
	fprintf(stderr,
	        "moatd: stopped: %llu queries, %llu answered, %llu denied, %llu forwarded, "
	        "%llu servfail, %llu formerr, %llu dropped, %llu refused clients, %llu upstream "
	        "mismatches, %llu rate-limited, %llu over the in-flight caps\n",
	        (unsigned long long)t.queries, (unsigned long long)t.answered,
	        (unsigned long long)t.denied, (unsigned long long)t.forwarded,
	        (unsigned long long)t.servfail, (unsigned long long)t.formerr,
	        (unsigned long long)t.dropped, (unsigned long long)t.refused_clients,
	        (unsigned long long)t.upstream_mismatch, (unsigned long long)t.ratelimited,
	        (unsigned long long)t.inflight_refused);
	if (nworkers > 1)
		for (unsigned i = 0; i < nworkers; i++)
			fprintf(stderr, "moatd: worker %u: %llu queries\n", i,
			        (unsigned long long)workers[i].stats.queries);
	for (unsigned i = 0; i < nworkers; i++)
		worker_deinit(&workers[i]);
	sdnotify_close();
	free(workers);
	ratelimit_free(limiter);
	inflight_free(inflight);
	agentstore_close(store);
	log_close(log);
	logreopen_release();
	pathfd_release();
	config_free(&cfg);
	return 0;
}
