/* server_sandbox.h: moat-fw's runtime sandboxes (server_sandbox.c). */
#ifndef MOAT_FW_SERVER_SANDBOX_H
#define MOAT_FW_SERVER_SANDBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "server_state.h"

#define FWSRV_RUNTIME_MAX 4096 /* runtime sandbox ranges (SANDBOX_ADD, fwproto_sandbox.h) */

/* Copy o into srv->opts with room for the runtime sandboxes and point srv->o at the copy, so
 * every check of a grant sees the --sandbox ranges and the runtime ones. 0 or MOAT_ENOMEM. */
int fwsrv_sandbox_init(struct fwsrv *srv, const struct fwsrv_opts *o);
void fwsrv_sandbox_free(struct fwsrv *srv);

/* When msg is a SANDBOX_ADD or SANDBOX_DEL: handle it, answer c with one SANDBOX_REPLY and
 * return true. Otherwise false (the message is the caller's: a GRANT or garbage). */
bool fwsrv_sandbox_msg(struct fwsrv_conn *c, const uint8_t *msg, size_t len);

#endif
