/* Unit tests for what moat-fw reads from the host and refuses at start (tools/fw/hostnet.c,
 * tools/fw/startck.c) and for its system-call filter (tools/fw/privs.c, loaded in a child):
 * the interface of a sandbox range from route-table text, each start-up refusal with its
 * message (and the flags it suggests), a bridge's gateway inside a sandbox range, and
 * execve, io_uring and IPv4 sockets refused under the filter while Unix and netlink sockets
 * still work. */
#include <criterion/criterion.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hostnet.h"
#include "moat/addrguard.h"
#include "moat/err.h"
#include "nft.h"
#include "privs.h"
#include "startck.h"

static struct fwnft_range R(const char *text) {
	struct fwnft_range r;
	cr_assert_eq(fwnft_range_parse(text, &r), 0, "bad test range %s", text);
	return r;
}

static const char route4[] =
    "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
    "eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n"
    "eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
    "veth1\t000A0A0A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
    "veth2\t000A0A0A\t00000000\t0001\t0\t0\t0\t80FFFFFF\t0\t0\t0\n"
    "down0\t0000000B\t00000000\t0000\t0\t0\t0\t000000FF\t0\t0\t0\n";

static const char route6[] =
    "20010db8000100000000000000000000 40 00000000000000000000000000000000 00 "
    "00000000000000000000000000000000 00000100 00000001 00000000 00000001     veth1\n"
    "20010db8000100000000000000000002 80 00000000000000000000000000000000 00 "
    "00000000000000000000000000000000 00000000 00000003 00000000 80200001     veth1\n"
    "00000000000000000000000000000000 00 00000000000000000000000000000000 00 "
    "fd000000000000000000000000000001 00000400 00000002 00000000 00000003     eth0\n"
    "00000000000000000000000000000001 80 00000000000000000000000000000000 00 "
    "00000000000000000000000000000000 00000000 00000002 00000000 80200001       lo\n";

Test(fwhost, route_pick)
{
	char ifn[FWNFT_IFNAMSIZ];
	struct fwnft_range r = R("10.10.10.0/25");
	cr_assert_eq(fwhost_route_pick(&r, route4, ifn), 0);
	cr_assert_str_eq(ifn, "veth2", "the most specific route wins");
	r = R("10.10.10.128/25");
	cr_assert_eq(fwhost_route_pick(&r, route4, ifn), 0);
	cr_assert_str_eq(ifn, "veth1");
	r = R("192.0.2.7");
	cr_assert_eq(fwhost_route_pick(&r, route4, ifn), 0);
	cr_assert_str_eq(ifn, "eth0");
	r = R("203.0.113.0/24");
	cr_assert_eq(fwhost_route_pick(&r, route4, ifn), MOAT_ENOENT, "only the default route");
	r = R("11.0.0.0/8");
	cr_assert_eq(fwhost_route_pick(&r, route4, ifn), MOAT_ENOENT, "a route that is not up");
	r = R("10.10.0.0/16");
	cr_assert_eq(fwhost_route_pick(&r, route4, ifn), MOAT_ENOENT, "no route covers all of it");
	r = R("2001:db8:1::2/128");
	cr_assert_eq(fwhost_route_pick(&r, route6, ifn), 0);
	cr_assert_str_eq(ifn, "veth1", "the local /128 route does not count, the /64 does");
	r = R("2001:db8:2::/64");
	cr_assert_eq(fwhost_route_pick(&r, route6, ifn), MOAT_ENOENT);
	r = R("::1");
	cr_assert_eq(fwhost_route_pick(&r, route6, ifn), MOAT_ENOENT, "lo never counts");
}

static struct addrguard *guard(void)
{
	struct addrguard *g = addrguard_new();
	cr_assert_not_null(g);
	cr_assert_eq(addrguard_add(g, "169.254.0.0/16", ADDR_ALWAYS), 0);
	cr_assert_eq(addrguard_add(g, "127.0.0.0/8", ADDR_ALWAYS), 0);
	cr_assert_eq(addrguard_add(g, "10.0.0.0/8", ADDR_PRIVATE), 0);
	return g;
}

