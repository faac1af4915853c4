/* holder.h: which moat-fw holds table inet moat in the current network namespace. moat-fw
 * names its pid in the table's comment (nft.h); the holder is that process if it is alive, in
 * this network namespace and still called moat-fw. Two moat-fw processes on one table would undo
 * each other's changes, and `moat-fw --remove` under a running one would be undone at once: both
 * ask here. */
#ifndef MOAT_FW_HOLDER_H
#define MOAT_FW_HOLDER_H

#include <stddef.h>

struct fwnft;

enum fwhold_state {
	FWHOLD_NONE = 0, /* no table inet moat here */
	FWHOLD_FREE = 1, /* the table is here, no live moat-fw holds it (*pid: the one that made
	                    it, 0 when unknown) */
	FWHOLD_HELD = 2, /* held by *pid (comm its command name) */
};

/* Look. Returns an enum fwhold_state (a failure to tell counts as held: the safe answer). */
int fwhold_check(struct fwnft *n, unsigned long *pid, char *comm, size_t commlen);

#endif
