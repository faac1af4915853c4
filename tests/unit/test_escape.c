/* Unit tests for moat-escape (tools/escape, linked as libmoatescape): the key=value config and
 * its errors, resolv.conf, the numeric forms of an address, what a DNS reply counts as (deny,
 * no data, failure, data), the internal-address check, base32 and tunnelling names, the summary
 * line and the three report formats, the worst-case bound, and the probes themselves against
 * tiny servers on 127.0.0.1 (loopback only). */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "escape.h"
#include "moat/err.h"
#include "moat/wire.h"

static void setup(void)
{
	cr_assert(sodium_init() >= 0);
}

TestSuite(escape, .init = setup);

/* ---------------------------------------------------------------- config -- */

static int load(struct escape_cfg *c, const char *text, char *err, size_t errlen)
{
	escape_cfg_init(c);
	return escape_cfg_load_string(c, text, strlen(text), "t.conf", err, errlen);
}

static void expect_error(const char *text, const char *want)
{
	struct escape_cfg c;
	char err[512] = "";

	cr_expect_eq(load(&c, text, err, sizeof(err)), MOAT_EINVAL, "accepted: %s", text);
	cr_expect(strstr(err, want) != NULL, "error '%s' does not say '%s'", err, want);
}

static bool sa_is(const void *sa, const char *addr, unsigned port)
{
	char buf[80], want[80];

	escape_sa_str(sa, true, buf, sizeof(buf));
	snprintf(want, sizeof(want), strchr(addr, ':') ? "[%s]:%u" : "%s:%u", addr, port);
	return strcmp(buf, want) == 0;
}

Test(escape, defaults)
{
	struct escape_cfg c;

	escape_cfg_init(&c);
	cr_expect_eq(c.nmeta, 5);
	cr_expect_str_eq(c.meta_names[0], "metadata.google.internal");
	cr_expect_str_eq(c.meta_names[4], "metadata.goog");
	cr_expect(sa_is(&c.meta_addr, "169.254.169.254", 80));
	cr_expect_eq(c.nothers, 4);
	cr_expect(c.others_default);
	cr_expect(c.unresolved_default && c.v6_default && c.rebind_default);
	cr_expect_eq(c.timeout_ms, 2000);
	cr_expect_eq(c.expire_wait, ESCAPE_DEFAULT_EXPIRE_WAIT);
	cr_expect_eq(c.grant_min, 30);
	/* moatd's default sinkhole answers (240.0.0.1, 100::1), and 0.0.0.0 and :: */
	cr_expect_eq(c.nsinks, 4);
	cr_expect_eq(c.sinks[0].len, 4);
	cr_expect_eq(c.sinks[0].b[0], 240);
	cr_expect_eq(c.sinks[1].len, 16);
	cr_expect_eq(c.sinks[1].b[1], 0);
	cr_expect_eq(c.sinks[1].b[0], 1);
	cr_expect_eq(c.sinks[2].len, 4);
	cr_expect_eq(c.sinks[2].b[0], 0);
	cr_expect_eq(c.format, ESCAPE_FMT_TABLE);
	cr_expect(!c.has_resolver);
}

