/* config_flags.c owns moatd's command line: the usage text, reading the flags, applying them
 * onto the configuration (numeric flags through config_limits.c's table, like the YAML keys),
 * and the flag-mode agent that serves loopback and the listen addresses' networks when there
 * is no -c. It prints its errors to stderr and returns them; only --help and --version exit. */
#include "config/config_flags.h"

#include <getopt.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/config_load.h"
#include "moat/err.h"
#include "moat/netaddr.h"
#include "moat/version.h"
#include "moat/zonesdir.h"

static void usage(FILE *f)
{
	fputs(
	    "usage: moatd --listen ADDR:PORT --upstream ADDR:PORT [--upstream-source ADDR]\n"
	    "             --allow FILE [--allow FILE...] [--deny nxdomain|refused|sinkhole]\n"
	    "             [--strict-chain] [--allow-private] [--audit] [--log FILE] [--firewall "
	    "PATH]\n"
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
	    "  --ratelimit QPS        queries per second per client, bursts as large\n"
	    "                         (default 10000; 0: off)\n"
	    "  --workers N            threads sharing the port (SO_REUSEPORT); default 1\n"
	    "  --tcp-max-queued BYTES answers queued per TCP connection before moatd stops\n"
	    "                         reading it (default 65536)\n"
	    "  --inflight-max N       questions waiting for an upstream, in all (default 2048)\n"
	    "  --inflight-per-client N  of them per client (default 256); over a cap: SERVFAIL\n"
	    "  --budget BYTES         every agent's label budget: new label bytes a wildcard zone\n"
	    "                         and window (default 4096; 0: off, per-rule ones too)\n"
	    "  --budget-window S      its sliding window in seconds (default 3600)\n"
	    "  --user NAME            drop to this user once the sockets are bound (default:\n"
	    "                         moat if it exists, else nobody; root stays root)\n"
	    "  --no-seccomp           skip the system-call filter (for debugging)\n"
	    "  --allow FILE           allowlist: one name or *.name per line (repeatable)\n"
	    "  --deny FORM            nxdomain (default), refused or sinkhole\n"
	    "  --strict-chain         every CNAME/DNAME target must be allowed too\n"
	    "  --allow-private        private and shared answers are not refused\n"
	    "  --audit                audit mode: names no allowlist allows are answered and\n"
	    "                         logged as would-deny (every agent)\n"
	    "  --log FILE             query log (JSON lines); default stdout; /dev/null: none\n"
	    "  --log-budget BYTES     query log bytes a second, beyond: counted, not written\n"
	    "                         (default 1048576; 0: unbounded)\n"
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
	O_VERSION,
	O_FIREWALL,
	O_USER,
	O_NOSECCOMP,
	O_NUMBER, /* a flag of config_limits.c's table, found by its name */
	O_CONTROL,
	O_METRICS,
	O_ZONES,
	O_STATE,
	O_AUDIT,
	O_BUDGET,
	O_BUDGET_WINDOW,
};

static const struct option flags_long[] = {
    {"listen", required_argument, 0, O_LISTEN},
    {"upstream", required_argument, 0, O_UPSTREAM},
    {"upstream-source", required_argument, 0, O_SOURCE},
    {"upstream-timeout", required_argument, 0, O_NUMBER},
    {"allow", required_argument, 0, O_ALLOW},
    {"deny", required_argument, 0, O_DENY},
    {"check", no_argument, 0, O_CHECK},
    {"strict", no_argument, 0, O_STRICT_CHECK},
    {"strict-chain", no_argument, 0, O_STRICT},
    {"allow-private", no_argument, 0, O_PRIVATE},
    {"audit", no_argument, 0, O_AUDIT},
    {"log", required_argument, 0, O_LOG},
    {"log-budget", required_argument, 0, O_NUMBER},
    {"firewall", required_argument, 0, O_FIREWALL},
    {"cache-size", required_argument, 0, O_NUMBER},
    {"ratelimit", required_argument, 0, O_NUMBER},
    {"user", required_argument, 0, O_USER},
    {"no-seccomp", no_argument, 0, O_NOSECCOMP},
    {"workers", required_argument, 0, O_NUMBER},
    {"serve-stale", required_argument, 0, O_NUMBER},
    {"tcp-max-queued", required_argument, 0, O_NUMBER},
    {"inflight-max", required_argument, 0, O_NUMBER},
    {"inflight-per-client", required_argument, 0, O_NUMBER},
    {"control", required_argument, 0, O_CONTROL},
    {"metrics", required_argument, 0, O_METRICS},
    {"zones-dir", required_argument, 0, O_ZONES},
    {"state-dir", required_argument, 0, O_STATE},
    {"budget", required_argument, 0, O_BUDGET},
    {"budget-window", required_argument, 0, O_BUDGET_WINDOW},
    {"config", required_argument, 0, 'c'},
    {"help", no_argument, 0, 'h'},
    {"version", no_argument, 0, O_VERSION},
    {0, 0, 0, 0},
};

void config_flags_free(struct config_flags *o)
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

static int flags_add_addr(struct sockaddr_storage **v, size_t *n, const char *flag, const char *s)
{
	struct sockaddr_storage ss;
	if (netaddr_parse_addrport(s, 53, &ss) < 0) {
		fprintf(stderr, "moatd: --%s %s: expected ADDR:PORT\n", flag, s);
		return MOAT_EINVAL;
	}
	struct sockaddr_storage *nv = realloc(*v, (*n + 1) * sizeof(**v));
	if (!nv)
		return MOAT_ENOMEM;
	nv[(*n)++] = ss;
	*v = nv;
	return 0;
}

/* A numeric flag: a whole decimal number within its setting's range, kept for later. */
static int flags_number(struct config_flags *o, const char *flag, const char *arg)
{
	const struct config_limit *l = config_limit_flag(flag);
	uint64_t v;

	if (!l || !netaddr_uint(arg, strlen(arg), l->max, &v) || v < l->min) {
		fprintf(stderr, "moatd: --%s: %u to %u%s\n", flag, l ? l->min : 0, l ? l->max : 0,
		        l ? l->unit : "");
		return MOAT_EINVAL;
	}
	if (o->nnum == CONFIG_FLAGS_NUM_MAX) {
		fprintf(stderr, "moatd: too many numeric flags\n");
		return MOAT_EINVAL;
	}
	o->num[o->nnum].lim = l;
	o->num[o->nnum++].v = (uint32_t)v;
	return 0;
}

/* The flags that only set a field: a text argument kept as given (the config reads it later), or a
 * switch. */
#define FIELD(f) offsetof(struct config_flags, f)
static const struct {
	int ch;
	bool text;
	size_t off;
} flag_fields[] = {
    /* clang-format off */
	{'c', true, FIELD(config_path)}, {O_DENY, true, FIELD(deny)}, {O_LOG, true, FIELD(log)},
	{O_FIREWALL, true, FIELD(firewall)}, {O_USER, true, FIELD(user)},
	{O_ZONES, true, FIELD(zones_dir)}, {O_CONTROL, true, FIELD(control)},
	{O_METRICS, true, FIELD(metrics)}, {O_STATE, true, FIELD(state_dir)},
	{O_BUDGET, true, FIELD(budget)}, {O_BUDGET_WINDOW, true, FIELD(budget_window)},
	{O_CHECK, false, FIELD(check)}, {O_STRICT_CHECK, false, FIELD(strict)},
	{O_STRICT, false, FIELD(strict_chain)}, {O_PRIVATE, false, FIELD(allow_private)},
	{O_NOSECCOMP, false, FIELD(no_seccomp)}, {O_AUDIT, false, FIELD(audit)},
    /* clang-format on */
};

/* Set ch's field if it is one of flag_fields; false if it is not. */
static bool flags_field(struct config_flags *o, int ch, const char *arg)
{
	for (size_t i = 0; i < sizeof(flag_fields) / sizeof(flag_fields[0]); i++) {
		if (flag_fields[i].ch != ch)
			continue;
		char *field = (char *)o + flag_fields[i].off;
		if (flag_fields[i].text)
			*(const char **)(void *)field = arg;
		else
			*(bool *)field = true;
		return true;
	}
	return false;
}

/* One flag with an address or a value to check now; 1 if ch is not one of them. */
static int flags_checked(struct config_flags *o, int ch, int idx)
{
	switch (ch) {
	case O_LISTEN:
		return flags_add_addr(&o->listen, &o->nlisten, "listen", optarg);
	case O_UPSTREAM:
		return flags_add_addr(&o->up, &o->nup, "upstream", optarg);
	case O_SOURCE:
		if (netaddr_parse_addrport(optarg, 0, &o->source) < 0) {
			fprintf(stderr, "moatd: --upstream-source %s: expected an address\n",
			        optarg);
			return MOAT_EINVAL;
		}
		o->has_source = true;
		return 0;
	case O_NUMBER:
		return flags_number(o, flags_long[idx].name, optarg);
	case O_ALLOW:
		return config_strv_push(&o->allow, &o->nallow, optarg) < 0 ? MOAT_ENOMEM : 0;
	default:
		return 1;
	}
}

static int flags_read(int argc, char **argv, struct config_flags *o)
{
	int ch, idx = 0, rc;

	memset(o, 0, sizeof(*o));
	while ((ch = getopt_long(argc, argv, "c:h", flags_long, &idx)) != -1) {
		if (flags_field(o, ch, optarg))
			continue;
		if ((rc = flags_checked(o, ch, idx)) <= 0) {
			if (rc < 0)
				return rc;
			continue;
		}
		if (ch == 'h' || ch == O_VERSION) {
			if (ch == 'h')
				usage(stdout);
			else
				printf("moatd %s\n", MOAT_VERSION_FULL);
			exit(0);
		}
		usage(stderr);
		return MOAT_EINVAL;
	}
	if (optind < argc) {
		fprintf(stderr, "moatd: unexpected argument '%s'\n", argv[optind]);
		return MOAT_EINVAL;
	}
	if (o->strict && !o->check) {
		fprintf(stderr, "moatd: --strict goes with --check\n");
		return MOAT_EINVAL;
	}
	return 0;
}

/* Replace an owned string of cfg with a copy of s (when s was given). */
static int flags_string(char **slot, const char *s)
{
	if (!s)
		return 0;
	free(*slot);
	*slot = strdup(s);
	return *slot ? 0 : MOAT_ENOMEM;
}

/* Flags given beside a config replace its values and lists. */
static int flags_apply(struct config *cfg, struct config_flags *o)
{
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
	if (o->has_source) {
		cfg->upstream_source = o->source;
		cfg->has_upstream_source = true;
	}
	for (size_t i = 0; i < o->nnum; i++)
		config_limit_set(cfg, o->num[i].lim, o->num[i].v);
	if (o->no_seccomp)
		cfg->seccomp = false;
	if (o->zones_dir && config_set_zones_dir(cfg, o->zones_dir) < 0)
		return MOAT_ENOMEM;
	if (flags_string(&cfg->log_file, o->log) || flags_string(&cfg->user, o->user) ||
	    flags_string(&cfg->fw_socket, o->firewall) ||
	    flags_string(&cfg->control_path, o->control) ||
	    flags_string(&cfg->state_dir, o->state_dir))
		return MOAT_ENOMEM;
	if (o->metrics) {
		if (netaddr_parse_addrport(o->metrics, 0, &cfg->metrics_addr) < 0) {
			fprintf(stderr, "moatd: --metrics %s: expected ADDR:PORT\n", o->metrics);
			return MOAT_EINVAL;
		}
		cfg->has_metrics = true;
	}
	return 0;
}

/* Without -c: one agent, 'default', with the --allow lists and the --deny form. */
static int flags_agent(struct config *cfg, struct config_flags *o)
{
	struct config_agent *a = calloc(1, sizeof(*a));
	if (!a)
		return MOAT_ENOMEM;
	cfg->agents = a;
	cfg->nagents = 1;
	config_agent_init(a);
	snprintf(a->name, sizeof(a->name), "default");
	if (o->deny && config_deny_parse(o->deny, strlen(o->deny), &a->deny) < 0) {
		fprintf(stderr, "moatd: --deny %s: expected nxdomain, refused or sinkhole\n",
		        o->deny);
		return MOAT_EINVAL;
	}
	a->allow_files = o->allow;
	a->nallow = o->nallow;
	o->allow = NULL;
	o->nallow = 0;
	return flag_mode_clients(a, cfg) < 0 ? MOAT_ENOMEM : 0;
}

/* --budget and --budget-window: every agent's label budget (tests and quick use; a config
 * sets each agent's own). --budget 0 turns the per-rule budgets off too. */
static int flags_budget(struct config *cfg, const struct config_flags *o)
{
	uint64_t bytes = 0, window = 0;
	if (o->budget && !netaddr_uint(o->budget, strlen(o->budget), 1u << 24, &bytes)) {
		fprintf(stderr, "moatd: --budget: 0 to %u (bytes)\n", 1u << 24);
		return MOAT_EINVAL;
	}
	if (o->budget_window && (!netaddr_uint(o->budget_window, strlen(o->budget_window),
	                                       CONFIG_BUDGET_WINDOW_MAX, &window) ||
	                         !window)) {
		fprintf(stderr, "moatd: --budget-window: 1 to %u (seconds)\n",
		        CONFIG_BUDGET_WINDOW_MAX);
		return MOAT_EINVAL;
	}
	for (size_t i = 0; i < cfg->nagents; i++) {
		struct config_budget *b = &cfg->agents[i].budget;
		if (o->budget) {
			b->bytes = (uint32_t)bytes;
			if (!bytes)
				b->nzones = 0;
		}
		if (o->budget_window)
			b->window_s = (uint32_t)window;
	}
	return 0;
}

int config_flags_build(int argc, char **argv, struct config *cfg, struct config_flags *o)
{
	char err[4096];
	int rc = flags_read(argc, argv, o);

	config_init(cfg);
	if (rc < 0)
		return rc;
	if (o->check) /* every error of a file in one run, not only the first */
		cfg->check_max_errors = CONFIG_CHECK_ERRORS;
	if (o->config_path) {
		if (config_load_file(cfg, o->config_path, err, sizeof(err)) < 0) {
			config_print_errors(stderr, "moatd: ", err);
			return MOAT_EINVAL;
		}
		if (o->nallow || o->deny) {
			fprintf(stderr,
			        "moatd: --allow and --deny are for flag mode; with -c, agents "
			        "come from the config\n");
			return MOAT_EINVAL;
		}
	}
	if ((rc = flags_apply(cfg, o)) < 0 || (!o->config_path && (rc = flags_agent(cfg, o)) < 0))
		return rc;
	for (size_t i = 0; i < cfg->nagents; i++) {
		cfg->agents[i].strict_chain |= o->strict_chain;
		cfg->agents[i].allow_private |= o->allow_private;
		if (o->audit)
			cfg->agents[i].mode = AGENT_AUDIT;
	}
	if ((rc = flags_budget(cfg, o)) < 0)
		return rc;
	if (config_validate(cfg, err, sizeof(err)) < 0) {
		fprintf(stderr, "moatd: %s\n", err);
		return MOAT_EINVAL;
	}
	return 0;
}
