/* The control protocol between moatctl and moatd, over moatd's Unix control socket
 * (`control: PATH`, `--control PATH`; mode 0660, group `control_group:`).
 *
 * Format, version 1. A request is one line of text (at most CTLPROTO_MAXLINE bytes, ending in
 * "\n"), words separated by spaces:
 *   status                      pid, version, uptime, workers, agents, last reload
 *   stats                       every counter (the numbers of the metrics endpoint)
 *   reload                      load the config and policy again; on error the running
 *                               policy stays and the reply's "error" is "file:line: reason"
 *   flush [NAME]                drop every cached answer, or those for NAME (any type), in
 *                               every worker; replies once every worker has done it
 *   agents                      the running policy's agents
 *   explain NAME [client=ADDR] [type=T]
 *                               the daemon's decision on NAME for the agent of ADDR (default:
 *                               the first agent), with the rule (file:line) that decided
 *   agent add NAME client=CIDR [client=CIDR...] [deny=nxdomain|refused|sinkhole]
 *             [mode=enforce|audit] [force] patterns=N
 *                               followed by N lines, the agent's allowlist (one pattern and
 *                               optional ports a line, as in a file): a runtime agent, in the
 *                               state store before the reply (moat/agentstore.h). A range that
 *                               is the whole space is refused; one overlapping a config agent's
 *                               unless force. The reply's "warning" says when moat-fw does not
 *                               cover a range (its HELLO), else null
 *   agent del NAME              remove a runtime agent (config agents are read-only)
 *   watch                       the connection then streams the asks of ask mode as JSON lines
 *                               (the pending ones first), and the decisions and timeouts
 *   allow PATTERN agent=A [ports=tcp/443,8443]... [for=SECONDS]
 *   deny PATTERN agent=A        a runtime rule for agent A (PATTERN: a name, or a wildcard
 *                               as in an allowlist): answers the asks it decides; kept in
 *                               state_dir unless for= gives its lifetime
 * A connection may carry several requests; each gets exactly one reply, in order.
 * A reply is one JSON object on one line:
 *   {"v":1,"ok":true,"cmd":"explain",...fields of that command...}
 *   {"v":1,"ok":false,"cmd":"agent add","error":"text"}   ("cmd" when the request was read)
 * Unknown commands, extra words and overlong lines get an error reply, never a disconnect. */
#ifndef MOAT_CTLPROTO_H
#define MOAT_CTLPROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "moat/agentstore.h"
#include "moat/name.h"

#define CTLPROTO_VERSION 1
#define CTLPROTO_MAXLINE 1024

enum ctl_cmd {
	CTL_STATUS = 0,
	CTL_STATS,
	CTL_RELOAD,
	CTL_FLUSH,
	CTL_AGENTS,
	CTL_EXPLAIN,
	CTL_AGENT_ADD,
	CTL_AGENT_DEL,
	CTL_WATCH, /* ctlproto_ask.c: ask mode */
	CTL_ALLOW,
	CTL_DENY,
};

#define CTLPROTO_PORTS_MAX 128 /* bytes of an allow's port words ("tcp/443,8443 udp/53") */

/* Words of the longest request: agent add NAME, a client= per range, deny=, mode=, force,
 * patterns=. */
#define CTLPROTO_WORDS_MAX (3 + AGENT_CLIENTS_MAX + 4)

struct ctl_request {
	enum ctl_cmd cmd;
	bool has_name;
	uint8_t lname[NAME_MAXWIRE]; /* lower-cased wire form */
	bool has_client;
	struct sockaddr_storage client;
	uint16_t qtype; /* explain; default A */
	/* agent add / agent del */
	char agent[CONFIG_NAME_MAX];
	enum deny_form deny;
	enum agent_mode mode;
	struct cidr clients[AGENT_CLIENTS_MAX];
	size_t nclients;
	uint32_t npatterns; /* lines that follow an agent add */
	/* allow / deny (agent names the agent) */
	char pattern[NAME_MAXTEXT + 2]; /* "api.example.com" or "*.example.com" */
	char ports[CTLPROTO_PORTS_MAX]; /* allow: "tcp/443,8443 udp/53"; "": every port */
	uint32_t for_s;                 /* allow: seconds the rule lasts; 0: kept (state_dir) */
	bool force;                     /* agent add: a range may overlap a config agent's */
};

/* Parse one request line (without or with its "\n"). Pure. Returns 0, or MOAT_EINVAL with a
 * message in err. */
int ctlproto_parse(const char *line, size_t len, struct ctl_request *out, char *err, size_t errlen);

/* The request line for r, "\n" included (what moatctl sends). Returns its length or
 * MOAT_ESPACE. */
int ctlproto_format(const struct ctl_request *r, char *out, size_t cap);

/* ctlproto_agent.c: the words of an agent request (words[0] is "agent"), for ctlproto_parse. */
int ctlproto_parse_agent(char **words, int n, struct ctl_request *r, char *err, size_t errlen);

/* The request line of an agent add or del, "\n" included; the pattern lines are the caller's
 * to send after it. Returns its length or MOAT_ESPACE. */
int ctlproto_format_agent(const struct ctl_request *r, char *out, size_t cap);

/* ctlproto_ask.c: the words of watch, allow and deny (words[0] is the command). */
int ctlproto_parse_ask(char **words, int n, struct ctl_request *r, char *err, size_t errlen);
int ctlproto_format_ask(const struct ctl_request *r, char *out, size_t cap);

/* "A", "aaaa", "TYPE65" -> type number; MOAT_EINVAL when unknown. */
int ctlproto_parse_type(const char *s, uint16_t *out);

/* The command's name ("explain"). */
const char *ctlproto_cmd_str(enum ctl_cmd c);

/* {"v":1,"ok":false,"error":"msg"}\n, msg escaped. Returns the length or MOAT_ESPACE. */
int ctlproto_error(const char *msg, char *out, size_t cap);
/* The same naming the command it answers (cmd an enum ctl_cmd; < 0: none):
 * {"v":1,"ok":false,"cmd":"agent add","error":"msg"}\n */
int ctlproto_error_cmd(int cmd, const char *msg, char *out, size_t cap);

#endif