Test(escape, every_key)
{
	struct escape_cfg c;
	char err[512] = "";
	const char *text = "# comment line\n"
	                   "resolver = 127.0.0.1:5353\n"
	                   "allowed=www.example.test\n"
	                   "allowed-target   www.example.test:8080   # trailing comment\n"
	                   "rebind meta.rebind.test\n"
	                   "rebind priv.rebind.test\n"
	                   "metadata-names a.test, b.test c.test\n"
	                   "metadata-addr 192.0.2.254:8080\n"
	                   "metadata-addr6 2001:db8::254\n"
	                   "other-resolver 203.0.113.53\n"
	                   "other-resolver [2001:db8::53]:5353\n"
	                   "unresolved 2001:db8::99\n"
	                   "v6-target 2001:db8::80\n"
	                   "expire-name short.escape.test\n"
	                   "expire-port 81\n"
	                   "expire-wait 10\n"
	                   "grant-min 0\n"
	                   "tunnel-domain tunnel.test\n"
	                   "timeout 500\n"
	                   "sinkhole 192.0.2.99\n"
	                   "format json\n"
	                   "\n";

	cr_assert_eq(load(&c, text, err, sizeof(err)), 0, "%s", err);
	cr_expect(c.has_resolver && sa_is(&c.resolver, "127.0.0.1", 5353));
	cr_expect_str_eq(c.allowed, "www.example.test");
	cr_expect_str_eq(c.target_host, "www.example.test");
	cr_expect_eq(c.target_port, 8080);
	cr_expect_eq(c.nrebind, 2);
	cr_expect(!c.rebind_default);
	cr_expect_str_eq(c.rebind[1], "priv.rebind.test");
	cr_expect_eq(c.nmeta, 3);
	cr_expect_str_eq(c.meta_names[2], "c.test");
	cr_expect(sa_is(&c.meta_addr, "192.0.2.254", 8080));
	cr_expect_eq(c.nothers, 2, "the first other-resolver replaces the defaults");
	cr_expect(sa_is(&c.others[0], "203.0.113.53", 53));
	cr_expect(sa_is(&c.others[1], "2001:db8::53", 5353));
	cr_expect(!c.others_default && !c.unresolved_default && !c.v6_default);
	cr_expect_eq(c.unresolved.ss_family, AF_INET6);
	cr_expect_str_eq(c.expire_name, "short.escape.test");
	cr_expect_eq(c.expire_port, 81);
	cr_expect_eq(c.expire_wait, 10);
	cr_expect_eq(c.grant_min, 0);
	cr_expect_str_eq(c.tunnel_domain, "tunnel.test");
	cr_expect_eq(c.timeout_ms, 500);
	cr_expect_eq(c.nsinks, 1, "the first sinkhole replaces 0.0.0.0 and ::");
	cr_expect_eq(c.sinks[0].len, 4);
	cr_expect_eq(c.format, ESCAPE_FMT_JSON);

	/* finish keeps what was given and fills the rest from it */
	cr_assert_eq(escape_cfg_finish(&c, "/nonexistent", err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(c.expire_port, 81);
	cr_expect_eq(c.meta_addr6.sin6_port, htons(8080), "IPv6 metadata uses the same port");
}

Test(escape, allowed_target_forms)
{
	static const struct {
		const char *in, *host;
		unsigned port;
	} ok[] = {
	    {"www.example.test", "www.example.test", 443},
	    {"www.example.test:80", "www.example.test", 80},
	    {"192.0.2.10:8080", "192.0.2.10", 8080},
	    {"192.0.2.10", "192.0.2.10", 443},
	    {"[2001:db8::10]:80", "2001:db8::10", 80},
	    {"[2001:db8::10]", "2001:db8::10", 443},
	    {"2001:db8::10", "2001:db8::10", 443},
	};
	static const char *const bad[] = {"",        ":80",          "host:0",         "host:65536",
	                                  "host:x",  "[2001:db8::1", "[2001:db8::1]x", "[nope]:80",
	                                  "a..b:80", "2001:db8::zz"};
	struct escape_cfg c;
	char err[256];

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		escape_cfg_init(&c);
		cr_expect_eq(escape_cfg_set(&c, "allowed-target", ok[i].in, err, sizeof(err)), 0,
		             "%s: %s", ok[i].in, err);
		cr_expect_str_eq(c.target_host, ok[i].host, "%s", ok[i].in);
		cr_expect_eq(c.target_port, ok[i].port, "%s", ok[i].in);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		escape_cfg_init(&c);
		cr_expect_eq(escape_cfg_set(&c, "allowed-target", bad[i], err, sizeof(err)),
		             MOAT_EINVAL, "accepted '%s'", bad[i]);
	}
}

Test(escape, config_errors_name_the_line)
{
	expect_error("allowed a.test\nbogus 1\n", "t.conf:2: unknown key 'bogus'");
	expect_error("timeout fast\n",
	             "t.conf:1: timeout: 'fast' is not a number from 50 to 60000");
	expect_error("timeout 10\n", "t.conf:1: timeout");
	expect_error("timeout -5\n", "timeout");
	expect_error("\n\nresolver nowhere\n", "t.conf:3: resolver: 'nowhere' is not ADDR[:PORT]");
	expect_error("allowed\n", "t.conf:1: 'allowed' has no value");
	expect_error("allowed a..b\n", "allowed: 'a..b' is not a domain name");
	expect_error("allowed .\n", "is not a domain name");
	expect_error("metadata-addr 2001:db8::1\n", "metadata-addr");
	expect_error("metadata-addr6 192.0.2.1\n", "metadata-addr6: '192.0.2.1' is not an IPv6");
	expect_error("v6-target 192.0.2.1\n", "v6-target");
	expect_error("unresolved www.example.test\n", "unresolved");
	expect_error("expire-wait 3601\n", "expire-wait");
	expect_error("expire-port 0\n", "expire-port");
	expect_error("sinkhole nowhere\n", "sinkhole");
	expect_error("format xml\n", "format: 'xml' is not table, tap or json");
	expect_error("metadata-names ,,\n", "metadata-names: empty list");
	/* 3 x 64 bytes of labels must fit in front of it */
	expect_error("tunnel-domain "
	             "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa."
	             "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\n",
	             "too long for three 63-byte labels");
}

Test(escape, list_keys_replace_then_add)
{
	struct escape_cfg c;
	char err[256];

	escape_cfg_init(&c);
	for (int i = 0; i < ESCAPE_MAXLIST; i++)
		cr_assert_eq(escape_cfg_set(&c, "rebind", "r.test", err, sizeof(err)), 0);
	cr_expect_eq(c.nrebind, ESCAPE_MAXLIST);
	cr_expect_eq(escape_cfg_set(&c, "rebind", "r.test", err, sizeof(err)), MOAT_EINVAL);
	cr_expect(strstr(err, "more than") != NULL);
	/* the file and then a flag: both add to the one list */
	escape_cfg_init(&c);
	cr_assert_eq(escape_cfg_set(&c, "metadata-names", "a.test", err, sizeof(err)), 0);
	cr_assert_eq(escape_cfg_set(&c, "metadata-names", "b.test,c.test", err, sizeof(err)), 0);
	cr_expect_eq(c.nmeta, 3);
}

static char *write_temp(const char *text)
{
	static char path[64];
	int fd;

	strcpy(path, "/tmp/test_escape.XXXXXX");
	fd = mkstemp(path);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

Test(escape, resolv_conf)
{
	struct sockaddr_storage ss;
	char *p;

	p = write_temp("# generated\nsearch example.test\nnameserver fe80::1%eth0\n"
	               "nameserver 192.0.2.53\nnameserver 192.0.2.54\n");
	cr_expect_eq(escape_resolv_conf(p, &ss), 0);
	cr_expect(sa_is(&ss, "192.0.2.53", 53), "the first usable nameserver, port 53");
	unlink(p);
	p = write_temp("nameserver 2001:db8::53\n");
	cr_expect_eq(escape_resolv_conf(p, &ss), 0);
	cr_expect(sa_is(&ss, "2001:db8::53", 53));
	unlink(p);
	p = write_temp("search example.test\n");
	cr_expect_eq(escape_resolv_conf(p, &ss), MOAT_ENOENT);
	unlink(p);
	cr_expect_eq(escape_resolv_conf("/nonexistent/resolv.conf", &ss), MOAT_EIO);
}

Test(escape, finish_needs_resolver_and_control)
{
	struct escape_cfg c;
	char err[512];
	char *p;

	escape_cfg_init(&c);
	escape_cfg_set(&c, "allowed", "www.example.test", err, sizeof(err));
	cr_expect_eq(escape_cfg_finish(&c, "/nonexistent", err, sizeof(err)), MOAT_EINVAL);
	cr_expect(strstr(err, "no resolver") != NULL, "%s", err);

	p = write_temp("nameserver 127.0.0.53\n");
	escape_cfg_init(&c);
	cr_expect_eq(escape_cfg_finish(&c, p, err, sizeof(err)), MOAT_EINVAL);
	cr_expect(strstr(err, "no control") != NULL, "%s", err);

	escape_cfg_init(&c);
	escape_cfg_set(&c, "allowed", "www.example.test", err, sizeof(err));
	cr_assert_eq(escape_cfg_finish(&c, p, err, sizeof(err)), 0, "%s", err);
	cr_expect(sa_is(&c.resolver, "127.0.0.53", 53));
	cr_expect_str_eq(c.target_host, "www.example.test");
	cr_expect_eq(c.target_port, 443);
	cr_expect_str_eq(c.expire_name, "www.example.test");
	cr_expect_eq(c.expire_port, 443);
	unlink(p);
}

Test(escape, config_file)
{
	struct escape_cfg c;
	char err[512];
	char *p = write_temp("allowed www.example.test\n\ntimeout fast\n");

	escape_cfg_init(&c);
	cr_expect_eq(escape_cfg_load_file(&c, p, err, sizeof(err)), MOAT_EINVAL);
	cr_expect(strstr(err, ":3: timeout") != NULL, "%s", err);
	unlink(p);
	cr_expect_eq(escape_cfg_load_file(&c, "/nonexistent/x.conf", err, sizeof(err)), MOAT_EIO);
}

/* ---------------------------------------------------------- numeric forms -- */

static void check_forms(const char *dotted, const char *dec, const char *hex, const char *oct)
{
	struct in_addr a, b;
	char forms[ESCAPE_NFORMS][32];

	cr_assert_eq(inet_pton(AF_INET, dotted, &a), 1);
	escape_numeric_forms(a, forms);
	cr_expect_str_eq(forms[ESCAPE_FORM_DOTTED], dotted);
	cr_expect_str_eq(forms[ESCAPE_FORM_DECIMAL], dec);
	cr_expect_str_eq(forms[ESCAPE_FORM_HEX], hex);
	cr_expect_str_eq(forms[ESCAPE_FORM_OCTAL], oct);
	/* The point of the forms: inet_aton reads every one of them as the same address. */
	for (int f = 0; f < ESCAPE_NFORMS; f++) {
		cr_expect_eq(inet_aton(forms[f], &b), 1, "inet_aton rejects %s", forms[f]);
		cr_expect_eq(b.s_addr, a.s_addr, "%s is not %s", forms[f], dotted);
	}
}

Test(escape, numeric_forms)
{
	check_forms("169.254.169.254", "2852039166", "0xa9fea9fe", "0251.0376.0251.0376");
	check_forms("127.0.0.1", "2130706433", "0x7f000001", "0177.00.00.01");
	check_forms("0.0.0.0", "0", "0x00000000", "00.00.00.00");
	check_forms("255.255.255.255", "4294967295", "0xffffffff", "0377.0377.0377.0377");
}

/* ------------------------------------------------------- classification -- */

struct rr_spec {
	uint16_t type;
	const char *text; /* an address for A/AAAA, a string for TXT */
};

/* A reply to (name, qtype): header, question, the answer records, an OPT with an EDE code when
 * ede >= 0 (and ext_rcode in its TTL). Returns the length. */
static size_t build_reply(uint8_t *out, uint16_t id, const char *name, uint16_t qtype,
                          uint8_t rcode, const struct rr_spec *rrs, size_t n, int ede,
                          uint8_t ext_rcode, uint16_t flags_extra)
{
	uint8_t wire[NAME_MAXWIRE];
	int wl = name_from_text(name, strlen(name), wire);
	size_t o = 0;
	bool opt = ede >= 0 || ext_rcode;

	cr_assert(wl > 0);
	uint16_t flags = 0x8180 | rcode | flags_extra;
	uint8_t hdr[12] = {id >> 8, id & 0xff, flags >> 8, flags & 0xff, 0, 1, 0, (uint8_t)n,
	                   0,       0,         0,          opt ? 1 : 0};
	memcpy(out, hdr, 12);
	o = 12;
	memcpy(out + o, wire, (size_t)wl);
	o += (size_t)wl;
	out[o++] = qtype >> 8;
	out[o++] = qtype & 0xff;
	out[o++] = 0;
	out[o++] = 1;
	for (size_t i = 0; i < n; i++) {
		out[o++] = 0xc0; /* pointer to the question name */
		out[o++] = 12;
		out[o++] = rrs[i].type >> 8;
		out[o++] = rrs[i].type & 0xff;
		out[o++] = 0;
		out[o++] = 1;
		uint32_t ttl = 60 + (uint32_t)i;
		out[o++] = ttl >> 24;
		out[o++] = (ttl >> 16) & 0xff;
		out[o++] = (ttl >> 8) & 0xff;
		out[o++] = ttl & 0xff;
		uint8_t rd[256];
		size_t rl;
		if (rrs[i].type == WIRE_A) {
			cr_assert_eq(inet_pton(AF_INET, rrs[i].text, rd), 1);
			rl = 4;
		} else if (rrs[i].type == WIRE_AAAA) {
			cr_assert_eq(inet_pton(AF_INET6, rrs[i].text, rd), 1);
			rl = 16;
		} else {
			rl = strlen(rrs[i].text) + 1;
			rd[0] = (uint8_t)(rl - 1);
			memcpy(rd + 1, rrs[i].text, rl - 1);
		}
		out[o++] = 0;
		out[o++] = (uint8_t)rl;
		memcpy(out + o, rd, rl);
		o += rl;
	}
	if (opt) {
		uint8_t o1[] = {0, 0, 41, 0x04, 0xd0, ext_rcode, 0, 0, 0};
		memcpy(out + o, o1, sizeof(o1));
		o += sizeof(o1);
		if (ede >= 0) {
			uint8_t o2[] = {0, 6, 0, 15, 0, 2, (uint8_t)(ede >> 8), (uint8_t)ede};
			memcpy(out + o, o2, sizeof(o2));
			o += sizeof(o2);
		} else {
			out[o++] = 0;
			out[o++] = 0;
		}
	}
	return o;
}

static struct escape_addr default_sinks[2] = {{.len = 4}, {.len = 16}};

static void classify(const char *name, uint16_t qtype, uint8_t rcode, const struct rr_spec *rrs,
                     size_t n, int ede, struct escape_answer *a)
{
	static uint8_t pkt[4096];
	uint8_t wire[NAME_MAXWIRE];
	size_t len = build_reply(pkt, 0x1234, name, qtype, rcode, rrs, n, ede, 0, 0);

	name_from_text(name, strlen(name), wire);
	escape_classify(pkt, len, 0x1234, wire, qtype, default_sinks, 2, a);
}

Test(escape, classify_denies)
{
	struct escape_answer a;
	char txt[256];

	classify("x.test", WIRE_A, WIRE_NXDOMAIN, NULL, 0, 15, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_DENY);
	cr_expect_eq(a.ede, 15);
	cr_expect_str_eq(escape_answer_str(&a, txt, sizeof(txt)), "NXDOMAIN (EDE 15)");

	classify("x.test", WIRE_A, WIRE_REFUSED, NULL, 0, -1, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_DENY);
	cr_expect_eq(a.ede, -1);
	cr_expect_str_eq(escape_answer_str(&a, txt, sizeof(txt)), "REFUSED");

	/* moatd's sinkhole deny: NOERROR with 0.0.0.0 / :: */
	struct rr_spec s4[] = {{WIRE_A, "0.0.0.0"}};
	classify("x.test", WIRE_A, WIRE_NOERROR, s4, 1, -1, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_DENY);
	cr_expect_eq(a.nsink, 1);
	cr_expect_eq(a.naddr, 0);
	cr_expect_str_eq(escape_answer_str(&a, txt, sizeof(txt)), "NOERROR sinkhole");
	struct rr_spec s6[] = {{WIRE_AAAA, "::"}};
	classify("x.test", WIRE_AAAA, WIRE_NOERROR, s6, 1, -1, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_DENY);
}

Test(escape, classify_nodata_fail_data)
{
	struct escape_answer a;
	char txt[256];

	/* Empty NOERROR: also what a sinkhole deny gives a TXT question. */
	classify("x.test", WIRE_TXT, WIRE_NOERROR, NULL, 0, -1, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_NODATA);
	cr_expect_str_eq(escape_answer_str(&a, txt, sizeof(txt)), "NOERROR (no data)");

	classify("x.test", WIRE_A, WIRE_SERVFAIL, NULL, 0, -1, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_FAIL);
	classify("x.test", WIRE_A, WIRE_NOTIMP, NULL, 0, -1, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_FAIL);

	struct rr_spec addrs[] = {
	    {WIRE_A, "0.0.0.0"}, {WIRE_A, "192.0.2.10"}, {WIRE_A, "192.0.2.11"}};
	classify("x.test", WIRE_A, WIRE_NOERROR, addrs, 3, -1, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_DATA, "one real address among sinkholes is data");
	cr_expect_eq(a.naddr, 2);
	cr_expect_eq(a.nsink, 1);
	cr_expect_eq(a.addr_ttl, 61, "lowest TTL of the real addresses");
	cr_expect_str_eq(escape_answer_str(&a, txt, sizeof(txt)),
	                 "NOERROR 192.0.2.10,192.0.2.11 sinkhole");

	struct rr_spec t[] = {{WIRE_TXT, "exfil"}};
	classify("x.test", WIRE_TXT, WIRE_NOERROR, t, 1, -1, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_DATA);
	cr_expect_eq(a.nother, 1);
	cr_expect_str_eq(escape_answer_str(&a, txt, sizeof(txt)), "NOERROR +1 record");

	/* An NXDOMAIN that still carries an address: a deny by rcode, but the address is counted,
	 * and the "does it resolve" tests look at the addresses, not the rcode. */
	struct rr_spec leak[] = {{WIRE_A, "169.254.169.254"}};
	classify("x.test", WIRE_A, WIRE_NXDOMAIN, leak, 1, -1, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_DENY);
	cr_expect_eq(a.naddr, 1);
}

Test(escape, classify_malformed_and_ext_rcode)
{
	static uint8_t pkt[4096];
	uint8_t wire[NAME_MAXWIRE];
	struct escape_answer a;
	size_t len;

	name_from_text("x.test", 6, wire);
	len = build_reply(pkt, 0x1234, "x.test", WIRE_A, WIRE_NOERROR, NULL, 0, -1, 0, 0);
	escape_classify(pkt, len, 0x9999, wire, WIRE_A, default_sinks, 2, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_MALFORMED, "another ID");
	escape_classify(pkt, len, 0x1234, wire, WIRE_AAAA, default_sinks, 2, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_MALFORMED, "another question");
	escape_classify(pkt, len - 1, 0x1234, wire, WIRE_A, default_sinks, 2, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_MALFORMED, "truncated");
	/* BADVERS: extended rcode 1 in the OPT TTL */
	len = build_reply(pkt, 0x1234, "x.test", WIRE_A, 0, NULL, 0, -1, 1, 0);
	escape_classify(pkt, len, 0x1234, wire, WIRE_A, default_sinks, 2, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_FAIL);
}

Test(escape, classify_custom_sinkhole)
{
	static uint8_t pkt[4096];
	uint8_t wire[NAME_MAXWIRE];
	struct escape_answer a;
	struct escape_addr sink = {.len = 4};
	struct rr_spec rr[] = {{WIRE_A, "192.0.2.99"}};
	size_t len = build_reply(pkt, 7, "x.test", WIRE_A, WIRE_NOERROR, rr, 1, -1, 0, 0);

	inet_pton(AF_INET, "192.0.2.99", sink.b);
	name_from_text("x.test", 6, wire);
	escape_classify(pkt, len, 7, wire, WIRE_A, &sink, 1, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_DENY);
	escape_classify(pkt, len, 7, wire, WIRE_A, default_sinks, 2, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_DATA);
}

static bool internal(const char *text)
{
	struct escape_addr a;

	a.len = strchr(text, ':') ? 16 : 4;
	cr_assert_eq(inet_pton(a.len == 4 ? AF_INET : AF_INET6, text, a.b), 1);
	return escape_addr_internal(&a);
}

Test(escape, internal_addresses)
{
	static const char *const in[] = {"169.254.169.254",
	                                 "127.0.0.1",
	                                 "10.0.0.5",
	                                 "172.16.1.1",
	                                 "192.168.1.1",
	                                 "100.100.100.200",
	                                 "0.0.0.0",
	                                 "224.0.0.1",
	                                 "::1",
	                                 "fe80::1",
	                                 "fd00:ec2::254",
	                                 "::ffff:169.254.169.254",
	                                 "64:ff9b::a9fe:a9fe",
	                                 "2002:a9fe:a9fe::1"};
	static const char *const out[] = {"192.0.2.10", "198.51.100.1", "8.8.8.8", "2001:db8::10",
	                                  "2606:4700:4700::1111"};

	for (size_t i = 0; i < sizeof(in) / sizeof(in[0]); i++)
		cr_expect(internal(in[i]), "%s should be internal", in[i]);
	for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++)
		cr_expect(!internal(out[i]), "%s should not be internal", out[i]);
}

/* ----------------------------------------------------- tunnelling names -- */

Test(escape, base32_rfc4648_vectors)
{
	static const char *const v[][2] = {{"", ""},
	                                   {"f", "my"},
	                                   {"fo", "mzxq"},
	                                   {"foo", "mzxw6"},
	                                   {"foob", "mzxw6yq"},
	                                   {"fooba", "mzxw6ytb"},
	                                   {"foobar", "mzxw6ytboi"}};
	char out[32];

	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		escape_base32((const uint8_t *)v[i][0], strlen(v[i][0]), out);
		cr_expect_str_eq(out, v[i][1]);
	}
}

