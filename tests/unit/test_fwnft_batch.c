/* Unit tests for moat-fw's netlink element batches (tools/fw/nft_batch.c), without a kernel: the
 * key bytes of every set kind in both placements (nftables' concatenation layout), bad elements
 * refused, and the batch itself parsed back with libnftnl: begin/end markers, one add per set,
 * delete + add again for refreshed elements only, timeouts in milliseconds, ACK flags, messages
 * split at FWNFT_MSG_ELEMS and transactions at FWNFT_TXN_ELEMS. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <endian.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <stdlib.h>
#include <string.h>

#include "moat/err.h"
#include "nft_batch.h"

static struct fwnft_elem EL(const char *src, const char *dst, uint8_t proto, uint16_t port,
                            uint64_t timeout, bool refresh) {
	struct fwnft_elem e = {
	    .proto = proto, .port = port, .timeout = timeout, .refresh = refresh};
	int af = strchr(dst, ':') ? AF_INET6 : AF_INET;
	e.family = af == AF_INET ? 4 : 6;
	cr_assert_eq(inet_pton(af, dst, e.dst), 1);
	if (src)
		cr_assert_eq(inet_pton(af, src, e.src), 1);
	return e;
}

static const struct fwnft_setup netns = {.placement = FWNFT_NETNS};
static const struct fwnft_setup fwd = {.placement = FWNFT_FORWARD};

Test(fwnft_batch, keys_netns)
{
	uint8_t k[FWNFT_KEY_MAX];
	const char *set;
	struct fwnft_elem e = EL(NULL, "192.0.2.80", FWNFT_PROTO_ANY, 0, 30, false);
	cr_assert_eq(fwnft_elem_key(&netns, &e, &set, k), 4);
	cr_assert_str_eq(set, "allow4");
	cr_assert_arr_eq(k, ((uint8_t[]){192, 0, 2, 80}), 4);
	e = EL(NULL, "192.0.2.80", 6, 443, 30, false);
	cr_assert_eq(fwnft_elem_key(&netns, &e, &set, k), 12);
	cr_assert_str_eq(set, "port4");
	/* ipv4_addr . inet_proto . inet_service: 4 + (1 padded to 4) + (2 padded to 4) */
	cr_assert_arr_eq(k, ((uint8_t[]){192, 0, 2, 80, 6, 0, 0, 0, 0x01, 0xbb, 0, 0}), 12);
	e = EL(NULL, "2001:db8::80", 17, 53, 30, false);
	cr_assert_eq(fwnft_elem_key(&netns, &e, &set, k), 24);
	cr_assert_str_eq(set, "port6");
	cr_assert_eq(k[16], 17);
	cr_assert_eq(k[20], 0);
	cr_assert_eq(k[21], 53);
	e = EL(NULL, "2001:db8::80", FWNFT_PROTO_ECHO, 0, 30, false);
	cr_assert_eq(fwnft_elem_key(&netns, &e, &set, k), 16);
	cr_assert_str_eq(set, "echo6");
}

Test(fwnft_batch, keys_forward)
{
	uint8_t k[FWNFT_KEY_MAX];
	const char *set;
	struct fwnft_elem e = EL("10.9.0.7", "192.0.2.80", 6, 80, 30, false);
	cr_assert_eq(fwnft_elem_key(&fwd, &e, &set, k), 16);
	cr_assert_str_eq(set, "port4");
	cr_assert_arr_eq(k, ((uint8_t[]){10, 9, 0, 7, 192, 0, 2, 80, 6, 0, 0, 0, 0, 80, 0, 0}), 16);
	e = EL("2001:db8:9::7", "2001:db8::80", 6, 80, 30, false);
	cr_assert_eq(fwnft_elem_key(&fwd, &e, &set, k), FWNFT_KEY_MAX);
	cr_assert_eq(k[15], 7, "source first");
	cr_assert_eq(k[31], 0x80, "then the destination");
	e = EL("10.9.0.7", "192.0.2.80", FWNFT_PROTO_ECHO, 0, 30, false);
	cr_assert_eq(fwnft_elem_key(&fwd, &e, &set, k), 8);
	cr_assert_str_eq(set, "echo4");
	e = EL("10.9.0.7", "192.0.2.80", FWNFT_PROTO_ANY, 0, 30, false);
	cr_assert_eq(fwnft_elem_key(&fwd, &e, &set, k), 8);
	cr_assert_str_eq(set, "allow4");
}

