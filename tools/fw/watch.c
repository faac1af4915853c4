/* watch.c owns moat-fw's watch on its own tables (see watch.h): the event socket and its
 * kernel-side filter of moat-fw's own sockets, and the reading of nftables events into a
 * change worth an ALERT. */
#include "watch.h"

#include "moat/err.h"
#include "nft.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/filter.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define FWWATCH_RCVBUF (4 << 20)
#define FWWATCH_FD_SCAN 1024 /* descriptors looked at for our own sockets */
#define FWWATCH_GEN_WAIT_MS 20

struct fwwatch {
	struct mnl_socket *sock;
	int fd;
	uint32_t own[FWWATCH_OWN_MAX];
	size_t nown;
	bool rescanned; /* in the current read */
};

/* --- parsing ------------------------------------------------------------------------------- */

/* The NUL-terminated string attribute of type t in h's payload, or NULL. */
static const char *fwwatch_str(const struct nlmsghdr *h, uint16_t t)
{
	const struct nlattr *a;
	mnl_attr_for_each(a, h, sizeof(struct nfgenmsg))
	{
		if (mnl_attr_get_type(a) != t)
			continue;
		const char *s = mnl_attr_get_payload(a);
		size_t n = mnl_attr_get_payload_len(a);
		return n > 0 && s[n - 1] == '\0' ? s : NULL;
	}
	return NULL;
}

static uint32_t fwwatch_u32(const struct nlmsghdr *h, uint16_t t)
{
	const struct nlattr *a;
	mnl_attr_for_each(a, h, sizeof(struct nfgenmsg))
	{
		if (mnl_attr_get_type(a) == t && mnl_attr_get_payload_len(a) == 4)
			return ntohl(mnl_attr_get_u32(a));
	}
	return 0;
}

/* What event type does, and how weighty it is; the name attribute of its object (0: none). */
static int fwwatch_kind(uint16_t type, const char **verb, const char **obj, uint16_t *name_attr)
{
	static const struct {
		uint16_t type;
		int rank;
		const char *obj, *verb;
		uint16_t name;
	} kinds[] = {
	    {NFT_MSG_DELTABLE, 6, "table", "deleted", 0},
	    {NFT_MSG_NEWTABLE, 5, "table", "created or changed", 0},
	    {NFT_MSG_DELCHAIN, 4, "chain", "deleted", NFTA_CHAIN_NAME},
	    {NFT_MSG_NEWCHAIN, 4, "chain", "added or changed", NFTA_CHAIN_NAME},
	    {NFT_MSG_DELSET, 3, "set", "deleted", NFTA_SET_NAME},
	    {NFT_MSG_NEWSET, 3, "set", "added or changed", NFTA_SET_NAME},
	    {NFT_MSG_DELRULE, 2, "a rule of chain", "deleted", NFTA_RULE_CHAIN},
	    {NFT_MSG_NEWRULE, 2, "a rule in chain", "added", NFTA_RULE_CHAIN},
	    {NFT_MSG_DELSETELEM, 1, "elements of set", "deleted", NFTA_SET_ELEM_LIST_SET},
	    {NFT_MSG_NEWSETELEM, 1, "elements of set", "added", NFTA_SET_ELEM_LIST_SET},
	};
	for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if (kinds[i].type == type) {
			*verb = kinds[i].verb;
			*obj = kinds[i].obj;
			*name_attr = kinds[i].name;
			return kinds[i].rank;
		}
	*verb = "changed";
	*obj = "an object of table";
	*name_attr = 0;
	return 0;
}

/* One event of another socket about table (one of ours): counted, and described when it is the
 * weightiest so far. */
static void fwwatch_change_add(const struct nlmsghdr *h, uint16_t type, const char *table,
                               struct fwwatch_change *ch)
{
	const char *verb, *obj;
	uint16_t na;
	int rank = fwwatch_kind(type, &verb, &obj, &na);
	const char *name = na ? fwwatch_str(h, na) : NULL;
	if (ch->n++ == 0) {
		ch->portid = h->nlmsg_pid;
		ch->want_gen = true;
		ch->rank = -1;
	}
	if (rank <= ch->rank)
		return;
	ch->rank = rank;
	if (na == 0)
		snprintf(ch->what, sizeof(ch->what), "%s inet %s %s", obj, table, verb);
	else
		snprintf(ch->what, sizeof(ch->what), "%s inet %s %s %s", obj, table,
		         name ? name : "?", verb);
}

void fwwatch_parse(const void *buf, size_t len, bool (*own)(void *ctx, uint32_t portid), void *ctx,
                   struct fwwatch_change *ch)
{
	int rest = (int)len;
	for (const struct nlmsghdr *h = buf; mnl_nlmsg_ok(h, rest); h = mnl_nlmsg_next(h, &rest)) {
		if (NFNL_SUBSYS_ID(h->nlmsg_type) != NFNL_SUBSYS_NFTABLES ||
		    h->nlmsg_len < NLMSG_HDRLEN + sizeof(struct nfgenmsg) || h->nlmsg_pid == 0)
			continue;
		uint16_t type = NFNL_MSG_TYPE(h->nlmsg_type);
		if (type == NFT_MSG_NEWGEN) {
			/* The end of a transaction: it names the process behind the change. */
			if (ch->want_gen && h->nlmsg_pid == ch->portid) {
				const char *comm = fwwatch_str(h, NFTA_GEN_PROC_NAME);
				ch->pid = fwwatch_u32(h, NFTA_GEN_PROC_PID);
				snprintf(ch->comm, sizeof(ch->comm), "%s", comm ? comm : "?");
				ch->want_gen = false;
			}
			continue;
		}
		const struct nfgenmsg *g = mnl_nlmsg_get_payload(h);
		const char *table = fwwatch_str(h, 1); /* NFTA_*_TABLE and NFTA_TABLE_NAME are 1 */
		if (g->nfgen_family != NFPROTO_INET || !table ||
		    (strcmp(table, FWNFT_TABLE) != 0 && strcmp(table, FWNFT_GUARD) != 0))
			continue;
		if (own && own(ctx, h->nlmsg_pid))
			continue;
		fwwatch_change_add(h, type, table, ch);
	}
}

