/* remove.h: `moat-fw --remove [--netns NAME|PATH]` deletes table inet moat and prints what it
 * removed (its chains, sets and the number of live grants). */
#ifndef MOAT_FW_REMOVE_H
#define MOAT_FW_REMOVE_H

/* Returns the exit status: 0 when the table is gone (or was not there), 1 on failure. */
int fwremove_run(const char *netns);

#endif
