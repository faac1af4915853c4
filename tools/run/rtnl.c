/* rtnl.c owns the run's links, made with rtnetlink (libmnl, which moat-fw's netlink batches
 * already use): the veth pair (moat-N here, eth0 inside the sandbox's namespace, created there
 * directly so no sandbox interface ever exists in this namespace), their addresses, the links
 * up, the sandbox's default route through the host end, and the link's deletion at the end.
 * Netlink rather than `ip`: one socket per namespace and a few messages, no process started. */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define RTNL_BUF 8192

/* A netlink route socket in the namespace of fd netns (-1: the current one). */
static struct mnl_socket *rtnl_open(int netns)
{
	int back = -1;
	if (netns >= 0) {
		back = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
		if (back < 0 || setns(netns, CLONE_NEWNET) != 0) {
			if (back >= 0)
				close(back);
			return NULL;
		}
	}
	struct mnl_socket *nl = mnl_socket_open(NETLINK_ROUTE);
	if (nl && mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		mnl_socket_close(nl);
		nl = NULL;
	}
	if (back >= 0) {
		/* The socket stays in the namespace it was made in. */
		if (setns(back, CLONE_NEWNET) != 0) {
			if (nl)
				mnl_socket_close(nl);
			nl = NULL;
		}
		close(back);
	}
	return nl;
}

/* Send one request and wait for its answer; cb (may be NULL) reads a data reply. 0 or -errno. */
static int rtnl_talk(struct mnl_socket *nl, struct nlmsghdr *nlh, mnl_cb_t cb, void *data)
{
	char buf[RTNL_BUF];
	unsigned seq = (unsigned)time(NULL) ^ (unsigned)getpid();
	nlh->nlmsg_seq = seq;
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	unsigned portid = mnl_socket_get_portid(nl);
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
		if (n < 0)
			return -errno;
		int rc = mnl_cb_run(buf, (size_t)n, seq, portid, cb, data);
		if (rc < 0)
			return -errno;
		if (rc == MNL_CB_STOP)
			return 0;
	}
}

static struct nlmsghdr *rtnl_msg(char *buf, uint16_t type, uint16_t flags)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
	return nlh;
}

/* veth: NAME here, PEER in the namespace of fd peer_ns. */
static int rtnl_veth(struct mnl_socket *nl, const char *name, const char *peer, int peer_ns)
{
	char buf[RTNL_BUF];
	struct nlmsghdr *nlh = rtnl_msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	struct nlattr *info = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	struct nlattr *vp = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
	struct ifinfomsg *pm = mnl_nlmsg_put_extra_header(nlh, sizeof(*pm));
	pm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, peer);
	mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)peer_ns);
	mnl_attr_nest_end(nlh, vp);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, info);
	return rtnl_talk(nl, nlh, NULL, NULL);
}

static int rtnl_up(struct mnl_socket *nl, int ifindex)
{
	char buf[RTNL_BUF];
	struct nlmsghdr *nlh = rtnl_msg(buf, RTM_NEWLINK, 0);
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	ifm->ifi_index = ifindex;
	ifm->ifi_flags = IFF_UP;
	ifm->ifi_change = IFF_UP;
	return rtnl_talk(nl, nlh, NULL, NULL);
}

static int rtnl_addr4(struct mnl_socket *nl, int ifindex, const uint8_t a[4], unsigned bits)
{
	char buf[RTNL_BUF];
	struct nlmsghdr *nlh = rtnl_msg(buf, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE);
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = (unsigned char)bits;
	ifa->ifa_index = (unsigned)ifindex;
	mnl_attr_put(nlh, IFA_LOCAL, 4, a);
	mnl_attr_put(nlh, IFA_ADDRESS, 4, a);
	return rtnl_talk(nl, nlh, NULL, NULL);
}

static int rtnl_default4(struct mnl_socket *nl, const uint8_t gw[4])
{
	char buf[RTNL_BUF];
	struct nlmsghdr *nlh = rtnl_msg(buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = AF_INET;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_BOOT;
	rtm->rtm_scope = RT_SCOPE_UNIVERSE;
	rtm->rtm_type = RTN_UNICAST;
	mnl_attr_put(nlh, RTA_GATEWAY, 4, gw);
	return rtnl_talk(nl, nlh, NULL, NULL);
}

static int rtnl_index_cb(const struct nlmsghdr *nlh, void *data)
{
	const struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);
	*(int *)data = ifm->ifi_index;
	return MNL_CB_OK;
}

static int rtnl_index(struct mnl_socket *nl, const char *name)
{
	char buf[RTNL_BUF];
	/* With NLM_F_ACK the answer is the link, then the ack that ends the wait. */
	struct nlmsghdr *nlh = rtnl_msg(buf, RTM_GETLINK, 0);
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	int index = -1;
	if (rtnl_talk(nl, nlh, rtnl_index_cb, &index) < 0)
		return -1;
	return index;
}

int rtnl_ifindex(int netns, const char *name)
{
	struct mnl_socket *nl = rtnl_open(netns);
	if (!nl)
		return -1;
	int index = rtnl_index(nl, name);
	mnl_socket_close(nl);
	return index;
}

/* The sandbox's side: lo and eth0 up, its address, the default route through the host end. */
static int rtnl_sandbox_side(struct run_state *st)
{
	struct mnl_socket *nl = rtnl_open(st->sbx_ns);
	if (!nl)
		return -errno;
	int rc, eth = rtnl_index(nl, "eth0");
	if (eth < 0)
		rc = -ENODEV;
	else if ((rc = rtnl_up(nl, 1)) == 0 && (rc = rtnl_addr4(nl, eth, st->sbx4, 30)) == 0 &&
	         (rc = rtnl_up(nl, eth)) == 0)
		rc = rtnl_default4(nl, st->host4);
	mnl_socket_close(nl);
	return rc;
}

int rtnl_setup(struct run_state *st)
{
	struct mnl_socket *nl = rtnl_open(-1);
	if (!nl) {
		run_err("netlink: %s", strerror(errno));
		return -1;
	}
	int rc = rtnl_veth(nl, st->ifname, "eth0", st->sbx_ns);
	if (rc == 0) {
		st->made_link = true;
		int idx = rtnl_index(nl, st->ifname);
		rc = idx < 0 ? -ENODEV : rtnl_addr4(nl, idx, st->host4, 30);
		if (rc == 0)
			rc = rtnl_up(nl, idx);
	}
	mnl_socket_close(nl);
	if (rc == 0)
		rc = rtnl_sandbox_side(st);
	if (rc < 0)
		run_err("links: %s", strerror(-rc));
	return rc < 0 ? -1 : 0;
}

int rtnl_link_del(const char *name)
{
	struct mnl_socket *nl = rtnl_open(-1);
	if (!nl)
		return -1;
	char buf[RTNL_BUF];
	struct nlmsghdr *nlh = rtnl_msg(buf, RTM_DELLINK, 0);
	struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
	ifm->ifi_family = AF_UNSPEC;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	int rc = rtnl_talk(nl, nlh, NULL, NULL);
	mnl_socket_close(nl);
	return rc == 0 || rc == -ENODEV ? 0 : -1;
}