Test(fwnft_batch, bad_elements)
{
	uint8_t k[FWNFT_KEY_MAX];
	const char *set;
	struct fwnft_elem bad[] = {
	    EL(NULL, "192.0.2.1", 6, 0, 30, false),                /* TCP without a port */
	    EL(NULL, "192.0.2.1", FWNFT_PROTO_ANY, 80, 30, false), /* every port with a port */
	    EL(NULL, "192.0.2.1", FWNFT_PROTO_ECHO, 1, 30, false),
	    EL(NULL, "192.0.2.1", 1, 0, 30, false), EL(NULL, "192.0.2.1", 132, 80, 30, false)};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(fwnft_elem_key(&netns, &bad[i], &set, k), MOAT_EINVAL, "case %zu", i);
	struct fwnft_elem e = EL(NULL, "192.0.2.1", 6, 80, 30, false);
	e.family = 5;
	cr_expect_eq(fwnft_elem_key(&netns, &e, &set, k), MOAT_EINVAL);
	struct fwnft_batch b = {0};
	cr_expect_eq(fwnft_batch_elems(&netns, bad, 1, &b), MOAT_EINVAL);
	e = EL(NULL, "192.0.2.1", 6, 80, 0, false);
	cr_expect_eq(fwnft_batch_elems(&netns, &e, 1, &b), MOAT_EINVAL, "timeout 0");
	cr_expect_eq(b.len, 0, "nothing built for a refused batch");
	fwnft_batch_free(&b);
}

/* One message of a batch, as read back. */
struct msg {
	uint16_t type; /* NFNL_MSG_BATCH_BEGIN/END or NFT_MSG_* */
	bool ack;
	char set[16];
	size_t nelem;
	uint8_t key0[FWNFT_KEY_MAX];
	uint32_t key0_len;
	uint64_t timeout0; /* ms, 0 when absent */
};

/* Read a NEWSETELEM/DELSETELEM message with libmnl (libnftnl's own parser refuses the element
 * nests its builder numbers 1..n; the kernel takes any nest type). */
static void parse_elems(const struct nlmsghdr *h, struct msg *m)
{
	const struct nlattr *a;
	mnl_attr_for_each(a, h, sizeof(struct nfgenmsg))
	{
		switch (mnl_attr_get_type(a)) {
		case NFTA_SET_ELEM_LIST_TABLE:
			cr_assert_str_eq(mnl_attr_get_str(a), "moat");
			break;
		case NFTA_SET_ELEM_LIST_SET:
			snprintf(m->set, sizeof(m->set), "%s", mnl_attr_get_str(a));
			break;
		case NFTA_SET_ELEM_LIST_ELEMENTS: {
			const struct nlattr *el;
			mnl_attr_for_each_nested(el, a)
			{
				if (m->nelem++)
					continue;
				const struct nlattr *f;
				mnl_attr_for_each_nested(f, el)
				{
					if (mnl_attr_get_type(f) == NFTA_SET_ELEM_TIMEOUT)
						m->timeout0 = be64toh(mnl_attr_get_u64(f));
					if (mnl_attr_get_type(f) != NFTA_SET_ELEM_KEY)
						continue;
					const struct nlattr *v = mnl_attr_get_payload(f);
					cr_assert_eq(mnl_attr_get_type(v), NFTA_DATA_VALUE);
					m->key0_len = mnl_attr_get_payload_len(v);
					cr_assert_leq(m->key0_len, FWNFT_KEY_MAX);
					memcpy(m->key0, mnl_attr_get_payload(v), m->key0_len);
				}
			}
			break;
		}
		}
	}
}

static size_t parse_batch(const struct fwnft_batch *b, struct msg *out, size_t cap)
{
	size_t n = 0;
	int len = (int)b->len;
	for (const struct nlmsghdr *h = (const struct nlmsghdr *)b->buf; mnl_nlmsg_ok(h, len);
	     h = mnl_nlmsg_next(h, &len)) {
		cr_assert_lt(n, cap);
		struct msg *m = &out[n++];
		memset(m, 0, sizeof(*m));
		uint16_t t = h->nlmsg_type;
		m->type = (t == NFNL_MSG_BATCH_BEGIN || t == NFNL_MSG_BATCH_END) ? t : (t & 0xff);
		m->ack = h->nlmsg_flags & NLM_F_ACK;
		if (m->type != NFT_MSG_NEWSETELEM && m->type != NFT_MSG_DELSETELEM)
			continue;
		parse_elems(h, m);
	}
	cr_assert_eq(len, 0, "trailing bytes in the batch");
	return n;
}

