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
		if (sb[i].bits == 0)
			continue; /* the whole space: fwstart_check refuses it and says what works
			           */
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

/* True when an address's interface (getifaddrs' name, maybe with a ":label") is ifname. */
static bool fwstart_same_if(const char *addr_if, const char *ifname)
{
	size_t n = strcspn(addr_if, ":");
	return *ifname && strlen(ifname) == n && strncmp(addr_if, ifname, n) == 0;
}

bool fwstart_is_gateway(const struct fwnft_range *own, const struct fwnft_range *sb)
{
	return fwnft_range_within(own, sb) && fwstart_same_if(own->ifname, sb->ifname);
}

/* "CIDR" or "CIDR@IFACE" as --sandbox would take it. */
static const char *fwstart_flag(const struct fwnft_range *r, const char *ifname, char *out,
                                size_t cap)
{
	char t[80];
	fwstart_text(r, t, sizeof(t));
	snprintf(out, cap, "%s%s%s", t, *ifname ? "@" : "", ifname);
	return out;
}

/* --sandbox 0/0: say which range would do, from the host's networks (on its interface when it
 * names one). */
static int fwstart_whole(const struct fwnft_range *r, const struct fwnft_range *nets, size_t nnets,
                         char *err, size_t errlen)
{
	char t[80], u[96];
	const struct fwnft_range *pick = NULL;
	for (size_t i = 0; i < nnets && !pick; i++)
		if (nets[i].family == r->family &&
		    (!*r->ifname || fwstart_same_if(nets[i].ifname, r->ifname)))
			pick = &nets[i];
	if (pick) {
		char ifn[FWNFT_IFNAMSIZ];
		snprintf(ifn, sizeof(ifn), "%.*s", (int)strcspn(pick->ifname, ":"), pick->ifname);
		fwstart_flag(pick, ifn, u, sizeof(u));
	} else {
		snprintf(u, sizeof(u), "%s@IFACE",
		         r->family == 4 ? "192.0.2.0/24" : "2001:db8::/64");
	}
	snprintf(err, errlen,
	         "--sandbox %s is the whole address space: name the sandboxes' own range, such as "
	         "--sandbox %s%s",
	         fwstart_text(r, t, sizeof(t)), u, pick ? " (a network of this host)" : "");
	return MOAT_EINVAL;
}

/* A host address inside r on another interface than r's: refused, with the two flags that
 * would work (the interface that holds it, or the half of r without it). */
static int fwstart_foreign_own(const struct fwnft_range *r, const struct fwnft_range *own,
                               char *err, size_t errlen)
{
	char t[96], u[80], v[96], w[96], ifn[FWNFT_IFNAMSIZ];
	struct fwnft_range half = *r;
	if (r->bits < (r->family == 4 ? 32 : 128)) {
		/* The half that leaves own out: r's address with the next bit unlike own's. */
		uint8_t m = (uint8_t)(0x80 >> (r->bits % 8));
		half.addr[r->bits / 8] =
		    (uint8_t)((half.addr[r->bits / 8] & ~m) | (~own->addr[r->bits / 8] & m));
		half.bits++;
	}
	snprintf(ifn, sizeof(ifn), "%.*s", (int)strcspn(own->ifname, ":"), own->ifname);
	bool host = r->bits == (r->family == 4 ? 32 : 128); /* nothing left without it */
	snprintf(w, sizeof(w), "; else leave the address out: --sandbox ");
	if (!host)
		fwstart_flag(&half, r->ifname, w + strlen(w), sizeof(w) - strlen(w));
	snprintf(err, errlen,
	         "--sandbox %s covers %s, an address of this host (on %s%s%s): its rules would "
	         "judge the host's own traffic; if the sandboxes are behind %s, name it: "
	         "--sandbox %s%s",
	         fwstart_flag(r, r->ifname, t, sizeof(t)), fwstart_text(own, u, sizeof(u)),
	         own->ifname, *r->ifname ? ", not " : "", r->ifname, ifn,
	         fwstart_flag(r, ifn, v, sizeof(v)), host ? "" : w);
	return MOAT_EINVAL;
}

static int fwstart_sandbox(const struct addrguard *guard, const struct fwnft_range *deny,
                           size_t ndeny, const struct fwnft_range *r, const struct fwnft_range *own,
                           size_t nown, const struct fwnft_range *nets, size_t nnets, char *err,
                           size_t errlen)
{
	char t[80], u[80];
	fwstart_text(r, t, sizeof(t));
	if (r->bits == 0)
		return fwstart_whole(r, nets, nnets, err, errlen);
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
	/* The host's addresses on the range's own interface are its gateway (a bridge's address
	 * inside the subnet): the rules treat them as the host's, never a sandbox's. */
	for (size_t i = 0; i < nown; i++)
		if (fwnft_range_within(&own[i], r) && !fwstart_is_gateway(&own[i], r))
			return fwstart_foreign_own(r, &own[i], err, errlen);
	return 0;
}

int fwstart_gateways(const struct fwnft_range *sb, size_t nsb, const struct fwnft_range *own,
                     size_t nown, struct fwnft_range **out, size_t *nout)
{
	struct fwnft_range *v = NULL;
	size_t n = 0;
	for (size_t i = 0; i < nown; i++) {
		bool in = false;
		for (size_t j = 0; j < nsb && !in; j++)
			in = fwstart_is_gateway(&own[i], &sb[j]);
		if (!in)
			continue;
		struct fwnft_range *nv = realloc(v, (n + 1) * sizeof(*nv));
		if (!nv) {
			free(v);
			return MOAT_ENOMEM;
		}
		v = nv;
		v[n] = own[i];
		v[n].ifname[strcspn(v[n].ifname, ":")] = '\0'; /* the interface, not the label */
		n++;
	}
	*out = v;
	*nout = n;
	return 0;
}

int fwstart_check(const struct addrguard *guard, const struct fwnft_range *deny, size_t ndeny,
                  const struct fwnft_resolver *res, size_t nres, const struct fwnft_range *sb,
                  size_t nsb, const struct fwnft_range *own, size_t nown,
                  const struct fwnft_range *nets, size_t nnets, char *err, size_t errlen)
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
		int rc = fwstart_sandbox(guard, deny, ndeny, &sb[i], own, nown, nets, nnets, err,
		                         errlen);
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