Test(escape, tunnel_names)
{
	char a[ESCAPE_NAMELEN], b[ESCAPE_NAMELEN];
	uint8_t wire[NAME_MAXWIRE];
	int n = escape_tunnel_name("example.net", a, sizeof(a));

	cr_assert_gt(n, 0);
	cr_expect_eq((size_t)n, strlen(a));
	cr_expect_eq(name_from_text(a, strlen(a), wire), NAME_MAXWIRE, "fills 255 bytes");
	cr_expect_eq(name_count_labels(wire), 6, "4 labels + example.net");
	for (int i = 0; i < 3; i++)
		cr_expect_eq(wire[64 * i], 63, "label %d is 63 bytes", i);
	cr_expect_eq(strspn(a, "abcdefghijklmnopqrstuvwxyz234567."), strlen(a));
	cr_expect(strcmp(a + n - 12, ".example.net") == 0);
	escape_tunnel_name("example.net", b, sizeof(b));
	cr_expect_str_neq(a, b, "random data each time");

	/* A 63-byte domain leaves room for exactly three labels. */
	char dom[64];
	memset(dom, 'd', 61);
	dom[61] = '\0';
	n = escape_tunnel_name(dom, a, sizeof(a));
	cr_assert_gt(n, 0);
	name_from_text(a, strlen(a), wire);
	cr_expect_eq(name_count_labels(wire), 4);
	cr_expect_eq(name_wire_len(wire, NAME_MAXWIRE), 255);
	cr_expect_eq(escape_tunnel_name("", a, sizeof(a)), MOAT_EINVAL);
	cr_expect_eq(escape_tunnel_name("example.net", a, 100), MOAT_ESPACE);
}

