/* ctlproto_ask.c owns the grammar of the control protocol's ask-mode commands (moat/ctlproto.h):
 *   watch
 *   allow PATTERN agent=A [ports=tcp/443,8443]... [for=SECONDS]
 *   deny PATTERN agent=A
 * Pure. The pattern and the ports are checked here as far as a word goes; the daemon loads the
 * rule with the allowlist loader's own code (IDN, ports, the lint). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/config.h"
#include "moat/ctlproto.h"
#include "moat/err.h"
#include "moat/policy.h"

static int qfail(char *err, size_t errlen, const char *msg, const char *word)
{
	snprintf(err, errlen, "%s%s%.200s", msg, word ? ": " : "", word ? word : "");
	return MOAT_EINVAL;
}

static int ask_option(const char *w, struct ctl_request *r, char *err, size_t errlen)
{
	if (!strncmp(w, "agent=", 6)) {
		if (!config_name_ok(w + 6, strlen(w + 6)))
			return qfail(err, errlen, "bad agent name", w + 6);
		snprintf(r->agent, sizeof(r->agent), "%s", w + 6);
		return 0;
	}
	if (r->cmd == CTL_ALLOW && !strncmp(w, "ports=", 6)) {
		struct policy_ports pp;
		char why[128];
		size_t have = strlen(r->ports);
		if (policy_ports_parse(w + 6, strlen(w + 6), &pp, why, sizeof(why)) < 0)
			return qfail(err, errlen, why, NULL);
		if (have + strlen(w + 6) + 2 > sizeof(r->ports))
			return qfail(err, errlen, "too many ports", NULL);
		snprintf(r->ports + have, sizeof(r->ports) - have, "%s%s", have ? " " : "", w + 6);
		return 0;
	}
	if (r->cmd == CTL_ALLOW && !strncmp(w, "for=", 4)) {
		char *end;
		unsigned long v = strtoul(w + 4, &end, 10);
		if (!w[4] || *end || w[4] == '-' || !v || v > 31536000)
			return qfail(err, errlen, "bad duration (1 to 31536000 seconds)", w + 4);
		r->for_s = (uint32_t)v;
		return 0;
	}
	return qfail(err, errlen, "unknown option", w);
}

int ctlproto_parse_ask(char **w, int n, struct ctl_request *r, char *err, size_t errlen)
{
	if (!strcmp(w[0], "watch")) {
		r->cmd = CTL_WATCH;
		return n == 1 ? 0 : qfail(err, errlen, "too many arguments for", "watch");
	}
	r->cmd = !strcmp(w[0], "allow") ? CTL_ALLOW : CTL_DENY;
	if (n < 2)
		return qfail(err, errlen, "expected allow|deny NAME agent=AGENT", NULL);
	if (strlen(w[1]) >= sizeof(r->pattern) || strchr(w[1], '='))
		return qfail(err, errlen, "bad name", w[1]);
	snprintf(r->pattern, sizeof(r->pattern), "%s", w[1]);
	for (int i = 2; i < n; i++)
		if (ask_option(w[i], r, err, errlen) < 0)
			return MOAT_EINVAL;
	if (!r->agent[0])
		return qfail(err, errlen, "allow and deny need agent=AGENT", NULL);
	return 0;
}

int ctlproto_format_ask(const struct ctl_request *r, char *out, size_t cap)
{
	int k;
	if (r->cmd == CTL_WATCH) {
		k = snprintf(out, cap, "watch\n");
		return k < 0 || (size_t)k >= cap ? MOAT_ESPACE : k;
	}
	char ports[CTLPROTO_PORTS_MAX * 2] = "", f[32] = "";
	for (const char *p = r->ports; *p;) { /* each port word as its own ports= */
		size_t l = strcspn(p, " ");
		size_t have = strlen(ports);
		snprintf(ports + have, sizeof(ports) - have, " ports=%.*s", (int)l, p);
		p += l + (p[l] == ' ');
	}
	if (r->for_s)
		snprintf(f, sizeof(f), " for=%u", r->for_s);
	k = snprintf(out, cap, "%s %s agent=%s%s%s\n", r->cmd == CTL_ALLOW ? "allow" : "deny",
	             r->pattern, r->agent, ports, f);
	return k < 0 || (size_t)k >= cap ? MOAT_ESPACE : k;
}
