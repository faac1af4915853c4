/* hostnet.h: what moat-fw learns from the network stack it runs in: which interface a sandbox
 * range is routed to (from /proc/net/route and /proc/net/ipv6_route), the host's own addresses
 * and on-link IPv6 prefixes (getifaddrs), and entering a network namespace by name or path.
 * The route-table parsers are pure functions over the files' text, so they are unit-tested. */
#ifndef MOAT_FW_HOSTNET_H
#define MOAT_FW_HOSTNET_H

#include <stddef.h>

#include "nft.h"

/* The interface of the most specific non-default route that covers all of r, from the text of
 * /proc/net/route (r IPv4) or /proc/net/ipv6_route (r IPv6). Routes on lo, reject routes and
 * default routes never count. Returns 0 with ifname set (FWNFT_IFNAMSIZ bytes), or MOAT_ENOENT. */
int fwhost_route_pick(const struct fwnft_range *r, const char *text, char *ifname);

/* The same, reading the files of the current network namespace. MOAT_EIO when unreadable. */
int fwhost_route_iface(const struct fwnft_range *r, char *ifname);

/* The current namespace's addresses. own: each address as a host range (/32, /128), with its
 * interface's name; link6: the on-link prefixes of global IPv6 addresses (link-local left out).
 * Either may be NULL. *own and *link6 are malloc'd: the caller frees them. Returns 0,
 * MOAT_EIO or MOAT_ENOMEM. */
int fwhost_addrs(struct fwnft_range **own, size_t *nown, struct fwnft_range **link6,
                 size_t *nlink6);

/* The same, and the networks of the addresses (both families, lo and link-local left out, each
 * with its interface's name) into *nets when nets is not NULL (malloc'd, the caller frees). */
int fwhost_addrs_nets(struct fwnft_range **own, size_t *nown, struct fwnft_range **link6,
                      size_t *nlink6, struct fwnft_range **nets, size_t *nnets);

/* Enter the network namespace spec: a path (/proc/PID/ns/net, /var/run/netns/X: anything with
 * a '/') or a name under /run/netns. Says why on stderr when it fails. Returns 0 or MOAT_EIO,
 * MOAT_EINVAL. */
int fwhost_enter_netns(const char *spec);

#endif
