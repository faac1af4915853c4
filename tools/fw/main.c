/* main.c owns moat-fw's command line: it parses and checks the flags into struct fwsrv_opts and
 * hands over to fwsrv_run. Exit status: 0 after SIGTERM/SIGINT, 1 when start-up failed, 2 for a
 * usage error. */
#include "moat/config.h"
#include "moat/err.h"
#include "moat/version.h"
#include "nft.h"
#include "server.h"

#include <getopt.h>
#include <stdbool.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FW_MAX_LIST 64 /* --sandbox, --resolver and --ranges may each be given this often */

static void fw_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: moat-fw --socket PATH (--netns NAME | --forward --sandbox CIDR...)\n"
	    "               [--state DIR] [--resolver ADDR[:PORT]]... [--ranges FILE]...\n"
	    "               [--min-lifetime S] [--max-lifetime S]\n"
	    "  --socket PATH       Unix SOCK_SEQPACKET socket moatd sends grants to (mode 0660)\n"
	    "  --netns NAME        filter inside network namespace /run/netns/NAME (output hook)\n"
	    "  --forward           filter on this host for sandboxes behind it (forward and "
	    "input hooks)\n"
	    "  --sandbox CIDR      a sandbox source range (forward placement; repeatable)\n"
	    "  --state DIR         LMDB grant ledger directory (default " FWSRV_DEFAULT_STATE ")\n"
	    "  --resolver ADDR     the sandbox may send DNS (UDP and TCP, port 53 unless given)\n"
	    "                      to ADDR and nowhere else (repeatable)\n"
	    "  --ranges FILE       more always-deny ranges (the shipped list is always loaded)\n"
	    "  --min-lifetime S    shortest grant in seconds (default %d)\n"
	    "  --max-lifetime S    longest grant in seconds (default %d, at most %d)\n"
	    "  --version           print the version and exit\n",
	    FWSRV_DEFAULT_MIN, FWSRV_DEFAULT_MAX, FWSRV_LIFETIME_CAP);
}

static int fw_seconds(const char *s, uint32_t *out)
{
	char *end;
	if (*s < '0' || *s > '9')
		return MOAT_EINVAL;
	unsigned long v = strtoul(s, &end, 10);
	if (*end != '\0' || v < 1 || v > FWSRV_LIFETIME_CAP)
		return MOAT_EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int fw_resolver(const char *s, struct fwnft_resolver *r)
{
	struct sockaddr_storage ss;
	if (config_parse_addrport(s, 53, &ss) != 0)
		return MOAT_EINVAL;
	memset(r, 0, sizeof(*r));
	if (ss.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
		r->family = 4;
		memcpy(r->addr, &in->sin_addr, 4);
		r->port = ntohs(in->sin_port);
	} else {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
		static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
		/* The sandbox sends DNS to this address; a mapped form would never match IPv4. */
		if (memcmp(&in6->sin6_addr, mapped, sizeof(mapped)) == 0)
			return MOAT_EINVAL;
		r->family = 6;
		memcpy(r->addr, &in6->sin6_addr, 16);
		r->port = ntohs(in6->sin6_port);
	}
	return r->port ? 0 : MOAT_EINVAL;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"netns", required_argument, NULL, 'n'},
	    {"forward", no_argument, NULL, 'f'},
	    {"sandbox", required_argument, NULL, 'b'},
	    {"state", required_argument, NULL, 'd'},
	    {"resolver", required_argument, NULL, 'r'},
	    {"ranges", required_argument, NULL, 'R'},
	    {"min-lifetime", required_argument, NULL, 'm'},
	    {"max-lifetime", required_argument, NULL, 'M'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	static struct fwnft_range sandbox[FW_MAX_LIST];
	static struct fwnft_resolver resolver[FW_MAX_LIST];
	static const char *ranges[FW_MAX_LIST];
	struct fwsrv_opts o = {
	    .state_dir = FWSRV_DEFAULT_STATE,
	    .min_lifetime = FWSRV_DEFAULT_MIN,
	    .max_lifetime = FWSRV_DEFAULT_MAX,
	    .sandbox = sandbox,
	    .resolver = resolver,
	    .range_files = ranges,
	};
	bool forward = false;
	int c;

	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		const char *bad = NULL;
		switch (c) {
		case 's':
			o.socket_path = optarg;
			break;
		case 'n':
			o.netns = optarg;
			break;
		case 'f':
			forward = true;
			break;
		case 'b':
			if (o.nsandbox == FW_MAX_LIST ||
			    fwnft_range_parse(optarg, &sandbox[o.nsandbox]) != 0)
				bad = "--sandbox wants a CIDR with zero host bits";
			else
				o.nsandbox++;
			break;
		case 'd':
			o.state_dir = optarg;
			break;
		case 'r':
			if (o.nresolver == FW_MAX_LIST ||
			    fw_resolver(optarg, &resolver[o.nresolver]) != 0)
				bad = "--resolver wants ADDR or ADDR:PORT";
			else
				o.nresolver++;
			break;
		case 'R':
			if (o.nrange_files == FW_MAX_LIST)
				bad = "too many --ranges";
			else
				ranges[o.nrange_files++] = optarg;
			break;
		case 'm':
			if (fw_seconds(optarg, &o.min_lifetime) != 0)
				bad = "--min-lifetime wants seconds";
			break;
		case 'M':
			if (fw_seconds(optarg, &o.max_lifetime) != 0)
				bad = "--max-lifetime wants seconds";
			break;
		case 'h':
			fw_usage(stdout);
			return 0;
		case 'V':
			printf("moat-fw %s\n", MOAT_VERSION_FULL);
			return 0;
		default:
			fw_usage(stderr);
			return 2;
		}
		if (bad) {
			fprintf(stderr, "moat-fw: %s (got '%s'; at most %d seconds, %d items)\n",
			        bad, optarg, FWSRV_LIFETIME_CAP, FW_MAX_LIST);
			return 2;
		}
	}
	const char *why = NULL;
	if (optind != argc)
		why = "unexpected argument";
	else if (!o.socket_path)
		why = "--socket is required";
	else if (!o.netns == !forward)
		why = "give exactly one of --netns NAME and --forward";
	else if (forward && o.nsandbox == 0)
		why = "--forward needs at least one --sandbox CIDR";
	else if (!forward && o.nsandbox)
		why = "--sandbox belongs to --forward";
	else if (o.min_lifetime > o.max_lifetime)
		why = "--min-lifetime is above --max-lifetime";
	if (why) {
		fprintf(stderr, "moat-fw: %s\n", why);
		fw_usage(stderr);
		return 2;
	}
	o.placement = forward ? FWNFT_FORWARD : FWNFT_NETNS;
	return fwsrv_run(&o);
}
