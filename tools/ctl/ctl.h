/* moatctl's subcommands: each is a main of its own (argv[0] is the command's name), returning
 * the exit status: 0 done, 1 refused or failed (the message says why), 2 usage error. */
#ifndef MOAT_CTL_H
#define MOAT_CTL_H

int ctl_compile_main(int argc, char **argv); /* compile.c */
int ctl_verify_main(int argc, char **argv);  /* compile.c */
int ctl_sign_main(int argc, char **argv);    /* sign.c */
int ctl_keygen_main(int argc, char **argv);  /* sign.c */

#endif
