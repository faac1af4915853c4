/* ctl.h: the pieces of moatctl shared by its files. */
#ifndef MOAT_CTL_H
#define MOAT_CTL_H

#include <stdbool.h>

/* grants.c: print moat-fw's live grants from the ledger in dir (only agent's when not NULL) as
 * one JSON object, pretty unless raw. Returns the exit status. */
int ctl_grants(const char *dir, const char *agent, bool raw);

/* main.c: print a JSON reply, raw (one line as received) or indented. */
void ctl_print_json(const char *json, bool raw);

/* The policy-file commands, each a main of its own (argv[0] is the command's name) returning the
 * exit status: 0 done, 1 refused or failed (the message says why), 2 usage error. */
int ctl_compile_main(int argc, char **argv); /* compile.c */
int ctl_verify_main(int argc, char **argv);  /* compile.c */
int ctl_sign_main(int argc, char **argv);    /* sign.c */
int ctl_keygen_main(int argc, char **argv);  /* sign.c */

/* compile.c: run argv[1] if it is one of the commands above (they need no daemon), setting
 * *status; false if it is not one of them. */
bool ctl_policy_command(int argc, char **argv, int *status);

#endif
