/* startck.c owns moat-fw's start-up refusals and warnings (see startck.h): the interface of
 * each sandbox range, the checks of --resolver and --sandbox against the always-deny ranges and
 * the host's own addresses, and the packet-socket warning of the netns placement. */
#include "startck.h"
#include "hostnet.h"
#include "moat/err.h"

#include <dirent.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FWSTART_CAP_NET_RAW 13

static const char *fwstart_text(const struct fwnft_range *r, char *out, size_t cap)
{
	char a[64];
	addrguard_format(r->addr, r->family == 4 ? 4 : 16, a, sizeof(a));
	snprintf(out, cap, "%s/%u", a, r->bits);
	return out;
}

int fwstart_ifaces(struct fwnft_range *sb, size_t n, char *err, size_t errlen)
{
	char t[80];
	for (size_t i = 0; i < n; i++) {
		if (sb[i].ifname[0]) {
			if (if_nametoindex(sb[i].ifname) == 0)
				fprintf(
				    stderr,
				    "moat-fw: note: interface %s of --sandbox %s does not exist "
				    "(yet); its rules apply once it does\n",
				    sb[i].ifname, fwstart_text(&sb[i], t, sizeof(t)));
			continue;
		}
		int rc = fwhost_route_iface(&sb[i], sb[i].ifname);
		if (rc < 0) {
			snprintf(
			    err, errlen,
			    "--sandbox %s: no route to it but the default one, so its interface "
			    "is unknown; name it: --sandbox %s@IFACE",
			    fwstart_text(&sb[i], t, sizeof(t)), t);
			return MOAT_ENOENT;
		}
		fprintf(stderr,
		        "moat-fw: --sandbox %s is on interface %s (from the routing table)\n",
		        fwstart_text(&sb[i], t, sizeof(t)), sb[i].ifname);
	}
	return 0;
}

/* True when ranges a and b share an address (one lies inside the other). */
static bool fwstart_overlap(const struct fwnft_range *a, const struct fwnft_range *b)
{
	return fwnft_range_within(a, b) || fwnft_range_within(b, a);
}

static int fwstart_sandbox(const struct addrguard *guard, const struct fwnft_range *deny,
                           size_t ndeny, const struct fwnft_range *r, const struct fwnft_range *own,
                           size_t nown, char *err, size_t errlen)
{
	char t[80], u[80];
	fwstart_text(r, t, sizeof(t));
	if (r->bits == 0) {
		snprintf(err, errlen, "--sandbox %s is the whole address space", t);
		return MOAT_EINVAL;
	}
	if (addrguard_check(guard, r->addr, r->family == 4 ? 4 : 16) == ADDR_ALWAYS) {
		snprintf(err, errlen, "--sandbox %s lies in the always-deny ranges", t);
		return MOAT_EINVAL;
	}
	for (size_t i = 0; i < ndeny; i++)
		if (fwstart_overlap(r, &deny[i])) {
			snprintf(err, errlen, "--sandbox %s overlaps the always-deny range %s", t,
			         fwstart_text(&deny[i], u, sizeof(u)));
			return MOAT_EINVAL;
		}
	for (size_t i = 0; i < nown; i++)
		if (fwnft_range_within(&own[i], r)) {
			snprintf(
			    err, errlen,
			    "--sandbox %s covers %s, an address of this host (on %s): its rules "
			    "would judge the host's own traffic",
			    t, fwstart_text(&own[i], u, sizeof(u)), own[i].ifname);
			return MOAT_EINVAL;
		}
	return 0;
}

int fwstart_check(const struct addrguard *guard, const struct fwnft_range *deny, size_t ndeny,
                  const struct fwnft_resolver *res, size_t nres, const struct fwnft_range *sb,
                  size_t nsb, const struct fwnft_range *own, size_t nown, char *err, size_t errlen)
{
	char a[64];
	if (nres == 0) {
		snprintf(
		    err, errlen,
		    "no --resolver: the sandbox could send DNS nowhere, not even to moatd; give "
		    "moatd's listen address: --resolver ADDR[:PORT]");
		return MOAT_EINVAL;
	}
	for (size_t i = 0; i < nres; i++)
		if (addrguard_check(guard, res[i].addr, res[i].family == 4 ? 4 : 16) ==
		    ADDR_ALWAYS) {
			snprintf(
			    err, errlen,
			    "--resolver %s lies in the always-deny ranges (metadata, loopback, "
			    "link-local, ...): moatd must listen on an address the sandbox may "
			    "reach",
			    addrguard_format(res[i].addr, res[i].family == 4 ? 4 : 16, a,
			                     sizeof(a)));
			return MOAT_EINVAL;
		}
	for (size_t i = 0; i < nsb; i++) {
		int rc = fwstart_sandbox(guard, deny, ndeny, &sb[i], own, nown, err, errlen);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* True when /proc/PID/status shows CAP_NET_RAW in CapEff. */
static bool fwstart_has_raw(const char *pid)
{
	char path[64], line[256];
	bool raw = false;
	snprintf(path, sizeof(path), "/proc/%s/status", pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return false;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "CapEff:", 7) == 0) {
			unsigned long long caps = strtoull(line + 7, NULL, 16);
			raw = (caps >> FWSTART_CAP_NET_RAW) & 1u;
		}
	fclose(f);
	return raw;
}

void fwstart_packet_warning(const char *path)
{
	struct stat ns, st;
	char pids[160] = "", p[64];
	size_t n = 0;
	if (stat(path, &ns) != 0)
		return;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(p, sizeof(p), "/proc/%s/ns/net", e->d_name);
		if (stat(p, &st) != 0 || st.st_ino != ns.st_ino || st.st_dev != ns.st_dev ||
		    !fwstart_has_raw(e->d_name))
			continue;
		if (atoi(e->d_name) == (int)getpid())
			continue;
		if (n++ < 8) {
			size_t l = strlen(pids);
			snprintf(pids + l, sizeof(pids) - l, "%s%s", l ? " " : "", e->d_name);
		}
	}
	if (d)
		closedir(d);
	fprintf(stderr,
	        "moat-fw: WARNING: netns placement: packet sockets (AF_PACKET) bypass the output "
	        "hook, so a sandbox process with CAP_NET_RAW can send past these rules; drop "
	        "CAP_NET_RAW in the sandbox or use --forward%s%s%s\n",
	        n ? " (processes with CAP_NET_RAW in it now: " : "", pids, n ? ")" : "");
}
