/* config_check.c owns the sanity checks across config values that each parse fine alone but
 * together make a resolver that cannot work or does something else than meant: two agents with
 * the same client range (the second is never reached), a listen address twice, an upstream that
 * is moatd itself (a loop), cache_min_ttl above cache_max_ttl, a user that does not exist and a
 * log file in a missing directory (both would pass --check and then stop the daemon), a zone
 * transferred without TSIG under policy_pubkey (an unsigned source). Each error
 * names the file:line of the value, or the flag it came from. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "moat/config.h"
#include "moat/err.h"

void config_where_text(const struct config *cfg, int line, const char *flag, char *out, size_t cap)
{
	if (line > 0 && cfg->where.file)
		snprintf(out, cap, "%s:%d", cfg->where.file, line);
	else
		snprintf(out, cap, "%s", flag);
}

static int line_of(const int *lines, const void *owner, const void *arr, size_t i)
{
	return lines && owner == arr ? lines[i] : 0;
}

static void sa_text(const struct sockaddr_storage *ss, char *out, size_t cap)
{
	char a[INET6_ADDRSTRLEN] = "?";
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *s = (const struct sockaddr_in *)ss;
		inet_ntop(AF_INET, &s->sin_addr, a, sizeof(a));
		snprintf(out, cap, "%s:%u", a, ntohs(s->sin_port));
	} else {
		const struct sockaddr_in6 *s = (const struct sockaddr_in6 *)ss;
		inet_ntop(AF_INET6, &s->sin6_addr, a, sizeof(a));
		snprintf(out, cap, "[%s]:%u", a, ntohs(s->sin6_port));
	}
}

static bool sa_same(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	if (a->ss_family != b->ss_family)
		return false;
	if (a->ss_family == AF_INET) {
		const struct sockaddr_in *x = (const void *)a, *y = (const void *)b;
		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *x = (const void *)a, *y = (const void *)b;
	return x->sin6_port == y->sin6_port && !memcmp(&x->sin6_addr, &y->sin6_addr, 16);
}

/* An upstream that reaches a listener: the same address, or a local one (loopback,
 * unspecified) on the port of a listener bound to every address of that family. */
static bool sa_reaches(const struct sockaddr_storage *up, const struct sockaddr_storage *l)
{
	if (sa_same(up, l))
		return true;
	if (up->ss_family != l->ss_family)
		return false;
	if (up->ss_family == AF_INET) {
		const struct sockaddr_in *u = (const void *)up, *s = (const void *)l;
		uint32_t ua = ntohl(u->sin_addr.s_addr);
		return s->sin_addr.s_addr == 0 && u->sin_port == s->sin_port &&
		       ((ua >> 24) == 127 || ua == 0);
	}
	const struct sockaddr_in6 *u = (const void *)up, *s = (const void *)l;
	return IN6_IS_ADDR_UNSPECIFIED(&s->sin6_addr) && u->sin6_port == s->sin6_port &&
	       (IN6_IS_ADDR_LOOPBACK(&u->sin6_addr) || IN6_IS_ADDR_UNSPECIFIED(&u->sin6_addr));
}

static int check_listen(const struct config *cfg, char *err, size_t errlen)
{
	const struct config_where *w = &cfg->where;
	char where[300], first[300], a[80];
	for (size_t i = 0; i < cfg->nlisten; i++)
		for (size_t j = 0; j < i; j++)
			if (sa_same(&cfg->listen[i], &cfg->listen[j])) {
				sa_text(&cfg->listen[i], a, sizeof(a));
				config_where_text(
				    cfg, line_of(w->listen_lines, w->listen_for, cfg->listen, i),
				    "--listen", where, sizeof(where));
				config_where_text(
				    cfg, line_of(w->listen_lines, w->listen_for, cfg->listen, j),
				    "--listen", first, sizeof(first));
				snprintf(err, errlen,
				         "%s: listen: %s is listed twice (first at %s)", where, a,
				         first);
				return MOAT_EINVAL;
			}
	for (size_t u = 0; u < cfg->nupstreams; u++)
		for (size_t i = 0; i < cfg->nlisten; i++)
			if (sa_reaches(&cfg->upstreams[u], &cfg->listen[i])) {
				sa_text(&cfg->upstreams[u], a, sizeof(a));
				config_where_text(
				    cfg,
				    line_of(w->upstream_lines, w->upstream_for, cfg->upstreams, u),
				    "--upstream", where, sizeof(where));
				config_where_text(
				    cfg, line_of(w->listen_lines, w->listen_for, cfg->listen, i),
				    "--listen", first, sizeof(first));
				snprintf(err, errlen,
				         "%s: upstreams: %s is moatd's own listen address (%s): "
				         "queries would loop back to moatd",
				         where, a, first);
				return MOAT_EINVAL;
			}
	return 0;
}

