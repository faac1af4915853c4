/* Unit tests for moat-fw's drop log (tools/fw/droplog.c) without a kernel: the log statement
 * the rules carry (and none without --drop-log), every drop rule of both placements carrying
 * one with its chain and kind, the accept rules of the allow sets carrying "connect", and the
 * packet headers read back (IPv4, IPv6 with an extension header, a later fragment, junk). */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <string.h>

#include "droplog.h"
#include "moat/err.h"
#include "nft.h"

Test(fwdroplog, statement)
{
	char b[128];
	cr_assert_str_eq(fwdroplog_stmt(27, "output", "spoofed", b, sizeof(b)),
	                 " log prefix \"moat output spoofed\" group 27");
	cr_assert_str_eq(fwdroplog_stmt(0, "output", "spoofed", b, sizeof(b)), "");
}

/* Every "drop" line of the ruleset logs, with the kinds expected per chain. */
static void every_drop_logs(enum fwnft_placement pl, const char *const *want, size_t nwant)
{
	struct fwnft_range sb = {0};
	struct fwnft_resolver res = {.family = 4, .port = 53};
	inet_pton(AF_INET, "198.51.100.1", res.addr);
	fwnft_range_parse("198.51.100.0/24", &sb);
	snprintf(sb.ifname, sizeof(sb.ifname), "veth0");
	struct fwnft_setup s = {.placement = pl,
	                        .sandbox = &sb,
	                        .nsandbox = pl == FWNFT_FORWARD,
	                        .resolver = &res,
	                        .nresolver = 1,
	                        .log_group = 27};
	struct fwnft_buf b = {0};
	cr_assert_eq(fwnft_build_ruleset(&s, &b), 0);
	for (char *l = strtok(b.p, "\n"); l; l = strtok(NULL, "\n")) {
		size_t n = strlen(l);
		if (n > 5 && !strcmp(l + n - 5, " drop"))
			cr_assert(strstr(l, " log prefix \"moat "), "a drop without a log: %s", l);
		if (strstr(l, "@allow4 accept") || strstr(l, "@port6 accept"))
			cr_assert(strstr(l, "connect") || strstr(l, "echo-request"),
			          "an allow rule without its connect log: %s", l);
	}
	fwnft_buf_free(&b);
	cr_assert_eq(fwnft_build_ruleset(&s, &b), 0);
	for (size_t i = 0; i < nwant; i++)
		cr_assert(strstr(b.p, want[i]), "missing %s", want[i]);
	fwnft_buf_free(&b);
}

Test(fwdroplog, rules_of_both_placements)
{
	static const char *const netns[] = {
	    "\"moat output always-deny\"", "\"moat output spoofed\"", "\"moat output icmp\"",
	    "\"moat output unresolved\"",  "\"moat output connect\"", "\"moat input inbound\"",
	};
	every_drop_logs(FWNFT_NETNS, netns, sizeof(netns) / sizeof(netns[0]));
	static const char *const fwd[] = {
	    "\"moat sandbox spoofed\"", "\"moat sandbox unresolved\"",
	    "\"moat sandbox connect\"", "\"moat host spoofed\"",
	    "\"moat host host\"",       "\"moat to_sandbox inbound\"",
	};
	every_drop_logs(FWNFT_FORWARD, fwd, sizeof(fwd) / sizeof(fwd[0]));
}

Test(fwdroplog, parse)
{
	struct fwdroplog_pkt k;
	uint8_t v4[28] = {0x45, 0, 0,   28, 0,   0, 0x40, 0,    64,   17,   0, 0, 198, 51,
	                  100,  2, 203, 0,  113, 9, 0x30, 0x39, 0x01, 0xbb, 0, 8, 0,   0};
	cr_assert_eq(fwdroplog_parse(v4, sizeof(v4), &k), 0);
	cr_assert_eq(k.family, 4);
	cr_assert_eq(k.proto, 17);
	cr_assert_eq(k.port, 443);
	cr_assert_eq(k.dst[3], 9);
	v4[6] = 0x20; /* a later fragment: more fragments set */
	v4[7] = 0x10; /* offset 16: no transport header here */
	cr_assert_eq(fwdroplog_parse(v4, sizeof(v4), &k), 0);
	cr_assert_eq(k.port, 0);
	/* IPv6, hop-by-hop options (8 bytes), then TCP to port 8443 */
	uint8_t v6[40 + 8 + 20] = {0x60};
	v6[6] = 0; /* next header: hop-by-hop */
	v6[24] = 0x20;
	v6[25] = 0x01;
	v6[40] = 6; /* then TCP */
	v6[41] = 0; /* 8 bytes */
	v6[48 + 2] = 0x20;
	v6[48 + 3] = 0xfb;
	cr_assert_eq(fwdroplog_parse(v6, sizeof(v6), &k), 0);
	cr_assert_eq(k.family, 6);
	cr_assert_eq(k.proto, 6);
	cr_assert_eq(k.port, 8443);
	cr_assert_eq(k.dst[0], 0x20);
	uint8_t junk[10] = {0x12};
	cr_assert_eq(fwdroplog_parse(junk, sizeof(junk), &k), MOAT_EINVAL);
	uint8_t badihl[20] = {0x4f};
	cr_assert_eq(fwdroplog_parse(badihl, sizeof(badihl), &k), MOAT_EINVAL);
}
