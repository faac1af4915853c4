/* bench-agents: the cost of picking a query's agent by client address (policy_agent_for) with
 * 1 agent and with 1 + 1,000 runtime agents (a /32 or /128 each, as `moatctl agent add` gives
 * sandboxes), through the index (policy_clients.c) and through the linear scan it replaced,
 * measured in the same run. Also the time to add the 1,000 agents one snapshot edit at a time
 * (agent_edit_add, what the control socket does before the commit). Issue 16's target: the
 * per-query cost unchanged by the number of agents. Run by hand:
 *   build/bench-agents [LOOKUPS]        default 4000000 lookups per case */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "moat/agent_edit.h"
#include "moat/policy.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

enum { NQ = 4096, NAGENTS = 1000 };
static struct sockaddr_storage q[NQ];

static void addr_of(unsigned i, char *out, size_t cap)
{
	if (i < 750)
		snprintf(out, cap, "%s.%u",
		         i < 250   ? "198.51.100"
		         : i < 500 ? "203.0.113"
		                   : "192.0.2",
		         i % 250 + 1);
	else
		snprintf(out, cap, "2001:db8:16::%x", i - 749);
}

/* ns per lookup over the query set; sink keeps the compiler from dropping the calls. */
static double time_lookups(const struct policy *p, long n, size_t *sink)
{
	double t0 = now_s();
	for (long i = 0; i < n; i++)
		*sink += (size_t)policy_agent_for(p, (const struct sockaddr *)&q[i & (NQ - 1)]);
	return (now_s() - t0) * 1e9 / (double)n;
}

static struct policy *base_policy(const char *allow)
{
	struct config cfg;
	struct policy *p;
	char err[256];
	config_init(&cfg);
	cfg.agents = calloc(1, sizeof(*cfg.agents));
	cfg.nagents = 1;
	snprintf(cfg.agents[0].name, sizeof(cfg.agents[0].name), "ops");
	cfg.agents[0].clients = calloc(2, sizeof(struct cidr));
	netaddr_parse_cidr("127.0.0.0/8", &cfg.agents[0].clients[0]);
	netaddr_parse_cidr("::1", &cfg.agents[0].clients[1]);
	cfg.agents[0].nclients = 2;
	config_strv_push(&cfg.agents[0].allow_files, &cfg.agents[0].nallow, allow);
	if (policy_load(&cfg, &p, err, sizeof(err)) < 0) {
		fprintf(stderr, "bench-agents: %s\n", err);
		exit(1);
	}
	config_free(&cfg);
	return p;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 4000000;
	char allow[] = "/tmp/bench-agents.XXXXXX", a[64], pat[64], err[512], warn[64];
	int fd = mkstemp(allow);
	if (n < 1 || fd < 0 || write(fd, "ops.test\n", 9) != 9)
		return 2;
	close(fd);
	struct policy *one = base_policy(allow), *many = policy_ref(one), *np;
	unlink(allow);
	double t0 = now_s();
	for (unsigned i = 0; i < NAGENTS; i++) {
		struct agent_spec s;
		char *pp = pat;
		memset(&s, 0, sizeof(s));
		snprintf(s.name, sizeof(s.name), "a%u", i);
		addr_of(i, a, sizeof(a));
		netaddr_parse_cidr(a, &s.clients[0]);
		s.nclients = 1;
		snprintf(pat, sizeof(pat), "a%u.fleet.test", i);
		s.patterns = &pp;
		s.npatterns = 1;
		if (agent_edit_add(many, &s, &np, warn, sizeof(warn), err, sizeof(err)) < 0) {
			fprintf(stderr, "bench-agents: %s\n", err);
			return 1;
		}
		policy_unref(many);
		many = np;
	}
	double add_ms = (now_s() - t0) * 1e3;
	/* Clients spread over every agent's address (and loopback, the config agent's). */
	unsigned seed = 99;
	for (int i = 0; i < NQ; i++) {
		seed = seed * 1103515245u + 12345u;
		unsigned k = (seed >> 8) % (NAGENTS + 1);
		if (k == NAGENTS)
			snprintf(a, sizeof(a), "127.0.0.1");
		else
			addr_of(k, a, sizeof(a));
		netaddr_parse_addrport(a, 0, &q[i]);
	}
	size_t sink = 0;
	struct policy_clients *idx1 = one->byclient, *idxn = many->byclient;
	double r[4];
	for (int round = 0; round < 2; round++) { /* the first round warms up */
		r[0] = time_lookups(one, n, &sink);
		r[1] = time_lookups(many, n, &sink);
		one->byclient = NULL;
		many->byclient = NULL;
		r[2] = time_lookups(one, n, &sink);
		r[3] = time_lookups(many, n / 50, &sink);
		one->byclient = idx1;
		many->byclient = idxn;
	}
	printf("| agents | index ns/lookup | linear ns/lookup |\n|---|---|---|\n");
	printf("| 1 | %.1f | %.1f |\n| 1001 | %.1f | %.1f |\n", r[0], r[2], r[1], r[3]);
	printf("index, 1001 vs 1 agent: x%.2f; linear, 1001 vs 1 agent: x%.1f\n", r[1] / r[0],
	       r[3] / r[2]);
	printf("1000 snapshot edits (agent_edit_add, no store): %.1f ms\n", add_ms);
	policy_unref(one);
	policy_unref(many);
	return sink == 42; /* never */
}
