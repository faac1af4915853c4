/* The grant ledger: moat-fw's durable record of every live grant, in an LMDB environment (a
 * directory holding data.mdb and lock.mdb). After a restart moat-fw rebuilds the kernel's allow
 * sets from it, so nothing granted is lost and nothing expired comes back.
 *
 * Record format, version 2 (one database, the environment's unnamed main DB):
 *   key   (36 bytes): u8 family (4 or 6)
 *                     16 bytes sandbox source address (all zero in the netns placement; IPv4 in
 *                              the first 4 bytes, rest zero)
 *                     16 bytes destination address (IPv4 in the first 4 bytes, rest zero)
 *                     u8 proto: 0 every port, 6 TCP, 17 UDP, 255 the address's ICMP echo
 *                     u16 port, big-endian (0 unless proto is 6 or 17)
 *   value (9 + agent_len bytes): u64 expiry, unix seconds, big-endian
 *                     u8 agent_len (1..63), agent name bytes (no NUL)
 *   and one record key "version" (7 bytes) -> u32 big-endian format version (2).
 * Version 1 had 33-byte keys (no proto, no port: every port). ledger_open turns each version-1
 * record into its version-2 "every port" record, then writes the version record; a
 * ledger of a later version is refused. Records of any other shape are skipped when iterating
 * and deleted by ledger_purge.
 *
 * Writes happen in batches: ledger_batch_begin opens one write transaction, ledger_batch_put
 * adds records to it, ledger_batch_commit commits them into the shared mapping without an fsync
 * (a durable commit costs a millisecond or more on disk, on the path of every answer);
 * ledger_sync makes what was committed durable, once a second. A put only ever extends a
 * record's expiry; it never shortens one.
 *
 * Single-threaded use: one struct ledger per process, used from the thread that opened it. */
#ifndef MOAT_FW_LEDGER_H
#define MOAT_FW_LEDGER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LEDGER_VERSION 2
#define LEDGER_KEYLEN 36
#define LEDGER_KEYLEN_V1 33
#define LEDGER_AGENT_MAX 63
#define LEDGER_MAPSIZE (64u * 1024u * 1024u)

struct ledger;

struct ledger_key {
	uint8_t family; /* 4 or 6 */
	uint8_t src[16];
	uint8_t dst[16];
	uint8_t proto; /* FWNFT_PROTO_ANY (0), 6, 17 or FWNFT_PROTO_ECHO (255) */
	uint16_t port;
};

/* One live record, as handed to ledger_iterate's callback. */
struct ledger_entry {
	struct ledger_key key;
	uint64_t expiry;    /* unix seconds */
	uint64_t remaining; /* expiry - now, > 0 */
	char agent[LEDGER_AGENT_MAX + 1];
};

/* Open (creating the directory with mode 0700 if missing) the ledger in dir. On success *out
 * owns the environment; free it with ledger_close. Returns 0, MOAT_EIO (err says why) or
 * MOAT_ENOMEM. */
int ledger_open(const char *dir, struct ledger **out, char *err, size_t errlen);
void ledger_close(struct ledger *l);

/* Make committed batches durable (fsync). Commits are not synced one by one; moat-fw calls this
 * once a second and at close. Returns 0 or MOAT_EIO. */
int ledger_sync(struct ledger *l);

/* Start the one write transaction of a batch. Only one batch may be open at a time. */
int ledger_batch_begin(struct ledger *l);

/* Record key -> (expiry, agent) in the open batch unless the ledger already holds a later or equal
 * expiry for key (extend-only). *prev receives the expiry held before this put (0 if none), so the
 * caller knows whether the kernel's timeout must be refreshed. Later puts in the same batch see
 * earlier ones. agent: 1..63 bytes. Returns 0, MOAT_EINVAL or MOAT_EIO (the batch must then be
 * aborted). */
int ledger_batch_put(struct ledger *l, const struct ledger_key *key, uint64_t expiry,
                     const char *agent, uint64_t *prev);

/* Commit the batch (no fsync: durable at the next ledger_sync) or drop it. Either ends the batch.
 * commit: 0 or MOAT_EIO. */
int ledger_batch_commit(struct ledger *l);
void ledger_batch_abort(struct ledger *l);

/* Call cb for every well-formed record with expiry > now, in key order, inside one read
 * transaction (cb must not write to the ledger). A non-zero return from cb stops the walk and is
 * returned. Otherwise returns the number of records visited or MOAT_EIO. */
int ledger_iterate(struct ledger *l, uint64_t now,
                   int (*cb)(const struct ledger_entry *e, void *ctx), void *ctx);

/* Call cb for every well-formed record of one destination (family, src: all zero or NULL in
 * the netns placement, dst), expired ones too (remaining 0) until the purge removes them, so
 * the drop log can tell an expired grant and a wrong port from a never-resolved address. One
 * read transaction; cb must not write. Returns the number visited, cb's non-zero return, or
 * MOAT_EIO / MOAT_EINVAL (a batch is open). */
int ledger_each_dst(struct ledger *l, uint8_t family, const uint8_t *src, const uint8_t *dst,
                    uint64_t now, int (*cb)(const struct ledger_entry *e, void *ctx), void *ctx);

/* Delete every record with expiry <= now and every malformed record, in one write transaction.
 * Returns the number deleted or MOAT_EIO. Must not be called while a batch is open. */
int ledger_purge(struct ledger *l, uint64_t now);

/* Delete every well-formed record whose key match() accepts (live or expired), in one write
 * transaction (a runtime sandbox's removal takes its grants with it). Returns the number
 * deleted or MOAT_EIO. Must not be called while a batch is open. */
int ledger_delete_if(struct ledger *l, bool (*match)(const struct ledger_key *key, void *ctx),
                     void *ctx);

/* Serialized forms, exposed for tests and tools. key_out: LEDGER_KEYLEN bytes. */
void ledger_key_encode(const struct ledger_key *key, uint8_t *key_out);

#endif