/* --------------------------------------------------------------- report -- */

/* What a run without a witness gives: tests 12 and 13 not configured. */
static void results_all_held(struct escape_result r[ESCAPE_NTESTS])
{
	for (int i = 0; i < ESCAPE_NTESTS; i++)
		escape_result_init(&r[i], i + 1);
	r[11].outcome = r[12].outcome = ESCAPE_UNSET;
}

Test(escape, witness_tests_count_when_set)
{
	struct escape_result r[ESCAPE_NTESTS];
	struct escape_cfg c;
	char s[1024], err[256];

	for (int i = 0; i < ESCAPE_NTESTS; i++)
		escape_result_init(&r[i], i + 1);
	cr_expect_str_eq(r[11].name, "spoofed source passes");
	cr_expect_str_eq(r[12].name, "inbound connection accepted");
	escape_summary(r, ESCAPE_NTESTS, s, sizeof(s));
	cr_expect_str_eq(s, "moat-escape: 13 of 13 held");
	r[11].outcome = ESCAPE_ESCAPED;
	strcpy(r[11].reason, "a datagram from forged source 192.0.2.3 reached 203.0.113.80");
	escape_summary(r, ESCAPE_NTESTS, s, sizeof(s));
	cr_expect_str_eq(s, "moat-escape: 12 of 13 held; escaped: 12 (a datagram from forged "
	                    "source 192.0.2.3 reached 203.0.113.80)");
	cr_expect(!escape_all_held(r, ESCAPE_NTESTS));
	escape_cfg_init(&c);
	cr_expect_eq(escape_ntests(&c), 11);
	cr_expect_eq(escape_cfg_set(&c, "witness", "www.demo.test", err, sizeof(err)), 0, "%s",
	             err);
	cr_expect_eq(c.witness_port, 7);
	cr_expect_eq(escape_ntests(&c), 13);
	cr_expect_eq(escape_cfg_set(&c, "witness", "[2001:db8::1]:9", err, sizeof(err)), 0);
	cr_expect_eq(c.witness_port, 9);
	cr_expect_eq(escape_cfg_set(&c, "spoof-source", "192.0.2.99", err, sizeof(err)), 0);
	cr_expect_eq(c.nspoof, 1);
	cr_expect_eq(escape_cfg_set(&c, "inbound-port", "0", err, sizeof(err)), MOAT_EINVAL);
}