/* A forward zone's upstream that is moatd itself loops as surely as a global one. */
static int check_forwards(const struct config *cfg, const struct config_forward *f, size_t n,
                          char *err, size_t errlen)
{
	char where[300], a[80];
	for (size_t k = 0; k < n; k++)
		for (size_t u = 0; u < f[k].nupstreams; u++)
			for (size_t i = 0; i < cfg->nlisten; i++)
				if (sa_reaches(&f[k].upstreams[u], &cfg->listen[i])) {
					sa_text(&f[k].upstreams[u], a, sizeof(a));
					config_where_text(cfg, f[k].line, "forward", where,
					                  sizeof(where));
					snprintf(err, errlen,
					         "%s: forward: upstream %s is moatd's own listen "
					         "address: queries would loop back to moatd",
					         where, a);
					return MOAT_EINVAL;
				}
	return 0;
}

static int check_agents(const struct config *cfg, char *err, size_t errlen)
{
	char where[300], first[300], r[64];
	for (size_t i = 0; i < cfg->nagents; i++) {
		const struct config_agent *a = &cfg->agents[i];
		for (size_t k = 0; k < a->nclients; k++)
			for (size_t j = 0; j < i; j++) {
				const struct config_agent *b = &cfg->agents[j];
				for (size_t l = 0; l < b->nclients; l++) {
					const struct cidr *x = &a->clients[k], *y = &b->clients[l];
					if (x->bits != y->bits || memcmp(x->addr, y->addr, 16))
						continue;
					config_where_text(cfg,
					                  a->client_lines ? a->client_lines[k] : 0,
					                  "clients", where, sizeof(where));
					config_where_text(cfg,
					                  b->client_lines ? b->client_lines[l] : 0,
					                  "clients", first, sizeof(first));
					netaddr_cidr_text(x, r, sizeof(r));
					snprintf(
					    err, errlen,
					    "%s: clients: %s of agent '%s' is also the range of "
					    "agent '%s' (%s): one of them would never be reached",
					    where, r, a->name, b->name, first);
					return MOAT_EINVAL;
				}
			}
	}
	return 0;
}

static int check_files(const struct config *cfg, char *err, size_t errlen)
{
	char where[300];
	if (cfg->user && getpwnam(cfg->user) == NULL) {
		config_where_text(cfg, cfg->where.user, "--user", where, sizeof(where));
		snprintf(err, errlen, "%s: user: no such user '%s'", where, cfg->user);
		return MOAT_EINVAL;
	}
	if (cfg->log_file) {
		const char *slash = strrchr(cfg->log_file, '/');
		char *dir = slash == NULL ? strdup(".")
		            : slash == cfg->log_file
		                ? strdup("/")
		                : strndup(cfg->log_file, (size_t)(slash - cfg->log_file));
		struct stat st;
		bool ok = dir && stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
		if (!ok) {
			config_where_text(cfg, cfg->where.log, "--log", where, sizeof(where));
			snprintf(err, errlen, "%s: log: directory '%s' of %s does not exist", where,
			         dir ? dir : "?", cfg->log_file);
		}
		free(dir);
		if (!ok)
			return MOAT_EINVAL;
	}
	return 0;
}

/* With policy_pubkey, every policy source must be signed: a transferred zone is signed only by
 * its TSIG (an unsigned AXFR can be rewritten by anyone on the path to the primary). */
static int check_rpz(const struct config *cfg, char *err, size_t errlen)
{
	char where[300];
	for (size_t i = 0; cfg->has_policy_pubkey && i < cfg->nrpz; i++) {
		const struct config_rpz *z = &cfg->rpz[i];
		if (!z->primary.ss_family || z->tsig_name[0])
			continue;
		config_where_text(cfg, z->line, "rpz", where, sizeof(where));
		snprintf(err, errlen,
		         "%s: rpz '%s': policy_pubkey is set, and a zone transferred without tsig "
		         "is signed by no one (anyone on the path to its primary can change it): "
		         "give it a tsig key",
		         where, z->name);
		return MOAT_EINVAL;
	}
	return 0;
}

int config_check_sanity(const struct config *cfg, char *err, size_t errlen)
{
	char where[300];
	int rc;
	if ((rc = check_listen(cfg, err, errlen)) || (rc = check_agents(cfg, err, errlen)) ||
	    (rc = check_rpz(cfg, err, errlen)) ||
	    (rc = check_forwards(cfg, cfg->forwards, cfg->nforwards, err, errlen)))
		return rc;
	for (size_t i = 0; i < cfg->nagents; i++)
		if ((rc = check_forwards(cfg, cfg->agents[i].forwards, cfg->agents[i].nforwards,
		                         err, errlen)))
			return rc;
	if (cfg->cache_min_ttl > cfg->cache_max_ttl) {
		config_where_text(cfg, cfg->where.cache_min_ttl, "cache_min_ttl", where,
		                  sizeof(where));
		snprintf(err, errlen,
		         "%s: cache_min_ttl (%u) is above cache_max_ttl (%u): no TTL fits both",
		         where, cfg->cache_min_ttl, cfg->cache_max_ttl);
		return MOAT_EINVAL;
	}
	return check_files(cfg, err, errlen);
}
