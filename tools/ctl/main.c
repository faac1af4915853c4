/* moatctl: the operator's command line for moatd. Most commands are one request on moatd's
 * control socket (protocol in moat/ctlproto.h; the request line is built and checked with the
 * same parser the daemon uses); `grants` reads moat-fw's ledger (grants.c) and `check` loads a
 * config and its policy files with the daemon's own loader, without a daemon. Output is the
 * reply's JSON object, indented, or as one line with --json; the exit status is 0 when the
 * reply says ok, 1 when it does not, 2 for a usage error or an unreachable socket. */
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "moat/bytes.h"
#include "moat/config.h"
#include "moat/config_load.h"
#include "moat/ctlproto.h"
#include "moat/err.h"
#include "moat/policy.h"
#include "ctl.h"

#define DEFAULT_SOCKET "/run/moat/ctl.sock"
#define DEFAULT_STATE "/var/lib/moat-fw"
#define REPLY_LIMIT (4u << 20)
#define TIMEOUT_MS 10000

static void usage(FILE *f)
{
	fputs("usage: moatctl [-s SOCKET] [--json] COMMAND\n"
	      "  status                       daemon, policy and reload state\n"
	      "  stats                        every counter\n"
	      "  reload                       load the config and policy again\n"
	      "  flush [NAME]                 drop cached answers (all, or NAME's)\n"
	      "  agents                       the running policy's agents\n"
	      "  explain NAME [--client ADDR] [--type T] [--state DIR]\n"
	      "                               which rule allows or denies NAME, and why, its\n"
	      "                               ports, and whether moat-fw holds its grant\n"
	      "  grants [AGENT] [--state DIR] moat-fw's live grants (its ledger, "
	      "default " DEFAULT_STATE ")\n"
	      "  check CONFIG                 validate a config and its policy files\n"
	      "  report [AGENT] [--since TIME] [--format text|json|allowlist] [--log FILE]...\n"
	      "         [--fw-log FILE]... [--highrisk FILE]... [--wildcard-min N]\n"
	      "                               what agents tried, from the logs, and the\n"
	      "                               allowlist that lets it through\n"
	      "  compile [--highrisk] -o OUT.mpol FILE...\n"
	      "                               compile text lists into one mapped file\n"
	      "  verify [--pubkey K.pub] [--highrisk] FILE.mpol...\n"
	      "                               check compiled files in full (and signatures)\n"
	      "  sign --key K FILE...         write FILE.sig (Ed25519)\n"
	      "  keygen -o K                  a signing key K and its public key K.pub\n"
	      "  agent add NAME --clients CIDR... (--allow FILE | --pattern P...)\n"
	      "            [--deny nxdomain|refused|sinkhole] [--force]\n"
	      "                               add a runtime agent (kept in moatd's state_dir)\n"
	      "  agent del NAME               remove a runtime agent\n"
	      "  batch                        agent add/del lines from stdin, one connection\n"
	      "  watch [--count N]            ask mode: asks, decisions, timeouts as JSON lines\n"
	      "  allow NAME --agent A [--ports tcp/443,8443]... [--for DURATION]\n"
	      "  deny NAME --agent A          a runtime rule (kept in state_dir unless --for);\n"
	      "                               answers the asks it decides\n"
	      "  -s, --socket PATH            moatd's control socket (default " DEFAULT_SOCKET ")\n"
	      "  --json                       print replies as one line of JSON\n",
	      f);
}

void ctl_print_json(const char *json, bool raw)
{
	if (raw) {
		fputs(json, stdout);
		if (!*json || json[strlen(json) - 1] != '\n')
			putchar('\n');
		return;
	}
	int depth = 0;
	bool in_str = false;
	for (const char *p = json; *p && *p != '\n'; p++) {
		char ch = *p;
		if (in_str) {
			putchar(ch);
			if (ch == '\\' && p[1])
				putchar(*++p);
			else if (ch == '"')
				in_str = false;
			continue;
		}
		switch (ch) {
		case '"':
			in_str = true;
			putchar(ch);
			break;
		case '{':
		case '[':
			if ((p[1] == '}' || p[1] == ']')) {
				putchar(ch);
				putchar(*++p);
				break;
			}
			printf("%c\n%*s", ch, 2 * ++depth, "");
			break;
		case '}':
		case ']':
			printf("\n%*s%c", 2 * --depth, "", ch);
			break;
		case ',':
			printf(",\n%*s", 2 * depth, "");
			break;
		case ':':
			fputs(": ", stdout);
			break;
		default:
			putchar(ch);
		}
	}
	putchar('\n');
}