Test(fwnft_batch, add_delete_add)
{
	struct fwnft_elem e[] = {
	    EL(NULL, "192.0.2.80", 6, 80, 31, true),                 /* port4, refreshed */
	    EL(NULL, "192.0.2.80", FWNFT_PROTO_ECHO, 0, 31, true),   /* echo4, refreshed */
	    EL(NULL, "2001:db8::80", FWNFT_PROTO_ANY, 0, 61, false), /* allow6 */
	    EL(NULL, "192.0.2.81", 17, 123, 3601, false),            /* port4 */
	};
	struct fwnft_batch b = {0};
	cr_assert_eq(fwnft_batch_elems(&netns, e, 4, &b), 0);
	struct msg m[32];
	size_t n = parse_batch(&b, m, 32);
	cr_assert_eq(n, 9);
	cr_assert_eq(b.ntxn, 1);
	cr_assert_eq(b.txn_end[0], b.len);
	cr_assert_eq(m[0].type, NFNL_MSG_BATCH_BEGIN);
	cr_assert_not(m[0].ack);
	/* add: allow6, port4 (2), echo4 */
	/* add all (allow6, port4 x2, echo4), delete the refreshed ones (no timeout), add them again
	 */
	static const struct {
		uint16_t type;
		const char *set;
		size_t nelem;
		uint64_t timeout0;
	} want[] = {
	    {NFT_MSG_NEWSETELEM, "allow6", 1, 61000}, {NFT_MSG_NEWSETELEM, "port4", 2, 31000},
	    {NFT_MSG_NEWSETELEM, "echo4", 1, 31000},  {NFT_MSG_DELSETELEM, "port4", 1, 0},
	    {NFT_MSG_DELSETELEM, "echo4", 1, 0},      {NFT_MSG_NEWSETELEM, "port4", 1, 31000},
	    {NFT_MSG_NEWSETELEM, "echo4", 1, 31000},
	};
	for (size_t i = 0; i < 7; i++) {
		cr_assert_eq(m[i + 1].type, want[i].type, "message %zu", i + 1);
		cr_assert_str_eq(m[i + 1].set, want[i].set, "message %zu", i + 1);
		cr_assert_eq(m[i + 1].nelem, want[i].nelem, "message %zu", i + 1);
		cr_assert_eq(m[i + 1].timeout0, want[i].timeout0, "message %zu", i + 1);
	}
	cr_assert_eq(m[2].key0_len, 12);
	cr_assert_arr_eq(m[2].key0, ((uint8_t[]){192, 0, 2, 80, 6, 0, 0, 0, 0, 80, 0, 0}), 12);
	cr_assert_eq(m[8].type, NFNL_MSG_BATCH_END);
	for (size_t i = 0; i < 9; i++)
		cr_assert_eq(m[i].ack, i == 7, "message %zu: only the last one asks for an answer",
		             i);
	cr_assert_eq(b.nacks, 1);
	fwnft_batch_free(&b);
	cr_assert_eq(fwnft_batch_elems(&netns, e, 0, &b), 0);
	cr_assert_eq(b.len, 0, "no elements, no messages");
	fwnft_batch_free(&b);
}

Test(fwnft_batch, split_messages_and_transactions)
{
	enum { N = FWNFT_TXN_ELEMS + 300 };
	struct fwnft_elem *e = calloc(N, sizeof(*e));
	for (int i = 0; i < N; i++) {
		e[i] = EL("2001:db8:9::7", "2001:db8::1", 6, 1, 3600, false);
		e[i].family = 6;
		e[i].port = (uint16_t)(1 + i);
	}
	struct fwnft_batch b = {0};
	cr_assert_eq(fwnft_batch_elems(&fwd, e, N, &b), 0);
	cr_assert_eq(b.ntxn, 2);
	static struct msg m[64];
	size_t n = parse_batch(&b, m, 64);
	size_t begins = 0, adds = 0, elems = 0;
	for (size_t i = 0; i < n; i++) {
		begins += m[i].type == NFNL_MSG_BATCH_BEGIN;
		if (m[i].type == NFT_MSG_NEWSETELEM) {
			adds++;
			elems += m[i].nelem;
			cr_assert_leq(m[i].nelem, FWNFT_MSG_ELEMS);
			cr_assert_str_eq(m[i].set, "port6");
			cr_assert_eq(m[i].key0_len, FWNFT_KEY_MAX);
		}
	}
	cr_assert_eq(begins, 2);
	cr_assert_eq(elems, N);
	cr_assert_eq(adds, FWNFT_TXN_ELEMS / FWNFT_MSG_ELEMS + 2);
	fwnft_batch_free(&b);
	free(e);
}
