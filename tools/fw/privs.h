/* privs.h: moat-fw keeps only what it needs once it is set up: CAP_NET_ADMIN (nftables over
 * netlink), no way to gain more (no_new_privs), and no way to reach the network (a seccomp
 * filter refuses IPv4, IPv6 and packet sockets; its own Unix socket and netlink still work). */
#ifndef MOAT_FW_PRIVS_H
#define MOAT_FW_PRIVS_H

#include <stddef.h>

/* Returns 0, or a negative MOAT_* code with err set (the caller then stops). */
int fwprivs_drop(char *err, size_t errlen);

#endif
