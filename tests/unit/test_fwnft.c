/* Unit tests for moat-fw's nft text (tools/fw/nft.c), without a kernel: range parsing and
 * containment, the ranges file loader (always lines only, errors with file:line), overlap
 * reduction, the shipped blocked-ranges.txt, the full start-up ruleset of both placements
 * (compared byte for byte, so any change to the rules is a visible test change; the forward
 * one with its guard table, a gateway and the table comment naming the pid). The element
 * batches are tested in test_fwnft_batch.c. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moat/err.h"
#include "nft.h"

static struct fwnft_range R(const char *text) {
	struct fwnft_range r;
	cr_assert_eq(fwnft_range_parse(text, &r), 0, "bad test range %s", text);
	return r;
}

static struct fwnft_resolver
RES(const char *text, uint16_t port) {
	struct fwnft_resolver r = {.port = port};
	if (inet_pton(AF_INET, text, r.addr) == 1)
		r.family = 4;
	else if (inet_pton(AF_INET6, text, r.addr) == 1)
		r.family = 6;
	else
		cr_assert_fail("bad test resolver %s", text);
	return r;
}

Test(fwnft, range_parse)
{
	struct fwnft_range r;
	cr_assert_eq(fwnft_range_parse("10.0.0.0/8", &r), 0);
	cr_assert_eq(r.family, 4);
	cr_assert_eq(r.bits, 8);
	cr_assert_eq(r.addr[0], 10);
	cr_assert_eq(fwnft_range_parse("192.0.2.1", &r), 0);
	cr_assert_eq(r.bits, 32);
	cr_assert_eq(fwnft_range_parse("2001:db8::/32", &r), 0);
	cr_assert_eq(r.family, 6);
	cr_assert_eq(r.bits, 32);
	cr_assert_eq(fwnft_range_parse("::ffff:0:0/96", &r), 0);
	cr_assert_eq(r.family, 6, "the text's family is kept, not the mapped form's");
	cr_assert_eq(fwnft_range_parse("::1", &r), 0);
	cr_assert_eq(r.bits, 128);
	const char *bad[] = {"10.0.0.1/8",   "10.0.0.0/33",   "2001:db8::/129", "10.0.0.0/",
	                     "10.0.0.0/x",   "10.0.0.0/08",   "nope",           "",
	                     "10.0.0.0/8/8", "2001:db8::1/64"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(fwnft_range_parse(bad[i], &r), MOAT_EINVAL, "%s accepted", bad[i]);
}

Test(fwnft, range_contains)
{
	struct fwnft_range r = R("10.1.0.0/16");
	uint8_t in[4] = {10, 1, 200, 3}, out[4] = {10, 2, 0, 1}, v6[16] = {0x20, 0x01};
	cr_assert(fwnft_range_contains(&r, 4, in));
	cr_assert_not(fwnft_range_contains(&r, 4, out));
	cr_assert_not(fwnft_range_contains(&r, 6, v6), "families never mix");
	struct fwnft_range all = R("0.0.0.0/0");
	cr_assert(fwnft_range_contains(&all, 4, out));
	struct fwnft_range r6 = R("2001::/16");
	cr_assert(fwnft_range_contains(&r6, 6, v6));
}

static char *write_tmp(const char *text)
{
	static char path[64];
	snprintf(path, sizeof(path), "/tmp/moat-fwnft-test.XXXXXX");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

Test(fwnft, ranges_load_always_only)
{
	char err[256];
	struct fwnft_range *v = NULL;
	size_t n = 0;
	char *path = write_tmp("# comment\n\n"
	                       "169.254.0.0/16 always # link-local\n"
	                       "10.0.0.0/8     private\n"
	                       "  fe80::/10\talways\n"
	                       "192.0.2.7 always\n");
	cr_assert_eq(fwnft_ranges_load(path, &v, &n, err, sizeof(err)), 0, "%s", err);
	unlink(path);
	cr_assert_eq(n, 3);
	cr_assert_eq(v[0].family, 4);
	cr_assert_eq(v[0].bits, 16);
	cr_assert_eq(v[1].family, 6);
	cr_assert_eq(v[1].bits, 10);
	cr_assert_eq(v[2].bits, 32);
	free(v);
}

Test(fwnft, ranges_load_errors)
{
	static const struct {
		const char *text;
		const char *want;
	} cases[] = {
	    {"10.0.0.0/8 always\n10.0.0.1/8 always\n", ":2: bad range '10.0.0.1/8'"},
	    {"10.0.0.0/8\n", ":1: want"},
	    {"10.0.0.0/8 sometimes\n", ":1: want"},
	    {"\n\n10.0.0.0/8 always extra\n", ":3: want"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[256];
		struct fwnft_range *v = NULL;
		size_t n = 0;
		char *path = write_tmp(cases[i].text);
		cr_expect_eq(fwnft_ranges_load(path, &v, &n, err, sizeof(err)), MOAT_EINVAL);
		cr_expect(strstr(err, cases[i].want) != NULL, "case %zu: '%s'", i, err);
		cr_expect(strncmp(err, path, strlen(path)) == 0, "error names the file: %s", err);
		unlink(path);
		free(v);
	}
	char err[256];
	struct fwnft_range *v = NULL;
	size_t n = 0;
	cr_expect_eq(fwnft_ranges_load("/nonexistent/ranges", &v, &n, err, sizeof(err)), MOAT_EIO);
	cr_expect(strstr(err, "/nonexistent/ranges:0:") == err, "%s", err);
}

Test(fwnft, ranges_reduce)
{
	struct fwnft_range v[] = {R("240.0.0.0/4"),    R("255.255.255.255"), R("169.254.169.254"),
	                          R("169.254.0.0/16"), R("::/128"),          R("::1"),
	                          R("169.254.0.0/16"), R("fe80::/10"),       R("fe80::1")};
	size_t n = fwnft_ranges_reduce(v, sizeof(v) / sizeof(v[0]));
	cr_assert_eq(n, 5);
	cr_assert_eq(v[0].bits, 4);
	cr_assert_eq(v[1].bits, 16);
	cr_assert_eq(v[1].addr[0], 169);
	cr_assert_eq(v[2].family, 6);
	cr_assert_eq(v[2].bits, 128, "::/128 does not contain ::1");
	cr_assert_eq(v[3].addr[15], 1);
	cr_assert_eq(v[4].bits, 10);
}

static const char *const shipped = MOAT_SOURCE_DIR "/zones/blocked-ranges.txt";

Test(fwnft, shipped_ranges)
{
	char err[256];
	struct fwnft_range *v = NULL;
	size_t n = 0;
	cr_assert_eq(fwnft_ranges_load(shipped, &v, &n, err, sizeof(err)), 0, "%s", err);
	n = fwnft_ranges_reduce(v, n);
	struct fwnft_setup s = {.placement = FWNFT_NETNS, .deny = v, .ndeny = n};
	struct fwnft_buf b = {0};
	cr_assert_eq(fwnft_build_ruleset(&s, &b), 0);
	const char *want[] = {"0.0.0.0/8",         "127.0.0.0/8",     "169.254.0.0/16",
	                      "224.0.0.0/4",       "240.0.0.0/4",     "100.100.100.200/32",
	                      "168.63.129.16/32",  "192.0.0.192/32",  "::/128",
	                      "::1/128",           "fe80::/10",       "ff00::/8",
	                      "fd00:ec2::254/128", "fd20:ce::254/128"};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		cr_expect(strstr(b.p, want[i]) != NULL, "%s missing from the deny sets", want[i]);
	/* Private ranges are moatd's per-agent business; contained hosts are merged away. */
	const char *absent[] = {"10.0.0.0/8", "fc00::/7", "169.254.169.254", "255.255.255.255",
	                        "100.64.0.0/10"};
	for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
		cr_expect(strstr(b.p, absent[i]) == NULL, "%s must not be in the deny sets",
		          absent[i]);
	fwnft_buf_free(&b);
	free(v);
}