Test(fwhost, start_checks)
{
	struct addrguard *g = guard();
	struct fwnft_range deny[] = {R("169.254.0.0/16"), R("127.0.0.0/8")};
	struct fwnft_resolver res = {.family = 4, .addr = {192, 0, 2, 1}, .port = 53};
	struct fwnft_resolver meta = {.family = 4, .addr = {169, 254, 169, 254}, .port = 53};
	struct fwnft_range own[] = {R("192.0.2.1"), R("198.51.100.1")};
	snprintf(own[0].ifname, sizeof(own[0].ifname), "h0");
	char err[512];
	struct fwnft_range sb[] = {R("192.0.2.2")};

	cr_assert_eq(fwstart_check(g, deny, 2, &res, 1, sb, 1, own, 2, NULL, 0, err, sizeof(err)),
	             0, "%s", err);
	cr_assert_eq(fwstart_check(g, deny, 2, NULL, 0, sb, 1, own, 2, NULL, 0, err, sizeof(err)),
	             MOAT_EINVAL);
	cr_assert(strstr(err, "no --resolver") != NULL, "%s", err);
	cr_assert_eq(fwstart_check(g, deny, 2, &meta, 1, sb, 1, own, 2, NULL, 0, err, sizeof(err)),
	             MOAT_EINVAL);
	cr_assert(strstr(err, "--resolver 169.254.169.254 lies in the always-deny") != NULL, "%s",
	          err);
	static const struct {
		const char *range, *want;
	} bad[] = {
	    {"0.0.0.0/0", "is the whole address space"},
	    {"169.254.1.0/24", "lies in the always-deny ranges"},
	    {"160.0.0.0/4", "overlaps the always-deny range 169.254.0.0/16"},
	    {"192.0.2.0/24", "covers 192.0.2.1/32, an address of this host (on h0)"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct fwnft_range r = R(bad[i].range);
		cr_expect_eq(
		    fwstart_check(g, deny, 2, &res, 1, &r, 1, own, 2, NULL, 0, err, sizeof(err)),
		    MOAT_EINVAL, "%s accepted", bad[i].range);
		cr_expect(strstr(err, bad[i].want) != NULL, "%s: %s", bad[i].range, err);
		cr_expect(strstr(err, bad[i].range) != NULL, "the message names %s: %s",
		          bad[i].range, err);
	}
	addrguard_free(g);
}

/* A bridge's gateway: a host address inside the range on the range's own interface is allowed
 * (and listed by fwstart_gateways); one on another interface is refused with the flags that
 * would work; the whole space names a network of the host. */
Test(fwhost, gateways)
{
	struct addrguard *g = guard();
	struct fwnft_range deny[] = {R("169.254.0.0/16")};
	struct fwnft_resolver res = {.family = 4, .addr = {192, 0, 2, 1}, .port = 53};
	struct fwnft_range own[] = {R("192.0.2.1"), R("2001:db8:77::1"), R("198.51.100.1")};
	snprintf(own[0].ifname, sizeof(own[0].ifname), "br-x:gw"); /* an address label */
	snprintf(own[1].ifname, sizeof(own[1].ifname), "br-x");
	snprintf(own[2].ifname, sizeof(own[2].ifname), "eth0");
	struct fwnft_range nets[] = {R("198.51.100.0/24"), R("192.0.2.0/24")};
	snprintf(nets[0].ifname, sizeof(nets[0].ifname), "eth0");
	snprintf(nets[1].ifname, sizeof(nets[1].ifname), "br-x");
	struct fwnft_range sb[] = {R("192.0.2.0/24"), R("2001:db8:77::/64")};
	snprintf(sb[0].ifname, sizeof(sb[0].ifname), "br-x");
	snprintf(sb[1].ifname, sizeof(sb[1].ifname), "br-x");
	char err[512];
	cr_assert_eq(fwstart_check(g, deny, 1, &res, 1, sb, 2, own, 3, nets, 2, err, sizeof(err)),
	             0, "%s", err);
	struct fwnft_range *gw = NULL;
	size_t ngw = 0;
	cr_assert_eq(fwstart_gateways(sb, 2, own, 3, &gw, &ngw), 0);
	cr_assert_eq(ngw, 2);
	cr_assert_str_eq(gw[0].ifname, "br-x", "the label is not the interface");
	cr_assert_eq(gw[0].addr[3], 1);
	cr_assert_eq(gw[1].family, 6);
	free(gw);

	snprintf(sb[0].ifname, sizeof(sb[0].ifname), "br-y");
	cr_assert_eq(fwstart_check(g, deny, 1, &res, 1, sb, 1, own, 3, nets, 2, err, sizeof(err)),
	             MOAT_EINVAL);
	cr_assert(strstr(err, "--sandbox 192.0.2.0/24@br-y covers 192.0.2.1/32, an address of "
	                      "this host (on br-x:gw, not br-y)"),
	          "%s", err);
	cr_assert(strstr(err, "name it: --sandbox 192.0.2.0/24@br-x; else leave the address out: "
	                      "--sandbox 192.0.2.128/25@br-y"),
	          "%s", err);
	struct fwnft_range host = R("198.51.100.1");
	snprintf(host.ifname, sizeof(host.ifname), "br-x");
	cr_assert_eq(
	    fwstart_check(g, deny, 1, &res, 1, &host, 1, own, 3, nets, 2, err, sizeof(err)),
	    MOAT_EINVAL);
	cr_assert(strstr(err, "name it: --sandbox 198.51.100.1/32@eth0") && !strstr(err, "leave"),
	          "a host range has no half without it: %s", err);

	struct fwnft_range all = R("0.0.0.0/0");
	snprintf(all.ifname, sizeof(all.ifname), "br-x");
	cr_assert_eq(fwstart_check(g, deny, 1, &res, 1, &all, 1, own, 3, nets, 2, err, sizeof(err)),
	             MOAT_EINVAL);
	cr_assert(strstr(err, "--sandbox 0.0.0.0/0 is the whole address space: name the "
	                      "sandboxes' own range, such as --sandbox 192.0.2.0/24@br-x (a "
	                      "network of this host)"),
	          "%s", err);
	struct fwnft_range all6 = R("::/0");
	cr_assert_eq(
	    fwstart_check(g, deny, 1, &res, 1, &all6, 1, own, 3, nets, 2, err, sizeof(err)),
	    MOAT_EINVAL);
	cr_assert(strstr(err, "such as --sandbox 2001:db8::/64@IFACE"), "%s", err);
	addrguard_free(g);
}

/* Run fn in a child under the filter; its exit status, or 128 + the signal that killed it. */
static int under_filter(int (*fn)(void))
{
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char err[256];
		if (fwprivs_filter(err, sizeof(err)) != 0)
			_exit(99);
		_exit(fn());
	}
	int st = 0;
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}

