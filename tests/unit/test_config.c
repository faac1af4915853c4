/* Unit tests for config.c: defaults, every key of config format version 1, each error with the
 * line it must point at, path resolution relative to the config file, the shipped example
 * config, and the address / address-range syntax shared with the flags. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "moat/config.h"
#include "moat/config_load.h"
#include "moat/err.h"

static int load(struct config *cfg, const char *text, char *err, size_t errlen)
{
	config_init(cfg);
	return config_load_string(cfg, text, strlen(text), "t.yaml", err, errlen);
}

/* The text must be rejected with "t.yaml:LINE: ..." mentioning `what`. */
static void expect_error(const char *text, int line, const char *what)
{
	struct config cfg;
	char err[512] = "";
	char prefix[32];
	int rc;

	rc = load(&cfg, text, err, sizeof(err));
	cr_expect_eq(rc, MOAT_EINVAL, "accepted:\n%s", text);
	snprintf(prefix, sizeof(prefix), "t.yaml:%d: ", line);
	cr_expect(strncmp(err, prefix, strlen(prefix)) == 0, "error '%s' not at line %d for:\n%s",
	          err, line, text);
	cr_expect(strstr(err, what) != NULL, "error '%s' does not say '%s'", err, what);
	config_free(&cfg);
}

static uint16_t port_of(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

static bool addr_is(const struct sockaddr_storage *ss, const char *text)
{
	uint8_t want[16];

	if (ss->ss_family == AF_INET)
		return inet_pton(AF_INET, text, want) == 1 &&
		       memcmp(&((const struct sockaddr_in *)ss)->sin_addr, want, 4) == 0;
	if (ss->ss_family == AF_INET6)
		return inet_pton(AF_INET6, text, want) == 1 &&
		       memcmp(&((const struct sockaddr_in6 *)ss)->sin6_addr, want, 16) == 0;
	return false;
}

static struct sockaddr_storage sa4(const char *text)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	ss.ss_family = AF_INET;
	cr_assert_eq(inet_pton(AF_INET, text, &((struct sockaddr_in *)&ss)->sin_addr), 1);
	return ss;
}

static struct sockaddr_storage sa6(const char *text)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	ss.ss_family = AF_INET6;
	cr_assert_eq(inet_pton(AF_INET6, text, &((struct sockaddr_in6 *)&ss)->sin6_addr), 1);
	return ss;
}

static bool in_range(const char *range, const struct sockaddr_storage ss)
{
	struct cidr c;

	cr_assert_eq(netaddr_parse_cidr(range, &c), 0, "range %s", range);
	return netaddr_cidr_contains(&c, (const struct sockaddr *)&ss);
}

/* --- defaults ------------------------------------------------------------------------------ */

Test(config, defaults)
{
	struct config cfg;

	config_init(&cfg);
	cr_expect_eq(cfg.upstream_timeout_ms, 1000);
	cr_expect_eq(cfg.upstream_attempts, 3);
	cr_expect_eq(cfg.tcp_idle_ms, 10000);
	cr_expect_eq(cfg.tcp_max_clients, 1024);
	cr_expect_eq(cfg.workers, 1);
	cr_expect_eq(cfg.serve_stale, 0);
	cr_expect_null(cfg.log_file);
	cr_expect_eq(cfg.nlisten, 0);
	cr_expect_eq(cfg.nupstreams, 0);
	cr_expect_eq(cfg.nagents, 0);
	cr_expect_not(cfg.has_upstream_source);
	cr_assert_eq(cfg.nhighrisk, 1);
	cr_expect_str_eq(cfg.highrisk_files[0], MOAT_ZONES_DIR "/highrisk.txt");
	cr_assert_eq(cfg.nranges, 1);
	cr_expect_str_eq(cfg.range_files[0], MOAT_ZONES_DIR "/blocked-ranges.txt");
	config_free(&cfg);
	cr_expect_null(cfg.highrisk_files);
	cr_expect_null(cfg.range_files);
	cr_expect_eq(cfg.nhighrisk, 0);
	cr_expect_eq(cfg.nranges, 0);
}

Test(config, agent_defaults)
{
	struct config cfg;
	char err[256] = "";

	cr_assert_eq(
	    load(&cfg, "agents:\n  - name: a\n    clients: [10.0.0.0/8]\n", err, sizeof(err)), 0,
	    "%s", err);
	cr_assert_eq(cfg.nagents, 1);
	cr_expect_str_eq(cfg.agents[0].name, "a");
	cr_expect_eq(cfg.agents[0].deny, DENY_NXDOMAIN);
	/* 240.0.0.1 and 100::1: nothing a kernel delivers to the local host (0.0.0.0 and ::
	 * reach the client's own loopback) */
	static const uint8_t sink6[16] = {0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
	static const uint8_t sink4[4] = {240, 0, 0, 1};
	cr_expect_eq(memcmp(cfg.agents[0].sink4, sink4, 4), 0);
	cr_expect_eq(memcmp(cfg.agents[0].sink6, sink6, 16), 0);
	cr_expect_eq(cfg.agents[0].sink_ttl, 60);
	cr_expect_not(cfg.agents[0].strict_chain);
	cr_expect_not(cfg.agents[0].allow_private);
	cr_expect_eq(cfg.agents[0].nallow, 0);
	/* Keys not in the file keep their defaults. */
	cr_expect_eq(cfg.upstream_timeout_ms, 1000);
	cr_expect_eq(cfg.nhighrisk, 1);
	config_free(&cfg);
}

Test(config, empty_is_defaults)
{
	static const char *const texts[] = {"", "# nothing\n", "---\n", "~\n"};
	size_t i;

	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct config cfg;
		char err[256] = "";

		cr_expect_eq(load(&cfg, texts[i], err, sizeof(err)), 0, "'%s': %s", texts[i], err);
		cr_expect_eq(cfg.nhighrisk, 1);
		cr_expect_eq(config_validate(&cfg, err, sizeof(err)), MOAT_EINVAL);
		config_free(&cfg);
	}
}

/* --- every key ----------------------------------------------------------------------------- */

