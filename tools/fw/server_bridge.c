/* server_bridge.c owns moat-fw's knowledge of the sandbox bridges (server_bridge.h): which
 * --sandbox interfaces are Linux bridges (or do not exist yet, and may become one: a container
 * engine creates its bridge when its network is made), read from rtnetlink at every rebuild
 * and once a second; whether the kernel can match a frame's bridge by name (asked once, with a
 * transaction the kernel checks and aborts); the ports of the host's other bridges, which the
 * bridge tables let pass when it cannot; and keeping the bridge tables in step when any of it
 * changes. The tables' text is nft_bridge.c's. */
#include "server_bridge.h"

#include "hostnet.h"
#include "moat/err.h"
#include "nft.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The current lists into srv and its setup (srv takes br and ports). */
static void fwsrv_bridge_store(struct fwsrv *srv, struct fwnft_ifname *br, size_t nbr,
                               uint32_t *ports, size_t nports)
{
	free(srv->bridge);
	free(srv->bports);
	srv->bridge = br;
	srv->nbridge = nbr;
	srv->bports = ports;
	srv->nbports = nports;
	srv->setup.bridge = br;
	srv->setup.nbridge = nbr;
	srv->setup.bports = ports;
	srv->setup.nbports = nports;
	srv->setup.bridge_meta = srv->bridge_meta > 0;
}

static int fwsrv_bridge_read(const struct fwsrv *srv, struct fwnft_ifname **br, size_t *nbr,
                             uint32_t **ports, size_t *nports)
{
	struct fwhost_link *l = NULL;
	size_t nl = 0;
	int rc = fwhost_links(&l, &nl);
	if (rc == 0)
		/* The sandboxes as they are now (runtime ones too: server_sandbox.c). */
		rc = fwhost_bridges(l, nl, srv->o->sandbox, srv->o->nsandbox, br, nbr, ports,
		                    nports);
	free(l);
	return rc;
}

/* "br-x, br-y" */
static void fwsrv_bridge_names(const struct fwsrv *srv, char *out, size_t cap)
{
	out[0] = '\0';
	for (size_t i = 0; i < srv->nbridge; i++) {
		size_t l = strlen(out);
		snprintf(out + l, cap - l, "%s%s", i ? ", " : "", srv->bridge[i].name);
	}
}

/* Whether the kernel takes the tables with meta ibrname, else with the port set; neither:
 * moat-fw cannot close the bridges, and says so. */
static int fwsrv_bridge_probe(struct fwsrv *srv)
{
	char err[512], names[256];
	struct fwnft_setup t = srv->setup;
	t.bridge_stale = false;
	for (int meta = 1; meta >= 0; meta--) {
		struct fwnft_buf b = {0};
		t.bridge_meta = meta;
		int rc = fwnft_build_bridge(&t, &b);
		if (rc == 0)
			rc = fwnft_check(srv->nft, b.p, err, sizeof(err));
		fwnft_buf_free(&b);
		if (rc == 0) {
			srv->bridge_meta = meta ? 1 : -1;
			srv->setup.bridge_meta = meta;
			return 0;
		}
	}
	fwsrv_bridge_names(srv, names, sizeof(names));
	fprintf(stderr,
	        "moat-fw: refusing: sandbox interface %s is a Linux bridge (or not there yet), and "
	        "this kernel refuses nftables bridge tables (%s): sandboxes on it would reach each "
	        "other unfiltered (CONFIG_NF_TABLES_BRIDGE)\n",
	        names, err);
	return MOAT_EIO;
}

/* The start-up line, and one whenever the bridges change. */
static void fwsrv_bridge_say(const struct fwsrv *srv)
{
	char names[256];
	fwsrv_bridge_names(srv, names, sizeof(names));
	if (srv->nbridge == 0)
		fprintf(stderr,
		        "moat-fw: no sandbox interface is a bridge now: no bridge tables\n");
	else if (srv->bridge_meta > 0)
		fprintf(stderr,
		        "moat-fw: sandbox bridges (or interfaces not there yet) %s: tables bridge "
		        "moat and moat_guard drop what they switch between their ports (matched by "
		        "bridge name)\n",
		        names);
	else
		fprintf(
		    stderr,
		    "moat-fw: sandbox bridges (or interfaces not there yet) %s: tables bridge "
		    "moat and moat_guard drop what they switch between their ports; this kernel "
		    "has no meta ibrname (CONFIG_NFT_BRIDGE_META), so every bridge's switched "
		    "frames are dropped but those from ports of the host's other bridges (%zu "
		    "now, read every second)\n",
		    names, srv->nbports);
}

