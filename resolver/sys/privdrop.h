/* privdrop.h: moatd gives up what it no longer needs once its sockets are bound: root (to an
 * unprivileged user), the ability to gain privileges again (no_new_privs), and every system call
 * outside the short list it uses (a seccomp filter, libseccomp). */
#ifndef MOAT_PRIVDROP_H
#define MOAT_PRIVDROP_H

#include <stdbool.h>
#include <stddef.h>

#define PRIVDROP_USER "moat" /* moatd's default user, the one moat-fw admits by default */

/* The user moatd becomes, into *user: the configured one; without one, when started as root,
 * PRIVDROP_USER. When that user does not exist: with a firewall channel an error (MOAT_ENOENT,
 * err says what to create: moat-fw would not admit another user by default, and nobody may be
 * its own), without one "nobody" with a warning on stderr. *user NULL: stay as started (not root
 * and none configured, or "root" configured, which moatd warns about). 0 or MOAT_ENOENT. */
int privdrop_pick_user(const char *configured, bool firewall, const char **user, char *err,
                       size_t errlen);

struct privdrop_opts {
	const char *user; /* configured (--user, user:); NULL: the default above */
	bool firewall;    /* a firewall channel is configured (see privdrop_pick_user) */
	bool filter;      /* install the system-call filter */
	int log_dirfd;    /* the log's directory (logreopen_init); -1: none */
};

/* Switch to the user privdrop_pick_user picks (its primary group, no supplementary groups),
 * set no_new_privs, and install the system-call filter when o->filter is set. Returns 0, or a
 * negative MOAT_* code with err set; the caller must then exit (half-dropped is not a state to
 * serve in). */
int privdrop_apply(const struct privdrop_opts *o, char *err, size_t errlen);

#endif
