/* fwchan.h: moatd's side of the firewall channel (format in moat/fwproto.h). A query whose
 * answer carries addresses asks for a grant and waits; the answer is released only when
 * moat-fw acknowledges, with the client TTL capped at the granted lifetime. Runs on the loop
 * thread. */
#ifndef MOAT_FWCHAN_H
#define MOAT_FWCHAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "moat/fwproto.h"

struct fwchan;

/* status: FWPROTO_OK or another fwproto_status (FAILED also for timeouts and a lost channel). */
typedef void (*fwchan_cb)(void *ctx, uint16_t status, uint32_t lifetime);

/* A channel to moat-fw at path, connected by the first grant (and again after it drops). A
 * failed connect is reported on stderr with its cause (once per cause, not per grant): the
 * grants it fails are answered SERVFAIL. Returns 0 with *out set, MOAT_EINVAL (path too long for a
 * unix socket) or MOAT_ENOMEM. Ownership: the caller closes *out with fwchan_close. */
int fwchan_new(uv_loop_t *loop, const char *path, uint32_t timeout_ms, struct fwchan **out);

/* Close the channel; pending grants are completed with FWPROTO_FAILED first. */
void fwchan_close(struct fwchan *fw);

/* Ask for a grant. g->seq is set here. cb runs exactly once (possibly before this returns when
 * the channel is down), unless fwchan_cancel is called first with the returned token.
 * Returns a token (> 0) for fwchan_cancel, or 0 when cb already ran. */
uint32_t fwchan_grant(struct fwchan *fw, struct fwproto_grant *g, fwchan_cb cb, void *ctx);

/* Forget a pending grant: its callback will not run. */
void fwchan_cancel(struct fwchan *fw, uint32_t token);

/* For moatctl status, on the channel's own loop thread: true when connected to moat-fw now;
 * why gets the last failed connect ("connect: Permission denied"), "" when none since the last
 * connect. */
bool fwchan_state(const struct fwchan *fw, char *why, size_t cap);

/* The last HELLO any channel (or fwchan_probe) received from moat-fw, into out: its placement
 * and sandbox ranges. False when none has arrived yet. Any thread. */
bool fwchan_coverage(struct fwproto_hello *out);

enum fwchan_probe_result {
	FWCHAN_ADMITTED = 0, /* moat-fw took the connection and said HELLO */
	FWCHAN_ABSENT,       /* nothing listens at the path (yet) */
	FWCHAN_SILENT,       /* connected, but no HELLO in time */
	FWCHAN_REFUSED,      /* the socket or moat-fw refused this process's user, or spoke
	                      * another channel format */
};

/* Connect to moat-fw at path as the process is now (start-up, after the privilege drop), wait
 * up to timeout_ms for its HELLO, and close. A result other than FWCHAN_ADMITTED puts the
 * reason, with what would fix it, into why. Blocking; the main thread before it serves. */
int fwchan_probe(const char *path, uint32_t timeout_ms, char *why, size_t cap);

#endif
