/* server_sandbox.c owns moat-fw's runtime sandboxes (forward placement): the SANDBOX_ADD and
 * SANDBOX_DEL requests of a root peer (moat run, moat/fwproto_sandbox.h), the list of ranges
 * they keep beside the --sandbox ones, and the removal of everything granted to a removed
 * range, in the kernel's sets and in the ledger, so a later sandbox given the same address
 * never inherits a grant.
 *
 * Runtime interfaces are named FWNFT_RUNTIME_IFPREFIX* ("moat-3"): the ruleset sends every
 * interface of that name through the sandbox chains whatever this list holds (nft.c), so an
 * interface whose range is not (or no longer) known has no valid source and all its traffic is
 * dropped, also after a restart of moat-fw, which forgets runtime ranges: closed stays closed
 * until moat run adds the range again.
 *
 * The checks of an added range are the start-up ones (startck.c: not the whole space, not in
 * or over an always-deny range, no address of this host) and one more: no overlap with any
 * other sandbox range, so one sandbox can never take another's source. */
#include "server_sandbox.h"

#include "nft_batch.h"
#include "startck.h"
#include "moat/bytes.h"
#include "moat/err.h"
#include "moat/fwproto.h"
#include "moat/fwproto_sandbox.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

int fwsrv_sandbox_init(struct fwsrv *srv, const struct fwsrv_opts *o)
{
	srv->opts = *o;
	/* Allocated once at its largest: the array never moves, so pointers into it (the
	 * start-up setup's) stay good. */
	srv->sbx = calloc(o->nsandbox + FWSRV_RUNTIME_MAX, sizeof(*srv->sbx));
	if (!srv->sbx)
		return MOAT_ENOMEM;
	if (o->nsandbox)
		memcpy(srv->sbx, o->sandbox, o->nsandbox * sizeof(*srv->sbx));
	srv->nsbx_start = o->nsandbox;
	srv->opts.sandbox = srv->sbx;
	srv->o = &srv->opts;
	return 0;
}

void fwsrv_sandbox_free(struct fwsrv *srv)
{
	free(srv->sbx);
	srv->sbx = NULL;
}

static const char *fwsrv_range_text(const struct fwnft_range *r, char *out, size_t cap)
{
	char a[INET6_ADDRSTRLEN];
	inet_ntop(r->family == 4 ? AF_INET : AF_INET6, r->addr, a, sizeof(a));
	snprintf(out, cap, "%s/%u", a, r->bits);
	return out;
}

static bool fwsrv_same(const struct fwnft_range *a, const struct fwnft_range *b)
{
	return a->family == b->family && a->bits == b->bits && memcmp(a->addr, b->addr, 16) == 0 &&
	       strcmp(a->ifname, b->ifname) == 0;
}

/* Index of r in the sandbox list, or -1. */
static long fwsrv_sandbox_find(const struct fwsrv *srv, const struct fwnft_range *r)
{
	for (size_t i = 0; i < srv->opts.nsandbox; i++)
		if (fwsrv_same(&srv->sbx[i], r))
			return (long)i;
	return -1;
}

/* `add|delete element inet moat sbxF { "IF" . ADDR/BITS }` */
static int fwsrv_sbx_cmd(struct fwsrv *srv, const char *verb, const struct fwnft_range *r,
                         char *err, size_t errlen)
{
	char cmd[200], t[80];
	snprintf(cmd, sizeof(cmd), "%s element inet " FWNFT_TABLE " sbx%d { \"%s\" . %s }\n", verb,
	         r->family == 4 ? 4 : 6, r->ifname, fwsrv_range_text(r, t, sizeof(t)));
	return fwnft_run(srv->nft, cmd, err, errlen);
}

