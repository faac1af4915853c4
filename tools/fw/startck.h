/* startck.h: moat-fw's start-up refusals. A misconfiguration that would leave the sandbox open,
 * break the host or silently drop DNS to moatd stops moat-fw before any rule is written, with
 * a message that names the option and the reason. */
#ifndef MOAT_FW_STARTCK_H
#define MOAT_FW_STARTCK_H

#include <stdbool.h>
#include <stddef.h>

#include "moat/addrguard.h"
#include "nft.h"

/* Give every sandbox range without an interface the one its route points to, printing each
 * choice on stderr. MOAT_ENOENT with err set when a range has no route but the default. */
int fwstart_ifaces(struct fwnft_range *sb, size_t n, char *err, size_t errlen);

/* The checks (err says which option and why, and what would work; MOAT_EINVAL):
 *   no resolver; a resolver in the always-deny ranges;
 *   a sandbox range that is the whole space (the host's networks, nets, suggest one), lies in
 *   or covers an always-deny range, or covers one of the host's own addresses (own, nown)
 *   that is not on the range's own interface. One on that interface is the range's gateway
 *   (a bridge's address inside its subnet) and is allowed: see fwstart_gateways. */
int fwstart_check(const struct addrguard *guard, const struct fwnft_range *deny, size_t ndeny,
                  const struct fwnft_resolver *res, size_t nres, const struct fwnft_range *sb,
                  size_t nsb, const struct fwnft_range *own, size_t nown,
                  const struct fwnft_range *nets, size_t nnets, char *err, size_t errlen);

/* Whether the host address own (a host range, with its interface) is a gateway of sandbox
 * range sb: inside it, on sb's interface. */
bool fwstart_is_gateway(const struct fwnft_range *own, const struct fwnft_range *sb);

/* The gateways among own for the ranges sb[0..nsb) (each with its interface's name, no
 * label) into *out (malloc'd; the caller frees it). 0 or MOAT_ENOMEM. */
int fwstart_gateways(const struct fwnft_range *sb, size_t nsb, const struct fwnft_range *own,
                     size_t nown, struct fwnft_range **out, size_t *nout);

/* Netns placement: warn on stderr that packet sockets bypass the output hook, naming the
 * processes already in the namespace at path that hold CAP_NET_RAW. Best effort, no result. */
void fwstart_packet_warning(const char *path);

#endif
