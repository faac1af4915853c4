/* system.c owns the system mode: the run joins the system's moatd and moat-fw instead of
 * starting its own. moat-fw (forward placement, on this host) gets a runtime sandbox range,
 * the sandbox's address on its link moat-N (SANDBOX_ADD, moat/fwproto_sandbox.h; its reply
 * names the resolvers the sandbox may send DNS to, the first IPv4 one on port 53 goes into the
 * sandbox's resolv.conf); moatd gets a runtime agent moat-run-N for that address with the run's
 * allowlist, over its control socket (the request moat/ctlproto.h defines, as moatctl
 * sends it). At the end both
 * are removed, the agent first so no grant for the address can follow the range's removal
 * (which takes the range's grants with it). A run that died is cleaned the same way from its
 * record: each removal of something already gone counts as done. */
#include "run.h"

#include "moat/fwproto.h"
#include "moat/fwproto_sandbox.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* A daemon's answer, at most: each agent add is a store commit and a new policy snapshot, and
 * many runs starting at once queue behind each other on a loaded host. */
#define SYS_TIMEOUT_MS 30000

static int sys_connect(const char *path, int type)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (!path || strlen(path) >= sizeof(sa.sun_path))
		return -1;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

bool system_present(const struct run_opts *o)
{
	int a = sys_connect(o->fw_socket, SOCK_SEQPACKET);
	int b = sys_connect(o->ctl_socket, SOCK_STREAM);
	if (a >= 0)
		close(a);
	if (b >= 0)
		close(b);
	return a >= 0 && b >= 0;
}

/* One SANDBOX request on fd and its reply. 0 with r filled, or -1 (why in err). */
static int sys_fw_request(int fd, uint8_t type, const struct run_state *st,
                          struct fwproto_sandbox_reply *r, char *err, size_t errlen)
{
	static uint32_t seq;
	struct fwproto_sandbox rq = {.type = type, .seq = ++seq, .family = 4, .bits = 32};
	memcpy(rq.addr, st->sbx4, 4);
	snprintf(rq.ifname, sizeof(rq.ifname), "%s", st->ifname);
	uint8_t buf[FWPROTO_SBX_MAXREPLY + 1];
	int n = fwproto_sandbox_encode(&rq, buf, sizeof(buf));
	if (n < 0 || send(fd, buf, (size_t)n, MSG_NOSIGNAL) != n) {
		snprintf(err, errlen, "send: %s", strerror(errno));
		return -1;
	}
	ssize_t got = -1;
	/* moat-fw greets every peer it admits with a HELLO (moat/fwproto.h) before any answer. */
	for (int i = 0; i < 2; i++) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, SYS_TIMEOUT_MS) != 1) {
			snprintf(err, errlen, "no answer in %d ms", SYS_TIMEOUT_MS);
			return -1;
		}
		got = recv(fd, buf, sizeof(buf), 0);
		if (got < 2 || buf[1] != FWPROTO_HELLO)
			break;
	}
	struct fwproto_ack ack;
	if (got > 0 && fwproto_ack_decode(buf, (size_t)got, &ack) == 0) {
		snprintf(err, errlen,
		         "this moat-fw has no runtime sandboxes (it answered %s); "
		         "update it",
		         fwproto_status_str(ack.status));
		return -1;
	}
	if (got <= 0 || fwproto_sandbox_reply_decode(buf, (size_t)got, r) != 0 ||
	    r->seq != rq.seq) {
		snprintf(err, errlen, "unreadable answer");
		return -1;
	}
	return 0;
}

/* The sandbox's nameserver from moat-fw's resolvers: IPv4 (the sandbox has no IPv6) on port
 * 53 (resolv.conf names no port). */
static int sys_resolver(struct run_state *st, const struct fwproto_sandbox_reply *r)
{
	for (unsigned i = 0; i < r->nres; i++)
		if (r->res[i].family == 4 && r->res[i].port == 53) {
			inet_ntop(AF_INET, r->res[i].addr, st->resolver, sizeof(st->resolver));
			return 0;
		}
	run_err("moat-fw names no IPv4 resolver on port 53 (--resolver): the sandbox could not "
	        "reach moatd");
	return -1;
}

