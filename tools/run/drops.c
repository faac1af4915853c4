/* drops.c owns what the firewall dropped, as it happens: the run's own table marks the
 * sandbox's new flows for nftables tracing (hostnft.c) and this listens to the trace events of
 * the namespace where table inet moat judges them (NFNLGRP_NFTRACE; libnftnl reads the
 * events). An event whose verdict is a drop in table moat is one packet the firewall dropped;
 * its destination and port come from the packet's headers, which the kernel sends once per
 * traced packet (in its first event), so they are kept by trace id until the verdict comes.
 * In the system mode the namespace is shared with other runs, so only packets that arrived on
 * this run's link count (the interface comes with the headers, so those decide too). Tracing costs
 * nothing once a flow is established, and nothing at all while no one listens. */
#include "run.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <libnftnl/trace.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DROPS_IDS 512 /* packets whose headers wait for their verdict */

static struct {
	int ifindex; /* 0: every packet */
	struct {
		uint32_t id;
		uint8_t family, proto;
		uint16_t port;
		uint8_t dst[16];
		bool used;
	} pkt[DROPS_IDS];
} drops;

struct drops_job {
	int fd;
};

static int drops_open_job(void *arg)
{
	struct drops_job *j = arg;
	j->fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_NETFILTER);
	if (j->fd < 0)
		return -1;
	struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
	int grp = NFNLGRP_NFTRACE, buf = 1 << 20;
	/* A burst of traced packets must not overflow the socket (as root: past rmem_max). */
	setsockopt(j->fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
	if (bind(j->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    setsockopt(j->fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &grp, sizeof(grp)) != 0) {
		close(j->fd);
		j->fd = -1;
		return -1;
	}
	return 0;
}

int drops_open(int netns, int back, int ifindex)
{
	struct drops_job j = {-1};
	drops.ifindex = ifindex;
	memset(drops.pkt, 0, sizeof(drops.pkt));
	if (netns < 0)
		drops_open_job(&j);
	else
		run_in_netns(netns, back, drops_open_job, &j);
	return j.fd;
}

/* Destination, protocol and port of a traced packet's headers. */
static void drops_headers(const struct nftnl_trace *t, uint32_t id)
{
	uint32_t nlen = 0, tlen = 0;
	const uint8_t *nh = nftnl_trace_get_data(t, NFTNL_TRACE_NETWORK_HEADER, &nlen);
	const uint8_t *th = nftnl_trace_is_set(t, NFTNL_TRACE_TRANSPORT_HEADER)
	                        ? nftnl_trace_get_data(t, NFTNL_TRACE_TRANSPORT_HEADER, &tlen)
	                        : NULL;
	if (!nh || nlen < 20)
		return;
	unsigned slot = id % DROPS_IDS;
	memset(&drops.pkt[slot], 0, sizeof(drops.pkt[slot]));
	uint8_t version = nh[0] >> 4;
	if (version == 4) {
		drops.pkt[slot].family = 4;
		drops.pkt[slot].proto = nh[9];
		memcpy(drops.pkt[slot].dst, nh + 16, 4);
	} else if (version == 6 && nlen >= 40) {
		drops.pkt[slot].family = 6;
		drops.pkt[slot].proto = nh[6];
		memcpy(drops.pkt[slot].dst, nh + 24, 16);
	} else {
		return;
	}
	uint8_t p = drops.pkt[slot].proto;
	if (th && tlen >= 4 && (p == 6 || p == 17))
		drops.pkt[slot].port = (uint16_t)(th[2] << 8 | th[3]);
	drops.pkt[slot].id = id;
	drops.pkt[slot].used = true;
}

static bool drops_is_drop(const struct nftnl_trace *t)
{
	uint32_t type = nftnl_trace_get_u32(t, NFTNL_TRACE_TYPE);
	if (type == NFT_TRACETYPE_RULE && nftnl_trace_is_set(t, NFTNL_TRACE_VERDICT))
		return nftnl_trace_get_u32(t, NFTNL_TRACE_VERDICT) == NF_DROP;
	if (type == NFT_TRACETYPE_POLICY && nftnl_trace_is_set(t, NFTNL_TRACE_POLICY))
		return nftnl_trace_get_u32(t, NFTNL_TRACE_POLICY) == NF_DROP;
	return false;
}

static void drops_event(const struct nlmsghdr *nlh)
{
	struct nftnl_trace *t = nftnl_trace_alloc();
	if (!t || nftnl_trace_nlmsg_parse(nlh, t) < 0) {
		nftnl_trace_free(t);
		return;
	}
	/* The interface comes with the packet's headers only; later events of the same packet
	 * are known by its id. */
	uint32_t id = nftnl_trace_get_u32(t, NFTNL_TRACE_ID);
	bool mine =
	    !drops.ifindex || (nftnl_trace_is_set(t, NFTNL_TRACE_IIF) &&
	                       (int)nftnl_trace_get_u32(t, NFTNL_TRACE_IIF) == drops.ifindex);
	if (nftnl_trace_is_set(t, NFTNL_TRACE_NETWORK_HEADER) && mine)
		drops_headers(t, id);
	const char *table = nftnl_trace_get_str(t, NFTNL_TRACE_TABLE);
	unsigned slot = id % DROPS_IDS;
	if (table && strcmp(table, "moat") == 0 && drops_is_drop(t) && drops.pkt[slot].used &&
	    drops.pkt[slot].id == id) {
		summary_drop(drops.pkt[slot].family, drops.pkt[slot].dst, drops.pkt[slot].proto,
		             drops.pkt[slot].port);
		drops.pkt[slot].used = false;
	}
	nftnl_trace_free(t);
}

void drops_read(int fd)
{
	char buf[65536];
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n <= 0) {
			if (n < 0 && errno == ENOBUFS)
				summary_drop(0, NULL, 0, 0); /* lost events: said in the summary */
			if (n < 0 && (errno == EINTR || errno == ENOBUFS))
				continue;
			return;
		}
		int len = (int)n;
		for (const struct nlmsghdr *nlh = (const struct nlmsghdr *)buf;
		     mnl_nlmsg_ok(nlh, len); nlh = mnl_nlmsg_next(nlh, &len))
			if (NFNL_SUBSYS_ID(nlh->nlmsg_type) == NFNL_SUBSYS_NFTABLES &&
			    NFNL_MSG_TYPE(nlh->nlmsg_type) == NFT_MSG_TRACE)
				drops_event(nlh);
	}
}

void drops_close(int fd)
{
	if (fd >= 0)
		close(fd);
}
