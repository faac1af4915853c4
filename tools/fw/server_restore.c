/* server_restore.c owns what moat-fw does with the ledger outside a batch: the rebuild at start-up
 * and after someone else changed the tables (table inet moat, and moat_guard in the forward
 * placement, replaced in one nft transaction from the current state: srv->setup's sandboxes and
 * the host's gateways in them; then every live ledger grant that this run still allows put
 * back) and the periodic purge of expired records. */
#include "server_restore.h"

#include "nft_batch.h"
#include "server_vet.h"
#include "startck.h"
#include "moat/addrguard.h"
#include "moat/bytes.h"
#include "moat/err.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define FWSRV_PURGE_GRACE 10 /* seconds a record outlives its expiry in the ledger */

struct fwsrv_restore {
	struct fwsrv *srv;
	struct fwnft_elem *v;
	size_t n, cap;
	size_t skipped;
};

static int fwsrv_restore_cb(const struct ledger_entry *e, void *ctx)
{
	struct fwsrv_restore *r = ctx;
	const struct fwsrv_opts *o = r->srv->o;
	static const uint8_t zero[16];
	struct fwproto_addr src = {.family = e->key.family}, dst = {.family = e->key.family};
	memcpy(src.addr, e->key.src, 16);
	memcpy(dst.addr, e->key.dst, 16);
	/* A grant the options of this run would refuse stays out too (a private address after
	 * --allow-private was dropped, an address the host has taken since, a resolver's). */
	bool ok = fwsrv_addr_why(r->srv, &src, &dst) == NULL;

	/* Records written under another placement or before a ranges file grew stay out, and so
	 * do those of a sandbox no longer there (the current sandboxes, not the command line's:
	 * they may change at run time) and those whose source is the host's own (a gateway). */
	const struct fwnft_setup *s = &r->srv->setup;
	if (o->placement == FWNFT_NETNS) {
		ok = ok && memcmp(e->key.src, zero, 16) == 0;
	} else {
		bool inside = false;
		for (size_t i = 0; i < s->nsandbox && !inside; i++)
			inside = fwnft_range_contains(&s->sandbox[i], e->key.family, e->key.src);
		ok = ok && inside && !fwsrv_is_own(r->srv, &src);
	}
	if (!ok) {
		r->skipped++;
		return 0;
	}
	if (grow_one(&r->v, &r->cap, r->n, sizeof(*r->v), 256) < 0)
		return MOAT_ENOMEM;
	struct fwnft_elem *n = &r->v[r->n++];
	n->family = e->key.family;
	n->proto = e->key.proto;
	n->port = e->key.port;
	memcpy(n->src, e->key.src, 16);
	memcpy(n->dst, e->key.dst, 16);
	n->timeout = e->remaining;
	n->refresh = false; /* the table is new: a plain add */
	return 0;
}

/* Put the restored elements back, a slice of transactions at a time. */
static int fwsrv_restore_elems(struct fwsrv *srv, const struct fwnft_elem *v, size_t n)
{
	char err[512];
	int rc = 0;
	for (size_t lo = 0; lo < n && rc == 0; lo += 32 * FWNFT_TXN_ELEMS) {
		struct fwnft_batch b = {0};
		size_t k = n - lo < 32 * FWNFT_TXN_ELEMS ? n - lo : 32 * FWNFT_TXN_ELEMS;
		rc = fwnft_batch_elems(&srv->setup, v + lo, k, &b);
		if (rc == 0 && (rc = fwnft_nl_send(srv->nl, &b, err, sizeof(err))) < 0)
			fprintf(stderr, "moat-fw: restoring grants: %s\n", err);
		fwnft_batch_free(&b);
	}
	return rc;
}

/* Forward placement: the host's addresses inside the current sandbox ranges (their gateways),
 * from the host's addresses as last read, into the setup. */
static int fwsrv_gateways(struct fwsrv *srv)
{
	struct fwnft_range *v = NULL;
	size_t n = 0;
	if (srv->o->placement != FWNFT_FORWARD)
		return 0;
	int rc =
	    fwstart_gateways(srv->setup.sandbox, srv->setup.nsandbox, srv->own, srv->nown, &v, &n);
	if (rc < 0)
		return rc;
	free(srv->hostsrc);
	srv->hostsrc = v;
	srv->nhostsrc = n;
	srv->setup.hostsrc = v;
	srv->setup.nhostsrc = n;
	return 0;
}

/* Replace both tables (one nft transaction), then put back every live ledger grant. Until the
 * grants are back the sets are empty: closed, never open. */
int fwsrv_rebuild(struct fwsrv *srv, bool restore)
{
	char err[1024];
	struct fwsrv_restore r = {.srv = srv};
	struct fwnft_buf b = {0};
	double t0 = fwsrv_ms();
	int purged = ledger_purge(srv->ledger, (uint64_t)time(NULL));
	int rc = ledger_iterate(srv->ledger, (uint64_t)time(NULL), fwsrv_restore_cb, &r);
	/* The sandboxes as they are now: those of --sandbox and those added at runtime
	 * (server_sandbox.c), which extend the same array. */
	srv->setup.sandbox = srv->o->sandbox;
	srv->setup.nsandbox = srv->o->nsandbox;
	if (rc >= 0)
		rc = fwsrv_gateways(srv);

	if (rc >= 0)
		rc = fwnft_build_ruleset(&srv->setup, &b);
	if (rc >= 0) {
		rc = fwnft_run(srv->nft, b.p, err, sizeof(err));
		if (rc < 0)
			fprintf(stderr, "moat-fw: nft: %s\n", err);
		if (rc >= 0)
			rc = fwsrv_restore_elems(srv, r.v, r.n);
	} else {
		fprintf(stderr, "moat-fw: reading the ledger failed: %s\n", moat_strerror(rc));
	}
	if (rc >= 0)
		fprintf(stderr,
		        "moat-fw: table inet moat %s (%s placement, %zu deny ranges%s); "
		        "%zu grants restored, %zu skipped, %d expired purged; %.3f ms\n",
		        restore ? "restored" : "created",
		        srv->o->placement == FWNFT_NETNS ? "netns" : "forward", srv->ndeny,
		        srv->o->placement == FWNFT_NETNS ? "" : ", with table inet moat_guard", r.n,
		        r.skipped, purged > 0 ? purged : 0, fwsrv_ms() - t0);
	free(r.v);
	fwnft_buf_free(&b);
	return rc < 0 ? rc : 0;
}

void fwsrv_purge(struct fwsrv *srv)
{
	/* Records stay a little past their expiry: a grant that comes back to such an address
	 * refreshes the element (delete + add) instead of a plain add, in case the kernel has not
	 * collected the expired element yet (a plain add would then leave it expired). */
	int rc = ledger_purge(srv->ledger, (uint64_t)time(NULL) - FWSRV_PURGE_GRACE);
	if (rc < 0)
		fprintf(stderr, "moat-fw: ledger purge failed: %s\n", moat_strerror(rc));
	else if (rc > 0)
		fprintf(stderr, "moat-fw: purged %d expired grants from the ledger\n", rc);
}
