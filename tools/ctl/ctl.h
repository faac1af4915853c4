/* ctl.h: the pieces of moatctl shared by its files. */
#ifndef MOAT_CTL_H
#define MOAT_CTL_H

#include <stdbool.h>

/* grants.c: print moat-fw's live grants from the ledger in dir (only agent's when not NULL) as
 * one JSON object, pretty unless raw. Returns the exit status. */
int ctl_grants(const char *dir, const char *agent, bool raw);

/* main.c: print a JSON reply, raw (one line as received) or indented. */
void ctl_print_json(const char *json, bool raw);

#endif
