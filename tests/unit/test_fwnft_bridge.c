/* Unit tests for moat-fw's layer-2 tables (tools/fw/nft_bridge.c, and where they join the
 * start-up ruleset in nft.c), without a kernel: tables bridge moat and moat_guard compared
 * byte for byte in both forms (the bridge matched by name with meta ibrname; without it, every
 * switched frame but those from the other bridges' ports), with and without such ports; the
 * deletion of tables left without a bridge; nothing at all without bridges; the port-set
 * update; and what is refused (a bad bridge name, ifindex 0, bridge tables in the netns
 * placement, a port update where there is no port set). The sandbox bridges picked from the
 * host's interfaces are tested here too (tools/fw/hostnet.c, fwhost_bridges). */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostnet.h"
#include "moat/err.h"
#include "nft.h"

static struct fwnft_ifname brs[2] = {{"br-x"}, {"docker0"}};
static uint32_t ports[2] = {7, 12};

static struct fwnft_setup setup(bool meta, size_t nports)
{
	return (struct fwnft_setup){.placement = FWNFT_FORWARD,
	                            .pid = 4242,
	                            .bridge = brs,
	                            .nbridge = 2,
	                            .bridge_meta = meta,
	                            .bports = ports,
	                            .nbports = nports};
}

static const char guard_comment[] =
    "\tcomment \"moat-fw: drops what a sandbox bridge switches between its ports if table "
    "bridge moat is gone; moat-fw --remove deletes this\"\n";
static const char moat_comment[] = "\tcomment \"moat-fw pid 4242 keeps this table and undoes "
                                   "changes to it; stop it, then moat-fw --remove\"\n";

/* The two tables as nft_bridge.c writes them, around each one's own set and chain text. */
static void want_tables(char *out, size_t cap, const char *guard, const char *moat)
{
	snprintf(out, cap,
	         "add table bridge moat_guard\n"
	         "delete table bridge moat_guard\n"
	         "table bridge moat_guard {\n%s%s}\n"
	         "add table bridge moat\n"
	         "delete table bridge moat\n"
	         "table bridge moat {\n%s%s}\n",
	         guard_comment, guard, moat_comment, moat);
}

Test(fwnft_bridge, by_name)
{
	struct fwnft_setup s = setup(true, 2);
	struct fwnft_buf b = {0};
	cr_assert_eq(fwnft_build_bridge(&s, &b), 0);
	char want[2048];
	want_tables(want, sizeof(want),
	            "\tchain guard_bridged {\n"
	            "\t\ttype filter hook forward priority -199; policy accept;\n"
	            "\t\tmeta ibrname { \"br-x\", \"docker0\" } counter drop\n"
	            "\t}\n",
	            "\tchain bridged {\n"
	            "\t\ttype filter hook forward priority -200; policy accept;\n"
	            "\t\tmeta ibrname { \"br-x\", \"docker0\" } counter drop\n"
	            "\t}\n");
	cr_assert_str_eq(b.p, want, "the ports do not matter when the bridge has a name");
	fwnft_buf_free(&b);
	cr_assert_eq(fwnft_build_bports(&s, &b), MOAT_EINVAL, "no port set to update");
	fwnft_buf_free(&b);
}

Test(fwnft_bridge, by_port)
{
	struct fwnft_setup s = setup(false, 2);
	struct fwnft_buf b = {0};
	cr_assert_eq(fwnft_build_bridge(&s, &b), 0);
	char want[2048];
	want_tables(want, sizeof(want),
	            "\tset guard_other_ports {\n"
	            "\t\ttype iface_index\n"
	            "\t\telements = { 7, 12 }\n"
	            "\t}\n"
	            "\tchain guard_bridged {\n"
	            "\t\ttype filter hook forward priority -199; policy accept;\n"
	            "\t\tmeta iif != @guard_other_ports counter drop\n"
	            "\t}\n",
	            "\tset other_ports {\n"
	            "\t\ttype iface_index\n"
	            "\t\telements = { 7, 12 }\n"
	            "\t}\n"
	            "\tchain bridged {\n"
	            "\t\ttype filter hook forward priority -200; policy accept;\n"
	            "\t\tmeta iif != @other_ports counter drop\n"
	            "\t}\n");
	cr_assert_str_eq(b.p, want);
	fwnft_buf_free(&b);

	/* No other bridge: an empty set, so every switched frame is dropped. */
	s = setup(false, 0);
	cr_assert_eq(fwnft_build_bridge(&s, &b), 0);
	cr_assert(strstr(b.p, "\tset other_ports {\n\t\ttype iface_index\n\t}\n"), "%s", b.p);
	cr_assert(strstr(b.p, "\tset guard_other_ports {\n\t\ttype iface_index\n\t}\n"), "%s", b.p);
	cr_assert_null(strstr(b.p, "elements"));
	fwnft_buf_free(&b);
}

