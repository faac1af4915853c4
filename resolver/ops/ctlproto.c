/* ctlproto.c owns the control protocol's grammar (moat/ctlproto.h): reading a request line
 * into a struct ctl_request, writing one back (moatctl), type names, and the error reply. Pure:
 * moatd's control.c does the I/O and runs the commands. */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "moat/config.h"
#include "moat/ctlproto.h"
#include "moat/err.h"
#include "moat/log.h"
#include "moat/wire.h"

static const char *const cmd_names[] = {
    [CTL_STATUS] = "status",       [CTL_STATS] = "stats",         [CTL_RELOAD] = "reload",
    [CTL_FLUSH] = "flush",         [CTL_AGENTS] = "agents",       [CTL_EXPLAIN] = "explain",
    [CTL_AGENT_ADD] = "agent add", [CTL_AGENT_DEL] = "agent del", [CTL_WATCH] = "watch",
    [CTL_ALLOW] = "allow",         [CTL_DENY] = "deny",
};
#define NCMDS (sizeof(cmd_names) / sizeof(cmd_names[0]))

const char *ctlproto_cmd_str(enum ctl_cmd c)
{
	return (unsigned)c < NCMDS ? cmd_names[c] : "?";
}

int ctlproto_parse_type(const char *s, uint16_t *out)
{
	char buf[16];
	if (!strncasecmp(s, "TYPE", 4) && s[4]) {
		char *end;
		long v = strtol(s + 4, &end, 10);
		if (*end || v < 0 || v > 65535)
			return MOAT_EINVAL;
		*out = (uint16_t)v;
		return 0;
	}
	/* Every mnemonic wire_type_str knows is below 260. */
	for (unsigned t = 1; t < 260; t++)
		if (!strcasecmp(wire_type_str((uint16_t)t, buf, sizeof(buf)), s) &&
		    strncmp(buf, "TYPE", 4) != 0) {
			*out = (uint16_t)t;
			return 0;
		}
	return MOAT_EINVAL;
}

/* The words of a line: at most max, each NUL-terminated in buf. Returns the count or -1. */
static int split(const char *line, size_t len, char *buf, char **words, int max)
{
	int n = 0;
	size_t o = 0;
	size_t i = 0;
	while (i < len) {
		while (i < len && (line[i] == ' ' || line[i] == '\t'))
			i++;
		if (i >= len)
			break;
		if (n == max)
			return -1;
		words[n++] = buf + o;
		while (i < len && line[i] != ' ' && line[i] != '\t')
			buf[o++] = line[i++];
		buf[o++] = 0;
	}
	return n;
}

static int fail(char *err, size_t errlen, const char *msg, const char *word)
{
	snprintf(err, errlen, "%s%s%s", msg, word ? ": " : "", word ? word : "");
	return MOAT_EINVAL;
}

/* explain's optional words: client=ADDR, type=T. */
static int parse_option(const char *w, struct ctl_request *r, char *err, size_t errlen)
{
	if (!strncmp(w, "client=", 7)) {
		/* An address: a port would not change the answer, so none is accepted. */
		if (netaddr_parse_addrport(w + 7, 0, &r->client) < 0 ||
		    ((struct sockaddr_in *)&r->client)->sin_port != 0)
			return fail(err, errlen, "bad client address (an IP address, no port)",
			            w + 7);
		r->has_client = true;
		return 0;
	}
	if (!strncmp(w, "type=", 5)) {
		if (ctlproto_parse_type(w + 5, &r->qtype) < 0)
			return fail(err, errlen, "unknown type", w + 5);
		return 0;
	}
	return fail(err, errlen, "unknown option", w);
}

