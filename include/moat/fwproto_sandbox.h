/* Runtime sandboxes on the firewall channel (fwproto.h, its format FWPROTO_VERSION): a root client (moat
 * run) asks moat-fw, in the forward placement, to judge one more sandbox source range arriving
 * on one interface, or to forget one it added earlier together with every grant bound to a
 * source in it. moat-fw answers each request with one SANDBOX_REPLY. The types are 16..18, far
 * from GRANT/ACK's, and a moat-fw that does not know them answers with a BADMSG ACK (it reads
 * every other message as a GRANT): a client tells the two apart by the type byte.
 *
 *   SANDBOX_ADD, SANDBOX_DEL (client -> moat-fw), 27 + ifname_len bytes:
 *     u8  version (3)      u8  type (FWPROTO_SANDBOX_ADD or _DEL)
 *     u16 flags            bit 0: grants for this sandbox may name private and shared ranges
 *                          (--sandbox ...,allow-private); every other bit 0
 *     u32 seq              echoed in the reply
 *     u8  family (4 or 6)  u8 prefix length (<= 32 or 128)
 *     16 bytes address     IPv4 in the first 4, the rest zero; host bits zero
 *     u8  ifname_len (1..15), ifname bytes [A-Za-z0-9_.-]
 *   SANDBOX_REPLY (moat-fw -> client), 10 + 19 * nres + text_len bytes:
 *     u8  version (3)      u8  type (FWPROTO_SANDBOX_REPLY)
 *     u16 status           enum fwproto_status: OK, DENIED (refused: text says why), FAILED
 *                          (the kernel or the ledger failed), BADMSG
 *     u32 seq
 *     u8  nres (0..FWPROTO_SBX_MAXRES): the addresses the sandbox may send DNS to
 *     nres x { u8 family (4 or 6); 16 bytes address; u16 port (1..65535) }
 *     u8  text_len (0..FWPROTO_SBX_TEXTMAX), text bytes (printable ASCII): why, when not OK
 * The decoders are as strict as fwproto.c's: one encoding per message, nothing trailing. */
#ifndef MOAT_FWPROTO_SANDBOX_H
#define MOAT_FWPROTO_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FWPROTO_SANDBOX_ADD 16
#define FWPROTO_SANDBOX_DEL 17
#define FWPROTO_SANDBOX_REPLY 18
#define FWPROTO_SBX_IFNAMSIZ 16 /* IFNAMSIZ: 15 bytes and the NUL */
#define FWPROTO_SBX_MAXRES 16
#define FWPROTO_SBX_TEXTMAX 200
#define FWPROTO_SBX_MAXREQ (27 + FWPROTO_SBX_IFNAMSIZ - 1)
#define FWPROTO_SBX_MAXREPLY (10 + 19 * FWPROTO_SBX_MAXRES + FWPROTO_SBX_TEXTMAX)

struct fwproto_sandbox {
	uint8_t type; /* FWPROTO_SANDBOX_ADD or FWPROTO_SANDBOX_DEL */
	bool allow_private;
	uint32_t seq;
	uint8_t family; /* 4 or 6 */
	uint8_t bits;
	uint8_t addr[16];
	char ifname[FWPROTO_SBX_IFNAMSIZ]; /* NUL-terminated */
};

struct fwproto_resolver {
	uint8_t family; /* 4 or 6 */
	uint8_t addr[16];
	uint16_t port;
};

struct fwproto_sandbox_reply {
	uint16_t status; /* enum fwproto_status */
	uint32_t seq;
	uint8_t nres;
	struct fwproto_resolver res[FWPROTO_SBX_MAXRES];
	char text[FWPROTO_SBX_TEXTMAX + 1]; /* NUL-terminated; "" when there is nothing to say */
};

/* True when msg (len bytes) is of the channel's version and one of the two request types: what moat-fw
 * hands to its sandbox handler instead of reading a GRANT. */
bool fwproto_is_sandbox(const uint8_t *msg, size_t len);

/* Encode into out[cap]: the length, or MOAT_EINVAL (a field the format cannot carry) or
 * MOAT_ESPACE. */
int fwproto_sandbox_encode(const struct fwproto_sandbox *s, uint8_t *out, size_t cap);
int fwproto_sandbox_reply_encode(const struct fwproto_sandbox_reply *r, uint8_t *out, size_t cap);

/* Decode one message: 0, or MOAT_EFORMAT with the caller's struct untouched. */
int fwproto_sandbox_decode(const uint8_t *msg, size_t len, struct fwproto_sandbox *s);
int fwproto_sandbox_reply_decode(const uint8_t *msg, size_t len, struct fwproto_sandbox_reply *r);

#endif