char *ctl_ask(const char *path, const char *text, size_t len, size_t nreplies)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "moatctl: socket path too long\n");
		return NULL;
	}
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "moatctl: cannot connect to %s: %m\n", path);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	for (size_t off = 0; off < len;) {
		ssize_t k = write(fd, text + off, len - off);
		if (k <= 0) {
			fprintf(stderr, "moatctl: cannot send to %s: %m\n", path);
			close(fd);
			return NULL;
		}
		off += (size_t)k;
	}
	size_t cap = 65536, n = 0, seen = 0, lines = 0;
	char *buf = malloc(cap);
	while (buf) {
		struct pollfd p = {fd, POLLIN, 0};
		if (poll(&p, 1, TIMEOUT_MS) != 1) {
			fprintf(stderr, "moatctl: no reply from %s\n", path);
			break;
		}
		if (n + 1 == cap && (cap >= REPLY_LIMIT || grow_one(&buf, &cap, cap, 1, cap) < 0))
			break;
		ssize_t k = read(fd, buf + n, cap - n - 1);
		if (k <= 0) {
			fprintf(stderr, "moatctl: %s closed without a reply\n", path);
			break;
		}
		n += (size_t)k;
		buf[n] = 0;
		for (char *nl; (nl = memchr(buf + seen, '\n', n - seen));
		     seen = (size_t)(nl - buf) + 1)
			lines++;
		seen = n;
		if (lines >= nreplies) {
			close(fd);
			return buf;
		}
	}
	free(buf);
	close(fd);
	return NULL;
}

static char *ask(const char *path, const char *line)
{
	return ctl_ask(path, line, strlen(line), 1);
}

/* The reply's "error" text, unescaped enough for a terminal. */
void ctl_print_error(const char *reply)
{
	const char *e = strstr(reply, "\"error\":\"");
	if (!e) {
		fprintf(stderr, "moatctl: %s", reply);
		return;
	}
	fputs("moatctl: ", stderr);
	for (e += 9; *e && *e != '"'; e++) {
		if (*e == '\\' && e[1])
			e++;
		fputc(*e, stderr);
	}
	fputc('\n', stderr);
}

void ctl_print_reply_error(const char *reply, bool raw)
{
	if (raw) /* the whole reply, as a program reading --json expects it */
		ctl_print_json(reply, true);
	else
		ctl_print_error(reply);
}

static int cmd_check(const char *path)
{
	struct config cfg;
	struct policy *p = NULL;
	char err[8192];
	config_init(&cfg);
	cfg.check_max_errors = CONFIG_CHECK_ERRORS; /* every error in one run */
	int rc = config_load_file(&cfg, path, err, sizeof(err));
	if (rc == 0)
		rc = config_validate(&cfg, err, sizeof(err));
	if (rc == 0)
		rc = policy_load(&cfg, &p, err, sizeof(err));
	config_free(&cfg);
	if (rc < 0) {
		config_print_errors(stdout, "", err);
		return 1;
	}
	printf("moatctl: configuration OK: %zu agent(s), %zu allow pattern(s)\n", p->nagents,
	       policy_allow_count(p));
	policy_unref(p);
	return 0;
}

/* Build the request from the words after the options (--client and --type become explain's
 * client= and type= words) and check it with the daemon's own parser. Returns 0 or prints why
 * not. */
static int build_request(int argc, char **argv, const char *client, const char *type, char *line,
                         size_t cap)
{
	char text[CTLPROTO_MAXLINE + 1], err[256];
	size_t n = 0;
	for (int i = 0; i < argc + 2; i++) {
		const char *w = i < argc ? argv[i] : i == argc ? client : type;
		const char *key = i < argc ? "" : i == argc ? "client=" : "type=";
		if (!w)
			continue;
		int k = snprintf(text + n, sizeof(text) - n, "%s%s%s", i ? " " : "", key, w);
		if (k < 0 || (size_t)k >= sizeof(text) - n) {
			fprintf(stderr, "moatctl: request too long\n");
			return MOAT_EINVAL;
		}
		n += (size_t)k;
	}
	struct ctl_request r;
	if (ctlproto_parse(text, n, &r, err, sizeof(err)) < 0) {
		fprintf(stderr, "moatctl: %s\n", err);
		return MOAT_EINVAL;
	}
	return ctlproto_format(&r, line, cap) < 0 ? MOAT_EINVAL : 0;
}