int ctlproto_parse(const char *line, size_t len, struct ctl_request *r, char *err, size_t errlen)
{
	char buf[CTLPROTO_MAXLINE + 1];
	char *w[CTLPROTO_WORDS_MAX];
	memset(r, 0, sizeof(*r));
	r->qtype = WIRE_A;
	while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
		len--;
	if (len > CTLPROTO_MAXLINE)
		return fail(err, errlen, "request too long", NULL);
	if (memchr(line, 0, len) || memchr(line, '\n', len))
		return fail(err, errlen, "one request per line, no NUL bytes", NULL);
	int n = split(line, len, buf, w, CTLPROTO_WORDS_MAX);
	if (n > 0 && !strcmp(w[0], "agent"))
		return ctlproto_parse_agent(w, n, r, err, errlen);
	if (n > 0 && (!strcmp(w[0], "watch") || !strcmp(w[0], "allow") || !strcmp(w[0], "deny")))
		return ctlproto_parse_ask(w, n, r, err, errlen);
	if (n < 0 || n > 4)
		return fail(err, errlen, "too many words", NULL);
	if (n == 0)
		return fail(err, errlen, "empty request", NULL);
	unsigned c = 0;
	while (c < CTL_AGENT_ADD && strcmp(w[0], cmd_names[c]) != 0)
		c++;
	if (c == CTL_AGENT_ADD)
		return fail(err, errlen, "unknown command", w[0]);
	r->cmd = (enum ctl_cmd)c;
	int maxargs = r->cmd == CTL_EXPLAIN ? 3 : r->cmd == CTL_FLUSH ? 1 : 0;
	if (n - 1 > maxargs)
		return fail(err, errlen, "too many arguments for", w[0]);
	if (r->cmd == CTL_EXPLAIN && n < 2)
		return fail(err, errlen, "explain needs a name", NULL);
	if (n >= 2 && (r->cmd == CTL_EXPLAIN || r->cmd == CTL_FLUSH)) {
		if (name_from_text(w[1], strlen(w[1]), r->lname) < 0)
			return fail(err, errlen, "bad name", w[1]);
		r->has_name = true;
	}
	for (int i = 2; i < n; i++)
		if (parse_option(w[i], r, err, errlen) < 0)
			return MOAT_EINVAL;
	return 0;
}

int ctlproto_format(const struct ctl_request *r, char *out, size_t cap)
{
	char name[NAME_MAXTEXT], addr[64], type[16];
	int n;
	if (r->cmd == CTL_AGENT_ADD || r->cmd == CTL_AGENT_DEL)
		return ctlproto_format_agent(r, out, cap);
	if (r->cmd >= CTL_WATCH)
		return ctlproto_format_ask(r, out, cap);
	if (r->has_name && name_to_text(r->lname, name, sizeof(name)) < 0)
		return MOAT_ESPACE;
	if (r->cmd != CTL_EXPLAIN) {
		n = snprintf(out, cap, "%s%s%s\n", ctlproto_cmd_str(r->cmd), r->has_name ? " " : "",
		             r->has_name ? name : "");
	} else {
		addr[0] = 0;
		if (r->has_client)
			log_format_addr((const struct sockaddr *)&r->client, false, addr,
			                sizeof(addr));
		n = snprintf(out, cap, "explain %s%s%s type=%s\n", name,
		             r->has_client ? " client=" : "", addr,
		             wire_type_str(r->qtype, type, sizeof(type)));
	}
	return n < 0 || (size_t)n >= cap ? MOAT_ESPACE : n;
}

int ctlproto_error(const char *msg, char *out, size_t cap)
{
	return ctlproto_error_cmd(-1, msg, out, cap);
}

int ctlproto_error_cmd(int cmd, const char *msg, char *out, size_t cap)
{
	char q[600];
	log_json_quote(msg, q, sizeof(q));
	int n =
	    cmd < 0
	        ? snprintf(out, cap, "{\"v\":%d,\"ok\":false,\"error\":%s}\n", CTLPROTO_VERSION, q)
	        : snprintf(out, cap, "{\"v\":%d,\"ok\":false,\"cmd\":\"%s\",\"error\":%s}\n",
	                   CTLPROTO_VERSION, ctlproto_cmd_str((enum ctl_cmd)cmd), q);
	return n < 0 || (size_t)n >= cap ? MOAT_ESPACE : n;
}
