/* privdrop.h: moatd gives up what it no longer needs once its sockets are bound: root (to an
 * unprivileged user), the ability to gain privileges again (no_new_privs), and every system call
 * outside the short list it uses (a seccomp filter, libseccomp). */
#ifndef MOAT_PRIVDROP_H
#define MOAT_PRIVDROP_H

#include <stdbool.h>
#include <stddef.h>

/* The user moatd becomes: the configured one; without one, when started as root, "moat" if
 * that user exists, else "nobody". NULL: stay as started (not root and none configured, or
 * "root" configured, which moatd warns about). */
const char *privdrop_pick_user(const char *configured);

struct privdrop_opts {
	const char *user; /* configured (--user, user:); NULL: the default above */
	bool filter;      /* install the system-call filter */
};

/* Switch to the user privdrop_pick_user picks (its primary group, no supplementary groups),
 * set no_new_privs, and install the system-call filter when o->filter is set. Returns 0, or a
 * negative MOAT_* code with err set; the caller must then exit (half-dropped is not a state to
 * serve in). */
int privdrop_apply(const struct privdrop_opts *o, char *err, size_t errlen);

#endif