static const char full_config[] = "listen: [\"127.0.0.1:5353\", \"[::1]:53\", 192.0.2.1, "
                                  "\"2001:db8::1\"]\n"
                                  "upstreams:\n"
                                  "  - 192.0.2.53\n"
                                  "  - \"[2001:db8::53]:5300\"\n"
                                  "upstream_source: 2001:db8::10\n"
                                  "upstream_timeout_ms: 250\n"
                                  "upstream_attempts: 5\n"
                                  "tcp_idle_ms: 2000\n"
                                  "tcp_max_clients: 64\n"
                                  "workers: 4\n"
                                  "serve_stale: 86400\n"
                                  "log: {file: /tmp/q.jsonl}\n"
                                  "highrisk: [hr1.txt, /etc/moat/hr2.txt]\n"
                                  "blocked_ranges: []\n"
                                  "agents:\n"
                                  "  - name: ci-42\n"
                                  "    clients: [10.0.0.0/24, \"2001:db8::/64\", 192.0.2.7]\n"
                                  "    allow: [allow/a.txt, /abs/b.txt]\n"
                                  "    deny: sinkhole\n"
                                  "    sinkhole: [\"2001:db8::dead\", 192.0.2.99]\n"
                                  "    sinkhole_ttl: 0\n"
                                  "    strict_chain: true\n"
                                  "    allow_private: True\n"
                                  "  - name: Other_Agent.2\n"
                                  "    clients: [198.51.100.0/24]\n"
                                  "    deny: refused\n"
                                  "    sinkhole: [192.0.2.1]\n"
                                  "    strict_chain: false\n"
                                  "  - name: third\n"
                                  "    clients: [\"::/0\"]\n"
                                  "    deny: nxdomain\n";