static uint16_t fwsrv_sandbox_add(struct fwsrv *srv, const struct fwnft_range *r, char *why,
                                  size_t cap)
{
	char t[80], u[80];
	size_t plen = strlen(FWNFT_RUNTIME_IFPREFIX);
	if (strncmp(r->ifname, FWNFT_RUNTIME_IFPREFIX, plen) != 0 || !r->ifname[plen]) {
		snprintf(why, cap,
		         "runtime sandbox interfaces are named " FWNFT_RUNTIME_IFPREFIX "*, not %s",
		         r->ifname);
		return FWPROTO_DENIED;
	}
	if (fwsrv_sandbox_find(srv, r) >= (long)srv->nsbx_start)
		return FWPROTO_OK; /* added again (moat run after a reconnect): nothing to do */
	if (fwstart_check(srv->guard, srv->deny, srv->ndeny, srv->o->resolver, srv->o->nresolver, r,
	                  1, srv->own, srv->nown, NULL, 0, why, cap) < 0)
		return FWPROTO_DENIED;
	for (size_t i = 0; i < srv->opts.nsandbox; i++) {
		const struct fwnft_range *o = &srv->sbx[i];
		if (o->family == r->family &&
		    (fwnft_range_within(o, r) || fwnft_range_within(r, o))) {
			snprintf(why, cap, "%s overlaps sandbox %s on %s",
			         fwsrv_range_text(r, t, sizeof(t)),
			         fwsrv_range_text(o, u, sizeof(u)), o->ifname);
			return FWPROTO_DENIED;
		}
	}
	if (srv->opts.nsandbox - srv->nsbx_start >= FWSRV_RUNTIME_MAX) {
		snprintf(why, cap, "already %d runtime sandboxes", FWSRV_RUNTIME_MAX);
		return FWPROTO_DENIED;
	}
	char err[512];
	if (fwsrv_sbx_cmd(srv, "add", r, err, sizeof(err)) < 0) {
		fprintf(stderr, "moat-fw: runtime sandbox %s: nft: %s\n",
		        fwsrv_range_text(r, t, sizeof(t)), err);
		snprintf(why, cap, "nft refused the sandbox range");
		return FWPROTO_FAILED;
	}
	srv->sbx[srv->opts.nsandbox++] = *r;
	fprintf(stderr, "moat-fw: runtime sandbox %s on %s added\n",
	        fwsrv_range_text(r, t, sizeof(t)), r->ifname);
	return FWPROTO_OK;
}

/* The ledger's grants bound to a source in one range, gathered for their removal. */
struct fwsrv_purge {
	const struct fwnft_range *r;
	FILE *cmds; /* nft commands */
	size_t n;
};

static bool fwsrv_purge_match(const struct ledger_key *k, void *ctx)
{
	const struct fwnft_range *r = ctx;
	return fwnft_range_contains(r, k->family, k->src);
}

/* Two commands per live element: an add (a no-op when it is there, so the delete cannot fail
 * on one that just expired) and the delete; all in one transaction. */
static int fwsrv_purge_cb(const struct ledger_entry *e, void *ctx)
{
	struct fwsrv_purge *p = ctx;
	const struct ledger_key *k = &e->key;
	if (!fwsrv_purge_match(k, (void *)p->r))
		return 0;
	char src[INET6_ADDRSTRLEN], dst[INET6_ADDRSTRLEN], tail[32] = "";
	int af = k->family == 4 ? AF_INET : AF_INET6;
	inet_ntop(af, k->src, src, sizeof(src));
	inet_ntop(af, k->dst, dst, sizeof(dst));
	const char *set = k->proto == FWNFT_PROTO_ANY    ? "allow"
	                  : k->proto == FWNFT_PROTO_ECHO ? "echo"
	                                                 : "port";
	if (k->proto != FWNFT_PROTO_ANY && k->proto != FWNFT_PROTO_ECHO)
		snprintf(tail, sizeof(tail), " . %s . %u", k->proto == 6 ? "tcp" : "udp", k->port);
	fprintf(p->cmds,
	        "add element inet " FWNFT_TABLE " %s%d { %s . %s%s timeout 1s }\n"
	        "delete element inet " FWNFT_TABLE " %s%d { %s . %s%s }\n",
	        set, k->family, src, dst, tail, set, k->family, src, dst, tail);
	p->n++;
	return 0;
}

/* Remove r's element (when registered) and every grant bound to a source in r, from the kernel
 * and from the ledger. The number of grants removed, or a negative code with why set. */
static int fwsrv_purge(struct fwsrv *srv, const struct fwnft_range *r, bool registered, char *why,
                       size_t cap)
{
	char *text = NULL, err[512];
	size_t len = 0;
	struct fwsrv_purge p = {.r = r, .cmds = open_memstream(&text, &len)};
	if (!p.cmds)
		return MOAT_ENOMEM;
	if (registered) {
		char t[80];
		fprintf(p.cmds, "delete element inet " FWNFT_TABLE " sbx%d { \"%s\" . %s }\n",
		        r->family, r->ifname, fwsrv_range_text(r, t, sizeof(t)));
	}
	int rc = ledger_iterate(srv->ledger, (uint64_t)time(NULL), fwsrv_purge_cb, &p);
	fclose(p.cmds);
	if (rc >= 0 && len)
		rc = fwnft_run(srv->nft, text, err, sizeof(err));
	free(text);
	if (rc < 0) {
		snprintf(why, cap, "%s", rc == MOAT_EIO ? "nft refused the removal" : "ledger");
		return rc;
	}
	rc = ledger_delete_if(srv->ledger, fwsrv_purge_match, (void *)r);
	if (rc < 0) {
		snprintf(why, cap, "the ledger could not be written");
		return rc;
	}
	return (int)p.n;
}

