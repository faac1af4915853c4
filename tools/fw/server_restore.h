/* server_restore.h: the ledger at start-up and between batches (server_restore.c). */
#ifndef MOAT_FW_SERVER_RESTORE_H
#define MOAT_FW_SERVER_RESTORE_H

#include "server_state.h"

/* Replace table inet moat (one nft transaction), then put back every live ledger grant this
 * run's options allow. Until the grants are back the sets are empty: closed, never open.
 * 0, or a negative code with a line on stderr. */
int fwsrv_rebuild(struct fwsrv *srv);

/* Delete the ledger's records expired a grace period ago (a line on stderr says how many). */
void fwsrv_purge(struct fwsrv *srv);

#endif
