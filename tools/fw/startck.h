/* startck.h: moat-fw's start-up refusals. A misconfiguration that would leave the sandbox open,
 * break the host or silently drop DNS to moatd stops moat-fw before any rule is written, with
 * a message that names the option and the reason. */
#ifndef MOAT_FW_STARTCK_H
#define MOAT_FW_STARTCK_H

#include <stddef.h>

#include "moat/addrguard.h"
#include "nft.h"

/* Give every sandbox range without an interface the one its route points to, printing each
 * choice on stderr. MOAT_ENOENT with err set when a range has no route but the default. */
int fwstart_ifaces(struct fwnft_range *sb, size_t n, char *err, size_t errlen);

/* The checks (err says which option and why; MOAT_EINVAL):
 *   no resolver; a resolver in the always-deny ranges;
 *   a sandbox range that is the whole space, lies in or covers an always-deny range, or
 *   covers one of the host's own addresses (own, nown). */
int fwstart_check(const struct addrguard *guard, const struct fwnft_range *deny, size_t ndeny,
                  const struct fwnft_resolver *res, size_t nres, const struct fwnft_range *sb,
                  size_t nsb, const struct fwnft_range *own, size_t nown, char *err, size_t errlen);

/* Netns placement: warn on stderr that packet sockets bypass the output hook, naming the
 * processes already in the namespace at path that hold CAP_NET_RAW. Best effort, no result. */
void fwstart_packet_warning(const char *path);

#endif
