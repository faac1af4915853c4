/* upstream.h: asking the upstream resolvers (upstream.c) for one question on behalf of a
 * worker: moatd's own query over UDP from a pooled socket, retried over TCP on TC=1, moved to
 * the next upstream on a timeout. Loop thread only. */
#ifndef MOAT_UPSTREAM_H
#define MOAT_UPSTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "moat/forward.h"
#include "moat/wire.h"

struct worker;
struct upstream_req;

/* status 0: pkt/len is an answer to our question, already parsed into *resp; otherwise a
 * negative code (MOAT_EIO: every attempt failed or timed out; MOAT_EFORMAT: malformed answer). */
typedef void (*upstream_cb)(void *ctx, int status, const uint8_t *pkt, size_t len,
                            const struct sockaddr *from, int64_t elapsed_us);

/* Ask the upstreams (lname, qtype, qclass). set: the upstreams to ask (a forward zone's, copied
 * into the request), NULL for the global ones. The answer is parsed into *resp (caller storage
 * that must live until the callback). cb runs exactly once, unless upstream_cancel is called
 * first. Returns 0, MOAT_ENOENT (no upstream) or MOAT_ENOMEM.
 * Ownership: the request frees itself after the callback or cancel. */
int upstream_query(struct worker *srv, const struct upstream_set *set, const uint8_t *lname,
                   uint16_t qtype, uint16_t qclass, bool dnssec_ok, struct wire_resp *resp,
                   upstream_cb cb, void *ctx, struct upstream_req **out);
void upstream_cancel(struct upstream_req *req);
/* Shutdown: end every request and close the pooled sockets (the loop must run to finish
 * closing them); after the loop has ended, upstream_deinit frees the pool. */
void upstream_cancel_all(struct worker *srv);
/* Send the upstream queries queued this loop turn (called once per turn, after the I/O). */
void upstream_flush(struct worker *srv);
void upstream_deinit(struct worker *srv);
/* How many UDP sockets a worker's pool may hold for inflight_share questions in flight. */
uint32_t upstream_pool_max(uint32_t inflight_share, size_t nupstreams);

#endif
