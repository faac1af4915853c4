/* moat-escape: the escape tests an operator runs from inside a sandbox before any agent moves in
 * (issue 5). main.c owns only the command line: it reads the config file, applies the flags on
 * top (a flag is the file's key with "--" in front), runs the tests in order with the report
 * streaming as they finish, and turns the outcome into the exit status: 0 when every test held
 * and the control worked, 1 otherwise, 2 for usage and configuration errors. */
#include <getopt.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"

#define ESCAPE_EXIT_HELD 0
#define ESCAPE_EXIT_ESCAPED 1
#define ESCAPE_EXIT_USAGE 2

static void escape_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: moat-escape --allowed NAME [options]\n"
	    "Runs eleven escape tests (thirteen with --witness) against the sandbox it runs in;\n"
	    "every test must end \"blocked\", the control (10) \"works\". Exit 0: all held; 1:\n"
	    "something escaped, the control failed or a test did not run; 2: usage or config "
	    "error.\n"
	    "\n"
	    "  --config FILE              key=value lines; keys are these options without --\n"
	    "  --resolver ADDR[:PORT]     resolver under test (default: first nameserver of\n"
	    "                             --resolv-conf, default /etc/resolv.conf)\n"
	    "  --allowed NAME             control: must resolve (required)\n"
	    "  --allowed-target HOST[:PORT]  control: must accept TCP (default NAME:443)\n"
	    "  --rebind NAME              allowed name pointing at an internal address (repeat)\n"
	    "  --metadata-names LIST      names of the metadata service (comma-separated)\n"
	    "  --metadata-addr ADDR[:PORT]   IPv4 metadata address (169.254.169.254:80)\n"
	    "  --metadata-addr6 ADDR      IPv6 metadata address (fd00:ec2::254)\n"
	    "  --other-resolver ADDR[:PORT]  a resolver to bypass with (repeat; default public)\n"
	    "  --unresolved ADDR          an address never resolved (192.0.2.1)\n"
	    "  --v6-target ADDR           an IPv6 address never resolved (2001:db8::1)\n"
	    "  --expire-name NAME         name for test 8 (default: --allowed)\n"
	    "  --expire-port PORT         port for test 8 (default: the target's)\n"
	    "  --expire-wait S            longest wait in test 8; 0 skips it (%d)\n"
	    "  --grant-min S              the firewall's shortest grant (%d: moat-fw default)\n"
	    "  --tunnel-domain NAME       a denied domain for test 9 (example.net)\n"
	    "  --scoped-name NAME         test 11: a name allowed for some TCP ports only\n"
	    "  --scoped-open PORT         test 11: a port its allowlist line names\n"
	    "  --scoped-closed PORT       test 11: a port it does not (443, or 80)\n"
	    "  --sinkhole ADDR            an address meaning \"denied\" (repeat; default moatd's\n"
	    "                             240.0.0.1 and 100::1, and 0.0.0.0 and ::)\n"
	    "  --witness NAME[:PORT]      an allowed host outside running tools/escape/witness.py\n"
	    "                             (port 7): tests 12 (forged sources) and 13 (inbound)\n"
	    "  --spoof-source ADDR        a source test 12 forges (repeat; default: a neighbour "
	    "of\n"
	    "                             the sandbox's address and a far documentation address)\n"
	    "  --inbound-port PORT        where test 13 listens for the witness (18080)\n"
	    "  --timeout MS               per-probe timeout (%d)\n"
	    "  --format table|tap|json    output (table)\n"
	    "  --resolv-conf FILE         where the default resolver comes from\n"
	    "Worst case: (2 + 2*metadata names + 12 + 2*rebind names + 3*other resolvers + 24)\n"
	    "probes x timeout, plus expire-wait; the table's first line gives the figure.\n",
	    ESCAPE_DEFAULT_EXPIRE_WAIT, ESCAPE_DEFAULT_GRANT_MIN, ESCAPE_DEFAULT_TIMEOUT_MS);
}

static void escape_progress(void *ctx, const struct escape_result *r)
{
	const struct escape_cfg *c = ctx;

	escape_report_row(stdout, c->format, r);
}

/* The command line: --config, --resolv-conf, and every other flag, in order, as key and value
 * (applied after the file, so a flag overrides the file). */
struct escape_cli {
	const char **keys, **vals; /* argc + 1 each */
	size_t nflags;
	const char *config, *resolv;
};