Test(escape, summary_lines)
{
	struct escape_result r[ESCAPE_NTESTS];
	char s[1024];

	results_all_held(r);
	cr_expect_eq(r[9].outcome, ESCAPE_WORKS);
	cr_expect_str_eq(r[9].expect, "works");
	cr_expect_str_eq(r[0].expect, "blocked");
	escape_summary(r, ESCAPE_NTESTS, s, sizeof(s));
	cr_expect_str_eq(s, "moat-escape: 11 of 11 held");
	cr_expect(escape_all_held(r, ESCAPE_NTESTS));

	r[4].outcome = ESCAPE_ESCAPED;
	strcpy(r[4].reason, "other resolver 203.0.113.53 answered over UDP 53");
	escape_summary(r, ESCAPE_NTESTS, s, sizeof(s));
	cr_expect_str_eq(s, "moat-escape: 10 of 11 held; escaped: 5 (other resolver 203.0.113.53 "
	                    "answered over UDP 53)");
	cr_expect(!escape_all_held(r, ESCAPE_NTESTS));

	r[5].outcome = ESCAPE_ESCAPED;
	strcpy(r[5].reason, "192.0.2.1:80 accepted a connection");
	r[7].outcome = ESCAPE_NOTRUN;
	strcpy(r[7].reason, "expire-wait is 0");
	r[9].outcome = ESCAPE_FAILED;
	strcpy(r[9].reason, "allowed name a.test did not resolve");
	escape_summary(r, ESCAPE_NTESTS, s, sizeof(s));
	cr_expect_str_eq(s, "moat-escape: 7 of 11 held; escaped: 5 (other resolver 203.0.113.53 "
	                    "answered over UDP 53), 6 (192.0.2.1:80 accepted a connection); "
	                    "control failed (allowed name a.test did not resolve); not run: 8 "
	                    "(expire-wait is 0)");

	/* not run alone: the run still cannot claim everything held */
	results_all_held(r);
	r[7].outcome = ESCAPE_NOTRUN;
	strcpy(r[7].reason, "expire-wait is 0");
	escape_summary(r, ESCAPE_NTESTS, s, sizeof(s));
	cr_expect_str_eq(s, "moat-escape: 10 of 11 held; not run: 8 (expire-wait is 0)");
	cr_expect(!escape_all_held(r, ESCAPE_NTESTS));

	/* a tiny buffer truncates, never overflows */
	escape_summary(r, ESCAPE_NTESTS, s, 10);
	cr_expect_str_eq(s, "moat-esca");
}

