/* server_batch.c owns the end-of-turn batch: the grants read during a loop turn (srv->pending)
 * are checked (server_vet.c), turned into their allow-set elements (nft_batch.h: one "every
 * port" element, or one per (protocol, port) of the grant and one echo element), deduplicated,
 * and written in one LMDB write transaction and one nft transaction whatever their number; then
 * one ACK each. The ledger transaction commits only after nft succeeded, so the ledger never
 * records a grant the kernel refused. */
#include "server_batch.h"

#include "metrics.h"
#include "nft_batch.h"
#include "server_conn.h"
#include "server_vet.h"
#include "server_watch.h"
#include "moat/err.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int fwsrv_key_cmp(const void *a, const void *b)
{
	const struct fwsrv_elem *x = a, *y = b;
	return memcmp(&x->key, &y->key, sizeof(x->key));
}

/* Write the batch's unique elements to the ledger and the kernel. 0, or a negative code with a
 * line on stderr (the ledger transaction is then dropped). */
static int fwsrv_commit(struct fwsrv *srv, size_t ne, uint64_t now, double *nft_ms,
                        double *ledger_ms)
{
	char err[512];
	struct fwnft_batch b = {0};
	double t0 = fwsrv_ms();
	int rc = ledger_batch_begin(srv->ledger);

	for (size_t i = 0; i < ne && rc == 0; i++) {
		struct fwsrv_elem *e = &srv->elems[i];
		struct fwnft_elem *n = &srv->nelems[i];
		uint64_t prev = 0;
		rc = ledger_batch_put(srv->ledger, &e->key, e->expiry, e->agent, &prev);
		n->family = e->key.family;
		n->proto = e->key.proto;
		n->port = e->key.port;
		memcpy(n->src, e->key.src, 16);
		memcpy(n->dst, e->key.dst, 16);
		/* Refresh only when the ledger knew the element and the new expiry is later;
		 * otherwise a plain add: with the ledger's remaining time it is a no-op if the
		 * element is there and a repair if it is not. An element the ledger never held is
		 * not in the set either (the kernel's copy never outlives the ledger's): a fresh
		 * grant is one add, not add + delete + add. */
		n->refresh = prev != 0 && e->expiry > prev;
		n->timeout = (e->expiry > prev ? e->expiry : prev) - now;
	}
	if (rc < 0) {
		fprintf(stderr, "moat-fw: ledger write failed: %s\n", moat_strerror(rc));
		ledger_batch_abort(srv->ledger);
		return rc;
	}
	*ledger_ms = fwsrv_ms() - t0;
	double t1 = fwsrv_ms();
	rc = fwnft_batch_elems(&srv->setup, srv->nelems, ne, &b);
	if (rc == 0)
		rc = fwnft_nl_send(srv->nl, &b, err, sizeof(err));
	*nft_ms = fwsrv_ms() - t1;
	fwnft_batch_free(&b);
	if (rc < 0) {
		fprintf(stderr, "moat-fw: nft refused the batch: %s\n",
		        rc == MOAT_EIO ? err : moat_strerror(rc));
		ledger_batch_abort(srv->ledger);
		return rc;
	}
	t1 = fwsrv_ms();
	rc = ledger_batch_commit(srv->ledger);
	*ledger_ms += fwsrv_ms() - t1;
	if (rc < 0)
		fprintf(stderr, "moat-fw: ledger commit failed; the grants are refused\n");
	return rc;
}

/* The elements of one granted address into out[] (fwsrv_grant_elems bounds their number):
 * "every port", or its ports then its echo. Returns how many. */
static size_t fwsrv_addr_elems(struct fwsrv *srv, const struct fwsrv_pending *p,
                               const struct fwproto_addr *a, uint64_t now, struct fwsrv_elem *out)
{
	size_t n = 0, nport = p->g.nport;
	for (size_t k = 0; k < (nport ? nport + 1 : 1); k++) {
		struct fwsrv_elem *e = &out[n++];
		memset(&e->key, 0, sizeof(e->key));
		e->key.family = a->family;
		memcpy(e->key.dst, a->addr, 16);
		if (srv->o->placement == FWNFT_FORWARD)
			fwsrv_source(srv->o, &p->g.client, a->family, e->key.src);
		bool echo = nport && k == nport;
		e->key.proto = echo    ? FWNFT_PROTO_ECHO
		               : nport ? p->g.port[k].proto
		                       : FWNFT_PROTO_ANY;
		e->key.port = echo || !nport ? 0 : p->g.port[k].port;
		e->expiry = now + p->lifetime + FWSRV_SLACK;
		e->agent = p->g.agent;
	}
	return n;
}

void fwsrv_flush(struct fwsrv *srv)
{
	size_t n = srv->npending, ne = 0, ok = 0, denied = 0, failed = 0;
	double t0 = fwsrv_ms(), nft_ms = 0, ledger_ms = 0;
	uint64_t now = (uint64_t)time(NULL);

	for (size_t i = 0; i < n; i++) {
		struct fwsrv_pending *p = &srv->pending[i];
		fwsrv_vet(srv, p);
		if (p->status != FWPROTO_OK)
			continue;
		for (size_t j = 0; j < p->g.naddr; j++)
			ne += fwsrv_addr_elems(srv, p, &p->g.addr[j], now, &srv->elems[ne]);
	}
	srv->pending_elems = 0;
	/* One element per key: the set command must not name an element twice. */
	qsort(srv->elems, ne, sizeof(*srv->elems), fwsrv_key_cmp);
	size_t u = 0;
	for (size_t i = 0; i < ne; i++) {
		if (u && fwsrv_key_cmp(&srv->elems[u - 1], &srv->elems[i]) == 0) {
			if (srv->elems[i].expiry > srv->elems[u - 1].expiry)
				srv->elems[u - 1] = srv->elems[i];
			continue;
		}
		srv->elems[u++] = srv->elems[i];
	}
	int rc = u ? fwsrv_commit(srv, u, now, &nft_ms, &ledger_ms) : 0;
	/* Refused because someone just changed the tables (deleted table inet moat, say): once
	 * they are back, the batch goes again. */
	if (rc < 0 && fwsrv_watch_check(srv))
		rc = fwsrv_commit(srv, u, now, &nft_ms, &ledger_ms);

	for (size_t i = 0; i < n; i++) {
		struct fwsrv_pending *p = &srv->pending[i];
		if (p->status == FWPROTO_OK && rc < 0) {
			p->status = FWPROTO_FAILED;
			p->lifetime = 0;
		}
		if (p->status == FWPROTO_OK)
			ok++;
		else if (p->status == FWPROTO_DENIED)
			denied++;
		else
			failed++;
	}
	/* Counted before the ACKs: a scrape after an ACK sees its grant. */
	fwmetrics_grants(n, ok, denied, failed);
	for (size_t i = 0; i < n; i++) {
		struct fwsrv_pending *p = &srv->pending[i];
		/* fwsrv_send_ack may close the connection, which clears later entries' conn. */
		fwsrv_send_ack(p->conn, p->status, p->g.seq,
		               p->status == FWPROTO_OK ? p->lifetime : 0);
	}
	srv->npending = 0;
	fprintf(stderr,
	        "moat-fw: batch grants=%zu ok=%zu denied=%zu failed=%zu addresses=%zu "
	        "nft_ms=%.3f ledger_ms=%.3f total_ms=%.3f\n",
	        n, ok, denied, failed, u, nft_ms, ledger_ms, fwsrv_ms() - t0);
}