static bool fwsrv_bridge_same(const struct fwsrv *srv, const struct fwnft_ifname *br, size_t nbr)
{
	if (nbr != srv->nbridge)
		return false;
	for (size_t i = 0; i < nbr; i++)
		if (strcmp(br[i].name, srv->bridge[i].name) != 0)
			return false;
	return true;
}

/* Whether either bridge table is in place (left by an earlier run or configuration). */
static bool fwsrv_bridge_tables_left(struct fwsrv *srv)
{
	char c[8];
	return fwnft_table_comment(srv->nft, "bridge", FWNFT_TABLE, c, sizeof(c)) == 0 ||
	       fwnft_table_comment(srv->nft, "bridge", FWNFT_GUARD, c, sizeof(c)) == 0;
}

int fwsrv_bridge_setup(struct fwsrv *srv)
{
	struct fwnft_ifname *br = NULL;
	uint32_t *ports = NULL;
	size_t nbr = 0, nports = 0;
	if (srv->o->placement != FWNFT_FORWARD)
		return 0;
	int rc = fwsrv_bridge_read(srv, &br, &nbr, &ports, &nports);
	if (rc < 0 && !srv->bridge_known) {
		fprintf(stderr, "moat-fw: cannot read this host's interfaces: %s\n",
		        moat_strerror(rc));
		return rc;
	}
	if (rc == 0) { /* else: the last lists stand */
		bool say = !srv->bridge_known || !fwsrv_bridge_same(srv, br, nbr);
		fwsrv_bridge_store(srv, br, nbr, ports, nports);
		srv->bridge_known = true;
		if (nbr && srv->bridge_meta == 0 && (rc = fwsrv_bridge_probe(srv)) < 0)
			return rc;
		if (say && (nbr || srv->bridge_meta))
			fwsrv_bridge_say(srv);
	}
	srv->setup.bridge_stale = srv->nbridge == 0 && fwsrv_bridge_tables_left(srv);
	return 0;
}

/* Apply the new lists: the whole bridge tables when the bridges changed, else the port sets.
 * On failure srv keeps the old lists, so the next refresh tries again. */
static void fwsrv_bridge_apply(struct fwsrv *srv, struct fwnft_ifname *br, size_t nbr,
                               uint32_t *ports, size_t nports, bool tables)
{
	char err[512];
	struct fwnft_ifname *ob = srv->bridge;
	uint32_t *op = srv->bports;
	size_t nob = srv->nbridge, nop = srv->nbports;
	struct fwnft_buf b = {0};
	srv->bridge = NULL; /* fwsrv_bridge_store must not free the old lists yet */
	srv->bports = NULL;
	fwsrv_bridge_store(srv, br, nbr, ports, nports);
	int rc = 0;
	if (nbr && srv->bridge_meta == 0)
		rc = fwsrv_bridge_probe(srv);
	srv->setup.bridge_stale = nbr == 0;
	if (rc == 0)
		rc = tables ? fwnft_build_bridge(&srv->setup, &b)
		            : fwnft_build_bports(&srv->setup, &b);
	if (rc == 0 && (rc = fwnft_run(srv->nft, b.p, err, sizeof(err))) < 0)
		fprintf(stderr, "moat-fw: updating the bridge tables: %s\n", err);
	fwnft_buf_free(&b);
	srv->setup.bridge_stale = false;
	if (rc < 0) {
		fwsrv_bridge_store(srv, ob, nob, op, nop); /* frees the new lists */
		return;
	}
	free(ob);
	free(op);
	if (tables)
		fwsrv_bridge_say(srv);
}

void fwsrv_bridge_refresh(struct fwsrv *srv)
{
	struct fwnft_ifname *br = NULL;
	uint32_t *ports = NULL;
	size_t nbr = 0, nports = 0;
	if (srv->o->placement != FWNFT_FORWARD ||
	    fwsrv_bridge_read(srv, &br, &nbr, &ports, &nports) < 0)
		return;
	bool tables = !fwsrv_bridge_same(srv, br, nbr);
	bool elems = !tables && nbr && srv->bridge_meta < 0 &&
	             (nports != srv->nbports ||
	              (nports && memcmp(ports, srv->bports, nports * sizeof(*ports)) != 0));
	if (tables || elems) {
		fwsrv_bridge_apply(srv, br, nbr, ports, nports, tables);
		return;
	}
	free(br);
	free(ports);
}
