/* config_yaml_budget.c owns the agent keys that narrow what an agent can carry through DNS
 * (issue 26): budget (its label budget, with per-rule overrides: moat/budget.h), qtypes, and the
 * answer caps answer_max_bytes, answer_max_records and answer_txt (moat/channel.h). */
#include "config/config_yaml.h"

#include <libfyaml.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moat/err.h"
#include "moat/idn.h"
#include "moat/name.h"
#include "moat/wire.h"

#define BUDGET_BYTES_MAX (1u << 24)

/* "*.cdn.example" (UTF-8 or A-labels) -> the wire name the wildcard is on. */
static int budget_zone_name(struct config_ctx *c, const char *ks, size_t klen, int line,
                            uint8_t *zone)
{
	char buf[IDN_MAXTEXT], conv[IDN_MAXTEXT], why[160], q[CONFIG_QUOTE_MAX + 8];
	config_quote(q, sizeof(q), ks, klen);
	if (klen < 3 || ks[0] != '*' || ks[1] != '.' || klen - 2 >= sizeof(buf))
		return config_fail(c, line,
		                   "budget.zones: '%s' is not a wildcard pattern (*.name): only "
		                   "wildcards carry a label budget",
		                   q);
	memcpy(buf, ks + 2, klen - 2);
	buf[klen - 2] = 0;
	const char *t = buf;
	int n = idn_from_user(buf, strlen(buf), conv, sizeof(conv), why, sizeof(why));
	if (n < 0)
		return config_fail(c, line, "budget.zones: '%s': %s", q, why);
	if (n > 0)
		t = conv;
	if (name_from_text(t, strlen(t), zone) <= 1)
		return config_fail(c, line, "budget.zones: '%s' is not a name below the root", q);
	return 0;
}

/* One pair of budget.zones: PATTERN: BYTES. */
static int budget_zone_key(struct config_ctx *c, const char *ks, size_t klen, struct fy_node *v,
                           int kline, void *arg)
{
	struct config_budget *b = arg;
	if (b->nzones == CONFIG_BUDGET_ZONES)
		return config_fail(c, kline, "budget.zones: more than %d zones",
		                   CONFIG_BUDGET_ZONES);
	struct config_budget_zone *nv = realloc(b->zones, (b->nzones + 1) * sizeof(*nv));
	if (!nv)
		return config_fail(c, kline, "out of memory");
	b->zones = nv;
	struct config_budget_zone *z = &b->zones[b->nzones];
	int rc = budget_zone_name(c, ks, klen, kline, z->zone);
	if (rc)
		return rc;
	for (size_t i = 0; i < b->nzones; i++)
		if (name_equal(b->zones[i].zone, z->zone))
			return config_fail(c, kline,
			                   "budget.zones: zone listed twice (first at line %d)",
			                   b->zones[i].line);
	if ((rc = config_u32(c, v, kline, "budget.zones", 0, BUDGET_BYTES_MAX, &z->bytes)))
		return rc;
	z->line = kline;
	b->nzones++;
	return 0;
}

/* One key of budget. */
static int budget_key(struct config_ctx *c, const char *ks, size_t klen, struct fy_node *v,
                      int kline, void *arg)
{
	struct config_budget *b = arg;
	if (config_key_is(ks, klen, "bytes"))
		return config_u32(c, v, kline, "budget.bytes", 0, BUDGET_BYTES_MAX, &b->bytes);
	if (config_key_is(ks, klen, "window_s"))
		return config_u32(c, v, kline, "budget.window_s", 1, CONFIG_BUDGET_WINDOW_MAX,
		                  &b->window_s);
	if (!config_key_is(ks, klen, "zones"))
		return config_unknown(c, kline, ks, klen);
	int line = config_node_line(v, kline);
	if (config_is_alias(v) || !v || fy_node_get_type(v) != FYNT_MAPPING)
		return config_fail(c, line, "budget.zones: expected {\"*.name\": BYTES, ...}");
	if (config_dup_keys(c, v, line))
		return MOAT_EINVAL;
	b->nzones = 0;
	return config_each_pair(c, v, line, budget_zone_key, b);
}

