/* privs.h: moat-fw keeps only what it needs once it is set up: its own unprivileged user (when
 * given), CAP_NET_ADMIN alone (permitted, effective and ambient: nftables over netlink), no way
 * to gain more (no_new_privs), and an allowlist system-call filter: no execve, no io_uring,
 * sockets only AF_UNIX (its grant socket) and AF_NETLINK (nftables), files opened read-only. */
#ifndef MOAT_FW_PRIVS_H
#define MOAT_FW_PRIVS_H

#include <stddef.h>
#include <sys/types.h>

/* Drop to uid/gid (0/0: stay uid 0) with only CAP_NET_ADMIN, then load the filter. Returns 0,
 * or a negative MOAT_* code with err set (the caller then stops). */
int fwprivs_drop(uid_t uid, gid_t gid, char *err, size_t errlen);

/* Only the system-call filter (exposed for the unit test, which loads it in a child). */
int fwprivs_filter(char *err, size_t errlen);

#endif