Test(config, every_key)
{
	struct config cfg;
	struct config_agent *a;
	uint8_t want[16];
	char err[256] = "";

	cr_assert_eq(load(&cfg, full_config, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(config_validate(&cfg, err, sizeof(err)), 0, "%s", err);

	cr_assert_eq(cfg.nlisten, 4);
	cr_expect(addr_is(&cfg.listen[0], "127.0.0.1"));
	cr_expect_eq(port_of(&cfg.listen[0]), 5353);
	cr_expect(addr_is(&cfg.listen[1], "::1"));
	cr_expect_eq(port_of(&cfg.listen[1]), 53);
	cr_expect(addr_is(&cfg.listen[2], "192.0.2.1"));
	cr_expect_eq(port_of(&cfg.listen[2]), 53);
	cr_expect(addr_is(&cfg.listen[3], "2001:db8::1"));
	cr_expect_eq(port_of(&cfg.listen[3]), 53);

	cr_assert_eq(cfg.nupstreams, 2);
	cr_expect(addr_is(&cfg.upstreams[0], "192.0.2.53"));
	cr_expect_eq(port_of(&cfg.upstreams[0]), 53);
	cr_expect(addr_is(&cfg.upstreams[1], "2001:db8::53"));
	cr_expect_eq(port_of(&cfg.upstreams[1]), 5300);

	cr_expect(cfg.has_upstream_source);
	cr_expect(addr_is(&cfg.upstream_source, "2001:db8::10"));
	cr_expect_eq(port_of(&cfg.upstream_source), 0);
	cr_expect_eq(cfg.upstream_timeout_ms, 250);
	cr_expect_eq(cfg.upstream_attempts, 5);
	cr_expect_eq(cfg.tcp_idle_ms, 2000);
	cr_expect_eq(cfg.tcp_max_clients, 64);
	cr_expect_eq(cfg.workers, 4);
	cr_expect_eq(cfg.serve_stale, 86400);
	cr_expect_str_eq(cfg.log_file, "/tmp/q.jsonl");

	/* A list in the file adds to the shipped list; an empty one adds nothing and, above all,
	 * cannot drop the shipped protections. */
	cr_assert_eq(cfg.nhighrisk, 3);
	cr_expect_str_eq(cfg.highrisk_files[0], MOAT_ZONES_DIR "/highrisk.txt");
	cr_expect_str_eq(cfg.highrisk_files[1], "hr1.txt");
	cr_expect_str_eq(cfg.highrisk_files[2], "/etc/moat/hr2.txt");
	cr_expect_eq(cfg.nranges, 1);
	cr_expect_str_eq(cfg.range_files[0], MOAT_ZONES_DIR "/blocked-ranges.txt");

	cr_assert_eq(cfg.nagents, 3);
	a = &cfg.agents[0];
	cr_expect_str_eq(a->name, "ci-42");
	cr_assert_eq(a->nclients, 3);
	cr_expect_eq(a->clients[0].bits, 96 + 24);
	cr_expect_eq(a->clients[1].bits, 64);
	cr_expect_eq(a->clients[2].bits, 128);
	cr_assert_eq(a->nallow, 2);
	cr_expect_str_eq(a->allow_files[0], "allow/a.txt"); /* load_string: kept as given */
	cr_expect_str_eq(a->allow_files[1], "/abs/b.txt");
	cr_expect_eq(a->deny, DENY_SINKHOLE);
	inet_pton(AF_INET, "192.0.2.99", want);
	cr_expect_eq(memcmp(a->sink4, want, 4), 0);
	inet_pton(AF_INET6, "2001:db8::dead", want);
	cr_expect_eq(memcmp(a->sink6, want, 16), 0);
	cr_expect_eq(a->sink_ttl, 0);
	cr_expect(a->strict_chain);
	cr_expect(a->allow_private);

	a = &cfg.agents[1];
	cr_expect_str_eq(a->name, "Other_Agent.2");
	cr_expect_eq(a->deny, DENY_REFUSED);
	inet_pton(AF_INET, "192.0.2.1", want);
	cr_expect_eq(memcmp(a->sink4, want, 4), 0);
	cr_expect_eq(memcmp(a->sink6, config_sink6_default, 16), 0,
	             "an IPv4-only sinkhole keeps the default sink6 (100::1)");
	cr_expect_not(a->strict_chain);

	a = &cfg.agents[2];
	cr_expect_eq(a->deny, DENY_NXDOMAIN);
	cr_expect_eq(a->clients[0].bits, 0);

	config_free(&cfg);
	cr_expect_null(cfg.agents);
	cr_expect_null(cfg.listen);
	cr_expect_eq(cfg.nagents, 0);
}

Test(config, log_stdout_forms)
{
	static const char *const texts[] = {"log: {file: \"-\"}\n", "log: {file: ~}\n", "log:\n",
	                                    "log: {}\n"};
	size_t i;

	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct config cfg;
		char err[256] = "";

		cr_expect_eq(load(&cfg, texts[i], err, sizeof(err)), 0, "'%s': %s", texts[i], err);
		cr_expect_null(cfg.log_file, "'%s'", texts[i]);
		config_free(&cfg);
	}
}

Test(config, block_and_flow_lists_alike)
{
	struct config cfg;
	char err[256] = "";

	cr_assert_eq(load(&cfg,
	                  "listen:\n"
	                  "  - 127.0.0.1\n"
	                  "upstreams: [192.0.2.53]\n"
	                  "agents:\n"
	                  "  -\n"
	                  "    name: x\n"
	                  "    clients:\n"
	                  "      - 127.0.0.0/8\n"
	                  "      - '::1'\n",
	                  err, sizeof(err)),
	             0, "%s", err);
	cr_expect_eq(config_validate(&cfg, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(cfg.agents[0].nclients, 2);
	config_free(&cfg);
}

/* --- errors and their lines ---------------------------------------------------------------- */

Test(config, unknown_keys)
{
	expect_error("listen: [127.0.0.1]\nfoo: 1\n", 2, "unknown key 'foo'");
	expect_error("agents:\n  - name: a\n    clients: [10.0.0.0/8]\n    colour: red\n", 4,
	             "unknown key 'colour'");
	expect_error("log:\n  file: x\n  level: debug\n", 3, "unknown key 'level'");
	/* The top-level form of a per-agent key is not silently accepted. */
	expect_error("\n\nstrict_chain: true\n", 3, "unknown key 'strict_chain'");
}

/* An unknown key is answered with the nearest known one of the same place (a typo, or a key
 * that has the known one as its start), and only when one is near. */
Test(config, unknown_key_suggestion)
{
	expect_error("upstream: [127.0.0.1]\n", 1,
	             "unknown key 'upstream' (did you mean 'upstreams'?)");
	expect_error("agents:\n  - name: a\n    clients: [10.0.0.0/8]\n    allowlist: [x]\n", 4,
	             "unknown key 'allowlist' (did you mean 'allow'?)");
	expect_error("agents:\n  - name: a\n    clients: [10.0.0.0/8]\n    stirct_chain: true\n", 4,
	             "(did you mean 'strict_chain'?)");
	expect_error("cache_sise_mb: 1\n", 1, "(did you mean 'cache_size_mb'?)");
	expect_error("log:\n  fiel: x\n", 2, "(did you mean 'file'?)");
	/* An agent key at the top level is not "near" a top-level key; nothing is suggested. */
	struct config cfg;
	char err[512] = "";
	cr_assert_eq(load(&cfg, "colour: red\n", err, sizeof(err)), MOAT_EINVAL);
	cr_assert_null(strstr(err, "did you mean"), "%s", err);
	config_free(&cfg);
}

/* --check (check_max_errors): every error of the file, one per line, and the walk goes on. */
Test(config, every_error_when_checking)
{
	static const char text[] = "foo: 1\n"
	                           "listen: [nonsense]\n"
	                           "agents:\n"
	                           "  - name: a\n"
	                           "    clients: [10.0.0.0/8]\n"
	                           "    deny: never\n"
	                           "  - name: b\n"
	                           "    clients: [bad]\n"
	                           "upstreams: [127.0.0.1]\n"
	                           "bar: 2\n";
	struct config cfg;
	char err[4096] = "";
	config_init(&cfg);
	cfg.check_max_errors = CONFIG_CHECK_ERRORS;
	cr_assert_eq(config_load_string(&cfg, text, strlen(text), "t.yaml", err, sizeof(err)),
	             MOAT_EINVAL);
	cr_assert(strstr(err, "t.yaml:1: unknown key 'foo'"), "%s", err);
	cr_assert(strstr(err, "\nt.yaml:2: listen:"), "%s", err);
	cr_assert(strstr(err, "\nt.yaml:6: deny:"), "%s", err);
	cr_assert(strstr(err, "\nt.yaml:8: clients: bad address range"), "%s", err);
	cr_assert(strstr(err, "\nt.yaml:10: unknown key 'bar'"), "%s", err);
	config_free(&cfg);
	/* capped, and the rest counted */
	char many[2048] = "";
	for (int i = 0; i < 25; i++)
		snprintf(many + strlen(many), sizeof(many) - strlen(many), "k%d: 1\n", i);
	config_init(&cfg);
	cfg.check_max_errors = 3;
	cr_assert_eq(config_load_string(&cfg, many, strlen(many), "t.yaml", err, sizeof(err)),
	             MOAT_EINVAL);
	cr_assert(strstr(err, "t.yaml:3: unknown key 'k2'"), "%s", err);
	cr_assert_null(strstr(err, "'k3'"), "%s", err);
	cr_assert(strstr(err, "\n... and 22 more error(s)"), "%s", err);
	config_free(&cfg);
	/* Without it, the first error only, as a start or a reload reports it. */
	config_init(&cfg);
	cr_assert_eq(config_load_string(&cfg, text, strlen(text), "t.yaml", err, sizeof(err)),
	             MOAT_EINVAL);
	cr_assert_null(strchr(err, '\n'), "%s", err);
	config_free(&cfg);
}

Test(config, agent_mode)
{
	struct config cfg;
	char err[512] = "";
	cr_assert_eq(load(&cfg,
	                  "agents:\n  - name: a\n    clients: [10.0.0.0/8]\n    mode: audit\n"
	                  "  - name: b\n    clients: [10.1.0.0/16]\n",
	                  err, sizeof(err)),
	             0, "%s", err);
	cr_assert_eq(cfg.agents[0].mode, AGENT_AUDIT);
	cr_assert_eq(cfg.agents[1].mode, AGENT_ENFORCE, "enforce is the default");
	config_free(&cfg);
	expect_error("agents:\n  - name: a\n    clients: [10.0.0.0/8]\n    mode: loose\n", 4,
	             "mode: expected enforce or audit");
}

Test(config, ask_mode)
{
	struct config cfg;
	char err[512] = "";
	cr_assert_eq(load(&cfg,
	                  "agents:\n  - name: a\n    clients: [10.0.0.0/8]\n    on_unknown: ask\n"
	                  "    ask_timeout_ms: 2500\n    ask_max_pending: 7\n"
	                  "  - name: b\n    clients: [10.1.0.0/16]\n",
	                  err, sizeof(err)),
	             0, "%s", err);
	cr_assert_eq(cfg.agents[0].on_unknown, UNKNOWN_ASK);
	cr_assert_eq(cfg.agents[0].ask_timeout_ms, 2500);
	cr_assert_eq(cfg.agents[0].ask_max_pending, 7);
	cr_assert_eq(cfg.agents[1].on_unknown, UNKNOWN_DENY, "deny is the default");
	cr_assert_eq(cfg.agents[1].ask_timeout_ms, 10000, "10 s is the default");
	config_free(&cfg);
	expect_error("agents:\n  - name: a\n    clients: [10.0.0.0/8]\n    on_unknown: maybe\n", 4,
	             "on_unknown: expected deny or ask");
	expect_error("agents:\n  - name: a\n    clients: [10.0.0.0/8]\n    ask_timeout_ms: 5\n", 4,
	             "ask_timeout_ms");
}

Test(config, expected_list)
{
	expect_error("listen: 127.0.0.1\n", 1, "listen: expected a list");
	expect_error("tcp_idle_ms: 100\nupstreams:\n", 2, "upstreams: expected a list");
	expect_error("highrisk: {a: b}\n", 1, "highrisk: expected a list");
	expect_error("blocked_ranges: x.txt\n", 1, "blocked_ranges: expected a list");
	expect_error("agents:\n  name: a\n", 2, "agents: expected a list");
	expect_error("agents:\n  - name: a\n    clients: 10.0.0.0/8\n", 3,
	             "clients: expected a list");
	expect_error("agents:\n  - name: a\n    clients: [10.0.0.0/8]\n    allow: a.txt\n", 4,
	             "allow: expected a list");
	expect_error("agents:\n  - name: a\n    clients: [10.0.0.0/8]\n    sinkhole: 0.0.0.0\n", 4,
	             "sinkhole: expected a list");
	expect_error("agents:\n  - just-a-name\n", 2, "each agent must be a mapping");
	expect_error("- a\n- b\n", 1, "expected a mapping");
	expect_error("log: /var/log/x\n", 1, "log: expected a mapping");
}

Test(config, expected_bool)
{
	static const char *const bad[] = {"yes", "no", "on", "1", "\"true\"", "truee", "[true]"};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[256];

		snprintf(text, sizeof(text),
		         "agents:\n  - name: a\n    clients: [10.0.0.0/8]\n    strict_chain: %s\n",
		         bad[i]);
		expect_error(text, 4, "strict_chain: expected true or false");
	}
	expect_error("agents:\n  - name: a\n    clients: [10.0.0.0/8]\n\n    allow_private:\n", 5,
	             "allow_private: expected true or false");
}

Test(config, numbers)
{
	expect_error("upstream_timeout_ms: 0\n", 1, "out of range 1..60000");
	expect_error("\nupstream_timeout_ms: 60001\n", 2, "out of range");
	expect_error("upstream_attempts: 0\n", 1, "upstream_attempts: 0 is out of range");
	expect_error("upstream_attempts: 17\n", 1, "out of range 1..16");
	expect_error("tcp_idle_ms: 99\n", 1, "tcp_idle_ms");
	expect_error("workers: 0\n", 1, "workers: 0 is out of range 1..64");
	expect_error("serve_stale: 604801\n", 1, "serve_stale: 604801 is out of range 0..604800");
	expect_error("\nworkers: 65\n", 2, "out of range 1..64");
	expect_error("tcp_max_clients: -1\n", 1, "tcp_max_clients: expected a number");
	expect_error("tcp_max_clients: 1e3\n", 1, "expected a number");
	expect_error("tcp_max_clients: 0x10\n", 1, "expected a number");
	expect_error("tcp_max_clients: 99999999999999999999999\n", 1, "expected a number");
	expect_error("tcp_max_clients: 1.5\n", 1, "expected a number");
	expect_error("tcp_max_clients:\n", 1, "tcp_max_clients: expected a number");
	expect_error("agents:\n  - name: a\n    clients: [10.0.0.0/8]\n    sinkhole_ttl: 86401\n",
	             4, "sinkhole_ttl");
}

Test(config, bad_addresses)
{
	expect_error("listen: [localhost]\n", 1, "listen: bad address 'localhost'");
	expect_error("listen:\n  - 127.0.0.1\n  - ns.example.com:53\n", 3, "bad address");
	expect_error("listen: [\"127.0.0.1:0\"]\n", 1, "'127.0.0.1:0': port 0 is not a port");
	expect_error("upstreams: [\"[::1]:0\"]\n", 1, "'[::1]:0': port 0 is not a port");
	expect_error("upstreams: [\"192.0.2.1:65536\"]\n", 1, "upstreams: bad address");
	expect_error("upstreams: [\"[2001:db8::1\"]\n", 1, "bad address");
	expect_error("upstreams: [127.1]\n", 1, "bad address");
	expect_error("upstream_source: \"192.0.2.1:53\"\n", 1, "upstream_source: bad address");
	expect_error("upstream_source: [192.0.2.1]\n", 1, "upstream_source: expected an address");
	expect_error("agents:\n  - name: a\n    clients: [10.0.0.0/8]\n    sinkhole: [nowhere]\n",
	             4, "sinkhole: bad address 'nowhere'");
}

Test(config, bad_clients)
{
	expect_error("agents:\n  - name: a\n    clients:\n      - 10.0.0.0/8\n      - 10.0.0.1/8\n",
	             5, "'10.0.0.1/8' has host bits set");
	expect_error("agents:\n  - name: a\n    clients: [\"2001:db8::1/32\"]\n", 3,
	             "host bits set");
	expect_error("agents:\n  - name: a\n    clients: [10.0.0.0/33]\n", 3,
	             "clients: bad address range '10.0.0.0/33'");
	expect_error("agents:\n  - name: a\n    clients: [corp.example]\n", 3, "bad address range");
}

Test(config, agent_names)
{
	expect_error("agents:\n  - name: has space\n    clients: [10.0.0.0/8]\n", 2,
	             "bad agent name 'has space'");
	expect_error("agents:\n  - name: \"\"\n    clients: [10.0.0.0/8]\n", 2, "bad agent name");
	expect_error("agents:\n  - name: a/b\n    clients: [10.0.0.0/8]\n", 2, "bad agent name");
	expect_error("agents:\n  - name: "
	             "a123456789012345678901234567890123456789012345678901234567890123\n"
	             "    clients: [10.0.0.0/8]\n",
	             2, "name");
	expect_error("agents:\n"
	             "  - name: ci\n"
	             "    clients: [10.0.0.0/8]\n"
	             "  - clients: [10.1.0.0/16]\n"
	             "    name: ci\n",
	             5, "duplicate agent name 'ci'");
	expect_error(
	    "agents:\n  - name: ok\n    clients: [10.0.0.0/8]\n  - clients: [10.1.0.0/16]\n", 4,
	    "agent without a name");
	expect_error("agents:\n  - name: lonely\n    deny: refused\n", 2,
	             "agent 'lonely' has no clients");
	expect_error("agents:\n  - name: lonely\n    clients: []\n", 2, "has no clients");

	/* 63 characters is the longest name. */
	{
		struct config cfg;
		char err[256] = "";

		cr_expect_eq(
		    load(&cfg,
		         "agents:\n  - name: "
		         "a12345678901234567890123456789012345678901234567890123456789012\n"
		         "    clients: [10.0.0.0/8]\n",
		         err, sizeof(err)),
		    0, "%s", err);
		config_free(&cfg);
	}
}

Test(config, deny_and_sinkhole)
{
	expect_error("agents:\n  - name: a\n    clients: [10.0.0.0/8]\n    deny: drop\n", 4,
	             "deny: expected nxdomain, refused or sinkhole");
	expect_error("agents:\n  - name: a\n    clients: [10.0.0.0/8]\n    deny: NXDOMAIN\n", 4,
	             "deny: expected");
	expect_error("agents:\n  - name: a\n    clients: [10.0.0.0/8]\n    deny: [refused]\n", 4,
	             "deny: expected");
	expect_error("agents:\n  - name: a\n    clients: [10.0.0.0/8]\n    sinkhole: []\n", 4,
	             "one IPv4 and/or one IPv6");
	expect_error("agents:\n  - name: a\n    clients: [10.0.0.0/8]\n"
	             "    sinkhole:\n      - 0.0.0.0\n      - 192.0.2.1\n",
	             6, "more than one IPv4");
	expect_error("agents:\n  - name: a\n    clients: [10.0.0.0/8]\n"
	             "    sinkhole: [\"::\", \"::1\"]\n",
	             4, "more than one IPv6");
}

Test(config, syntax_errors)
{
	expect_error("listen: [127.0.0.1\nupstreams: [192.0.2.1]\n", 3, "");
	expect_error("listen: [127.0.0.1]\nlisten: [127.0.0.2]\n", 2, "duplicate key");
	expect_error("a: \"\\q\"\n", 1, "escape");
	expect_error("tcp_idle_ms: 1000\n---\ntcp_idle_ms: 2000\n", 3, "only one YAML document");
	expect_error("tcp_idle_ms: &idle 1000\ntcp_max_clients: *idle\n", 2,
	             "aliases are not supported");
	expect_error("agents:\n  - &one\n    name: a\n    clients: [10.0.0.0/8]\n  - *one\n", 5,
	             "aliases are not supported");
	expect_error("listen: [127.0.0.1]\n? [a, b]\n: c\n", 2, "expected a key name");
}

Test(config, errors_leave_cfg_freeable)
{
	/* The file fails on the second agent: the first (and the half-read second) belong to cfg
	 * and config_free must release them (the sanitizer build checks for leaks). */
	expect_error("listen: [127.0.0.1]\n"
	             "highrisk: [a.txt, b.txt]\n"
	             "agents:\n"
	             "  - name: a\n"
	             "    clients: [10.0.0.0/8]\n"
	             "    allow: [x.txt, y.txt]\n"
	             "  - name: b\n"
	             "    clients: [10.1.0.0/16]\n"
	             "    allow: [z.txt]\n"
	             "    deny: bogus\n",
	             10, "deny");
}

Test(config, label_and_no_err_buffer)
{
	struct config cfg;

	config_init(&cfg);
	/* err may be NULL: only the return code matters then. */
	cr_expect_eq(config_load_string(&cfg, "foo: 1\n", 7, "x", NULL, 0), MOAT_EINVAL);
	config_free(&cfg);
}

/* --- files and relative paths -------------------------------------------------------------- */

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s", path);
	fputs(text, f);
	fclose(f);
}

Test(config, relative_paths_from_file)
{
	char dir[] = "/tmp/moat-config-XXXXXX";
	char path[PATH_MAX], want[PATH_MAX], real[PATH_MAX];
	char err[512] = "";
	struct config cfg;

	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/moatd.yaml", dir);
	write_file(path, "highrisk: [hr.txt, ../up/hr2.txt]\n"
	                 "blocked_ranges: [/abs/ranges.txt]\n"
	                 "log: {file: logs/q.jsonl}\n"
	                 "agents:\n"
	                 "  - name: a\n"
	                 "    clients: [10.0.0.0/8]\n"
	                 "    allow: [allow/a.txt, /etc/moat/b.txt]\n");
	cr_assert_not_null(realpath(dir, real));

	config_init(&cfg);
	cr_assert_eq(config_load_file(&cfg, path, err, sizeof(err)), 0, "%s", err);
	/* The shipped lists stay first; the file's lists are added after them. */
	cr_expect_str_eq(cfg.highrisk_files[0], MOAT_ZONES_DIR "/highrisk.txt");
	snprintf(want, sizeof(want), "%s/hr.txt", real);
	cr_expect_str_eq(cfg.highrisk_files[1], want);
	snprintf(want, sizeof(want), "%s/../up/hr2.txt", real);
	cr_expect_str_eq(cfg.highrisk_files[2], want);
	cr_expect_str_eq(cfg.range_files[0], MOAT_ZONES_DIR "/blocked-ranges.txt");
	cr_expect_str_eq(cfg.range_files[1], "/abs/ranges.txt");
	snprintf(want, sizeof(want), "%s/allow/a.txt", real);
	cr_expect_str_eq(cfg.agents[0].allow_files[0], want);
	cr_expect_str_eq(cfg.agents[0].allow_files[1], "/etc/moat/b.txt");
	/* The log file is an output, not config data: kept as written. */
	cr_expect_str_eq(cfg.log_file, "logs/q.jsonl");
	config_free(&cfg);

	/* The same text from a string keeps paths as given. */
	cr_assert_eq(load(&cfg, "highrisk: [hr.txt]\n", err, sizeof(err)), 0, "%s", err);
	cr_expect_str_eq(cfg.highrisk_files[1], "hr.txt");
	config_free(&cfg);

	/* Errors from a file are labelled with its path. */
	write_file(path, "listen: [127.0.0.1]\n\nbogus: 1\n");
	config_init(&cfg);
	cr_expect_eq(config_load_file(&cfg, path, err, sizeof(err)), MOAT_EINVAL);
	snprintf(want, sizeof(want), "%s:3: unknown key 'bogus'", path);
	cr_expect_str_eq(err, want);
	config_free(&cfg);

	unlink(path);
	rmdir(dir);
}

Test(config, missing_file)
{
	struct config cfg;
	char err[512] = "";

	config_init(&cfg);
	cr_expect_eq(config_load_file(&cfg, "/nonexistent/moat/moatd.yaml", err, sizeof(err)),
	             MOAT_EIO);
	cr_expect(strstr(err, "/nonexistent/moat/moatd.yaml") != NULL, "%s", err);
	config_free(&cfg);
}

Test(config, example_config)
{
	const char *path = MOAT_SOURCE_DIR "/zones/moatd.example.yaml";
	struct config cfg;
	char err[512] = "";
	size_t i, j;

	config_init(&cfg);
	cr_assert_eq(config_load_file(&cfg, path, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(config_validate(&cfg, err, sizeof(err)), 0, "%s", err);
	cr_expect_geq(cfg.nlisten, 1);
	cr_expect_geq(cfg.nupstreams, 1);
	cr_expect_geq(cfg.nagents, 1);
	/* The example keeps the shipped deny lists. */
	cr_expect_str_eq(cfg.highrisk_files[0], MOAT_ZONES_DIR "/highrisk.txt");
	/* Its allowlists resolve next to it and exist. */
	for (i = 0; i < cfg.nagents; i++) {
		for (j = 0; j < cfg.agents[i].nallow; j++) {
			const char *f = cfg.agents[i].allow_files[j];

			cr_expect(f[0] == '/', "%s", f);
			cr_expect_eq(access(f, R_OK), 0, "%s", f);
		}
	}
	config_free(&cfg);
}

/* --- validate ------------------------------------------------------------------------------ */

Test(config, validate_says_what_is_missing)
{
	struct config cfg;
	char err[256] = "";

	cr_assert_eq(load(&cfg, "upstreams: [192.0.2.53]\n", err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(config_validate(&cfg, err, sizeof(err)), MOAT_EINVAL);
	cr_expect(strstr(err, "listen") != NULL, "%s", err);
	config_free(&cfg);

	cr_assert_eq(load(&cfg, "listen: [127.0.0.1]\n", err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(config_validate(&cfg, err, sizeof(err)), MOAT_EINVAL);
	cr_expect(strstr(err, "upstream") != NULL, "%s", err);
	config_free(&cfg);

	cr_assert_eq(load(&cfg, "listen: [127.0.0.1]\nupstreams: [192.0.2.53]\n", err, sizeof(err)),
	             0, "%s", err);
	cr_expect_eq(config_validate(&cfg, err, sizeof(err)), MOAT_EINVAL);
	cr_expect(strstr(err, "agents") != NULL, "%s", err);

	/* Agents built by hand (as flags would): no client range, then a duplicate name. */
	cfg.agents = calloc(2, sizeof(*cfg.agents));
	cr_assert_not_null(cfg.agents);
	cfg.nagents = 2;
	strcpy(cfg.agents[0].name, "one");
	strcpy(cfg.agents[1].name, "one");
	cr_expect_eq(config_validate(&cfg, err, sizeof(err)), MOAT_EINVAL);
	cr_expect(strstr(err, "agent 'one' has no client ranges") != NULL, "%s", err);

	cfg.agents[0].clients = calloc(1, sizeof(struct cidr));
	cfg.agents[0].nclients = 1;
	cfg.agents[1].clients = calloc(1, sizeof(struct cidr));
	cfg.agents[1].clients[0].bits = 1; /* ::/1: not the same range as one's ::/0 */
	cfg.agents[1].nclients = 1;
	cr_expect_eq(config_validate(&cfg, err, sizeof(err)), MOAT_EINVAL);
	cr_expect(strstr(err, "duplicate agent name 'one'") != NULL, "%s", err);

	strcpy(cfg.agents[1].name, "two");
	cr_expect_eq(config_validate(&cfg, err, sizeof(err)), 0, "%s", err);

	cfg.agents[1].name[0] = '\0';
	cr_expect_eq(config_validate(&cfg, err, sizeof(err)), MOAT_EINVAL);
	cr_expect(strstr(err, "name") != NULL, "%s", err);
	strcpy(cfg.agents[1].name, "two");

	cfg.upstream_attempts = 0;
	cr_expect_eq(config_validate(&cfg, err, sizeof(err)), MOAT_EINVAL);
	cr_expect(strstr(err, "upstream_attempts") != NULL, "%s", err);
	config_free(&cfg);
}

Test(config, strv_push)
{
	char **v = NULL;
	size_t n = 0;
	struct config cfg;

	cr_assert_eq(config_strv_push(&v, &n, "a"), 0);
	cr_assert_eq(config_strv_push(&v, &n, "bc"), 0);
	cr_expect_eq(n, 2);
	cr_expect_str_eq(v[0], "a");
	cr_expect_str_eq(v[1], "bc");
	free(v[0]);
	free(v[1]);
	free(v);

	/* Flags add to the defaults the same way. */
	config_init(&cfg);
	cr_assert_eq(config_strv_push(&cfg.highrisk_files, &cfg.nhighrisk, "/x.txt"), 0);
	cr_expect_eq(cfg.nhighrisk, 2);
	config_free(&cfg);
}

/* --- addrport ------------------------------------------------------------------------------ */

Test(config, addrport_accepts)
{
	struct sockaddr_storage ss;

	cr_assert_eq(netaddr_parse_addrport("1.2.3.4:53", 99, &ss), 0);
	cr_expect_eq(ss.ss_family, AF_INET);
	cr_expect(addr_is(&ss, "1.2.3.4"));
	cr_expect_eq(port_of(&ss), 53);

	cr_assert_eq(netaddr_parse_addrport("1.2.3.4", 5353, &ss), 0);
	cr_expect_eq(port_of(&ss), 5353);

	cr_assert_eq(netaddr_parse_addrport("[2001:db8::1]:5353", 53, &ss), 0);
	cr_expect_eq(ss.ss_family, AF_INET6);
	cr_expect(addr_is(&ss, "2001:db8::1"));
	cr_expect_eq(port_of(&ss), 5353);

	cr_assert_eq(netaddr_parse_addrport("::1", 53, &ss), 0);
	cr_expect_eq(ss.ss_family, AF_INET6);
	cr_expect(addr_is(&ss, "::1"));
	cr_expect_eq(port_of(&ss), 53);

	cr_assert_eq(netaddr_parse_addrport("[::1]", 5300, &ss), 0);
	cr_expect_eq(port_of(&ss), 5300);

	cr_assert_eq(netaddr_parse_addrport("::ffff:192.0.2.1", 53, &ss), 0);
	cr_expect_eq(ss.ss_family, AF_INET6);

	cr_assert_eq(netaddr_parse_addrport("0.0.0.0:65535", 53, &ss), 0);
	cr_expect_eq(port_of(&ss), 65535);
	cr_assert_eq(netaddr_parse_addrport("[::]:1", 53, &ss), 0);
	cr_expect_eq(port_of(&ss), 1);
}

Test(config, addrport_rejects)
{
	static const char *const bad[] = {
	    "",
	    "localhost",
	    "localhost:53",
	    "ns1.example.com",
	    "ns1.example.com:53",
	    "1.2.3.4:0",
	    "1.2.3.4:65536",
	    "1.2.3.4:",
	    "1.2.3.4:53x",
	    "1.2.3.4:+53",
	    "1.2.3.4: 53",
	    ":53",
	    "1.2.3",
	    "127.1",
	    "0x7f.0.0.1",
	    "01.2.3.4",
	    "1.2.3.4.5",
	    "256.1.1.1",
	    " 1.2.3.4",
	    "[::1]:0",
	    "[::1]:",
	    "[::1]x",
	    "[::1]:53:53",
	    "[1.2.3.4]:53",
	    "[]:53",
	    "[::1",
	    "2001:db8::1::2",
	    "2001:db8::g",
	    "fe80::1%eth0",
	};
	struct sockaddr_storage ss;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(netaddr_parse_addrport(bad[i], 53, &ss), MOAT_EINVAL, "accepted '%s'",
		             bad[i]);
}

/* --- cidr ---------------------------------------------------------------------------------- */

Test(config, cidr_parse)
{
	static const uint8_t mapped10[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 0};
	struct cidr c;
	uint8_t want[16];

	cr_assert_eq(netaddr_parse_cidr("10.0.0.0/8", &c), 0);
	cr_expect_eq(c.bits, 104);
	cr_expect_eq(memcmp(c.addr, mapped10, 16), 0);

	cr_assert_eq(netaddr_parse_cidr("2001:db8::/32", &c), 0);
	cr_expect_eq(c.bits, 32);
	inet_pton(AF_INET6, "2001:db8::", want);
	cr_expect_eq(memcmp(c.addr, want, 16), 0);

	cr_assert_eq(netaddr_parse_cidr("192.0.2.1", &c), 0);
	cr_expect_eq(c.bits, 128);
	inet_pton(AF_INET6, "::ffff:192.0.2.1", want);
	cr_expect_eq(memcmp(c.addr, want, 16), 0);

	cr_assert_eq(netaddr_parse_cidr("2001:db8::1", &c), 0);
	cr_expect_eq(c.bits, 128);
	cr_assert_eq(netaddr_parse_cidr("0.0.0.0/0", &c), 0);
	cr_expect_eq(c.bits, 96);
	cr_assert_eq(netaddr_parse_cidr("::/0", &c), 0);
	cr_expect_eq(c.bits, 0);
	cr_assert_eq(netaddr_parse_cidr("192.0.2.128/25", &c), 0);
	cr_expect_eq(c.bits, 121);
	cr_assert_eq(netaddr_parse_cidr("10.16.0.0/12", &c), 0);
	cr_assert_eq(netaddr_parse_cidr("192.0.2.1/32", &c), 0);
	cr_expect_eq(c.bits, 128);
	/* The mapped spelling is the same range as the IPv4 one. */
	cr_assert_eq(netaddr_parse_cidr("::ffff:10.0.0.0/104", &c), 0);
	cr_expect_eq(c.bits, 104);
	cr_expect_eq(memcmp(c.addr, mapped10, 16), 0);
}

Test(config, cidr_rejects)
{
	static const char *const bad[] = {
	    "10.0.0.1/8",     "192.0.2.1/24", "2001:db8::1/32",
	    "10.17.0.0/12",   "10.0.0.0/33",  "::/129",
	    "10.0.0.0/",      "/8",           "10.0.0.0/8x",
	    "10.0.0.0/-1",    "10.0.0.0/+8",  "10.0.0.0/ 8",
	    "corp.example/8", "localhost",    "",
	    "10.0.0.0/8/8",   "127.1/8",      "1.2.3.4.5",
	    "2001:db8::/x",   "[::1]/128",
	};
	struct cidr c;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(netaddr_parse_cidr(bad[i], &c), MOAT_EINVAL, "accepted '%s'", bad[i]);
}

Test(config, cidr_contains_v4)
{
	cr_expect(in_range("10.0.0.0/8", sa4("10.1.2.3")));
	cr_expect(in_range("10.0.0.0/8", sa4("10.255.255.255")));
	cr_expect_not(in_range("10.0.0.0/8", sa4("11.0.0.0")));
	cr_expect_not(in_range("10.0.0.0/8", sa4("9.255.255.255")));
	cr_expect(in_range("10.16.0.0/12", sa4("10.31.255.255")));
	cr_expect_not(in_range("10.16.0.0/12", sa4("10.32.0.0")));
	cr_expect(in_range("192.0.2.7", sa4("192.0.2.7")));
	cr_expect_not(in_range("192.0.2.7", sa4("192.0.2.6")));
	cr_expect(in_range("0.0.0.0/0", sa4("203.0.113.9")));
	/* An IPv4 range never matches a native IPv6 client. */
	cr_expect_not(in_range("0.0.0.0/0", sa6("2001:db8::1")));
	cr_expect_not(in_range("10.0.0.0/8", sa6("::a00:1")));
}

Test(config, cidr_contains_v6)
{
	cr_expect(in_range("2001:db8::/32", sa6("2001:db8:ffff::1")));
	cr_expect_not(in_range("2001:db8::/32", sa6("2001:db9::1")));
	cr_expect(in_range("2001:db8:0:80::/57", sa6("2001:db8:0:ff::1")));
	cr_expect_not(in_range("2001:db8:0:80::/57", sa6("2001:db8:0:7f::1")));
	cr_expect(in_range("::1", sa6("::1")));
	cr_expect_not(in_range("::1", sa6("::2")));
	cr_expect(in_range("::/0", sa6("2001:db8::1")));
	/* ::/0 holds every address, IPv4 ones (compared mapped) included. */
	cr_expect(in_range("::/0", sa4("192.0.2.1")));
	cr_expect_not(in_range("2001:db8::/32", sa4("32.1.13.184")));
}

Test(config, cidr_contains_mapped)
{
	/* A v4 client on a dual-stack socket arrives as ::ffff:a.b.c.d and must match v4 ranges. */
	cr_expect(in_range("10.0.0.0/8", sa6("::ffff:10.1.2.3")));
	cr_expect_not(in_range("10.0.0.0/8", sa6("::ffff:11.1.2.3")));
	cr_expect(in_range("192.0.2.7", sa6("::ffff:192.0.2.7")));
	cr_expect(in_range("0.0.0.0/0", sa6("::ffff:203.0.113.9")));
	cr_expect(in_range("::ffff:10.0.0.0/104", sa4("10.9.9.9")));
}

Test(config, cidr_contains_other_family)
{
	struct sockaddr_un un;
	struct cidr c;

	memset(&un, 0, sizeof(un));
	un.sun_family = AF_UNIX;
	cr_assert_eq(netaddr_parse_cidr("::/0", &c), 0);
	cr_expect_not(netaddr_cidr_contains(&c, (const struct sockaddr *)&un));
	cr_expect_not(netaddr_cidr_contains(&c, NULL));
}

Test(config, daemon_keys)
{
	struct config cfg;
	char err[256] = "";

	cr_assert_eq(load(&cfg,
	                  "cache_size_mb: 8\ncache_min_ttl: 5\ncache_max_ttl: 600\n"
	                  "ratelimit_qps: 100\nratelimit_burst: 300\nratelimit_action: drop\n"
	                  "firewall_socket: /run/moat/fw.sock\nfirewall_timeout_ms: 250\n"
	                  "firewall_fail_open: true\nuser: nobody\nseccomp: false\n",
	                  err, sizeof(err)),
	             0, "%s", err);
	cr_expect_eq(cfg.cache_bytes, (size_t)8 << 20);
	cr_expect_eq(cfg.cache_min_ttl, 5);
	cr_expect_eq(cfg.cache_max_ttl, 600);
	cr_expect_eq(cfg.rl_qps, 100);
	cr_expect_eq(cfg.rl_burst, 300);
	cr_expect(cfg.rl_drop);
	cr_expect_str_eq(cfg.fw_socket, "/run/moat/fw.sock");
	cr_expect_eq(cfg.fw_timeout_ms, 250);
	cr_expect(cfg.fw_fail_open);
	cr_expect_str_eq(cfg.user, "nobody");
	cr_expect_not(cfg.seccomp);
	config_free(&cfg);

	cr_expect_neq(load(&cfg, "ratelimit_action: shout\n", err, sizeof(err)), 0);
	cr_expect(strstr(err, ":1: ratelimit_action: expected refuse or drop") != NULL, "%s", err);
	config_free(&cfg);
	cr_expect_neq(load(&cfg, "firewall_timeout_ms: 5\n", err, sizeof(err)), 0);
	config_free(&cfg);
	/* the query log's budget: any size up to 1 GiB a second, 0 for none */
	cr_assert_eq(load(&cfg, "log_bytes_per_s: 0\nratelimit_qps: 0\n", err, sizeof(err)), 0,
	             "%s", err);
	cr_expect_eq(cfg.log_budget, 0);
	cr_expect_eq(cfg.rl_qps, 0, "the rate limit can be turned off");
	config_free(&cfg);
	cr_assert_eq(load(&cfg, "log_bytes_per_s: 65536\n", err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(cfg.log_budget, 65536);
	config_free(&cfg);
	cr_expect_neq(load(&cfg, "log_bytes_per_s: 2000000000\n", err, sizeof(err)), 0);
	cr_expect(strstr(err, "log_bytes_per_s") != NULL, "%s", err);
	config_free(&cfg);
}

Test(config, daemon_key_defaults)
{
	struct config cfg;
	config_init(&cfg);
	cr_expect_eq(cfg.cache_bytes, (size_t)32 << 20);
	/* bounded by default (issue 22): a rate limit above any benign client, a log budget */
	cr_expect_eq(cfg.rl_qps, 10000);
	cr_expect_eq(cfg.rl_burst, 0, "bursts as large as the rate");
	cr_expect_eq(cfg.log_budget, 1u << 20);
	cr_expect(cfg.seccomp, "the filter is on by default");
	cr_expect_null(cfg.fw_socket);
	cr_expect_eq(cfg.fw_timeout_ms, 3000);
	config_free(&cfg);
}

/* Issue 12: the abuse limits (TCP backpressure, questions in flight). */
Test(config, abuse_limits)
{
	struct config cfg;
	char err[256] = "";
	config_init(&cfg);
	cr_expect_eq(cfg.tcp_max_queued, 65536);
	cr_expect_eq(cfg.tcp_max_inflight, 64);
	cr_expect_eq(cfg.inflight_max, 2048);
	cr_expect_eq(cfg.inflight_per_client, 256);
	config_free(&cfg);
	static const char text[] = "tcp_max_queued: 4096\ntcp_max_inflight: 8\n"
	                           "inflight_max: 100\ninflight_per_client: 10\n";
	cr_assert_eq(load(&cfg, text, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(cfg.tcp_max_queued, 4096);
	cr_expect_eq(cfg.tcp_max_inflight, 8);
	cr_expect_eq(cfg.inflight_max, 100);
	cr_expect_eq(cfg.inflight_per_client, 10);
	config_free(&cfg);
	expect_error("tcp_max_queued: 100\n", 1, "tcp_max_queued");
	expect_error("inflight_per_client: 0\n", 1, "inflight_per_client");
}

Test(config, operating_keys)
{
	struct config cfg;
	char err[256];
	cr_assert_eq(load(&cfg,
	                  "control: /run/moat/ctl.sock\ncontrol_group: moat\n"
	                  "metrics: 127.0.0.1:9153\ndnstap: {socket: /run/moat/tap.sock}\n",
	                  err, sizeof(err)),
	             0, "%s", err);
	cr_expect_str_eq(cfg.control_path, "/run/moat/ctl.sock");
	cr_expect_str_eq(cfg.control_group, "moat");
	cr_expect(cfg.has_metrics);
	cr_expect_eq(cfg.metrics_addr.ss_family, AF_INET);
	cr_expect_eq(ntohs(((struct sockaddr_in *)&cfg.metrics_addr)->sin_port), 9153);
	cr_expect_str_eq(cfg.dnstap_path, "/run/moat/tap.sock");
	cr_expect(cfg.dnstap_socket);
	config_free(&cfg);
	cr_assert_eq(
	    load(&cfg, "dnstap:\n  file: /var/log/tap\nmetrics: \"[::1]:9\"\n", err, sizeof(err)),
	    0, "%s", err);
	cr_expect_str_eq(cfg.dnstap_path, "/var/log/tap");
	cr_expect(!cfg.dnstap_socket);
	cr_expect_eq(cfg.metrics_addr.ss_family, AF_INET6);
	config_free(&cfg);
	static const struct {
		const char *text, *msg;
	} bad[] = {
	    {"metrics: nowhere\n", "t.yaml:1: metrics: expected ADDR:PORT"},
	    {"dnstap: {pipe: /x}\n", "t.yaml:1:"},
	    {"dnstap: {file: /x, socket: /y}\n", "dnstap: expected {file: PATH} or {socket: PATH}"},
	    {"dnstap: /x\n", "dnstap: expected"},
	    {"\n\ncontrol: [a]\n", "t.yaml:3:"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(load(&cfg, bad[i].text, err, sizeof(err)), MOAT_EINVAL, "%s",
		             bad[i].text);
		cr_expect(strstr(err, bad[i].msg), "%s -> %s", bad[i].text, err);
		config_free(&cfg);
	}
}