Test(escape, appendf)
{
	char b[16] = "";

	escape_appendf(b, sizeof(b), "%s", "one");
	escape_appendf(b, sizeof(b), "%d", 2);
	cr_expect_str_eq(b, "one; 2");
	escape_appendf(b, sizeof(b), "%s", "a long tail");
	cr_expect_eq(strlen(b), sizeof(b) - 1, "truncated at the buffer");
}

static char *render(enum escape_format fmt, struct escape_result r[ESCAPE_NTESTS])
{
	struct escape_cfg c;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	char err[256];

	escape_cfg_init(&c);
	escape_cfg_set(&c, "resolver", "127.0.0.1", err, sizeof(err));
	escape_report_begin(f, fmt, &c);
	for (int i = 0; i < ESCAPE_NTESTS; i++)
		escape_report_row(f, fmt, &r[i]);
	escape_report_end(f, fmt, r, ESCAPE_NTESTS);
	fclose(f);
	return buf;
}

static void sample(struct escape_result r[ESCAPE_NTESTS])
{
	results_all_held(r);
	strcpy(r[0].detail, "x.y: NXDOMAIN x2");
	r[4].outcome = ESCAPE_ESCAPED;
	strcpy(r[4].reason, "other resolver 203.0.113.53 answered over UDP 53");
	strcpy(r[4].detail, "203.0.113.53 UDP 53: answered (\"quoted\" \\ back)");
	r[7].outcome = ESCAPE_NOTRUN;
	strcpy(r[7].reason, "expire-wait is 0");
}

