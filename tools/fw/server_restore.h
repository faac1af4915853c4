/* server_restore.h: the ledger at start-up and between batches (server_restore.c). */
#ifndef MOAT_FW_SERVER_RESTORE_H
#define MOAT_FW_SERVER_RESTORE_H

#include <stdbool.h>

#include "server_state.h"

/* Replace table inet moat (and moat_guard, forward placement) in one nft transaction, built from
 * srv->setup (the current sandboxes, which may change at run time) and the host's addresses as
 * last read; then put back every live ledger grant this run allows. Until the grants are back
 * the sets are empty: closed, never open. restore: after a change by someone else (the log line
 * says "restored", not "created"). 0, or a negative code with a line on stderr. */
int fwsrv_rebuild(struct fwsrv *srv, bool restore);

/* Delete the ledger's records expired a grace period ago (a line on stderr says how many). */
void fwsrv_purge(struct fwsrv *srv);

#endif
