/* nft_batch.c owns the per-grant writes to the kernel (layout in nft_batch.h): the key bytes of
 * each allow-set element, the netlink batch that adds (and refreshes) them, and the netlink
 * socket that sends it and collects the kernel's answer to every message.
 *
 * Why not libnftables: it parses a text command and first reads the table's sets back from the
 * kernel for every call; that was ~0.6 ms of each fresh answer. The messages here are what nft
 * itself would send for `add element` / `delete element`, built with libnftnl. */
#include "nft_batch.h"
#include "moat/bytes.h"
#include "moat/err.h"

#include <errno.h>
#include <libmnl/libmnl.h>
#include <libnftnl/common.h>
#include <libnftnl/set.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>

#define FWNFT_MSG_ROOM 65536 /* free room ensured before each message is built */

/* Sequence numbers only grow within a process, so an answer left over from an abandoned batch
 * (one that failed early) is never taken for an answer to a later one. Loop thread only. */
static uint32_t fwnft_seq;
#define FWNFT_SNDBUF (8 << 20)

/* --- keys ---------------------------------------------------------------------------------- */

int fwnft_elem_key(const struct fwnft_setup *s, const struct fwnft_elem *e, const char **set,
                   uint8_t *key)
{
	static const char *const names[3][2] = {
	    {"allow4", "allow6"}, {"port4", "port6"}, {"echo4", "echo6"}};
	if (!s || !e || (e->family != 4 && e->family != 6))
		return MOAT_EINVAL;
	int kind, fi = e->family == 6;
	if (e->proto == FWNFT_PROTO_ANY || e->proto == FWNFT_PROTO_ECHO)
		kind = e->proto == FWNFT_PROTO_ANY ? 0 : 2;
	else if ((e->proto == 6 || e->proto == 17) && e->port != 0)
		kind = 1;
	else
		return MOAT_EINVAL;
	if (kind != 1 && e->port != 0)
		return MOAT_EINVAL;
	size_t alen = e->family == 4 ? 4 : 16, n = 0;
	memset(key, 0, FWNFT_KEY_MAX);
	if (s->placement == FWNFT_FORWARD) {
		memcpy(key, e->src, alen);
		n += alen;
	}
	memcpy(key + n, e->dst, alen);
	n += alen;
	if (kind == 1) {
		key[n] = e->proto;                    /* inet_proto: one byte in a 4-byte field */
		key[n + 4] = (uint8_t)(e->port >> 8); /* inet_service: network order */
		key[n + 5] = (uint8_t)e->port;
		n += 8;
	}
	*set = names[kind][fi];
	return (int)n;
}

/* --- the batch ----------------------------------------------------------------------------- */

void fwnft_batch_free(struct fwnft_batch *b)
{
	if (!b)
		return;
	free(b->buf);
	memset(b, 0, sizeof(*b));
}

static int fwnft_batch_room(struct fwnft_batch *b)
{
	/* Room for one more message of FWNFT_MSG_ROOM bytes. */
	return grow_one(&b->buf, &b->cap, b->len + FWNFT_MSG_ROOM - 1, 1, 4 * FWNFT_MSG_ROOM) < 0
	           ? MOAT_ENOMEM
	           : 0;
}

/* One NEWSETELEM/DELSETELEM message over e[idx[0..k)] into set name. */
static int fwnft_batch_msg(struct fwnft_batch *b, const struct fwnft_setup *s,
                           const struct fwnft_elem *e, const size_t *idx, size_t k,
                           const char *name, bool del)
{
	int rc = fwnft_batch_room(b);
	if (rc)
		return rc;
	struct nftnl_set *set = nftnl_set_alloc();
	if (!set)
		return MOAT_ENOMEM;
	nftnl_set_set_str(set, NFTNL_SET_TABLE, FWNFT_TABLE);
	nftnl_set_set_str(set, NFTNL_SET_NAME, name);
	for (size_t i = 0; i < k; i++) {
		uint8_t key[FWNFT_KEY_MAX];
		const char *dummy;
		int kl = fwnft_elem_key(s, &e[idx[i]], &dummy, key);
		struct nftnl_set_elem *el = nftnl_set_elem_alloc();
		if (!el) {
			nftnl_set_free(set);
			return MOAT_ENOMEM;
		}
		nftnl_set_elem_set(el, NFTNL_SET_ELEM_KEY, key, (uint32_t)kl);
		if (!del)
			nftnl_set_elem_set_u64(el, NFTNL_SET_ELEM_TIMEOUT,
			                       e[idx[i]].timeout * 1000);
		nftnl_set_elem_add(set, el);
	}
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(
	    (char *)b->buf + b->len, del ? NFT_MSG_DELSETELEM : NFT_MSG_NEWSETELEM, NFPROTO_INET,
	    (uint16_t)(del ? 0 : NLM_F_CREATE), fwnft_seq++);
	nftnl_set_elems_nlmsg_build_payload(nlh, set);
	nftnl_set_free(set);
	b->last_msg = b->len;
	b->len += nlh->nlmsg_len;
	return 0;
}