/* --- the socket ---------------------------------------------------------------------------- */

/* The port ids of this process's NETLINK_NETFILTER sockets but the watch's own. */
static void fwwatch_scan(struct fwwatch *w)
{
	w->nown = 0;
	for (int fd = 0; fd < FWWATCH_FD_SCAN && w->nown < FWWATCH_OWN_MAX; fd++) {
		int dom = 0, proto = 0;
		socklen_t l = sizeof(dom);
		if (fd == w->fd || getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) != 0 ||
		    dom != AF_NETLINK)
			continue;
		l = sizeof(proto);
		struct sockaddr_nl sa;
		socklen_t sl = sizeof(sa);
		if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &l) != 0 ||
		    proto != NETLINK_NETFILTER ||
		    getsockname(fd, (struct sockaddr *)&sa, &sl) != 0 || sa.nl_pid == 0)
			continue;
		w->own[w->nown++] = sa.nl_pid;
	}
}

/* The kernel-side filter: an event whose first message comes from one of our sockets (all the
 * messages of one buffer come from one transaction) or from the kernel is not delivered. */
static int fwwatch_filter(struct fwwatch *w)
{
	struct sock_filter f[FWWATCH_OWN_MAX + 4];
	size_t n = 0, k = w->nown + 1; /* the port ids to drop: ours and 0 */
	f[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
	                                      offsetof(struct nlmsghdr, nlmsg_pid));
	for (size_t i = 0; i < k; i++) {
		/* BPF loads in network order; the header is in host order. */
		uint32_t p = htonl(i < w->nown ? w->own[i] : 0);
		f[n++] =
		    (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, p, (uint8_t)(k - i), 0);
	}
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0xffffffffu);
	f[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0);
	struct sock_fprog prog = {.len = (unsigned short)n, .filter = f};
	return setsockopt(w->fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) == 0 ? 0
	                                                                                 : MOAT_EIO;
}

static bool fwwatch_is_own(void *ctx, uint32_t portid)
{
	struct fwwatch *w = ctx;
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < w->nown; i++)
			if (w->own[i] == portid)
				return true;
		/* Not known: maybe libnftables reopened its socket. Look once per read. */
		if (pass || w->rescanned)
			return false;
		fwwatch_scan(w);
		w->rescanned = true;
		fwwatch_filter(w);
	}
	return false;
}

struct fwwatch *fwwatch_open(char *err, size_t errlen)
{
	struct fwwatch *w = calloc(1, sizeof(*w));
	int grp = NFNLGRP_NFTABLES, sz = FWWATCH_RCVBUF;
	if (!w) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	w->sock = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (!w->sock || mnl_socket_bind(w->sock, 0, MNL_SOCKET_AUTOPID) < 0) {
		snprintf(err, errlen, "netlink socket: %s", strerror(errno));
		fwwatch_close(w);
		return NULL;
	}
	w->fd = mnl_socket_get_fd(w->sock);
	/* A burst of someone else's events must not overflow it (SO_RCVBUFFORCE needs
	 * CAP_NET_ADMIN, which moat-fw keeps). */
	if (setsockopt(w->fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) < 0)
		setsockopt(w->fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	/* The filter before the subscription: no event of ours ever arrives. */
	fwwatch_scan(w);
	if (fwwatch_filter(w) < 0 ||
	    mnl_socket_setsockopt(w->sock, NETLINK_ADD_MEMBERSHIP, &grp, sizeof(grp)) < 0) {
		snprintf(err, errlen, "subscribing to nftables events: %s", strerror(errno));
		fwwatch_close(w);
		return NULL;
	}
	return w;
}

void fwwatch_close(struct fwwatch *w)
{
	if (!w)
		return;
	if (w->sock)
		mnl_socket_close(w->sock);
	free(w);
}

int fwwatch_fd(const struct fwwatch *w)
{
	return w ? w->fd : -1;
}

int fwwatch_read(struct fwwatch *w, struct fwwatch_change *ch)
{
	static uint8_t buf[1 << 16];
	bool waited = false;
	memset(ch, 0, sizeof(*ch));
	w->rescanned = false;
	for (;;) {
		ssize_t n = recv(w->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n > 0) {
			fwwatch_parse(buf, (size_t)n, fwwatch_is_own, w, ch);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == ENOBUFS) {
			ch->lost = true;
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
			return MOAT_EIO;
		if (!ch->want_gen || waited)
			break;
		/* The transaction's NEWGEN is queued right after its events. */
		struct pollfd p = {.fd = w->fd, .events = POLLIN};
		poll(&p, 1, FWWATCH_GEN_WAIT_MS);
		waited = true;
	}
	return ch->n || ch->lost ? 1 : 0;
}