/* Read the command line into cli. -1 to carry on, or the exit status (--help, a usage error). */
static int escape_cli_parse(struct escape_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"resolv-conf", required_argument, NULL, 'R'},
	    {"help", no_argument, NULL, 'h'},
	    {"resolver", required_argument, NULL, 0},
	    {"allowed", required_argument, NULL, 0},
	    {"allowed-target", required_argument, NULL, 0},
	    {"rebind", required_argument, NULL, 0},
	    {"metadata-names", required_argument, NULL, 0},
	    {"metadata-addr", required_argument, NULL, 0},
	    {"metadata-addr6", required_argument, NULL, 0},
	    {"other-resolver", required_argument, NULL, 0},
	    {"unresolved", required_argument, NULL, 0},
	    {"v6-target", required_argument, NULL, 0},
	    {"expire-name", required_argument, NULL, 0},
	    {"expire-port", required_argument, NULL, 0},
	    {"expire-wait", required_argument, NULL, 0},
	    {"grant-min", required_argument, NULL, 0},
	    {"witness", required_argument, NULL, 0},
	    {"spoof-source", required_argument, NULL, 0},
	    {"inbound-port", required_argument, NULL, 0},
	    {"tunnel-domain", required_argument, NULL, 0},
	    {"scoped-name", required_argument, NULL, 0},
	    {"scoped-open", required_argument, NULL, 0},
	    {"scoped-closed", required_argument, NULL, 0},
	    {"sinkhole", required_argument, NULL, 0},
	    {"timeout", required_argument, NULL, 0},
	    {"format", required_argument, NULL, 0},
	    {NULL, 0, NULL, 0},
	};
	int ch, idx;

	while ((ch = getopt_long(argc, argv, "c:h", opts, &idx)) != -1) {
		if (ch == 0) {
			cli->keys[cli->nflags] = opts[idx].name;
			cli->vals[cli->nflags++] = optarg;
		} else if (ch == 'c') {
			cli->config = optarg;
		} else if (ch == 'R') {
			cli->resolv = optarg;
		} else {
			escape_usage(ch == 'h' ? stdout : stderr);
			return ch == 'h' ? ESCAPE_EXIT_HELD : ESCAPE_EXIT_USAGE;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "moat-escape: unexpected argument '%s'\n", argv[optind]);
		return ESCAPE_EXIT_USAGE;
	}
	return -1;
}

/* The configuration: the file, the flags over it, then what follows from both. 0, or -1 with the
 * reason on stderr. */
static int escape_configure(struct escape_cfg *cfg, const struct escape_cli *cli)
{
	char err[512];

	escape_cfg_init(cfg);
	if (cli->config != NULL && escape_cfg_load_file(cfg, cli->config, err, sizeof(err)) != 0) {
		fprintf(stderr, "moat-escape: %s\n", err);
		return -1;
	}
	for (size_t i = 0; i < cli->nflags; i++)
		if (escape_cfg_set(cfg, cli->keys[i], cli->vals[i], err, sizeof(err)) != 0) {
			fprintf(stderr, "moat-escape: --%s\n", err);
			return -1;
		}
	if (escape_cfg_finish(cfg, cli->resolv, err, sizeof(err)) != 0) {
		fprintf(stderr, "moat-escape: %s\n", err);
		return -1;
	}
	return 0;
}

/* Run the tests in order with the report streaming as they finish. The exit status. */
static int escape_run_all(const struct escape_cfg *cfg)
{
	static struct escape_result res[ESCAPE_NTESTS];

	if (sodium_init() < 0) {
		fprintf(stderr, "moat-escape: libsodium failed to start\n");
		return ESCAPE_EXIT_USAGE;
	}
	/* A peer closing a TCP connection must be a probe result, not the end of the run. */
	signal(SIGPIPE, SIG_IGN);

	escape_report_begin(stdout, cfg->format, cfg);
	escape_run(cfg, res, escape_progress, (void *)cfg);
	escape_report_end(stdout, cfg->format, res, ESCAPE_NTESTS);
	return escape_all_held(res, ESCAPE_NTESTS) ? ESCAPE_EXIT_HELD : ESCAPE_EXIT_ESCAPED;
}

int main(int argc, char **argv)
{
	struct escape_cli cli = {
	    .keys = calloc((size_t)argc + 1, sizeof(*cli.keys)),
	    .vals = calloc((size_t)argc + 1, sizeof(*cli.vals)),
	    .resolv = "/etc/resolv.conf",
	};
	static struct escape_cfg cfg;
	int rc = ESCAPE_EXIT_USAGE;

	if (cli.keys == NULL || cli.vals == NULL)
		fprintf(stderr, "moat-escape: out of memory\n");
	else if ((rc = escape_cli_parse(&cli, argc, argv)) < 0)
		rc = escape_configure(&cfg, &cli) == 0 ? escape_run_all(&cfg) : ESCAPE_EXIT_USAGE;
	free(cli.keys);
	free(cli.vals);
	return rc;
}
