/* The firewall channel between moatd and moat-fw: moatd asks for a grant (these addresses may be
 * reached by this sandbox for this long) and releases the DNS answer only after moat-fw has put
 * them into the kernel's allow set and acknowledged. Both programs include this header; the
 * encoders and decoders live in resolver/wire/fwproto.c (pure, bounds-checked, no allocation).
 *
 * Transport: a Unix SOCK_SEQPACKET socket (message boundaries kept, ordered, reliable) that
 * moat-fw listens on. One message per packet, all integers big-endian.
 *
 * Format version 3 (version 1 had no port list, version 2 no HELLO; the two sides must run the
 * same version, and a message of another version is refused: BADMSG, or a dropped channel on
 * moatd's side).
 *   HELLO (moat-fw -> moatd), the first message on every connection moat-fw admits (a peer it
 *   refuses is closed before any message, so "closed before HELLO" means "not admitted"),
 *   4 + 18 * nrange bytes:
 *     u8  version (3)       u8  type (FWPROTO_HELLO)   u8  placement (1 netns, 2 forward)
 *     u8  nrange (0..FWPROTO_MAXRANGE; always 0 in the netns placement)
 *     nrange x { u8 family (4 or 6); u8 bits (0..32 or 0..128); 16 bytes address (IPv4 in the
 *                first 4; every bit past bits zero) }
 *   The ranges are the sandbox sources moat-fw takes grants for (--sandbox, forward placement):
 *   moatd warns when a runtime agent's clients lie outside them. In the netns placement every
 *   client of the namespace is covered and no range is sent.
 *   GRANT (moatd -> moat-fw), 13 + agent_len + 17 + 1 + 3 * nport + 17 * naddr bytes:
 *     u8  version (3)       u8  type (FWPROTO_GRANT)   u16 naddr (1..FWPROTO_MAXADDR)
 *     u32 seq (echoed)      u32 lifetime (seconds asked: the answer's lowest TTL)
 *     u8  agent_len (1..63) agent name bytes
 *     u8  client family (4 or 6, or 0 when unknown) + 16 bytes client address (IPv4 in the first 4)
 *     u8  nport (0 = every port and protocol; else 1..FWPROTO_MAXPORT)
 *     nport x { u8 proto (6 TCP or 17 UDP); u16 port (1..65535) }, strictly increasing by
 *              (proto, port): the ports of the allowlist rule that allowed the name; they apply
 *              to every address of the grant
 *     naddr x { u8 family (4 or 6); 16 bytes address (IPv4 in the first 4) }
 *   ACK (moat-fw -> moatd), 16 bytes:
 *     u8  version (3)       u8  type (FWPROTO_ACK)     u16 status (enum fwproto_status)
 *     u32 seq               u32 lifetime (seconds granted after moat-fw's min/max clamp)
 *     u32 reserved (0)
 * moatd tells the client no TTL longer than the granted lifetime. Any status but FWPROTO_OK
 * means the answer is not released (SERVFAIL: fail closed).
 * Types 16..18 (runtime sandboxes, sent by a root client: moat run) are in fwproto_sandbox.h. */
#ifndef MOAT_FWPROTO_H
#define MOAT_FWPROTO_H

#include <stddef.h>
#include <stdint.h>

#define FWPROTO_VERSION 3
#define FWPROTO_MAXADDR 64
#define FWPROTO_MAXPORT 16
#define FWPROTO_AGENT_MAX 63
#define FWPROTO_MAXMSG                                                                             \
	(12 + 1 + FWPROTO_AGENT_MAX + 17 + 1 + 3 * FWPROTO_MAXPORT + 17 * FWPROTO_MAXADDR)
#define FWPROTO_ACKLEN 16
#define FWPROTO_MAXRANGE 64
#define FWPROTO_HELLO_MAXLEN (4 + 18 * FWPROTO_MAXRANGE)

enum fwproto_type {
	FWPROTO_GRANT = 1,
	FWPROTO_ACK = 2,
	FWPROTO_HELLO = 3,
};

enum fwproto_placement {
	FWPROTO_NETNS = 1,   /* inside the sandbox's namespace: every client there is covered */
	FWPROTO_FORWARD = 2, /* on the host: only the clients in the HELLO's ranges are covered */
};

enum fwproto_status {
	FWPROTO_OK = 0,
	FWPROTO_DENIED = 1, /* an address is in the always-deny ranges: nothing was granted */
	FWPROTO_FAILED = 2, /* the kernel refused the update or the ledger could not be written */
	FWPROTO_BADMSG = 3, /* the request could not be read */
};

struct fwproto_addr {
	uint8_t family; /* 4 or 6 */
	uint8_t addr[16];
};

struct fwproto_port {
	uint8_t proto; /* 6 (TCP) or 17 (UDP) */
	uint16_t port; /* 1..65535 */
};

struct fwproto_grant {
	uint32_t seq;
	uint32_t lifetime;
	char agent[FWPROTO_AGENT_MAX + 1]; /* NUL-terminated */
	struct fwproto_addr client;        /* family 0: unknown */
	uint8_t nport;                     /* 0: every port and protocol */
	struct fwproto_port port[FWPROTO_MAXPORT];
	uint16_t naddr;
	struct fwproto_addr addr[FWPROTO_MAXADDR];
};

struct fwproto_ack {
	uint16_t status;
	uint32_t seq;
	uint32_t lifetime;
};

/* A sandbox source range of a HELLO: bits count within the family; IPv4 in addr[0..3]. */
struct fwproto_range {
	uint8_t family; /* 4 or 6 */
	uint8_t bits;
	uint8_t addr[16];
};

struct fwproto_hello {
	uint8_t placement; /* enum fwproto_placement */
	uint8_t nrange;    /* 0 in the netns placement */
	struct fwproto_range range[FWPROTO_MAXRANGE];
};

/* Encode into out[cap]; return the length or MOAT_ESPACE/MOAT_EINVAL. */
int fwproto_grant_encode(const struct fwproto_grant *g, uint8_t *out, size_t cap);
int fwproto_ack_encode(const struct fwproto_ack *a, uint8_t *out, size_t cap);
int fwproto_hello_encode(const struct fwproto_hello *h, uint8_t *out, size_t cap);

/* Decode one message; return 0 or MOAT_EFORMAT (wrong version, type, length or field). */
int fwproto_grant_decode(const uint8_t *msg, size_t len, struct fwproto_grant *g);
int fwproto_ack_decode(const uint8_t *msg, size_t len, struct fwproto_ack *a);
int fwproto_hello_decode(const uint8_t *msg, size_t len, struct fwproto_hello *h);

const char *fwproto_status_str(uint16_t status);

#endif