static const char *last_line(const char *s)
{
	size_t n = strlen(s);
	const char *p;

	cr_assert(n > 1 && s[n - 1] == '\n');
	for (p = s + n - 2; p > s && p[-1] != '\n'; p--)
		;
	return p;
}

Test(escape, table_format)
{
	struct escape_result r[ESCAPE_NTESTS];
	char *out;

	sample(r);
	out = render(ESCAPE_FMT_TABLE, r);
	cr_expect(strstr(out, "escape tests against resolver 127.0.0.1:53 (probe timeout 2000 ms, "
	                      "worst case ") == out);
	cr_expect(strstr(out, "\n  #  test                           expect   result   detail\n"));
	cr_expect(strstr(out, "\n  1  unknown name resolves          blocked  blocked  x.y: "
	                      "NXDOMAIN x2\n"));
	cr_expect(strstr(out, "\n  5  other resolver answers         blocked  ESCAPED  "));
	cr_expect(strstr(out, "\n  8  expired grant still reachable  blocked  not run  \n"));
	cr_expect(strstr(out, "\n 10  control: allowed name works    works    works    \n"));
	cr_expect(strstr(out, "\n 11  port outside the grant opens   blocked  blocked  \n"), "%s",
	          out);
	cr_expect_str_eq(last_line(out), "moat-escape: 9 of 11 held; escaped: 5 (other resolver "
	                                 "203.0.113.53 answered over UDP 53); not run: 8 "
	                                 "(expire-wait is 0)\n");
	/* exactly one summary line */
	cr_expect_eq(strstr(out, "moat-escape:"), last_line(out));
	free(out);
}

Test(escape, tap_format)
{
	struct escape_result r[ESCAPE_NTESTS];
	char *out;

	sample(r);
	out = render(ESCAPE_FMT_TAP, r);
	cr_expect(strstr(out, "TAP version 13\n1..11\n") == out);
	cr_expect(strstr(out, "\nok 1 - unknown name resolves: blocked\n#   x.y: NXDOMAIN x2\n"));
	cr_expect(strstr(out, "\nnot ok 5 - other resolver answers: ESCAPED\n#   other resolver"));
	cr_expect(strstr(out, "\nnot ok 8 - expired grant still reachable: not run\n"));
	cr_expect(strstr(out, "\nok 10 - control: allowed name works: works\n"));
	cr_expect_str_eq(last_line(out), "# moat-escape: 9 of 11 held; escaped: 5 (other resolver "
	                                 "203.0.113.53 answered over UDP 53); not run: 8 "
	                                 "(expire-wait is 0)\n");
	free(out);
}

Test(escape, json_format)
{
	struct escape_result r[ESCAPE_NTESTS];
	char *out;

	sample(r);
	out = render(ESCAPE_FMT_JSON, r);
	cr_expect(strstr(out, "{\"results\":[\n {\"id\":1,\"test\":\"unknown name resolves\","
	                      "\"expect\":\"blocked\",\"result\":\"blocked\",\"held\":true,"
	                      "\"reason\":\"\",\"detail\":\"x.y: NXDOMAIN x2\"},") == out,
	          "%s", out);
	cr_expect(strstr(out, "\"result\":\"escaped\",\"held\":false"));
	cr_expect(strstr(out, "\"detail\":\"203.0.113.53 UDP 53: answered (\\\"quoted\\\" \\\\ "
	                      "back)\""));
	cr_expect(strstr(out, "\"result\":\"not run\""));
	cr_expect(strstr(out, "\n],\"held\":9,\"total\":11,\"ok\":false,\"summary\":\"moat-escape: "
	                      "9 of 11 held; escaped: 5 "));
	cr_expect_eq(out[strlen(out) - 2], '}');
	free(out);
}

Test(escape, json_strings)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	escape_json_str(f, "a\"b\\c\nd\x01\x7f");
	fclose(f);
	cr_expect_str_eq(buf, "\"a\\\"b\\\\c\\nd\\u0001\\u007f\"");
	free(buf);
}

Test(escape, outcome_words)
{
	cr_expect_str_eq(escape_outcome_str(ESCAPE_HELD), "blocked");
	cr_expect_str_eq(escape_outcome_str(ESCAPE_ESCAPED), "ESCAPED");
	cr_expect_str_eq(escape_outcome_str(ESCAPE_WORKS), "works");
	cr_expect_str_eq(escape_outcome_str(ESCAPE_FAILED), "FAILED");
	cr_expect_str_eq(escape_outcome_str(ESCAPE_NOTRUN), "not run");
}

Test(escape, worst_case_bound)
{
	struct escape_cfg c;

	escape_cfg_init(&c);
	/* 2 + 2x5 + 12 + 2x2 + 3x4 + 2 + 2 + 4 + 4 + 6 + 6 = 64 probes */
	cr_expect_eq(escape_worst_case_ms(&c), 64ull * 2000 + 120000);
	c.expire_wait = 0;
	c.timeout_ms = 100;
	c.nothers = 1;
	cr_expect_eq(escape_worst_case_ms(&c), 55ull * 100);
}

/* --------------------------------------------------------------- probes -- */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A socket bound to 127.0.0.1 on a free port. */
static int bound(int type, struct sockaddr_in *sa)
{
	socklen_t l = sizeof(*sa);
	int fd = socket(AF_INET, type, 0);

	cr_assert(fd >= 0);
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)sa, sizeof(*sa)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)sa, &l), 0);
	return fd;
}