static uint16_t fwsrv_sandbox_del(struct fwsrv *srv, const struct fwnft_range *r, char *why,
                                  size_t cap)
{
	char t[80];
	long i = fwsrv_sandbox_find(srv, r);
	if (i >= 0 && i < (long)srv->nsbx_start) {
		snprintf(why, cap, "%s on %s was given at start (--sandbox): not removable",
		         fwsrv_range_text(r, t, sizeof(t)), r->ifname);
		return FWPROTO_DENIED;
	}
	/* Unknown ranges too: a sandbox of an earlier moat-fw run may have left grants. */
	int n = fwsrv_purge(srv, r, i >= 0, why, cap);
	if (n < 0)
		return FWPROTO_FAILED;
	if (i >= 0) {
		memmove(&srv->sbx[i], &srv->sbx[i + 1],
		        (srv->opts.nsandbox - (size_t)i - 1) * sizeof(*srv->sbx));
		srv->opts.nsandbox--;
	}
	fprintf(
	    stderr, "moat-fw: runtime sandbox %s on %s removed%s, %d grant element(s) with it\n",
	    fwsrv_range_text(r, t, sizeof(t)), r->ifname, i >= 0 ? "" : " (was not registered)", n);
	return FWPROTO_OK;
}

/* The reply's resolvers: where the sandbox may send DNS. */
static void fwsrv_reply_resolvers(const struct fwsrv *srv, struct fwproto_sandbox_reply *rp)
{
	for (size_t i = 0; i < srv->o->nresolver && rp->nres < FWPROTO_SBX_MAXRES; i++) {
		struct fwproto_resolver *d = &rp->res[rp->nres++];
		d->family = srv->o->resolver[i].family;
		memcpy(d->addr, srv->o->resolver[i].addr, 16);
		d->port = srv->o->resolver[i].port;
	}
}

/* Decide one decoded request from c into rp (status and text). */
static void fwsrv_sandbox_decide(struct fwsrv_conn *c, const struct fwproto_sandbox *rq,
                                 struct fwproto_sandbox_reply *rp)
{
	struct fwsrv *srv = c->srv;
	struct fwnft_range r = {.family = rq->family, .bits = rq->bits};
	memcpy(r.addr, rq->addr, 16);
	memcpy(r.ifname, rq->ifname, sizeof(r.ifname));
	r.allow_private = rq->allow_private;
	if (c->uid != 0) {
		snprintf(rp->text, sizeof(rp->text), "only root may add or remove sandboxes");
		rp->status = FWPROTO_DENIED;
	} else if (srv->o->placement != FWNFT_FORWARD) {
		snprintf(rp->text, sizeof(rp->text),
		         "runtime sandboxes need moat-fw in the forward placement");
		rp->status = FWPROTO_DENIED;
	} else if (rq->type == FWPROTO_SANDBOX_ADD) {
		rp->status = fwsrv_sandbox_add(srv, &r, rp->text, sizeof(rp->text));
	} else {
		rp->status = fwsrv_sandbox_del(srv, &r, rp->text, sizeof(rp->text));
	}
	if (rp->status != FWPROTO_OK)
		fprintf(stderr, "moat-fw: sandbox request seq %u from uid %u refused: %s\n",
		        rq->seq, (unsigned)c->uid, rp->text);
}

bool fwsrv_sandbox_msg(struct fwsrv_conn *c, const uint8_t *msg, size_t len)
{
	if (!fwproto_is_sandbox(msg, len))
		return false;
	struct fwproto_sandbox rq;
	struct fwproto_sandbox_reply rp = {0};
	if (fwproto_sandbox_decode(msg, len, &rq) != 0) {
		rp.status = FWPROTO_BADMSG;
		rp.seq = len >= 8 ? be32_get(msg + 4) : 0;
		snprintf(rp.text, sizeof(rp.text), "unreadable sandbox request");
	} else {
		rp.seq = rq.seq;
		fwsrv_sandbox_decide(c, &rq, &rp);
		if (rp.status == FWPROTO_OK)
			fwsrv_reply_resolvers(c->srv, &rp);
	}
	uint8_t buf[FWPROTO_SBX_MAXREPLY];
	int n = fwproto_sandbox_reply_encode(&rp, buf, sizeof(buf));
	/* One request, one reply: a client that cannot take it is shut down, and the read
	 * callback closes the connection on the end of file that follows. */
	if (n < 0 || send(c->fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) != n)
		shutdown(c->fd, SHUT_RDWR);
	return true;
}
