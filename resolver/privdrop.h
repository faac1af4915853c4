/* privdrop.h: moatd gives up what it no longer needs once its sockets are bound: root (to an
 * unprivileged user), the ability to gain privileges again (no_new_privs), and every system call
 * outside the short list it uses (a seccomp filter, libseccomp). */
#ifndef MOAT_PRIVDROP_H
#define MOAT_PRIVDROP_H

#include <stdbool.h>
#include <stddef.h>

/* Switch to user (and its primary group, no supplementary groups) when user is not NULL, set
 * no_new_privs, and install the system-call filter when filter is true. Returns 0, or a
 * negative MOAT_* code with err set; the caller must then exit (half-dropped is not a state to
 * serve in). */
int privdrop_apply(const char *user, bool filter, char *err, size_t errlen);

#endif
