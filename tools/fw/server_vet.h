/* server_vet.h: the checks of one grant and of its addresses (server_vet.c). */
#ifndef MOAT_FW_SERVER_VET_H
#define MOAT_FW_SERVER_VET_H

#include <stdbool.h>
#include <stdint.h>

#include "server_state.h"

/* Check one pending grant; sets p->status (FWPROTO_OK, FWPROTO_DENIED with an ALERT line on
 * stderr, or FWPROTO_FAILED with a line) and p->lifetime (clamped; 0 when denied). */
void fwsrv_vet(struct fwsrv *srv, struct fwsrv_pending *p);

/* The sandbox source an element for an address of this family binds to, into src (16 bytes).
 * False when no single such address is known. */
bool fwsrv_source(const struct fwsrv_opts *o, const struct fwproto_addr *client, uint8_t family,
                  uint8_t *src);

/* Whether client's grants may name private and shared ranges (--allow-private, for all or for
 * the client's sandbox). */
bool fwsrv_private_ok(const struct fwsrv_opts *o, const struct fwproto_addr *client);

/* Why a grant for client may not name a (always-denied, private without --allow-private, this
 * host's own, the resolver's, IPv4-mapped), or NULL when it may. The ledger's restore asks
 * the same. */
const char *fwsrv_addr_why(const struct fwsrv *srv, const struct fwproto_addr *client,
                           const struct fwproto_addr *a);

/* Whether a is one of this host's own addresses (srv->own). */
bool fwsrv_is_own(const struct fwsrv *srv, const struct fwproto_addr *a);

#endif
