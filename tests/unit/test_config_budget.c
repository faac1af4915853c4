/* Unit tests for config_yaml_budget.c: an agent's budget (bytes, window_s, per-rule zones,
 * off), qtypes (names, TYPEnn, any) and answer caps, their defaults, upstream_dnssec_ok, and
 * each error at its line. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>

#include "moat/config.h"
#include "moat/config_load.h"
#include "moat/err.h"
#include "moat/name.h"
#include "moat/wire.h"

#define HEAD                                                                                       \
	"upstreams: [\"192.0.2.53\"]\nlisten: [\"127.0.0.1:53\"]\nagents:\n  - name: a\n    "      \
	"clients: [10.0.0.0/24]\n"

static int load(struct config *cfg, const char *text, char *err, size_t errlen)
{
	config_init(cfg);
	return config_load_string(cfg, text, strlen(text), "t.yaml", err, errlen);
}

static void expect_error(const char *text, int line, const char *what)
{
	struct config cfg;
	char err[512] = "", prefix[32];
	cr_expect_eq(load(&cfg, text, err, sizeof(err)), MOAT_EINVAL, "accepted:\n%s", text);
	snprintf(prefix, sizeof(prefix), "t.yaml:%d: ", line);
	cr_expect(!strncmp(err, prefix, strlen(prefix)), "'%s' not at line %d", err, line);
	cr_expect(strstr(err, what), "'%s' does not say '%s'", err, what);
	config_free(&cfg);
}

Test(config_budget, defaults)
{
	struct config cfg;
	char err[512] = "";
	cr_assert_eq(load(&cfg, HEAD, err, sizeof(err)), 0, "%s", err);
	const struct config_agent *a = &cfg.agents[0];
	cr_expect_eq(a->budget.bytes, 4096);
	cr_expect_eq(a->budget.window_s, 3600);
	cr_expect_eq(a->budget.nzones, 0);
	cr_expect_eq(a->channel.nqtypes, 0, "the default set");
	cr_expect_not(a->channel.any_qtype);
	cr_expect_eq(a->channel.answer_max_bytes, 8192);
	cr_expect_eq(a->channel.answer_max_records, 64);
	cr_expect_not(a->channel.answer_no_txt);
	cr_expect_not(cfg.upstream_dnssec_ok);
	config_free(&cfg);
}

Test(config_budget, every_key)
{
	struct config cfg;
	char err[512] = "";
	const char *text = HEAD "    budget:\n"
	                        "      bytes: 2048\n"
	                        "      window_s: 5\n"
	                        "      zones: {\"*.CDN.example\": 16384, \"*.bücher.example\": 0}\n"
	                        "    qtypes: [A, aaaa, TYPE65534]\n"
	                        "    answer_max_bytes: 1000\n"
	                        "    answer_max_records: 0\n"
	                        "    answer_txt: false\n"
	                        "upstream_dnssec_ok: true\n";
	cr_assert_eq(load(&cfg, text, err, sizeof(err)), 0, "%s", err);
	const struct config_agent *a = &cfg.agents[0];
	uint8_t w[NAME_MAXWIRE];
	cr_expect_eq(a->budget.bytes, 2048);
	cr_expect_eq(a->budget.window_s, 5);
	cr_assert_eq(a->budget.nzones, 2);
	name_from_text("cdn.example", 11, w);
	cr_expect(name_equal(a->budget.zones[0].zone, w));
	cr_expect_eq(a->budget.zones[0].bytes, 16384);
	cr_expect_eq(a->budget.zones[0].line, 9);
	name_from_text("xn--bcher-kva.example", 21, w);
	cr_expect(name_equal(a->budget.zones[1].zone, w), "UTF-8 becomes A-labels");
	cr_expect_eq(a->budget.zones[1].bytes, 0);
	cr_assert_eq(a->channel.nqtypes, 3);
	cr_expect_eq(a->channel.qtypes[0], WIRE_A);
	cr_expect_eq(a->channel.qtypes[1], WIRE_AAAA);
	cr_expect_eq(a->channel.qtypes[2], 65534);
	cr_expect_eq(a->channel.answer_max_bytes, 1000);
	cr_expect_eq(a->channel.answer_max_records, 0);
	cr_expect(a->channel.answer_no_txt);
	cr_expect(cfg.upstream_dnssec_ok);
	config_free(&cfg);

	cr_assert_eq(load(&cfg, HEAD "    budget: off\n    qtypes: [any]\n", err, sizeof(err)), 0,
	             "%s", err);
	cr_expect_eq(cfg.agents[0].budget.bytes, 0);
	cr_expect(cfg.agents[0].channel.any_qtype);
	config_free(&cfg);
}

Test(config_budget, errors)
{
	expect_error(HEAD "    budget: {bytes: 99999999}\n", 6, "budget.bytes");
	expect_error(HEAD "    budget: {window_s: 0}\n", 6, "budget.window_s");
	expect_error(HEAD "    budget: {speed: 1}\n", 6, "speed");
	expect_error(HEAD "    budget: 12\n", 6, "budget: expected");
	expect_error(HEAD "    budget:\n      zones: {\"cdn.example\": 10}\n", 7,
	             "not a wildcard pattern");
	expect_error(HEAD "    budget:\n      zones:\n        \"*.a.example\": 10\n"
	                  "        \"*.A.example.\": 20\n",
	             9, "listed twice (first at line 8)");
	expect_error(HEAD "    budget:\n      zones: {\"*.a.example\": lots}\n", 7, "budget.zones");
	expect_error(HEAD "    qtypes: []\n", 6, "qtypes: empty");
	expect_error(HEAD "    qtypes: [A,\n      BOGUS]\n", 7, "unknown type 'BOGUS'");
	expect_error(HEAD "    qtypes: [AXFR]\n", 6, "never forwarded");
	expect_error(HEAD "    answer_max_bytes: 70000\n", 6, "answer_max_bytes");
	expect_error(HEAD "    answer_txt: maybe\n", 6, "answer_txt");
	expect_error(HEAD "upstream_dnssec_ok: 2\n", 6, "upstream_dnssec_ok");
}