Test(fwnft, ruleset_netns)
{
	struct fwnft_range deny[] = {R("169.254.0.0/16"), R("127.0.0.0/8"), R("fe80::/10")};
	struct fwnft_resolver res[] = {RES("192.0.2.53", 53), RES("2001:db8::53", 5353)};
	struct fwnft_range link6 = R("2001:db8:1::/64");
	struct fwnft_port in[] = {{6, 8080}, {17, 5353}};
	struct fwnft_setup s = {.placement = FWNFT_NETNS,
	                        .deny = deny,
	                        .ndeny = 3,
	                        .resolver = res,
	                        .nresolver = 2,
	                        .link6 = &link6,
	                        .nlink6 = 1,
	                        .inbound = in,
	                        .ninbound = 2};
	struct fwnft_buf b = {0};
	cr_assert_eq(fwnft_build_ruleset(&s, &b), 0);
	const char *want =
	    "add table inet moat\n"
	    "delete table inet moat\n"
	    "table inet moat {\n"
	    "\tset deny4 {\n"
	    "\t\ttype ipv4_addr\n"
	    "\t\tflags interval\n"
	    "\t\telements = { 169.254.0.0/16, 127.0.0.0/8 }\n"
	    "\t}\n"
	    "\tset deny6 {\n"
	    "\t\ttype ipv6_addr\n"
	    "\t\tflags interval\n"
	    "\t\telements = { fe80::/10 }\n"
	    "\t}\n"
	    "\tset allow4 {\n"
	    "\t\ttype ipv4_addr\n"
	    "\t\tflags timeout\n"
	    "\t}\n"
	    "\tset port4 {\n"
	    "\t\ttype ipv4_addr . inet_proto . inet_service\n"
	    "\t\tflags timeout\n"
	    "\t}\n"
	    "\tset echo4 {\n"
	    "\t\ttype ipv4_addr\n"
	    "\t\tflags timeout\n"
	    "\t}\n"
	    "\tset allow6 {\n"
	    "\t\ttype ipv6_addr\n"
	    "\t\tflags timeout\n"
	    "\t}\n"
	    "\tset port6 {\n"
	    "\t\ttype ipv6_addr . inet_proto . inet_service\n"
	    "\t\tflags timeout\n"
	    "\t}\n"
	    "\tset echo6 {\n"
	    "\t\ttype ipv6_addr\n"
	    "\t\tflags timeout\n"
	    "\t}\n"
	    "\tset link6 {\n"
	    "\t\ttype ipv6_addr\n"
	    "\t\tflags interval\n"
	    "\t\telements = { fe80::/10, ff02::/16, 2001:db8:1::/64 }\n"
	    "\t}\n"
	    "\tchain output {\n"
	    "\t\ttype filter hook output priority 0; policy drop;\n"
	    "\t\tip daddr 0.0.0.0/8 counter drop\n"
	    "\t\tip6 daddr :: counter drop\n"
	    "\t\toif \"lo\" accept\n"
	    "\t\tfib saddr type != local counter drop\n"
	    "\t\tip saddr 127.0.0.0/8 counter drop\n"
	    "\t\tip6 saddr ::1 counter drop\n"
	    "\t\tct state established,related ct direction original accept\n"
	    "\t\tct state established ct direction reply accept\n"
	    "\t\ticmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit, "
	    "nd-router-advert } ip6 hoplimit 255 ip6 daddr @link6 accept\n"
	    "\t\tip daddr @deny4 counter drop\n"
	    "\t\tip6 daddr @deny6 counter drop\n"
	    "\t\tip daddr 192.0.2.53 udp dport 53 accept\n"
	    "\t\tip daddr 192.0.2.53 tcp dport 53 accept\n"
	    "\t\tip6 daddr 2001:db8::53 udp dport 5353 accept\n"
	    "\t\tip6 daddr 2001:db8::53 tcp dport 5353 accept\n"
	    "\t\ticmp type != echo-request counter drop\n"
	    "\t\ticmpv6 type != echo-request counter drop\n"
	    "\t\tip daddr @allow4 accept\n"
	    "\t\tip6 daddr @allow6 accept\n"
	    "\t\tip daddr . meta l4proto . th dport @port4 accept\n"
	    "\t\tip6 daddr . meta l4proto . th dport @port6 accept\n"
	    "\t\ticmp type echo-request ip daddr @allow4 accept\n"
	    "\t\ticmp type echo-request ip daddr @echo4 accept\n"
	    "\t\ticmpv6 type echo-request ip6 daddr @allow6 accept\n"
	    "\t\ticmpv6 type echo-request ip6 daddr @echo6 accept\n"
	    "\t\tcounter drop\n"
	    "\t}\n"
	    "\tchain input {\n"
	    "\t\ttype filter hook input priority 0; policy drop;\n"
	    "\t\tiif \"lo\" accept\n"
	    "\t\ticmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit, "
	    "nd-router-advert } ip6 hoplimit 255 accept\n"
	    "\t\tct state established,related ct direction reply accept\n"
	    "\t\tct direction original tcp dport 8080 accept\n"
	    "\t\tct direction original udp dport 5353 accept\n"
	    "\t\tcounter drop\n"
	    "\t}\n"
	    "}\n";
	cr_assert_str_eq(b.p, want);
	cr_assert_eq(b.len, strlen(want));
	fwnft_buf_free(&b);
}

