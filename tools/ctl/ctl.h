/* ctl.h: the pieces of moatctl shared by its files. */
#ifndef MOAT_CTL_H
#define MOAT_CTL_H

#include <stdbool.h>

/* grants.c: print moat-fw's live grants from the ledger in dir (only agent's when not NULL) as
 * one JSON object, pretty unless raw. Returns the exit status. */
int ctl_grants(const char *dir, const char *agent, bool raw);

/* explain.c: reply (moatd's explain answer) with "grant" added: whether moat-fw's ledger in
 * state_dir holds a grant of the name's cached addresses for its agent. malloc'd; NULL when
 * out of memory. */
char *ctl_explain_grant(const char *reply, const char *state_dir);

/* ask.c: `moatctl watch|allow|deny ...` (argv[0] is the command); the exit status. */
int ctl_ask_cmd(int argc, char **argv, const char *sock, bool raw);

/* report_out.c: `moatctl report ...` (argv[0] is "report"); the exit status. */
int ctl_report_main(int argc, char **argv);

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

/* main.c: send text (len bytes) on the control socket at path and read nreplies reply lines
 * into a malloc'd string (the caller frees it). NULL on failure (message printed). */
char *ctl_ask(const char *path, const char *text, size_t len, size_t nreplies);

/* main.c: the reply's "error" text on stderr. */
void ctl_print_error(const char *reply);
/* main.c: a reply that is not ok: with --json (raw) the reply itself on stdout, one line, else
 * its error text on stderr. */
void ctl_print_reply_error(const char *reply, bool raw);

/* agent.c: `moatctl agent add|del ...` (argv after "agent") and `moatctl batch`. Return the exit
 * status. */
int ctl_agent(int argc, char **argv, const char *sock, bool raw);
int ctl_batch(const char *sock, bool raw);

#endif