static int try_exec(void)
{
	char *const argv[] = {"/bin/true", NULL};
	execv("/bin/true", argv);
	return 1;
}

static int try_io_uring(void)
{
	syscall(SYS_io_uring_setup, 1, NULL);
	return 1;
}

static int try_sockets(void)
{
	if (socket(AF_INET, SOCK_DGRAM, 0) >= 0 || errno != EPERM)
		return 1;
	if (socket(AF_INET6, SOCK_STREAM, 0) >= 0 || socket(AF_PACKET, SOCK_RAW, 0) >= 0)
		return 2;
	if (socket(AF_UNIX, SOCK_SEQPACKET, 0) < 0 || socket(AF_NETLINK, SOCK_RAW, 0) < 0)
		return 3;
	return 0;
}

static int try_write_open(void)
{
	/* Read-only opens work, anything that could write or create a file does not. */
	if (fopen("/proc/self/status", "r") == NULL)
		return 1;
	return fopen("/tmp/moat-fwprivs-test", "w") == NULL && errno == EPERM ? 0 : 2;
}

Test(fwhost, seccomp_allowlist)
{
	cr_assert_eq(under_filter(try_exec), 128 + SIGSYS, "execve was not fatal");
	cr_assert_eq(under_filter(try_io_uring), 128 + SIGSYS, "io_uring_setup was not fatal");
	cr_assert_eq(under_filter(try_sockets), 0, "socket families");
	cr_assert_eq(under_filter(try_write_open), 0, "file opens");
}