Test(fwnft, ruleset_forward)
{
	struct fwnft_range deny[] = {R("169.254.0.0/16")};
	struct fwnft_range sb[] = {R("10.9.0.0/24"), R("10.8.0.0/24"), R("2001:db8:9::/64")};
	snprintf(sb[0].ifname, sizeof(sb[0].ifname), "veth-a");
	snprintf(sb[1].ifname, sizeof(sb[1].ifname), "veth-b");
	snprintf(sb[2].ifname, sizeof(sb[2].ifname), "veth-a");
	struct fwnft_resolver res[] = {RES("10.9.0.1", 53)};
	struct fwnft_port in[] = {{6, 8080}};
	struct fwnft_range gw[] = {R("10.9.0.1")}; /* a bridge's address inside 10.9.0.0/24 */
	snprintf(gw[0].ifname, sizeof(gw[0].ifname), "veth-a");
	struct fwnft_setup s = {.placement = FWNFT_FORWARD,
	                        .deny = deny,
	                        .ndeny = 1,
	                        .sandbox = sb,
	                        .nsandbox = 3,
	                        .resolver = res,
	                        .nresolver = 1,
	                        .inbound = in,
	                        .ninbound = 1,
	                        .dhcp = true,
	                        .hostsrc = gw,
	                        .nhostsrc = 1,
	                        .pid = 4242};
	struct fwnft_buf b = {0};
	cr_assert_eq(fwnft_build_ruleset(&s, &b), 0);
#define M "meta mark set meta mark | 0x00000080 "
	const char *want =
	    "add table inet moat_guard\n"
	    "delete table inet moat_guard\n"
	    "table inet moat_guard {\n"
	    "\tcomment \"moat-fw: a sandbox interface passes only what table inet moat accepted; "
	    "moat-fw --remove deletes this\"\n"
	    "\tchain guard_pre_forward {\n"
	    "\t\ttype filter hook forward priority -1; policy accept;\n"
	    "\t\tmeta mark & 0x00000080 != 0 iifname { \"veth-a\", \"veth-b\" } counter drop\n"
	    "\t\tmeta mark & 0x00000080 != 0 iifname \"moat-*\" counter drop\n"
	    "\t\tmeta mark & 0x00000080 != 0 oifname { \"veth-a\", \"veth-b\" } counter drop\n"
	    "\t\tmeta mark & 0x00000080 != 0 oifname \"moat-*\" counter drop\n"
	    "\t}\n"
	    "\tchain guard_forward {\n"
	    "\t\ttype filter hook forward priority 1; policy accept;\n"
	    "\t\tmeta mark & 0x00000080 != 0 meta mark set meta mark & 0xffffff7f accept\n"
	    "\t\tiifname { \"veth-a\", \"veth-b\" } counter drop\n"
	    "\t\tiifname \"moat-*\" counter drop\n"
	    "\t\toifname { \"veth-a\", \"veth-b\" } counter drop\n"
	    "\t\toifname \"moat-*\" counter drop\n"
	    "\t}\n"
	    "\tchain guard_pre_input {\n"
	    "\t\ttype filter hook input priority -1; policy accept;\n"
	    "\t\tmeta mark & 0x00000080 != 0 iifname { \"veth-a\", \"veth-b\" } counter drop\n"
	    "\t\tmeta mark & 0x00000080 != 0 iifname \"moat-*\" counter drop\n"
	    "\t}\n"
	    "\tchain guard_input {\n"
	    "\t\ttype filter hook input priority 1; policy accept;\n"
	    "\t\tmeta mark & 0x00000080 != 0 meta mark set meta mark & 0xffffff7f accept\n"
	    "\t\tiifname { \"veth-a\", \"veth-b\" } counter drop\n"
	    "\t\tiifname \"moat-*\" counter drop\n"
	    "\t}\n"
	    "}\n"
	    "add table inet moat\n"
	    "delete table inet moat\n"
	    "table inet moat {\n"
	    "\tcomment \"moat-fw pid 4242 keeps this table and undoes changes to it; stop it, then "
	    "moat-fw --remove\"\n"
	    "\tset deny4 {\n"
	    "\t\ttype ipv4_addr\n"
	    "\t\tflags interval\n"
	    "\t\telements = { 169.254.0.0/16 }\n"
	    "\t}\n"
	    "\tset deny6 {\n"
	    "\t\ttype ipv6_addr\n"
	    "\t\tflags interval\n"
	    "\t}\n"
	    "\tset allow4 {\n"
	    "\t\ttype ipv4_addr . ipv4_addr\n"
	    "\t\tflags timeout\n"
	    "\t}\n"
	    "\tset port4 {\n"
	    "\t\ttype ipv4_addr . ipv4_addr . inet_proto . inet_service\n"
	    "\t\tflags timeout\n"
	    "\t}\n"
	    "\tset echo4 {\n"
	    "\t\ttype ipv4_addr . ipv4_addr\n"
	    "\t\tflags timeout\n"
	    "\t}\n"
	    "\tset allow6 {\n"
	    "\t\ttype ipv6_addr . ipv6_addr\n"
	    "\t\tflags timeout\n"
	    "\t}\n"
	    "\tset port6 {\n"
	    "\t\ttype ipv6_addr . ipv6_addr . inet_proto . inet_service\n"
	    "\t\tflags timeout\n"
	    "\t}\n"
	    "\tset echo6 {\n"
	    "\t\ttype ipv6_addr . ipv6_addr\n"
	    "\t\tflags timeout\n"
	    "\t}\n"
	    "\tset sbx4 {\n"
	    "\t\ttype ifname . ipv4_addr\n"
	    "\t\tflags interval\n"
	    "\t\telements = { \"veth-a\" . 10.9.0.0/24, \"veth-b\" . 10.8.0.0/24 }\n"
	    "\t}\n"
	    "\tset sbx6 {\n"
	    "\t\ttype ifname . ipv6_addr\n"
	    "\t\tflags interval\n"
	    "\t\telements = { \"veth-a\" . 2001:db8:9::/64 }\n"
	    "\t}\n"
	    "\tset hostsrc4 {\n"
	    "\t\ttype ifname . ipv4_addr\n"
	    "\t\telements = { \"veth-a\" . 10.9.0.1 }\n"
	    "\t}\n"
	    "\tset hostsrc6 {\n"
	    "\t\ttype ifname . ipv6_addr\n"
	    "\t}\n"
	    "\tchain forward {\n"
	    "\t\ttype filter hook forward priority 0; policy accept;\n"
	    "\t\toifname { \"veth-a\", \"veth-b\" } jump to_sandbox\n"
	    "\t\toifname \"moat-*\" jump to_sandbox\n"
	    "\t\tiifname { \"veth-a\", \"veth-b\" } jump sandbox\n"
	    "\t\tiifname \"moat-*\" jump sandbox\n"
	    "\t\toifname { \"veth-a\", \"veth-b\" } meta mark set meta mark | 0x00000080\n"
	    "\t\toifname \"moat-*\" meta mark set meta mark | 0x00000080\n"
	    "\t}\n"
	    "\tchain input {\n"
	    "\t\ttype filter hook input priority 0; policy accept;\n"
	    "\t\tiifname { \"veth-a\", \"veth-b\" } jump host\n"
	    "\t\tiifname \"moat-*\" jump host\n"
	    "\t}\n"
	    "\tchain sandbox {\n"
	    "\t\tiifname . ip saddr != @sbx4 counter drop\n"
	    "\t\tiifname . ip6 saddr != @sbx6 counter drop\n"
	    "\t\tct state established,related ct direction original " M "accept\n"
	    "\t\tct state established ct direction reply " M "accept\n"
	    "\t\tip daddr @deny4 counter drop\n"
	    "\t\tip6 daddr @deny6 counter drop\n"
	    "\t\tip daddr 10.9.0.1 udp dport 53 " M "accept\n"
	    "\t\tip daddr 10.9.0.1 tcp dport 53 " M "accept\n"
	    "\t\ticmp type != echo-request counter drop\n"
	    "\t\ticmpv6 type != echo-request counter drop\n"
	    "\t\tip saddr . ip daddr @allow4 " M "accept\n"
	    "\t\tip6 saddr . ip6 daddr @allow6 " M "accept\n"
	    "\t\tip saddr . ip daddr . meta l4proto . th dport @port4 " M "accept\n"
	    "\t\tip6 saddr . ip6 daddr . meta l4proto . th dport @port6 " M "accept\n"
	    "\t\ticmp type echo-request ip saddr . ip daddr @allow4 " M "accept\n"
	    "\t\ticmp type echo-request ip saddr . ip daddr @echo4 " M "accept\n"
	    "\t\ticmpv6 type echo-request ip6 saddr . ip6 daddr @allow6 " M "accept\n"
	    "\t\ticmpv6 type echo-request ip6 saddr . ip6 daddr @echo6 " M "accept\n"
	    "\t\tcounter drop\n"
	    "\t}\n"
	    "\tchain host {\n"
	    "\t\tudp sport 68 udp dport 67 " M "accept\n"
	    "\t\tip6 saddr fe80::/10 udp sport 546 udp dport 547 " M "accept\n"
	    "\t\ticmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit, "
	    "nd-router-advert } ip6 hoplimit 255 ip6 saddr { fe80::/10, :: } ip6 daddr { "
	    "fe80::/10, ff02::/16 } " M "accept\n"
	    "\t\ticmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit, "
	    "nd-router-advert } ip6 hoplimit 255 ip6 saddr fe80::/10 fib daddr type local " M
	    "accept\n"
	    "\t\tiifname . ip saddr != @sbx4 counter drop\n"
	    "\t\tiifname . ip6 saddr != @sbx6 counter drop\n"
	    "\t\ticmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit, "
	    "nd-router-advert } ip6 hoplimit 255 ip6 daddr ff02::/16 " M "accept\n"
	    "\t\ticmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit, "
	    "nd-router-advert } ip6 hoplimit 255 fib daddr type local " M "accept\n"
	    "\t\tct state established,related " M "accept\n"
	    "\t\tip daddr 10.9.0.1 udp dport 53 " M "accept\n"
	    "\t\tip daddr 10.9.0.1 tcp dport 53 " M "accept\n"
	    "\t\tcounter drop\n"
	    "\t}\n"
	    "\tchain to_sandbox {\n"
	    "\t\tct state established,related ct direction reply return\n"
	    "\t\tct direction original tcp dport 8080 return\n"
	    "\t\tudp sport 67 udp dport 68 return\n"
	    "\t\tudp sport 547 udp dport 546 return\n"
	    "\t\tcounter drop\n"
	    "\t}\n"
	    "\tchain prerouting {\n"
	    "\t\ttype filter hook prerouting priority -300; policy accept;\n"
	    "\t\tiifname . ip saddr @hostsrc4 counter drop\n"
	    "\t\tiifname . ip6 saddr @hostsrc6 counter drop\n"
	    "\t}\n"
	    "}\n";
#undef M
	cr_assert_str_eq(b.p, want);
	fwnft_buf_free(&b);
	cr_assert_eq(
	    fwnft_comment_pid("moat-fw pid 4242 keeps this table and undoes changes to it; "
	                      "stop it, then moat-fw --remove"),
	    4242);
	cr_assert_eq(fwnft_comment_pid("moat-fw pid 0 keeps"), 0);
	cr_assert_eq(fwnft_comment_pid("moat-fw pid 12x"), 0);
	cr_assert_eq(fwnft_comment_pid("someone else's"), 0);
	gw[0].ifname[0] = '\0';
	cr_assert_eq(fwnft_build_ruleset(&s, &b), MOAT_EINVAL, "a gateway needs its interface");
	fwnft_buf_free(&b);
	snprintf(gw[0].ifname, sizeof(gw[0].ifname), "veth-a");
	sb[1].ifname[0] = '\0';
	cr_assert_eq(fwnft_build_ruleset(&s, &b), MOAT_EINVAL,
	             "every sandbox range needs its interface");
	fwnft_buf_free(&b);
	snprintf(sb[1].ifname, sizeof(sb[1].ifname), "a\"b");
	cr_assert_eq(fwnft_build_ruleset(&s, &b), MOAT_EINVAL, "a quote in an interface name");
	fwnft_buf_free(&b);
	s.nsandbox = 0;
	cr_assert_eq(fwnft_build_ruleset(&s, &b), MOAT_EINVAL, "forward needs a sandbox range");
	fwnft_buf_free(&b);
}

Test(fwnft, port_parse)
{
	struct fwnft_port p;
	cr_assert_eq(fwnft_port_parse("tcp/8080", &p), 0);
	cr_assert_eq(p.proto, 6);
	cr_assert_eq(p.port, 8080);
	cr_assert_eq(fwnft_port_parse("udp/53", &p), 0);
	cr_assert_eq(p.proto, 17);
	const char *bad[] = {"tcp/0",  "tcp/65536", "tcp/", "sctp/80",
	                     "tcp/08", "tcp/8x",    "8080", "tcp/123456"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(fwnft_port_parse(bad[i], &p), MOAT_EINVAL, "%s accepted", bad[i]);
}