Test(fwnft_bridge, bports_update)
{
	struct fwnft_setup s = setup(false, 2);
	struct fwnft_buf b = {0};
	cr_assert_eq(fwnft_build_bports(&s, &b), 0);
	cr_assert_str_eq(b.p, "flush set bridge moat other_ports\n"
	                      "add element bridge moat other_ports { 7, 12 }\n"
	                      "flush set bridge moat_guard guard_other_ports\n"
	                      "add element bridge moat_guard guard_other_ports { 7, 12 }\n");
	fwnft_buf_free(&b);
	s.nbports = 0;
	cr_assert_eq(fwnft_build_bports(&s, &b), 0);
	cr_assert_str_eq(b.p, "flush set bridge moat other_ports\n"
	                      "flush set bridge moat_guard guard_other_ports\n");
	fwnft_buf_free(&b);
	s.nbridge = 0;
	cr_assert_eq(fwnft_build_bports(&s, &b), MOAT_EINVAL, "no bridge tables to update");
	fwnft_buf_free(&b);
}

Test(fwnft_bridge, none_and_stale)
{
	struct fwnft_setup s = setup(false, 2);
	struct fwnft_buf b = {0};
	s.nbridge = 0;
	cr_assert_eq(fwnft_build_bridge(&s, &b), 0);
	cr_assert_null(b.p, "no bridge: not a word about bridge tables");
	s.bridge_stale = true;
	cr_assert_eq(fwnft_build_bridge(&s, &b), 0);
	cr_assert_str_eq(b.p, "add table bridge moat_guard\n"
	                      "delete table bridge moat_guard\n"
	                      "add table bridge moat\n"
	                      "delete table bridge moat\n");
	fwnft_buf_free(&b);
}

Test(fwnft_bridge, refused)
{
	struct fwnft_buf b = {0};
	struct fwnft_ifname bad[] = {{"a\"b"}};
	struct fwnft_setup s = setup(true, 0);
	s.bridge = bad;
	s.nbridge = 1;
	cr_assert_eq(fwnft_build_bridge(&s, &b), MOAT_EINVAL, "a quote in a bridge name");
	fwnft_buf_free(&b);
	uint32_t zero[] = {0};
	s = setup(false, 0);
	s.bports = zero;
	s.nbports = 1;
	cr_assert_eq(fwnft_build_bridge(&s, &b), MOAT_EINVAL, "ifindex 0");
	fwnft_buf_free(&b);
	s = setup(true, 0);
	s.placement = FWNFT_NETNS;
	cr_assert_eq(fwnft_build_bridge(&s, &b), MOAT_EINVAL, "bridge tables in the netns");
	fwnft_buf_free(&b);
	s.nbridge = 0;
	s.bridge_stale = true;
	cr_assert_eq(fwnft_build_bridge(&s, &b), MOAT_EINVAL, "stale bridge tables in the netns");
	fwnft_buf_free(&b);
}

