/* config.c owns moatd's configuration model: the defaults, releasing it, and the checks that a
 * loaded configuration is complete (whether it came from the YAML file, config_yaml*.c, or the
 * flags, config_flags.c). The numeric settings' ranges and defaults are config_limits.c's table;
 * address text is netaddr.c's. Nothing here opens sockets or reads policy files. */
#include "moat/config.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/config_model.h"
#include "moat/err.h"
#include "moat/zonesdir.h"

/* --- small helpers ------------------------------------------------------------------------- */

/* Copy untrusted text into an error message: errors end up in terminals and logs, so control
 * bytes and overly long values are not passed through. */
void config_quote(char *out, size_t outlen, const char *s, size_t len)
{
	size_t i, o = 0;

	for (i = 0; i < len && o + 4 < outlen; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (i == CONFIG_QUOTE_MAX) {
			out[o++] = '.';
			out[o++] = '.';
			out[o++] = '.';
			break;
		}
		out[o++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
	}
	out[o] = '\0';
}

int config_strv_push(char ***v, size_t *n, const char *s)
{
	char **nv;
	char *copy;

	copy = strdup(s);
	if (copy == NULL)
		return MOAT_ENOMEM;
	nv = realloc(*v, (*n + 1) * sizeof(*nv));
	if (nv == NULL) {
		free(copy);
		return MOAT_ENOMEM;
	}
	nv[*n] = copy;
	*v = nv;
	(*n)++;
	return 0;
}

void config_strv_free(char ***v, size_t *n)
{
	size_t i;

	for (i = 0; i < *n; i++)
		free((*v)[i]);
	free(*v);
	*v = NULL;
	*n = 0;
}

/* Keys compared since the last reset (config_key_nearest). */
static _Thread_local struct {
	const char *k[128];
	unsigned n;
} tried;

bool config_key_is(const char *k, size_t klen, const char *want)
{
	if (tried.n < sizeof(tried.k) / sizeof(tried.k[0]))
		tried.k[tried.n++] = want;
	return klen == strlen(want) && memcmp(k, want, klen) == 0;
}

void config_key_tried_reset(void)
{
	tried.n = 0;
}

/* Optimal string alignment distance (Levenshtein with adjacent swaps), up to 63 bytes each. */
static unsigned key_distance(const char *a, size_t la, const char *b, size_t lb)
{
	unsigned d[64][64];
	if (la > 63 || lb > 63)
		return 99;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (unsigned)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			unsigned cost = a[i - 1] != b[j - 1], v = d[i - 1][j - 1] + cost;
			if (d[i - 1][j] + 1 < v)
				v = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < v)
				v = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
			    d[i - 2][j - 2] + 1 < v)
				v = d[i - 2][j - 2] + 1;
			d[i][j] = v;
		}
	return d[la][lb];
}

const char *config_key_nearest(const char *k, size_t klen)
{
	const char *best = NULL;
	unsigned best_d = 99;
	for (unsigned i = 0; i < tried.n; i++) {
		const char *w = tried.k[i];
		size_t wl = strlen(w), lo = wl < klen ? wl : klen;
		unsigned dist = key_distance(k, klen, w, wl);
		/* One a prefix of the other ("allowlist" for "allow"): as near as two typos. */
		if (lo >= 4 && !memcmp(k, w, lo) && dist > 2)
			dist = 2; /* a true typo (upstreams for upstream) still wins */
		if (dist < best_d && dist <= (klen > 6 ? 3 : 2)) {
			best = w;
			best_d = dist;
		}
	}
	return best;
}

/* --- defaults, free, validate -------------------------------------------------------------- */

const uint8_t config_sink4_default[4] = {240, 0, 0, 1};
const uint8_t config_sink6_default[16] = {0x01, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};

void config_agent_init(struct config_agent *a)
{
	memset(a, 0, sizeof(*a));
	a->deny = DENY_NXDOMAIN;
	memcpy(a->sink4, config_sink4_default, sizeof(a->sink4));
	memcpy(a->sink6, config_sink6_default, sizeof(a->sink6));
	a->sink_ttl = 60;
	a->strict_chain = false;
	a->allow_private = false;
	a->ask_timeout_ms = CONFIG_ASK_TIMEOUT_MS;
	a->ask_max_pending = CONFIG_ASK_PENDING;
}

void config_forwards_free(struct config_forward **v, size_t *n)
{
	for (size_t i = 0; i < *n; i++)
		free((*v)[i].upstreams);
	free(*v);
	*v = NULL;
	*n = 0;
}

static void config_agent_free(struct config_agent *a)
{
	free(a->client_lines);
	free(a->allow_lines);
	a->client_lines = a->allow_lines = NULL;
	config_forwards_free(&a->forwards, &a->nforwards);
	free(a->clients);
	a->clients = NULL;
	a->nclients = 0;
	config_strv_free(&a->allow_files, &a->nallow);
	config_strv_free(&a->allow_rpz, &a->nallow_rpz);
	free(a->allow_rpz_lines);
	a->allow_rpz_lines = NULL;
}

