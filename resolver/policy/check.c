/* check.c owns the report of moatd --check (moat/check.h): lint warnings, overlapping agent
 * ranges, where each listen network's clients go, and the summary. */
#include "moat/check.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "moat/local.h"
#include "moat/policy_lint.h"

/* True if range a lies inside range b (b is at most as specific). */
static bool cidr_inside(const struct cidr *a, const struct cidr *b)
{
	struct sockaddr_in6 s = {.sin6_family = AF_INET6};
	memcpy(&s.sin6_addr, a->addr, 16);
	return a->bits >= b->bits && netaddr_cidr_contains(b, (const struct sockaddr *)&s);
}

static void report_overlaps(const struct policy *p, FILE *out)
{
	char ta[64], tb[64];
	for (size_t i = 0; i < p->nagents; i++)
		for (size_t j = 0; j < p->nagents; j++) {
			const struct policy_agent *a = &p->agents[i], *b = &p->agents[j];
			if (i == j)
				continue;
			for (size_t x = 0; x < a->nclients; x++)
				for (size_t y = 0; y < b->nclients; y++) {
					const struct cidr *ca = &a->clients[x],
					                  *cb = &b->clients[y];
					if (ca->bits == cb->bits || !cidr_inside(ca, cb))
						continue;
					netaddr_cidr_text(ca, ta, sizeof(ta));
					netaddr_cidr_text(cb, tb, sizeof(tb));
					fprintf(
					    out,
					    "moatd: overlap: %s (agent %s) lies inside %s (agent "
					    "%s): its clients go to %s (most specific wins)\n",
					    ta, a->cfg.name, tb, b->cfg.name, a->cfg.name);
				}
		}
}

static bool addr_unspecified(const struct sockaddr *sa)
{
	static const uint8_t zero[16];
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == 0;
	return !memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, zero, 16);
}

static void report_listen(const struct config *cfg, const struct policy *p, FILE *out)
{
	for (size_t i = 0; i < cfg->nlisten; i++) {
		const struct sockaddr *sa = (const struct sockaddr *)&cfg->listen[i];
		char a[INET6_ADDRSTRLEN] = "?";
		uint16_t port;
		if (sa->sa_family == AF_INET) {
			inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, a,
			          sizeof(a));
			port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
		} else {
			inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, a,
			          sizeof(a));
			port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
		}
		const struct policy_agent *ag = policy_agent_for(p, sa);
		if (addr_unspecified(sa))
			fprintf(out,
			        "moatd: listen %s%s%s:%u: every local network; each client goes to "
			        "the agent of its range\n",
			        sa->sa_family == AF_INET6 ? "[" : "", a,
			        sa->sa_family == AF_INET6 ? "]" : "", port);
		else
			fprintf(out, "moatd: listen %s%s%s:%u: clients on its network go to %s%s\n",
			        sa->sa_family == AF_INET6 ? "[" : "", a,
			        sa->sa_family == AF_INET6 ? "]" : "", port,
			        ag ? "agent " : "no agent (refused)", ag ? ag->cfg.name : "");
	}
}

int check_report(const struct config *cfg, struct policy *p, bool strict, FILE *out, FILE *errs)
{
	size_t n = policy_allow_count(p), warnings = policy_lint_count(p->lint);
	policy_lint_print(p->lint, errs, "");
	report_overlaps(p, out);
	report_listen(cfg, p, out);
	if (strict && warnings) {
		fprintf(errs, "moatd: --strict: %zu warning(s), configuration refused\n", warnings);
		return 1;
	}
	policy_rpz_report(cfg, p, out);
	size_t zones = p->fwd.n;
	for (size_t i = 0; i < p->nagents; i++)
		zones += p->agents[i].fwd.n;
	fprintf(out,
	        "moatd: configuration OK: %zu agent(s), %zu allow pattern(s), %zu high-risk "
	        "pattern(s), %zu forward zone(s), %zu local record(s), %zu warning(s)\n",
	        p->nagents, n, policy_set_count(p->highrisk), zones, local_data_count(p->local),
	        warnings);
	return 0;
}