struct ctl_opts {
	const char *sock, *state, *client, *type;
	bool raw;
};

/* The words after the options; options may also follow the command (explain NAME --client
 * ADDR). Returns their count, or -1 when there are too many. */
static int collect_words(int argc, char **argv, char **words, int max, struct ctl_opts *o)
{
	int n = 0;
	for (int i = optind; i < argc; i++) {
		const char *a = argv[i];
		bool has_val = i + 1 < argc;
		if (!strcmp(a, "--client") && has_val)
			o->client = argv[++i];
		else if (!strcmp(a, "--type") && has_val)
			o->type = argv[++i];
		else if (!strcmp(a, "--state") && has_val)
			o->state = argv[++i];
		else if (!strcmp(a, "--json"))
			o->raw = true;
		else if (n < max)
			words[n++] = argv[i];
		else
			return -1;
	}
	return n;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"socket", required_argument, 0, 's'},
	    {"json", no_argument, 0, 'j'},
	    {"client", required_argument, 0, 'C'},
	    {"type", required_argument, 0, 'T'},
	    {"state", required_argument, 0, 'S'},
	    {"help", no_argument, 0, 'h'},
	    {0, 0, 0, 0},
	};
	struct ctl_opts o = {DEFAULT_SOCKET, DEFAULT_STATE, NULL, NULL, false};
	int ch;
	if (ctl_policy_command(argc, argv, &ch)) /* compile, verify, sign, keygen: no daemon */
		return ch;
	if (argc > 1 && !strcmp(argv[1], "report")) /* reads the logs: no daemon either */
		return ctl_report_main(argc - 1, argv + 1);
	while ((ch = getopt_long(argc, argv, "+s:h", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			o.sock = optarg;
			break;
		case 'j':
			o.raw = true;
			break;
		case 'C':
			o.client = optarg;
			break;
		case 'T':
			o.type = optarg;
			break;
		case 'S':
			o.state = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc && !strcmp(argv[optind], "agent"))
		return ctl_agent(argc - optind - 1, argv + optind + 1, o.sock, o.raw);
	if (optind < argc && !strcmp(argv[optind], "batch"))
		return ctl_batch(o.sock, o.raw);
	if (optind < argc && (!strcmp(argv[optind], "watch") || !strcmp(argv[optind], "allow") ||
	                      !strcmp(argv[optind], "deny")))
		return ctl_ask_cmd(argc - optind, argv + optind, o.sock, o.raw);
	char *words[8];
	int nwords = collect_words(argc, argv, words, 8, &o);
	bool check = nwords > 0 && !strcmp(words[0], "check");
	bool grants = nwords > 0 && !strcmp(words[0], "grants");
	if (nwords <= 0 || (check && nwords != 2) || (grants && nwords > 2)) {
		usage(stderr);
		return 2;
	}
	if (check)
		return cmd_check(words[1]);
	if (grants)
		return ctl_grants(o.state, nwords == 2 ? words[1] : NULL, o.raw);
	char line[CTLPROTO_MAXLINE + 2];
	if (build_request(nwords, words, o.client, o.type, line, sizeof(line)) < 0)
		return 2;
	char *reply = ask(o.sock, line);
	if (!reply)
		return 2; /* the daemon could not be asked (moatctl(8)) */
	bool ok = strncmp(reply, "{\"v\":1,\"ok\":true", 16) == 0;
	if (ok && !strcmp(words[0], "explain")) { /* and whether moat-fw holds its grant */
		char *full = ctl_explain_grant(reply, o.state);
		if (full) {
			free(reply);
			reply = full;
		}
	}
	if (ok)
		ctl_print_json(reply, o.raw);
	else
		ctl_print_reply_error(reply, o.raw);
	free(reply);
	return ok ? 0 : 1;
}
