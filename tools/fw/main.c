/* main.c owns moat-fw's command line: it parses and checks the flags into struct fwsrv_opts and
 * hands over to fwsrv_run. Exit status: 0 after SIGTERM/SIGINT, 1 when start-up failed, 2 for a
 * usage error. */
#include "moat/netaddr.h"
#include "moat/err.h"
#include "moat/version.h"
#include "nft.h"
#include "remove.h"
#include "droplog.h"
#include "server.h"
#include "startck.h"

#include <getopt.h>
#include <grp.h>
#include <pwd.h>
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
	    "usage: moat-fw --socket PATH (--netns NAME|PATH | --forward --sandbox CIDR...)\n"
	    "               --resolver ADDR[:PORT]... [--state DIR] [--ranges FILE]...\n"
	    "               [--inbound tcp/PORT|udp/PORT]... [--dhcp] [--allow-private]\n"
	    "               [--moatd-user USER] [--socket-group GROUP] [--user USER]\n"
	    "               [--min-lifetime S] [--max-lifetime S] [--metrics ADDR:PORT]\n"
	    "               [--drop-log FILE [--log-group N]]\n"
	    "       moat-fw --remove [--force] [--netns NAME|PATH]\n"
	    "  --socket PATH       Unix SOCK_SEQPACKET socket moatd sends grants to (mode 0660)\n"
	    "  --netns NAME|PATH   filter inside the sandbox's network namespace: a name under\n"
	    "                      /run/netns, or a path such as /proc/PID/ns/net\n"
	    "  --forward           filter on this host for sandboxes behind it (forward and "
	    "input hooks)\n"
	    "  --sandbox CIDR[@IFACE][,allow-private]\n"
	    "                      a sandbox source range and the interface its traffic arrives\n"
	    "                      on (from the routing table when not given); allow-private lets\n"
	    "                      its grants name private and shared ranges (repeatable)\n"
	    "  --resolver ADDR     the sandbox may send DNS (UDP and TCP, port 53 unless given)\n"
	    "                      to ADDR and nowhere else (required; repeatable)\n"
	    "  --inbound P/PORT    new connections from outside may reach the sandbox on this\n"
	    "                      port (tcp/8080, udp/5353; repeatable); nothing else may\n"
	    "  --dhcp              let DHCP (v4 and v6) pass between the sandbox and its link\n"
	    "  --allow-private     grants may name private and shared ranges (10/8, fc00::/7, "
	    "...)\n"
	    "  --moatd-user USER   the only user whose processes may connect (default moat,\n"
	    "                      the user moatd drops to; root when there is no such user)\n"
	    "  --socket-group GRP  the socket's group (default: --moatd-user's own group)\n"
	    "  --user USER         run as USER after set-up, with only CAP_NET_ADMIN (default\n"
	    "                      moat-fw, else nobody; root keeps uid 0; never moatd's user)\n"
	    "  --state DIR         LMDB grant ledger directory (default " FWSRV_DEFAULT_STATE ")\n"
	    "  --ranges FILE       more always-deny ranges (the shipped list is always loaded)\n"
	    "  --min-lifetime S    shortest grant in seconds (default %d)\n"
	    "  --max-lifetime S    longest grant in seconds (default %d, at most %d)\n"
	    "  --metrics ADDR:PORT serve Prometheus metrics on GET /metrics there, in the\n"
	    "                      namespace moat-fw starts in (off by default)\n"
	    "  --drop-log FILE     every dropped packet of a sandbox and every new connection\n"
	    "                      it makes, as JSON lines (rate-limited, counted exactly)\n"
	    "  --log-group N       the nfnetlink_log group the rules log to (default 27)\n"
	    "  --remove            delete tables inet moat and moat_guard and say what they\n"
	    "                      held, then exit; refused while a moat-fw holds them\n"
	    "  --force             with --remove: remove them anyway (after stopping moat-fw)\n"
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
	if (netaddr_parse_addrport(s, 53, &ss) != 0)
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

