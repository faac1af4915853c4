/* nft_bridge.c owns the text of moat-fw's layer-2 tables, table bridge moat and table bridge
 * moat_guard (layout in nft.h): what closes the way between two sandboxes on ports of one Linux
 * bridge (docker0 and its kin).
 *
 * A frame the bridge switches from one port to another never reaches the inet hooks (unless
 * br_netfilter is loaded, which moat does not rely on): moat's inet rules judge only what is
 * addressed to the bridge device, the host. So in the bridge family's forward hook (which sees
 * only frames switched between ports, never those to or from the bridge device) everything of
 * a sandbox bridge is dropped and counted: IPv4, IPv6 with its neighbour discovery, ARP and
 * any other ethertype. Between sandboxes ARP and ND serve only to reach each other; toward the
 * gateway they are delivered to the host, not forwarded, and pass.
 *
 * The bridge is matched by name (meta ibrname) where the kernel has it (CONFIG_NFT_BRIDGE_META,
 * module nft_meta_bridge). Without it, no expression names a frame's bridge: then every frame
 * switched on any bridge is dropped unless its ingress port is one of the ports of the host's
 * other bridges (set other_ports, ifindexes, kept current by moat-fw), so a new port of a
 * sandbox bridge is closed from its first frame; a port of another bridge added while moat-fw
 * is down stays cut from its neighbours until it runs.
 *
 * Table moat_guard holds the same drop one priority later, so deleting table bridge moat (or
 * its rule) closes nothing less; it is replaced in the same transaction. Both are left in place
 * when moat-fw stops. */
#include "nft.h"
#include "moat/err.h"

#include <stdbool.h>
#include <string.h>

#define FWNFT_BRIDGE_PRIO -200 /* the bridge family's filter priority */

/* `{ "a", "b" }` of the bridges, or `{ 7, 9 }` of the other bridges' ports. */
static int fwnft_bridge_list(const struct fwnft_setup *s, struct fwnft_buf *b)
{
	fwnft_printf(b, "{ ");
	for (size_t i = 0; i < s->nbridge; i++)
		fwnft_printf(b, "%s\"%s\"", i ? ", " : "", s->bridge[i].name);
	return fwnft_printf(b, " }");
}

static int fwnft_bports_list(const struct fwnft_setup *s, struct fwnft_buf *b)
{
	fwnft_printf(b, "{ ");
	for (size_t i = 0; i < s->nbports; i++)
		fwnft_printf(b, "%s%u", i ? ", " : "", (unsigned)s->bports[i]);
	return fwnft_printf(b, " }");
}

/* One of the two tables: its comment, the port set (without meta ibrname) and the chain. */
static int fwnft_bridge_table(const struct fwnft_setup *s, struct fwnft_buf *b, bool guard)
{
	const char *name = guard ? FWNFT_GUARD : FWNFT_TABLE, *pre = guard ? "guard_" : "";
	fwnft_printf(b,
	             "add table bridge %s\n"
	             "delete table bridge %s\n"
	             "table bridge %s {\n",
	             name, name, name);
	if (guard)
		fwnft_printf(
		    b, "\tcomment \"moat-fw: drops what a sandbox bridge switches between its "
		       "ports if table bridge moat is gone; moat-fw --remove deletes this\"\n");
	else if (s->pid)
		fwnft_printf(b, "\tcomment \"" FWNFT_COMMENT_FMT "\"\n", s->pid);
	if (!s->bridge_meta) {
		fwnft_printf(b, "\tset %sother_ports {\n\t\ttype iface_index\n", pre);
		if (s->nbports) {
			fwnft_printf(b, "\t\telements = ");
			fwnft_bports_list(s, b);
			fwnft_printf(b, "\n");
		}
		fwnft_printf(b, "\t}\n");
	}
	fwnft_printf(b,
	             "\tchain %sbridged {\n"
	             "\t\ttype filter hook forward priority %d; policy accept;\n\t\t",
	             pre, FWNFT_BRIDGE_PRIO + (guard ? 1 : 0));
	if (s->bridge_meta) {
		fwnft_printf(b, "meta ibrname ");
		fwnft_bridge_list(s, b);
	} else {
		fwnft_printf(b, "meta iif != @%sother_ports", pre);
	}
	return fwnft_printf(b, " counter drop\n\t}\n}\n");
}

static int fwnft_bridge_check(const struct fwnft_setup *s)
{
	if (!s || (s->placement != FWNFT_FORWARD && (s->nbridge || s->bridge_stale)))
		return MOAT_EINVAL;
	for (size_t i = 0; i < s->nbridge; i++)
		if (!fwnft_ifname_ok(s->bridge[i].name))
			return MOAT_EINVAL;
	for (size_t i = 0; i < s->nbports; i++)
		if (s->bports[i] == 0)
			return MOAT_EINVAL;
	return 0;
}

int fwnft_build_bridge(const struct fwnft_setup *s, struct fwnft_buf *b)
{
	if (fwnft_bridge_check(s) < 0 || !b)
		return MOAT_EINVAL;
	if (s->nbridge == 0) {
		if (!s->bridge_stale)
			return b->err;
		/* add + delete: gone whether or not they were there. */
		return fwnft_printf(b, "add table bridge " FWNFT_GUARD "\n"
		                       "delete table bridge " FWNFT_GUARD "\n"
		                       "add table bridge " FWNFT_TABLE "\n"
		                       "delete table bridge " FWNFT_TABLE "\n");
	}
	fwnft_bridge_table(s, b, true);
	return fwnft_bridge_table(s, b, false);
}

int fwnft_build_bports(const struct fwnft_setup *s, struct fwnft_buf *b)
{
	if (fwnft_bridge_check(s) < 0 || !b || s->bridge_meta || s->nbridge == 0)
		return MOAT_EINVAL;
	for (int guard = 0; guard < 2; guard++) {
		const char *t = guard ? FWNFT_GUARD : FWNFT_TABLE, *pre = guard ? "guard_" : "";
		fwnft_printf(b, "flush set bridge %s %sother_ports\n", t, pre);
		if (s->nbports) {
			fwnft_printf(b, "add element bridge %s %sother_ports ", t, pre);
			fwnft_bports_list(s, b);
			fwnft_printf(b, "\n");
		}
	}
	return b->err;
}
