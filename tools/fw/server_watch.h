/* server_watch.h: moat-fw's answer to changes of its tables by anyone else (server_watch.c). */
#ifndef MOAT_FW_SERVER_WATCH_H
#define MOAT_FW_SERVER_WATCH_H

#include <stdbool.h>

#include "server_state.h"

/* Open the watch in the namespace current now, after the nft sockets (so they are known as
 * moat-fw's own) and before the first rebuild (so nothing between is missed). 0, or a
 * negative code with a line on stderr. */
int fwsrv_watch_open(struct fwsrv *srv);

/* Watch in the loop (after fwsrv_watch_open; the loop must be initialised). */
void fwsrv_watch_start(struct fwsrv *srv);

/* Read what the watch has now; when someone else changed the tables (or events were lost): an
 * ALERT line (at most 5 a second, the rest counted into the next), the metrics, and the tables
 * rebuilt from the current sandboxes and the ledger. True when it rebuilt them. */
bool fwsrv_watch_check(struct fwsrv *srv);

#endif