/* budget: {bytes, window_s, zones} or budget: off. */
static int config_budget(struct config_ctx *c, struct config_agent *a, struct fy_node *v, int line)
{
	int vline = config_node_line(v, line);
	if (v && fy_node_get_type(v) == FYNT_SCALAR && !config_is_alias(v)) {
		size_t len = 0;
		const char *s = fy_node_get_scalar(v, &len);
		if (s &&
		    ((len == 3 && !memcmp(s, "off", 3)) || (len == 5 && !memcmp(s, "false", 5)))) {
			a->budget.bytes = 0;
			a->budget.nzones = 0;
			return 0;
		}
	}
	if (config_is_alias(v) || !v || fy_node_get_type(v) != FYNT_MAPPING)
		return config_fail(c, vline,
		                   "budget: expected {bytes: N, window_s: S, zones: {...}} or off");
	if (config_dup_keys(c, v, vline))
		return MOAT_EINVAL;
	return config_each_pair(c, v, vline, budget_key, &a->budget);
}

/* qtypes: [A, AAAA, ...] or [any]. */
static int config_qtypes(struct config_ctx *c, struct config_agent *a, struct fy_node *v, int line)
{
	struct config_channel *ch = &a->channel;
	struct fy_node *item;
	void *it = NULL;
	int rc = config_seq(c, v, line, "qtypes");
	if (rc)
		return rc;
	ch->nqtypes = 0;
	ch->any_qtype = false;
	if (fy_node_sequence_item_count(v) < 1)
		return config_fail(c, config_node_line(v, line),
		                   "qtypes: empty (every question would be refused); leave it out "
		                   "for the default, or write [any]");
	while ((item = fy_node_sequence_iterate(v, &it)) != NULL) {
		char buf[16], q[CONFIG_QUOTE_MAX + 8];
		int iline = config_node_line(item, line);
		uint16_t t;
		if ((rc = config_scalar(c, item, line, "qtypes", "a query type", buf, sizeof(buf))))
			return rc;
		if (!strcmp(buf, "any")) {
			ch->any_qtype = true;
			continue;
		}
		config_quote(q, sizeof(q), buf, strlen(buf));
		if (wire_type_parse(buf, &t) < 0)
			return config_fail(c, iline,
			                   "qtypes: unknown type '%s' (A, AAAA, TYPE65, ...)", q);
		if (wire_qtype_is_meta(t))
			return config_fail(
			    c, iline,
			    "qtypes: '%s' is never forwarded (zone transfers, TSIG and "
			    "meta types are refused for every agent)",
			    q);
		if (ch->nqtypes == CONFIG_QTYPES_MAX)
			return config_fail(c, iline, "qtypes: more than %d types",
			                   CONFIG_QTYPES_MAX);
		ch->qtypes[ch->nqtypes++] = t;
	}
	return 0;
}

bool config_agent_channel_key(struct config_ctx *c, struct config_agent *a, const char *ks,
                              size_t klen, struct fy_node *v, int kline, int *rc)
{
	struct config_channel *ch = &a->channel;
	if (config_key_is(ks, klen, "budget")) {
		*rc = config_budget(c, a, v, kline);
	} else if (config_key_is(ks, klen, "qtypes")) {
		*rc = config_qtypes(c, a, v, kline);
	} else if (config_key_is(ks, klen, "answer_max_bytes")) {
		*rc = config_u32(c, v, kline, "answer_max_bytes", 0, WIRE_MAXMSG,
		                 &ch->answer_max_bytes);
	} else if (config_key_is(ks, klen, "answer_max_records")) {
		*rc = config_u32(c, v, kline, "answer_max_records", 0, 65535,
		                 &ch->answer_max_records);
	} else if (config_key_is(ks, klen, "answer_txt")) {
		bool txt = true;
		*rc = config_bool(c, v, kline, "answer_txt", &txt);
		ch->answer_no_txt = !txt;
	} else {
		return false;
	}
	return true;
}