/* One control request (its line and the lines after it); the reply's "ok". */
static int sys_ctl(const char *path, const char *req, char *reply, size_t cap)
{
	int fd = sys_connect(path, SOCK_STREAM);
	if (fd < 0) {
		snprintf(reply, cap, "%s: %s", path, strerror(errno));
		return -1;
	}
	size_t len = strlen(req), off = 0;
	while (off < len) {
		ssize_t n = send(fd, req + off, len - off, MSG_NOSIGNAL);
		if (n <= 0) {
			close(fd);
			snprintf(reply, cap, "send: %s", strerror(errno));
			return -1;
		}
		off += (size_t)n;
	}
	size_t got = 0;
	reply[0] = 0;
	while (got + 1 < cap && !memchr(reply, '\n', got)) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, SYS_TIMEOUT_MS) != 1) {
			snprintf(reply, cap, "no answer in %d ms", SYS_TIMEOUT_MS);
			close(fd);
			return -1;
		}
		ssize_t n = recv(fd, reply + got, cap - 1 - got, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
		reply[got] = 0;
	}
	close(fd);
	reply[strcspn(reply, "\n")] = 0;
	return strstr(reply, "\"ok\":true") ? 0 : -1;
}

static int sys_agent_add(struct run_state *st, const struct run_opts *o)
{
	char line[256];
	snprintf(line, sizeof(line), "agent add %s client=%u.%u.%u.%u/32%s%s patterns=%zu\n",
	         st->agent, st->sbx4[0], st->sbx4[1], st->sbx4[2], st->sbx4[3],
	         o->deny ? " deny=" : "", o->deny ? o->deny : "", o->nlines);
	size_t cap = strlen(line) + 1;
	for (size_t i = 0; i < o->nlines; i++)
		cap += strlen(o->lines[i]) + 1;
	char *req = malloc(cap), reply[2048];
	if (!req)
		return -1;
	size_t off = (size_t)snprintf(req, cap, "%s", line);
	for (size_t i = 0; i < o->nlines; i++)
		off += (size_t)snprintf(req + off, cap - off, "%s\n", o->lines[i]);
	int rc = sys_ctl(o->ctl_socket, req, reply, sizeof(reply));
	free(req);
	if (rc < 0)
		run_err("moatd refused the run's agent: %s", reply);
	return rc;
}

/* Where the system moatd's query log ends now: this run's lines come after it. */
static long sys_log_offset(const struct run_opts *o)
{
	struct stat sb;
	return stat(o->moatd_log, &sb) == 0 ? (long)sb.st_size : 0;
}

int system_attach(struct run_state *st, const struct run_opts *o)
{
	char err[256];
	struct fwproto_sandbox_reply r;
	st->fw_fd = sys_connect(o->fw_socket, SOCK_SEQPACKET);
	if (st->fw_fd < 0) {
		run_err("moat-fw at %s: %s", o->fw_socket, strerror(errno));
		return -1;
	}
	if (sys_fw_request(st->fw_fd, FWPROTO_SANDBOX_ADD, st, &r, err, sizeof(err)) < 0) {
		run_err("moat-fw at %s: %s", o->fw_socket, err);
		return -1;
	}
	if (r.status != FWPROTO_OK) {
		run_err("moat-fw refused the sandbox range: %s", r.text);
		return -1;
	}
	st->added_sandbox = true;
	if (sys_resolver(st, &r) < 0)
		return -1;
	st->log_offset = sys_log_offset(o);
	if (sys_agent_add(st, o) < 0)
		return -1;
	st->added_agent = true;
	return 0;
}

void system_detach(struct run_state *st, const struct run_opts *o, bool all)
{
	char reply[2048], req[128], err[256];
	if (st->added_agent || all) {
		snprintf(req, sizeof(req), "agent del %s\n", st->agent);
		/* A record's agent may never have been added: "no such" is done too. */
		if (sys_ctl(o->ctl_socket, req, reply, sizeof(reply)) < 0 &&
		    !strstr(reply, "no agent '")) {
			run_err("moatd: agent del %s: %s", st->agent, reply);
			st->keep_record = true;
		}
		st->added_agent = false;
	}
	if (st->added_sandbox || all) {
		struct fwproto_sandbox_reply r;
		if (st->fw_fd < 0)
			st->fw_fd = sys_connect(o->fw_socket, SOCK_SEQPACKET);
		if (st->fw_fd < 0 ||
		    sys_fw_request(st->fw_fd, FWPROTO_SANDBOX_DEL, st, &r, err, sizeof(err)) < 0) {
			run_err("moat-fw: removing sandbox %u.%u.%u.%u: %s", st->sbx4[0],
			        st->sbx4[1], st->sbx4[2], st->sbx4[3],
			        st->fw_fd < 0 ? strerror(errno) : err);
			st->keep_record = true;
		} else if (r.status != FWPROTO_OK) {
			run_err("moat-fw: removing sandbox: %s", r.text);
			st->keep_record = true;
		}
		st->added_sandbox = false;
	}
	if (st->fw_fd >= 0)
		close(st->fw_fd);
	st->fw_fd = -1;
}