/* Every message of one step (add all, delete refreshed, add refreshed) for e[lo..hi). */
static int fwnft_batch_step(struct fwnft_batch *b, const struct fwnft_setup *s,
                            const struct fwnft_elem *e, size_t lo, size_t hi, size_t *idx,
                            bool only_refresh, bool del)
{
	static const char *const sets[] = {"allow4", "allow6", "port4", "port6", "echo4", "echo6"};
	for (size_t si = 0; si < sizeof(sets) / sizeof(sets[0]); si++) {
		size_t k = 0;
		for (size_t i = lo; i < hi; i++) {
			uint8_t key[FWNFT_KEY_MAX];
			const char *name;
			if (only_refresh && !e[i].refresh)
				continue;
			if (fwnft_elem_key(s, &e[i], &name, key) < 0)
				return MOAT_EINVAL;
			if (strcmp(name, sets[si]) != 0)
				continue;
			idx[k++] = i;
			if (k == FWNFT_MSG_ELEMS) {
				int rc = fwnft_batch_msg(b, s, e, idx, k, sets[si], del);
				if (rc)
					return rc;
				k = 0;
			}
		}
		int rc = k ? fwnft_batch_msg(b, s, e, idx, k, sets[si], del) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

static int fwnft_batch_txn(struct fwnft_batch *b, const struct fwnft_setup *s,
                           const struct fwnft_elem *e, size_t lo, size_t hi, size_t *idx)
{
	if (b->ntxn == sizeof(b->txn_end) / sizeof(b->txn_end[0]))
		return MOAT_ELIMIT;
	if (fwnft_seq > 0xF0000000u) /* never wrap inside a transaction */
		fwnft_seq = 1;
	int rc = fwnft_batch_room(b);
	if (rc)
		return rc;
	size_t begin = b->len;
	struct nlmsghdr *nlh = nftnl_batch_begin((char *)b->buf + b->len, fwnft_seq++);
	b->len += nlh->nlmsg_len;
	rc = fwnft_batch_step(b, s, e, lo, hi, idx, false, false);
	if (rc == 0)
		rc = fwnft_batch_step(b, s, e, lo, hi, idx, true, true);
	if (rc == 0)
		rc = fwnft_batch_step(b, s, e, lo, hi, idx, true, false);
	if (rc == 0)
		rc = fwnft_batch_room(b);
	if (rc)
		return rc;
	if (b->last_msg <= begin) { /* nothing but the markers: drop them */
		b->len = begin;
		return 0;
	}
	/* Only the last message asks for an answer: the kernel answers errors anyway, and it
	 * processes a batch in order, so that answer means the whole transaction was read. */
	((struct nlmsghdr *)(b->buf + b->last_msg))->nlmsg_flags |= NLM_F_ACK;
	b->nacks++;
	nlh = nftnl_batch_end((char *)b->buf + b->len, fwnft_seq++);
	b->len += nlh->nlmsg_len;
	b->txn_end[b->ntxn++] = b->len;
	return 0;
}

int fwnft_batch_elems(const struct fwnft_setup *s, const struct fwnft_elem *e, size_t n,
                      struct fwnft_batch *b)
{
	if (!s || !b || (n && !e))
		return MOAT_EINVAL;
	for (size_t i = 0; i < n; i++) {
		uint8_t key[FWNFT_KEY_MAX];
		const char *name;
		if (e[i].timeout == 0 || fwnft_elem_key(s, &e[i], &name, key) < 0)
			return MOAT_EINVAL;
	}
	if (fwnft_seq == 0)
		fwnft_seq = (uint32_t)time(NULL) << 8;
	size_t idx[FWNFT_MSG_ELEMS > FWNFT_TXN_ELEMS ? FWNFT_MSG_ELEMS : FWNFT_TXN_ELEMS];
	int rc = 0;
	for (size_t lo = 0; lo < n && rc == 0; lo += FWNFT_TXN_ELEMS) {
		size_t hi = n - lo > FWNFT_TXN_ELEMS ? lo + FWNFT_TXN_ELEMS : n;
		rc = fwnft_batch_txn(b, s, e, lo, hi, idx);
	}
	return rc;
}

/* --- the socket ---------------------------------------------------------------------------- */

struct fwnft_nl {
	struct mnl_socket *sock;
	uint32_t portid;
};

struct fwnft_nl *fwnft_nl_open(void)
{
	struct fwnft_nl *nl = calloc(1, sizeof(*nl));
	if (!nl)
		return NULL;
	nl->sock = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (!nl->sock || mnl_socket_bind(nl->sock, 0, MNL_SOCKET_AUTOPID) < 0) {
		if (nl->sock)
			mnl_socket_close(nl->sock);
		free(nl);
		return NULL;
	}
	int fd = mnl_socket_get_fd(nl->sock), one = 1, sz = FWNFT_SNDBUF;
	/* Answers carry only the header of a failed message, and a large batch fits in one send
	 * (SO_SNDBUFFORCE needs CAP_NET_ADMIN, which moat-fw keeps; the plain one is the fallback).
	 */
	setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
	setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	/* The kernel answers while the send runs; a missing answer must not hang moat-fw. */
	struct timeval tv = {.tv_sec = 1};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	nl->portid = mnl_socket_get_portid(nl->sock);
	return nl;
}

void fwnft_nl_close(struct fwnft_nl *nl)
{
	if (nl)
		mnl_socket_close(nl->sock);
	free(nl);
}

/* Read answers to the transaction [seq_lo, seq_hi) until the one to ack_seq (its last message)
 * or an error arrives; the first error is kept in *first_err (a negative errno). MOAT_EIO when
 * no answer could be read (err says why). */
static int fwnft_nl_answers(struct fwnft_nl *nl, uint32_t seq_lo, uint32_t seq_hi, uint32_t ack_seq,
                            int *first_err, char *err, size_t errlen)
{
	static uint8_t buf[1 << 16];
	for (;;) {
		ssize_t n = mnl_socket_recvfrom(nl->sock, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* SO_RCVTIMEO (fwnft_nl_open) ends the wait for a silent kernel. */
			snprintf(err, errlen, "netlink receive: %s",
			         n == 0                                    ? "socket closed"
			         : errno == EAGAIN || errno == EWOULDBLOCK ? "no answer within 1 s"
			                                                   : strerror(errno));
			return MOAT_EIO;
		}
		int len = (int)n;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, len);
		     h = mnl_nlmsg_next(h, &len)) {
			if (h->nlmsg_seq < seq_lo || h->nlmsg_seq >= seq_hi ||
			    h->nlmsg_type != NLMSG_ERROR)
				continue; /* an answer to an earlier, abandoned batch */
			const struct nlmsgerr *me = mnl_nlmsg_get_payload(h);
			if (me->error) {
				*first_err = me->error;
				return 0; /* the transaction is aborted whatever follows */
			}
			if (h->nlmsg_seq == ack_seq)
				return 0;
		}
	}
}