/* "CIDR[@IFACE][,allow-private]" into r. */
static int fw_sandbox(const char *s, struct fwnft_range *r)
{
	char buf[128];
	bool priv = false;
	if (strlen(s) >= sizeof(buf))
		return MOAT_EINVAL;
	memcpy(buf, s, strlen(s) + 1);
	char *comma = strchr(buf, ',');
	if (comma) {
		*comma++ = '\0';
		if (strcmp(comma, "allow-private") != 0)
			return MOAT_EINVAL;
		priv = true;
	}
	char *at = strchr(buf, '@');
	if (at)
		*at++ = '\0';
	if (fwnft_range_parse(buf, r) != 0)
		return MOAT_EINVAL;
	if (at && (!*at || strlen(at) >= FWNFT_IFNAMSIZ || strchr(at, '"')))
		return MOAT_EINVAL;
	if (at)
		memcpy(r->ifname, at, strlen(at) + 1);
	r->allow_private = priv;
	return 0;
}

/* A user by name or number: its uid and primary group. */
static int fw_user(const char *s, uid_t *uid, gid_t *gid)
{
	struct passwd *pw = getpwnam(s);
	char *end;
	if (!pw && *s >= '0' && *s <= '9') {
		unsigned long v = strtoul(s, &end, 10);
		if (*end == '\0')
			pw = getpwuid((uid_t)v);
		if (!pw && *end == '\0') {
			*uid = (uid_t)v;
			*gid = (gid_t)v;
			return 0;
		}
	}
	if (!pw)
		return MOAT_ENOENT;
	*uid = pw->pw_uid;
	*gid = pw->pw_gid;
	return 0;
}

static int fw_group(const char *s, gid_t *gid)
{
	struct group *gr = getgrnam(s);
	char *end;
	if (gr) {
		*gid = gr->gr_gid;
		return 0;
	}
	unsigned long v = strtoul(s, &end, 10);
	if (*s < '0' || *s > '9' || *end != '\0')
		return MOAT_ENOENT;
	*gid = (gid_t)v;
	return 0;
}

/* --user's default: the moat-fw user where it exists, else nobody (said at start). */
static const char *fw_default_user(void)
{
	if (getpwnam("moat-fw"))
		return "moat-fw";
	fprintf(stderr, "moat-fw: warning: no user moat-fw (the install creates it): running as "
	                "nobody, a user other daemons share; create moat-fw or give --user\n");
	return "nobody";
}

/* --moatd-user's default: moat, the user moatd drops to by default, and its group for the
 * socket; root where there is no such user (moatd then refuses to start with a firewall
 * unless told its user, and root may do anything moat-fw does anyway). Says which at start. */
static void fw_default_moatd(struct fwsrv_opts *o, const char *given)
{
	char gname[64] = "";
	const struct passwd *pw = getpwuid(o->moatd_uid);
	if (o->socket_group == (gid_t)-1 && o->moatd_uid != 0)
		o->socket_group = o->moatd_gid;
	const struct group *gr = o->socket_group != (gid_t)-1 ? getgrgid(o->socket_group) : NULL;
	if (gr)
		snprintf(gname, sizeof(gname), " (%s)", gr->gr_name);
	if (!given && o->moatd_uid == 0)
		fprintf(stderr, "moat-fw: no user moat (moatd's default user; the install creates "
		                "it): grants only from root; create moat or give --moatd-user\n");
	fprintf(stderr, "moat-fw: grants only from user %s (uid %u)", pw ? pw->pw_name : "?",
	        (unsigned)o->moatd_uid);
	if (o->socket_group != (gid_t)-1)
		fprintf(stderr, "; socket group %u%s", (unsigned)o->socket_group, gname);
	fprintf(stderr, "\n");
	if (pw && !strcmp(pw->pw_name, "nobody"))
		fprintf(stderr, "moat-fw: warning: --moatd-user nobody: every process running as "
		                "nobody may grant\n");
}

