/* ask.c owns moatctl's ask-mode commands: `watch [--count N]` (the asks of agents with
 * on_unknown: ask, their decisions and timeouts, as JSON lines while they happen), and
 * `allow NAME --agent A [--ports tcp/443,8443]... [--for DURATION]` / `deny NAME --agent A`
 * (a runtime rule that answers them). Requests are built and checked with the daemon's own
 * parser (ctlproto). */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.h"
#include "moat/ctlproto.h"
#include "moat/err.h"

/* "90", "90s", "10m", "2h", "1d" -> seconds; 0 when not a duration. */
static unsigned long duration(const char *s)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10), mul = 1;
	if (end == s || *s == '-')
		return 0;
	if (*end == 'm')
		mul = 60;
	else if (*end == 'h')
		mul = 3600;
	else if (*end == 'd')
		mul = 86400;
	else if (*end && *end != 's')
		return 0;
	if (*end && end[1])
		return 0;
	return v * mul;
}

static int watch(const char *path, long count)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "moatctl: socket path too long\n");
		return 2;
	}
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    write(fd, "watch\n", 6) != 6) {
		fprintf(stderr, "moatctl: cannot connect to %s: %m\n", path);
		if (fd >= 0)
			close(fd);
		return 2;
	}
	char buf[65536];
	size_t n = 0;
	long lines = -1; /* the first line is the reply to watch */
	for (;;) {
		ssize_t k = read(fd, buf + n, sizeof(buf) - n - 1);
		if (k <= 0)
			break;
		n += (size_t)k;
		buf[n] = 0;
		char *p = buf, *nl;
		while ((nl = strchr(p, '\n'))) {
			*nl = 0;
			if (lines < 0 && strncmp(p, "{\"v\":1,\"ok\":true", 16)) {
				ctl_print_error(p);
				close(fd);
				return 1;
			}
			if (lines >= 0) {
				printf("%s\n", p);
				fflush(stdout);
			}
			p = nl + 1;
			if (++lines >= count && count > 0) {
				close(fd);
				return 0;
			}
		}
		n = strlen(p);
		memmove(buf, p, n + 1);
		if (n == sizeof(buf) - 1)
			n = 0; /* a line longer than the buffer: not one of moatd's */
	}
	close(fd);
	return 0;
}

int ctl_ask_cmd(int argc, char **argv, const char *sock, bool raw)
{
	char text[CTLPROTO_MAXLINE + 1], line[CTLPROTO_MAXLINE + 2], err[256];
	long count = 0;
	size_t n = (size_t)snprintf(text, sizeof(text), "%s", argv[0]);
	for (int i = 1; i < argc && n < sizeof(text); i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		unsigned long s;
		if (!strcmp(a, "--json")) {
			raw = true;
		} else if (!strcmp(a, "--count") && v && !strcmp(argv[0], "watch")) {
			count = atol(argv[++i]);
		} else if (!strcmp(a, "--agent") && v) {
			n += (size_t)snprintf(text + n, sizeof(text) - n, " agent=%s", argv[++i]);
		} else if (!strcmp(a, "--ports") && v) {
			n += (size_t)snprintf(text + n, sizeof(text) - n, " ports=%s", argv[++i]);
		} else if (!strcmp(a, "--for") && v && (s = duration(v))) {
			n += (size_t)snprintf(text + n, sizeof(text) - n, " for=%lu", s);
			i++;
		} else if (a[0] == '-') {
			fprintf(stderr, "moatctl: %s: bad option %s\n", argv[0], a);
			return 2;
		} else {
			n += (size_t)snprintf(text + n, sizeof(text) - n, " %s", a);
		}
	}
	struct ctl_request r;
	if (n >= sizeof(text) || ctlproto_parse(text, n, &r, err, sizeof(err)) < 0) {
		fprintf(stderr, "moatctl: %s\n", n >= sizeof(text) ? "request too long" : err);
		return 2;
	}
	if (r.cmd == CTL_WATCH)
		return watch(sock, count);
	if (ctlproto_format(&r, line, sizeof(line)) < 0)
		return 2;
	char *reply = ctl_ask(sock, line, strlen(line), 1);
	if (!reply)
		return 2;
	bool ok = !strncmp(reply, "{\"v\":1,\"ok\":true", 16);
	if (ok)
		ctl_print_json(reply, raw);
	else
		ctl_print_reply_error(reply, raw);
	free(reply);
	return ok ? 0 : 1;
}
