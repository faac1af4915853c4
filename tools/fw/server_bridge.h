/* server_bridge.h: the sandbox bridges of the forward placement (server_bridge.c): which
 * sandbox interfaces are Linux bridges, how the kernel lets moat-fw tell their frames apart,
 * and the ports of the host's other bridges, kept current in the bridge tables (nft.h). */
#ifndef MOAT_FW_SERVER_BRIDGE_H
#define MOAT_FW_SERVER_BRIDGE_H

#include "server_state.h"

/* Before a rebuild: read the interfaces, put the sandbox bridges (and the other bridges' ports)
 * into srv->setup, find out once whether the kernel has meta ibrname, and mark bridge tables
 * left without a bridge for deletion. Netns placement: nothing. 0, or a negative code with a
 * line on stderr (the first read failed, or the kernel refuses bridge tables). */
int fwsrv_bridge_setup(struct fwsrv *srv);

/* Once a second: read the interfaces again; when the sandbox bridges changed, replace the
 * bridge tables (one transaction); when only the other bridges' ports did (without meta
 * ibrname), replace their set's elements. A failure is tried again at the next call. */
void fwsrv_bridge_refresh(struct fwsrv *srv);

#endif