/* Everything the command line fills in; the arrays back the pointers in o. */
struct fw_cli {
	struct fwsrv_opts o;
	struct fwnft_range sandbox[FW_MAX_LIST];
	struct fwnft_resolver resolver[FW_MAX_LIST];
	const char *ranges[FW_MAX_LIST];
	struct fwnft_port inbound[FW_MAX_LIST];
	const char *user, *moatd_user;
	bool forward, remove, force;
};

/* One more item of a list option (c: 'b' --sandbox, 'r' --resolver, 'i' --inbound; n its count):
 * parsed into the next slot of its array if there is room. NULL, or why. */
static const char *fw_item(struct fw_cli *cli, int c, const char *arg, size_t *n, const char *why)
{
	size_t i = *n;
	int rc = i >= FW_MAX_LIST ? MOAT_EINVAL
	         : c == 'b'       ? fw_sandbox(arg, &cli->sandbox[i])
	         : c == 'r'       ? fw_resolver(arg, &cli->resolver[i])
	                          : fwnft_port_parse(arg, &cli->inbound[i]);
	if (rc != 0)
		return why;
	++*n;
	return NULL;
}

/* Apply one parsed option (getopt's c and optarg): NULL, or what is wrong with arg. */
static const char *fw_option(struct fw_cli *cli, int c, const char *arg)
{
	struct fwsrv_opts *o = &cli->o;
	/* The options that keep their argument as given, and the flags. */
	const char **text = c == 's'   ? &o->socket_path
	                    : c == 'n' ? &o->netns
	                    : c == 'd' ? &o->state_dir
	                    : c == 'U' ? &cli->user
	                    : c == 'u' ? &cli->moatd_user
	                    : c == 'P' ? &o->metrics
	                    : c == 'L' ? &o->drop_log
	                               : NULL;
	bool *flag = c == 'f'   ? &cli->forward
	             : c == 'D' ? &o->dhcp
	             : c == 'p' ? &o->allow_private
	             : c == 'X' ? &cli->remove
	             : c == 'F' ? &cli->force
	                        : NULL;
	if (text)
		*text = arg;
	if (flag)
		*flag = true;
	if (text || flag)
		return NULL;
	/* The list options: their count and what each wants. */
	const struct {
		int c;
		size_t *n;
		const char *why;
	} lists[] = {
	    {'b', &o->nsandbox, "--sandbox wants CIDR[@IFACE][,allow-private], zero host bits"},
	    {'r', &o->nresolver, "--resolver wants ADDR or ADDR:PORT"},
	    {'i', &o->ninbound, "--inbound wants tcp/PORT or udp/PORT"},
	};
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
		if (c == lists[i].c)
			return fw_item(cli, c, arg, lists[i].n, lists[i].why);
	switch (c) {
	case 'R':
		if (o->nrange_files == FW_MAX_LIST)
			return "too many --ranges";
		cli->ranges[o->nrange_files++] = arg;
		return NULL;
	case 'm':
		return fw_seconds(arg, &o->min_lifetime) != 0 ? "--min-lifetime wants seconds"
		                                              : NULL;
	case 'M':
		return fw_seconds(arg, &o->max_lifetime) != 0 ? "--max-lifetime wants seconds"
		                                              : NULL;
	case 'G': {
		char *end;
		unsigned long g = strtoul(arg, &end, 10);
		if (*arg < '1' || *arg > '9' || *end || g > 65535)
			return "--log-group wants 1..65535";
		o->log_group = (uint16_t)g;
		return NULL;
	}
	default: /* 'g' */
		return fw_group(arg, &o->socket_group) != 0 ? "--socket-group: no such group"
		                                            : NULL;
	}
}