Test(escape, connect_open_refused)
{
	struct sockaddr_in sa;
	char buf[64];
	int err;
	int fd = bound(SOCK_STREAM, &sa);

	cr_assert_eq(listen(fd, 4), 0);
	cr_expect_eq(escape_connect((struct sockaddr *)&sa, 1000, &err), ESCAPE_CONN_OPEN);
	cr_expect_eq(err, 0);
	close(fd);
	cr_expect_eq(escape_connect((struct sockaddr *)&sa, 1000, &err), ESCAPE_CONN_REFUSED);
	cr_expect_str_eq(escape_conn_str(ESCAPE_CONN_REFUSED, err, buf, sizeof(buf)), "refused");
	cr_expect_str_eq(escape_conn_str(ESCAPE_CONN_TIMEOUT, 0, buf, sizeof(buf)), "timeout");
}

/* A one-shot DNS server: answers the first query over UDP (with TC set when tc) and, when tcp
 * is given, the first query over TCP, with NXDOMAIN. */
struct fake {
	int udp, tcp;
	bool tc;
};

static size_t answer(const uint8_t *q, size_t n, uint8_t *out, bool tc)
{
	memcpy(out, q, n);
	out[2] = 0x81 | (tc ? 0x02 : 0); /* QR, RD, maybe TC */
	out[3] = 0x80 | WIRE_NXDOMAIN;
	return n; /* the question and our OPT echoed back: a valid reply */
}

static void *fake_run(void *arg)
{
	struct fake *f = arg;
	uint8_t q[512], out[600];
	struct sockaddr_storage from;
	socklen_t fl = sizeof(from);
	ssize_t n = recvfrom(f->udp, q, sizeof(q), 0, (struct sockaddr *)&from, &fl);

	if (n > 0) {
		/* a stray reply with another ID first: it must be skipped */
		size_t l = answer(q, (size_t)n, out, f->tc);
		out[0] ^= 0xff;
		sendto(f->udp, out, l, 0, (struct sockaddr *)&from, fl);
		out[0] ^= 0xff;
		sendto(f->udp, out, l, 0, (struct sockaddr *)&from, fl);
	}
	if (f->tcp >= 0) {
		int c = accept(f->tcp, NULL, NULL);
		uint8_t lb[2];
		if (c >= 0 && read(c, lb, 2) == 2) {
			size_t ql = (size_t)(lb[0] << 8 | lb[1]);
			if (ql <= sizeof(q) && read(c, q, ql) == (ssize_t)ql) {
				size_t l = answer(q, ql, out + 2, false);
				out[0] = (uint8_t)(l >> 8);
				out[1] = (uint8_t)l;
				cr_assert_eq(write(c, out, l + 2), (ssize_t)(l + 2));
			}
		}
		if (c >= 0)
			close(c);
	}
	return NULL;
}

Test(escape, dns_udp_reply)
{
	struct sockaddr_in sa;
	struct fake f = {.udp = bound(SOCK_DGRAM, &sa), .tcp = -1};
	static struct escape_dns d;
	struct escape_answer a;
	pthread_t t;

	pthread_create(&t, NULL, fake_run, &f);
	escape_dns_query((struct sockaddr *)&sa, "x.test", WIRE_A, ESCAPE_TR_AUTO, 2000, &d);
	pthread_join(t, NULL);
	cr_assert_eq(d.status, ESCAPE_DNS_REPLY);
	cr_expect(!d.tcp);
	escape_classify(d.pkt, d.len, d.id, d.lname, WIRE_A, default_sinks, 2, &a);
	cr_expect_eq(a.verdict, ESCAPE_V_DENY);
	close(f.udp);
}

Test(escape, dns_truncated_goes_tcp)
{
	struct sockaddr_in sa, sa2;
	struct fake f = {.udp = bound(SOCK_DGRAM, &sa), .tc = true};
	static struct escape_dns d;
	pthread_t t;

	/* the TCP listener on the same port as the UDP socket */
	f.tcp = socket(AF_INET, SOCK_STREAM, 0);
	sa2 = sa;
	cr_assert_eq(bind(f.tcp, (struct sockaddr *)&sa2, sizeof(sa2)), 0);
	cr_assert_eq(listen(f.tcp, 4), 0);
	pthread_create(&t, NULL, fake_run, &f);
	escape_dns_query((struct sockaddr *)&sa, "x.test", WIRE_A, ESCAPE_TR_AUTO, 2000, &d);
	pthread_join(t, NULL);
	cr_assert_eq(d.status, ESCAPE_DNS_REPLY);
	cr_expect(d.tcp, "TC=1 over UDP: the answer must come over TCP");
	cr_expect_eq(d.pkt[3] & 0xf, WIRE_NXDOMAIN);
	close(f.udp);
	close(f.tcp);
}

Test(escape, dns_timeout_is_bounded)
{
	struct sockaddr_in sa;
	int fd = bound(SOCK_DGRAM, &sa); /* bound, never answers */
	static struct escape_dns d;
	int64_t t0 = now_ms();

	escape_dns_query((struct sockaddr *)&sa, "x.test", WIRE_A, ESCAPE_TR_AUTO, 200, &d);
	int64_t took = now_ms() - t0;
	cr_expect_eq(d.status, ESCAPE_DNS_TIMEOUT);
	cr_expect(took >= 190 && took < 1000, "took %lld ms", (long long)took);
	close(fd);
	/* nothing bound any more: ICMP port unreachable comes back as an error */
	escape_dns_query((struct sockaddr *)&sa, "x.test", WIRE_A, ESCAPE_TR_UDP, 500, &d);
	cr_expect_eq(d.status, ESCAPE_DNS_NETERR);
	escape_dns_query((struct sockaddr *)&sa, "a..b", WIRE_A, ESCAPE_TR_UDP, 500, &d);
	cr_expect_eq(d.status, ESCAPE_DNS_BADNAME);
}