void config_rpz_free(struct config *cfg)
{
	for (size_t i = 0; i < cfg->nrpz; i++) {
		free(cfg->rpz[i].file);
		if (cfg->rpz[i].tsig_secret)
			explicit_bzero(cfg->rpz[i].tsig_secret, strlen(cfg->rpz[i].tsig_secret));
		free(cfg->rpz[i].tsig_secret);
	}
	free(cfg->rpz);
	cfg->rpz = NULL;
	cfg->nrpz = 0;
	config_strv_free(&cfg->highrisk_rpz, &cfg->nhighrisk_rpz);
	free(cfg->highrisk_rpz_lines);
	cfg->highrisk_rpz_lines = NULL;
}

void config_agents_free(struct config *cfg)
{
	size_t i;

	for (i = 0; i < cfg->nagents; i++)
		config_agent_free(&cfg->agents[i]);
	free(cfg->agents);
	cfg->agents = NULL;
	cfg->nagents = 0;
}

void config_init(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	config_limits_default(cfg);
	cfg->seccomp = true;
	/* Failing to record the shipped deny lists must not silently start a resolver without
	 * them, and config_init has no way to report it: out of memory this early is fatal. The
	 * placeholders are pointed at the shipped-lists directory right away. */
	if (config_strv_push(&cfg->highrisk_files, &cfg->nhighrisk, "") != 0 ||
	    config_strv_push(&cfg->range_files, &cfg->nranges, "") != 0 ||
	    config_set_zones_dir(cfg, zonesdir_default()) != 0)
		abort();
}

void config_free(struct config *cfg)
{
	if (cfg == NULL)
		return;
	free(cfg->listen);
	free(cfg->upstreams);
	free(cfg->log_file);
	free(cfg->fw_socket);
	free(cfg->user);
	free(cfg->where.file);
	free(cfg->where.listen_lines);
	free(cfg->where.upstream_lines);
	config_forwards_free(&cfg->forwards, &cfg->nforwards);
	config_strv_free(&cfg->local_data, &cfg->nlocal);
	free(cfg->local_lines);
	free(cfg->hosts_lines);
	config_strv_free(&cfg->hosts_files, &cfg->nhosts);
	free(cfg->control_path);
	free(cfg->control_group);
	free(cfg->dnstap_path);
	free(cfg->state_dir);
	config_strv_free(&cfg->highrisk_files, &cfg->nhighrisk);
	config_strv_free(&cfg->range_files, &cfg->nranges);
	config_agents_free(cfg);
	config_rpz_free(cfg);
	memset(cfg, 0, sizeof(*cfg));
}

int config_deny_parse(const char *s, size_t len, enum deny_form *out)
{
	static const char *const names[] = {"nxdomain", "refused", "sinkhole"};
	static const enum deny_form forms[] = {DENY_NXDOMAIN, DENY_REFUSED, DENY_SINKHOLE};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (config_key_is(s, len, names[i])) {
			*out = forms[i];
			return 0;
		}
	}
	return MOAT_EINVAL;
}

void config_print_errors(FILE *f, const char *prefix, const char *err)
{
	for (const char *p = err; *p;) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		fprintf(f, "%s%.*s\n", prefix, (int)n, p);
		p += n + (nl ? 1 : 0);
	}
}

int config_mode_parse(const char *s, size_t len, enum agent_mode *out)
{
	if (config_key_is(s, len, "enforce"))
		*out = AGENT_ENFORCE;
	else if (config_key_is(s, len, "audit"))
		*out = AGENT_AUDIT;
	else
		return MOAT_EINVAL;
	return 0;
}

bool config_name_ok(const char *s, size_t len)
{
	size_t i;

	if (len == 0 || len >= CONFIG_NAME_MAX)
		return false;
	for (i = 0; i < len; i++) {
		char ch = s[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-'))
			return false;
	}
	return true;
}

int config_validate(const struct config *cfg, char *err, size_t errlen)
{
	size_t i, j;

	if (cfg->nlisten == 0) {
		moat_errf(err, errlen, "no listen address configured");
		return MOAT_EINVAL;
	}
	if (cfg->nupstreams == 0) {
		moat_errf(err, errlen, "no upstream resolver configured");
		return MOAT_EINVAL;
	}
	if (cfg->nagents == 0) {
		moat_errf(err, errlen, "no agents configured: without one every client is refused");
		return MOAT_EINVAL;
	}
	/* Flags set these too: whichever way a value came, it is checked against one table. */
	if (config_limits_check(cfg, err, errlen) != 0)
		return MOAT_EINVAL;
	for (i = 0; i < cfg->nagents; i++) {
		const struct config_agent *a = &cfg->agents[i];
		size_t len = strnlen(a->name, CONFIG_NAME_MAX);

		if (!config_name_ok(a->name, len)) {
			moat_errf(err, errlen, "agent %zu has no valid name", i + 1);
			return MOAT_EINVAL;
		}
		if (a->nclients == 0) {
			moat_errf(err, errlen, "agent '%s' has no client ranges", a->name);
			return MOAT_EINVAL;
		}
		for (j = 0; j < i; j++) {
			if (strcmp(cfg->agents[j].name, a->name) == 0) {
				moat_errf(err, errlen, "duplicate agent name '%s'", a->name);
				return MOAT_EINVAL;
			}
		}
	}
	return config_check_sanity(cfg, err, errlen);
}

int config_set_zones_dir(struct config *cfg, const char *dir)
{
	if (cfg->nhighrisk == 0 || cfg->nranges == 0)
		return MOAT_EINVAL;
	return zonesdir_paths(dir, &cfg->highrisk_files[0], &cfg->range_files[0]);
}
