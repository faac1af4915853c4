/* moat-fw's grant writes: allow-set elements built as one netlink batch (libnftnl + libmnl) and
 * sent straight to the kernel, without libnftables' text parser (which cost ~0.6 ms a grant).
 *
 * The sets (defined in nft.c's start-up ruleset), per family f = 4 or 6:
 *   allow<f>  grants without ports: every port and protocol   key [src .] dst
 *   port<f>   grants with ports                               key [src .] dst . proto . port
 *   echo<f>   the addresses of grants with ports, for ICMP echo   key [src .] dst
 * ICMP echo follows any grant of an address: echo requests are looked up in allow<f> and in
 * echo<f>, so a grant without ports (the common case) writes one element, not two.
 * src only in the forward placement. Key fields are laid out as nftables lays out a
 * concatenation: each field in network byte order, padded with zeros to a multiple of 4 bytes.
 *
 * Building the batch is pure (unit-tested without CAP_NET_ADMIN); sending it is fwnft_nl_send. */
#ifndef MOAT_FW_NFT_BATCH_H
#define MOAT_FW_NFT_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nft.h"

#define FWNFT_PROTO_ANY 0    /* the element goes to allow<f> */
#define FWNFT_PROTO_ECHO 255 /* the element goes to echo<f> (255 is reserved by IANA) */
#define FWNFT_KEY_MAX 40     /* forward IPv6 port key: 16 + 16 + 4 + 4 */
#define FWNFT_MSG_ELEMS 256  /* elements per netlink message (the element nest is 16-bit) */
#define FWNFT_TXN_ELEMS 2048 /* elements per transaction (bounded socket buffer) */

/* One allow-set element to write. src is ignored in the netns placement. */
struct fwnft_elem {
	uint8_t family; /* 4 or 6 */
	uint8_t proto;  /* FWNFT_PROTO_ANY, 6 (TCP), 17 (UDP) or FWNFT_PROTO_ECHO */
	uint16_t port;  /* with proto 6 or 17: 1..65535; else 0 */
	uint8_t src[16];
	uint8_t dst[16];
	uint64_t timeout; /* seconds, >= 1 */
	bool refresh;     /* the new timeout is later than what the set may hold: re-create it */
};

/* The name of the set e belongs to ("allow4", "port6", ...) and its key bytes in key[]
 * (FWNFT_KEY_MAX). Returns the key length, or MOAT_EINVAL for a bad element. Pure. */
int fwnft_elem_key(const struct fwnft_setup *s, const struct fwnft_elem *e, const char **set,
                   uint8_t *key);

/* Netlink messages of one or more transactions, back to back. Zero-initialise; free with
 * fwnft_batch_free. ntxn counts transactions; in each, only the last message before the end
 * marker asks for an answer (nacks in all: one per transaction). */
struct fwnft_batch {
	uint8_t *buf;
	size_t len, cap;
	size_t last_msg; /* offset of the last element message built */
	size_t nacks;
	size_t ntxn;
	size_t txn_end[64]; /* byte offset where each transaction ends (ntxn of them) */
};
void fwnft_batch_free(struct fwnft_batch *b);

/* Append the messages that put e[0..n) into their sets: per transaction (at most FWNFT_TXN_ELEMS
 * elements), one add per set with every element, then for the refreshed ones a delete and an add
 * again with the new timeout (re-adding an existing element does not reliably reset its timeout
 * on every kernel; the first add makes the delete safe when the element already expired). An
 * element's three steps are always in one transaction. Elements must be unique per key. Returns
 * 0, MOAT_EINVAL (bad element) or MOAT_ENOMEM/MOAT_ELIMIT. */
int fwnft_batch_elems(const struct fwnft_setup *s, const struct fwnft_elem *e, size_t n,
                      struct fwnft_batch *b);

/* A netlink socket to nf_tables, in the network namespace current at open. */
struct fwnft_nl;
struct fwnft_nl *fwnft_nl_open(void);
void fwnft_nl_close(struct fwnft_nl *nl);

/* Send every transaction of b and wait for the kernel's answer to each message. Returns 0, or
 * MOAT_EIO with the kernel's error in err (a failed transaction is applied not at all; earlier
 * transactions of the same batch stay applied). */
int fwnft_nl_send(struct fwnft_nl *nl, const struct fwnft_batch *b, char *err, size_t errlen);

#endif
