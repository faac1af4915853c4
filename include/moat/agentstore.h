/* The agents added at runtime (`moatctl agent add`), kept in an LMDB environment in moatd's
 * state directory (`state_dir:`, `--state-dir`) so a restart brings them back. agentstore.c
 * owns the record format (documented there, versioned) and the environment. Writes happen in
 * batches: every agent command that arrives in one read of the control socket is one
 * transaction, committed (to disk) before any of their replies leaves. A record is a
 * struct agent_spec (moat/agent_edit.h). */
#ifndef MOAT_AGENTSTORE_H
#define MOAT_AGENTSTORE_H

#include <stddef.h>
#include <stdint.h>

#include "moat/agent_edit.h"

#define AGENTSTORE_VERSION 2 /* the newest record version written (agentstore.c) */
#define AGENTSTORE_FORMAT 1  /* the store's own version, in its "!format" record */
/* Encode spec as a record value. Ownership: *out is malloc'd, the caller frees it. Returns 0,
 * MOAT_EINVAL (a field out of range) or MOAT_ENOMEM. Pure. */
int agentstore_encode(const struct agent_spec *spec, uint8_t **out, size_t *len);

/* Decode the record of key (the agent's name) into *spec (cleared first; the caller clears it
 * after). Returns 0, or MOAT_EINVAL with the reason in err: unknown version, truncated or
 * overlong, a range or name out of bounds, a checksum that does not match. Pure. */
int agentstore_decode(const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen,
                      struct agent_spec *spec, char *err, size_t errlen);

struct agentstore;

/* Open (creating) the environment in dir. Call before privileges drop: the files stay open.
 * Ownership: close with agentstore_close. Returns 0 or a negative code with err set. */
int agentstore_open(const char *dir, struct agentstore **out, char *err, size_t errlen);
void agentstore_close(struct agentstore *st);

/* Stage a write or a delete in the open batch (begun on the first one). */
int agentstore_put(struct agentstore *st, const struct agent_spec *spec, char *err, size_t errlen);
int agentstore_del(struct agentstore *st, const char *name, char *err, size_t errlen);
/* Commit the batch (durable when it returns 0), or drop it. No batch: 0. */
int agentstore_commit(struct agentstore *st, char *err, size_t errlen);
void agentstore_abort(struct agentstore *st);

/* Call cb for every agent in the store, in name order. A record that does not decode is
 * reported through bad (name, reason) and skipped: its clients then match no agent and are
 * refused. Returns 0, cb's first non-zero return, or a negative code with err set. */
typedef int (*agentstore_cb)(void *ctx, const struct agent_spec *spec);
typedef void (*agentstore_bad_cb)(void *ctx, const char *name, const char *why);
int agentstore_each(struct agentstore *st, agentstore_cb cb, agentstore_bad_cb bad, void *ctx,
                    char *err, size_t errlen);

/* The kept runtime decisions of agent (moatctl allow / deny): text is their lines ("allow
 * PATTERN [PORTS]" / "deny PATTERN", each ending in a newline), "" to remove them. Staged in
 * the open batch like an agent. */
int agentstore_put_decided(struct agentstore *st, const char *agent, const char *text, char *err,
                           size_t errlen);
/* cb(ctx, agent, text) for every agent's decisions in the store (damaged records skipped).
 * Returns 0, cb's first non-zero return, or a negative code with err set. */
typedef int (*agentstore_decided_cb)(void *ctx, const char *agent, const char *text);
int agentstore_each_decided(struct agentstore *st, agentstore_decided_cb cb, void *ctx, char *err,
                            size_t errlen);

#endif
