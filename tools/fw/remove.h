/* remove.h: `moat-fw --remove [--force] [--netns NAME|PATH]` deletes table inet moat and table
 * inet moat_guard and prints what it removed (chains, sets, the number of live grants). It
 * refuses while a running moat-fw holds the table (holder.h), naming its pid, unless force. */
#ifndef MOAT_FW_REMOVE_H
#define MOAT_FW_REMOVE_H

#include <stdbool.h>

/* Returns the exit status: 0 when the tables are gone (or were not there), 1 on failure or
 * refusal. */
int fwremove_run(const char *netns, bool force);

#endif
