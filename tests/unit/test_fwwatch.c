/* Unit tests for moat-fw's reading of nftables events (tools/fw/watch.c, fwwatch_parse), on
 * messages built here as the kernel sends them: a change by another socket is counted and
 * described by its weightiest event and named by its NEWGEN (pid, command); events of our own
 * sockets, of the kernel (port id 0), of other tables and of other families are not changes;
 * a cut message stops the walk without harm. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <string.h>

#include "watch.h"

static uint8_t buf[8192];
static size_t len;

/* Append one event: type, family, sender port id, table (NULL: none), and one more string
 * attribute (attr 0: none). */
static void ev(uint16_t type, uint8_t family, uint32_t portid, const char *table, uint16_t attr,
               const char *value)
{
	struct nlmsghdr *h = mnl_nlmsg_put_header(buf + len);
	h->nlmsg_type = (uint16_t)((NFNL_SUBSYS_NFTABLES << 8) | type);
	h->nlmsg_pid = portid;
	struct nfgenmsg *g = mnl_nlmsg_put_extra_header(h, sizeof(*g));
	g->nfgen_family = family;
	if (table)
		mnl_attr_put_strz(h, 1, table);
	if (attr)
		mnl_attr_put_strz(h, attr, value);
	len += NLMSG_ALIGN(h->nlmsg_len);
}

static void gen(uint32_t portid, uint32_t pid, const char *comm)
{
	struct nlmsghdr *h = mnl_nlmsg_put_header(buf + len);
	h->nlmsg_type = (uint16_t)((NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWGEN);
	h->nlmsg_pid = portid;
	mnl_nlmsg_put_extra_header(h, sizeof(struct nfgenmsg));
	mnl_attr_put_u32(h, NFTA_GEN_ID, htonl(7));
	mnl_attr_put_u32(h, NFTA_GEN_PROC_PID, htonl(pid));
	mnl_attr_put_strz(h, NFTA_GEN_PROC_NAME, comm);
	len += NLMSG_ALIGN(h->nlmsg_len);
}

static bool own100(void *ctx, uint32_t portid)
{
	(void)ctx;
	return portid == 100;
}

Test(fwwatch, others_change_named_by_newgen)
{
	struct fwwatch_change ch = {0};
	len = 0;
	ev(NFT_MSG_DELRULE, NFPROTO_INET, 555, "moat", NFTA_RULE_CHAIN, "sandbox");
	ev(NFT_MSG_DELCHAIN, NFPROTO_INET, 555, "moat", NFTA_CHAIN_NAME, "sandbox");
	ev(NFT_MSG_DELSETELEM, NFPROTO_INET, 555, "moat", NFTA_SET_ELEM_LIST_SET, "allow4");
	gen(555, 4242, "nft");
	fwwatch_parse(buf, len, own100, NULL, &ch);
	cr_assert_eq(ch.n, 3);
	cr_assert_str_eq(ch.what, "chain inet moat sandbox deleted", "the weightiest event");
	cr_assert_eq(ch.portid, 555);
	cr_assert_eq(ch.pid, 4242);
	cr_assert_str_eq(ch.comm, "nft");
	cr_assert(!ch.want_gen);

	memset(&ch, 0, sizeof(ch));
	len = 0;
	ev(NFT_MSG_NEWSETELEM, NFPROTO_INET, 556, "moat", NFTA_SET_ELEM_LIST_SET, "allow4");
	fwwatch_parse(buf, len, own100, NULL, &ch);
	cr_assert_str_eq(ch.what, "elements of set inet moat allow4 added");
	cr_assert(ch.want_gen, "no NEWGEN yet");
	len = 0;
	gen(999, 1, "other"); /* another transaction's end does not name this one */
	gen(556, 77, "python3");
	fwwatch_parse(buf, len, own100, NULL, &ch);
	cr_assert_eq(ch.pid, 77);

	memset(&ch, 0, sizeof(ch));
	len = 0;
	ev(NFT_MSG_DELTABLE, NFPROTO_INET, 557, "moat_guard", 0, NULL);
	ev(NFT_MSG_NEWTABLE, NFPROTO_INET, 557, "moat", 0, NULL);
	fwwatch_parse(buf, len, own100, NULL, &ch);
	cr_assert_str_eq(ch.what, "table inet moat_guard deleted");
	cr_assert_eq(ch.n, 2);
}

Test(fwwatch, not_changes)
{
	struct fwwatch_change ch = {0};
	len = 0;
	ev(NFT_MSG_DELTABLE, NFPROTO_INET, 100, "moat", 0, NULL);     /* our own socket */
	ev(NFT_MSG_DELSETELEM, NFPROTO_INET, 0, "moat", 2, "allow4"); /* the kernel */
	ev(NFT_MSG_DELTABLE, NFPROTO_INET, 555, "filter", 0, NULL);   /* another table */
	ev(NFT_MSG_DELTABLE, NFPROTO_IPV4, 555, "moat", 0, NULL);     /* table ip moat */
	ev(NFT_MSG_DELTABLE, NFPROTO_INET, 555, "moatx", 0, NULL);
	ev(NFT_MSG_DELTABLE, NFPROTO_INET, 555, NULL, 0, NULL); /* no name */
	gen(100, 1, "moat-fw");
	fwwatch_parse(buf, len, own100, NULL, &ch);
	cr_assert_eq(ch.n, 0);
	cr_assert_eq(ch.what[0], '\0');
	cr_assert(!ch.want_gen);

	/* A message cut short: the walk stops, what came before counts. */
	len = 0;
	ev(NFT_MSG_DELRULE, NFPROTO_INET, 555, "moat", NFTA_RULE_CHAIN, "host");
	size_t first = len;
	ev(NFT_MSG_DELTABLE, NFPROTO_INET, 555, "moat", 0, NULL);
	fwwatch_parse(buf, first + 8, own100, NULL, &ch);
	cr_assert_eq(ch.n, 1);
	cr_assert_str_eq(ch.what, "a rule of chain inet moat host deleted");
	memset(&ch, 0, sizeof(ch));
	fwwatch_parse(buf, 3, NULL, NULL, &ch);
	cr_assert_eq(ch.n, 0);
}