/* The whole start-up ruleset ends with the bridge tables, in the same transaction. */
Test(fwnft_bridge, in_the_ruleset)
{
	struct fwnft_range sb[] = {{.family = 4, .addr = {10, 9}, .bits = 16, .ifname = "br-x"}};
	struct fwnft_resolver res[] = {{.family = 4, .addr = {10, 9, 0, 1}, .port = 53}};
	struct fwnft_setup s = setup(true, 0);
	s.sandbox = sb;
	s.nsandbox = 1;
	s.resolver = res;
	s.nresolver = 1;
	s.nbridge = 1;
	struct fwnft_buf b = {0}, t = {0};
	cr_assert_eq(fwnft_build_ruleset(&s, &b), 0);
	cr_assert_eq(fwnft_build_bridge(&s, &t), 0);
	cr_assert_gt(b.len, t.len);
	cr_assert_str_eq(b.p + b.len - t.len, t.p, "the bridge tables come last");
	cr_assert(strstr(b.p, "table inet moat_guard {") < strstr(b.p, "table inet moat {"));
	fwnft_buf_free(&b);
	fwnft_buf_free(&t);
}

static struct fwhost_link L(const char *name, uint32_t index, uint32_t master, bool bridge) {
	struct fwhost_link l = {.index = index, .master = master, .bridge = bridge};
	snprintf(l.name, sizeof(l.name), "%s", name);
	return l;
}

Test(fwnft_bridge, host_pick)
{
	/* br-x (a sandbox bridge) with ports 5 and 6; br-o (another) with 8 and 3; eth0 a bond's
	 * port (not a bridge's); veth-a a sandbox interface that is no bridge; "later" named by
	 * --sandbox but not there yet. */
	struct fwhost_link l[] = {
	    L("lo", 1, 0, false),      L("eth0", 2, 9, false), L("vo2", 3, 7, false),
	    L("br-x", 4, 0, true),     L("va", 5, 4, false),   L("vb", 6, 4, false),
	    L("br-o", 7, 0, true),     L("vo1", 8, 7, false),  L("bond0", 9, 0, false),
	    L("veth-a", 10, 0, false),
	};
	struct fwnft_range sb[4] = {{.family = 4}, {.family = 6}, {.family = 4}, {.family = 4}};
	snprintf(sb[0].ifname, sizeof(sb[0].ifname), "br-x");
	snprintf(sb[1].ifname, sizeof(sb[1].ifname), "br-x");
	snprintf(sb[2].ifname, sizeof(sb[2].ifname), "veth-a");
	snprintf(sb[3].ifname, sizeof(sb[3].ifname), "later");
	struct fwnft_ifname *br;
	uint32_t *p;
	size_t nbr, np;
	cr_assert_eq(fwhost_bridges(l, 10, sb, 4, &br, &nbr, &p, &np), 0);
	cr_assert_eq(nbr, 2, "br-x once, and the one not there yet");
	cr_assert_str_eq(br[0].name, "br-x");
	cr_assert_str_eq(br[1].name, "later");
	cr_assert_eq(np, 2, "the other bridge's ports, not the sandbox bridge's nor the bond's");
	cr_assert_eq(p[0], 3, "ascending");
	cr_assert_eq(p[1], 8);
	free(br);
	free(p);

	/* A runtime sandbox's link (moat run's veth) that is gone is no bridge to be. */
	struct fwnft_range rt = {.family = 4};
	snprintf(rt.ifname, sizeof(rt.ifname), "%s7", FWNFT_RUNTIME_IFPREFIX);
	cr_assert_eq(fwhost_bridges(l, 10, &rt, 1, &br, &nbr, &p, &np), 0);
	cr_assert_eq(nbr, 0);
	free(p);

	/* No sandbox bridge: nothing; br-x's ports are then another bridge's. */
	cr_assert_eq(fwhost_bridges(l, 10, &sb[2], 1, &br, &nbr, &p, &np), 0);
	cr_assert_eq(nbr, 0);
	cr_assert_null(br);
	cr_assert_eq(np, 4);
	cr_assert_eq(p[0], 3);
	cr_assert_eq(p[3], 8);
	free(p);
}

/* The rtnetlink read itself: every namespace has lo, index 1, no bridge, no master. */
Test(fwnft_bridge, host_links)
{
	struct fwhost_link *l = NULL;
	size_t n = 0;
	cr_assert_eq(fwhost_links(&l, &n), 0);
	bool lo = false;
	for (size_t i = 0; i < n; i++)
		if (strcmp(l[i].name, "lo") == 0)
			lo = l[i].index == 1 && !l[i].bridge && l[i].master == 0;
	cr_assert(lo, "lo not read as it is (%zu links)", n);
	free(l);
}
