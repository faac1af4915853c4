/* server_batch.h: the end-of-turn grant batch (server_batch.c) and the bound on the elements one
 * grant writes, which the reader (server_conn.c) uses to stop a turn before the batch is full. */
#ifndef MOAT_FW_SERVER_BATCH_H
#define MOAT_FW_SERVER_BATCH_H

#include <stddef.h>

#include "server_state.h"

/* Elements one grant writes: per address one "every port", or its ports and its echo. */
#define FWSRV_GRANT_ELEMS_MAX (FWPROTO_MAXADDR * (FWPROTO_MAXPORT + 1))
static inline size_t fwsrv_grant_elems(const struct fwproto_grant *g)
{
	return (size_t)g->naddr * (g->nport ? g->nport + 1u : 1u);
}

/* Check, write and answer every pending grant (srv->npending of them; none left after). */
void fwsrv_flush(struct fwsrv *srv);

#endif