int fwnft_nl_send(struct fwnft_nl *nl, const struct fwnft_batch *b, char *err, size_t errlen)
{
	if (err && errlen)
		err[0] = '\0';
	if (!nl || !b)
		return MOAT_EINVAL;
	size_t start = 0;
	for (size_t t = 0; t < b->ntxn; t++) {
		const uint8_t *p = b->buf + start;
		size_t len = b->txn_end[t] - start;
		uint32_t seq_lo = ((const struct nlmsghdr *)p)->nlmsg_seq, seq_hi = seq_lo,
		         ack_seq = 0;
		for (size_t off = 0; off < len;) {
			const struct nlmsghdr *h = (const struct nlmsghdr *)(p + off);
			if (h->nlmsg_flags & NLM_F_ACK)
				ack_seq = h->nlmsg_seq;
			seq_hi = h->nlmsg_seq + 1;
			off += NLMSG_ALIGN(h->nlmsg_len);
		}
		if (mnl_socket_sendto(nl->sock, p, len) < 0) {
			snprintf(err, errlen, "netlink send: %s", strerror(errno));
			return MOAT_EIO;
		}
		int first = 0;
		if (fwnft_nl_answers(nl, seq_lo, seq_hi, ack_seq, &first, err, errlen) < 0)
			return MOAT_EIO;
		if (first) {
			snprintf(err, errlen, "kernel refused the element batch: %s",
			         strerror(-first));
			return MOAT_EIO;
		}
		start = b->txn_end[t];
	}
	return 0;
}
