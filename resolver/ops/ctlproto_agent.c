/* ctlproto_agent.c owns the grammar of the control protocol's agent commands (moat/ctlproto.h):
 *   agent add NAME client=CIDR... [deny=FORM] [mode=enforce|audit] [force] patterns=N
 *                                                            (N pattern lines follow)
 *   agent del NAME
 * Pure. The name and the ranges are checked here with the config's own parsers; the pattern
 * lines are checked by the daemon with the allowlist loader's (agent_edit.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/config.h"
#include "moat/ctlproto.h"
#include "moat/err.h"

static const char *const deny_names[] = {"nxdomain", "refused", "sinkhole"};

static int afail(char *err, size_t errlen, const char *msg, const char *word)
{
	snprintf(err, errlen, "%s%s%.200s", msg, word ? ": " : "", word ? word : "");
	return MOAT_EINVAL;
}

static int add_option(const char *w, struct ctl_request *r, bool *has_n, char *err, size_t errlen)
{
	if (!strncmp(w, "client=", 7)) {
		if (r->nclients == AGENT_CLIENTS_MAX)
			return afail(err, errlen, "too many client ranges (at most 64)", NULL);
		if (netaddr_parse_cidr(w + 7, &r->clients[r->nclients]) < 0)
			return afail(err, errlen, "bad client range (ADDR or ADDR/BITS)", w + 7);
		r->nclients++;
		return 0;
	}
	if (!strncmp(w, "deny=", 5)) {
		for (unsigned i = 0; i < 3; i++)
			if (!strcmp(w + 5, deny_names[i])) {
				r->deny = (enum deny_form)i;
				return 0;
			}
		return afail(err, errlen, "bad deny form (nxdomain, refused or sinkhole)", w + 5);
	}
	if (!strncmp(w, "mode=", 5)) {
		if (config_mode_parse(w + 5, strlen(w + 5), &r->mode) < 0)
			return afail(err, errlen, "bad mode (enforce or audit)", w + 5);
		return 0;
	}
	if (!strcmp(w, "force")) {
		r->force = true;
		return 0;
	}
	if (!strncmp(w, "patterns=", 9)) {
		char *end;
		unsigned long v = strtoul(w + 9, &end, 10);
		if (!w[9] || *end || w[9] == '-' || v > AGENT_PATTERNS_MAX)
			return afail(err, errlen, "bad pattern count (0 to 1000000)", w + 9);
		r->npatterns = (uint32_t)v;
		*has_n = true;
		return 0;
	}
	return afail(err, errlen, "unknown option", w);
}

int ctlproto_parse_agent(char **w, int n, struct ctl_request *r, char *err, size_t errlen)
{
	if (n < 3 || (strcmp(w[1], "add") && strcmp(w[1], "del")))
		return afail(err, errlen, "expected agent add NAME ... or agent del NAME", NULL);
	if (!config_name_ok(w[2], strlen(w[2])))
		return afail(err, errlen, "bad agent name (1 to 63 of A-Z a-z 0-9 _ . -)", w[2]);
	snprintf(r->agent, sizeof(r->agent), "%s", w[2]);
	if (!strcmp(w[1], "del")) {
		r->cmd = CTL_AGENT_DEL;
		return n == 3 ? 0 : afail(err, errlen, "too many arguments for", "agent del");
	}
	r->cmd = CTL_AGENT_ADD;
	bool has_n = false;
	for (int i = 3; i < n; i++)
		if (add_option(w[i], r, &has_n, err, errlen) < 0)
			return MOAT_EINVAL;
	if (!r->nclients)
		return afail(err, errlen, "agent add needs at least one client=CIDR", NULL);
	if (!has_n)
		return afail(err, errlen, "agent add needs patterns=N", NULL);
	return 0;
}

int ctlproto_format_agent(const struct ctl_request *r, char *out, size_t cap)
{
	char range[64];
	int k;
	if (r->cmd == CTL_AGENT_DEL) {
		k = snprintf(out, cap, "agent del %s\n", r->agent);
		return k < 0 || (size_t)k >= cap ? MOAT_ESPACE : k;
	}
	k = snprintf(out, cap, "agent add %s", r->agent);
	if (k < 0 || (size_t)k >= cap)
		return MOAT_ESPACE;
	size_t n = (size_t)k;
	for (size_t i = 0; i <= r->nclients; i++) {
		if (i < r->nclients) {
			netaddr_cidr_text(&r->clients[i], range, sizeof(range));
			k = snprintf(out + n, cap - n, " client=%s", range);
		} else {
			k = snprintf(out + n, cap - n, " deny=%s%s%s patterns=%u\n",
			             deny_names[r->deny % 3],
			             r->mode == AGENT_AUDIT ? " mode=audit" : "",
			             r->force ? " force" : "", r->npatterns);
		}
		if (k < 0 || (size_t)k >= cap - n)
			return MOAT_ESPACE;
		n += (size_t)k;
	}
	return (int)n;
}