/* After the options: NULL, or why they do not make a run. */
static const char *fw_why(struct fw_cli *cli, bool extra)
{
	struct fwsrv_opts *o = &cli->o;
	if (extra)
		return "unexpected argument";
	if (cli->remove)
		return "--remove takes only --netns and --force";
	if (cli->force)
		return "--force belongs to --remove";
	if (cli->moatd_user ? fw_user(cli->moatd_user, &o->moatd_uid, &o->moatd_gid) != 0
	                    : fw_user("moat", &o->moatd_uid, &o->moatd_gid) != 0 &&
	                          fw_user("root", &o->moatd_uid, &o->moatd_gid) != 0)
		return "--moatd-user: no such user";
	if (fw_user(cli->user ? cli->user : fw_default_user(), &o->run_uid, &o->run_gid) != 0)
		return "--user: no such user";
	/* moatd's user could signal moat-fw and read its /proc files: never the same one. */
	if (o->run_uid == o->moatd_uid && o->run_uid != 0)
		return "--user is --moatd-user too: give moat-fw a user of its own (the install "
		       "creates moat-fw)";
	if (!o->socket_path)
		return "--socket is required";
	if (!o->netns == !cli->forward)
		return "give exactly one of --netns NAME and --forward";
	if (cli->forward && o->nsandbox == 0)
		return "--forward needs at least one --sandbox CIDR";
	if (!cli->forward && o->nsandbox)
		return "--sandbox belongs to --forward";
	if (o->min_lifetime > o->max_lifetime)
		return "--min-lifetime is above --max-lifetime";
	return NULL;
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
	    {"inbound", required_argument, NULL, 'i'},
	    {"dhcp", no_argument, NULL, 'D'},
	    {"allow-private", no_argument, NULL, 'p'},
	    {"moatd-user", required_argument, NULL, 'u'},
	    {"socket-group", required_argument, NULL, 'g'},
	    {"user", required_argument, NULL, 'U'},
	    {"metrics", required_argument, NULL, 'P'},
	    {"drop-log", required_argument, NULL, 'L'},
	    {"log-group", required_argument, NULL, 'G'},
	    {"remove", no_argument, NULL, 'X'},
	    {"force", no_argument, NULL, 'F'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	static struct fw_cli cli = {
	    .o =
	        {
	            .state_dir = FWSRV_DEFAULT_STATE,
	            .min_lifetime = FWSRV_DEFAULT_MIN,
	            .max_lifetime = FWSRV_DEFAULT_MAX,
	            .socket_group = (gid_t)-1,
	            .log_group = FWDROPLOG_GROUP,
	        },
	};
	struct fwsrv_opts *o = &cli.o;
	int c;

	o->sandbox = cli.sandbox;
	o->resolver = cli.resolver;
	o->range_files = cli.ranges;
	o->inbound = cli.inbound;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (c == 'V') {
			printf("moat-fw %s\n", MOAT_VERSION_FULL);
			return 0;
		}
		if (c == 'h' || c == '?' || c == ':') {
			fw_usage(c == 'h' ? stdout : stderr);
			return c == 'h' ? 0 : 2;
		}
		const char *bad = fw_option(&cli, c, optarg);
		if (bad) {
			fprintf(stderr, "moat-fw: %s (got '%s'; at most %d seconds, %d items)\n",
			        bad, optarg, FWSRV_LIFETIME_CAP, FW_MAX_LIST);
			return 2;
		}
	}
	if (cli.remove && optind == argc && !o->socket_path && !cli.forward && !o->nsandbox)
		return fwremove_run(o->netns, cli.force);
	const char *why = fw_why(&cli, optind != argc);
	if (why) {
		fprintf(stderr, "moat-fw: %s\n", why);
		fw_usage(stderr);
		return 2;
	}
	o->placement = cli.forward ? FWNFT_FORWARD : FWNFT_NETNS;
	fw_default_moatd(o, cli.moatd_user);
	char err[512];
	if (cli.forward && fwstart_ifaces(cli.sandbox, o->nsandbox, err, sizeof(err)) < 0) {
		fprintf(stderr, "moat-fw: refusing to start: %s\n", err);
		return 1;
	}
	return fwsrv_run(o);
}
