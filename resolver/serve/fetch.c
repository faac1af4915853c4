/* fetch.c owns the way from an allowed question to an upstream answer: the answer cache
 * (moat/cache.h), the table of questions in flight (identical questions share one upstream
 * query), and the hand-off to upstream.c. What it returns is only the upstream's answer, parsed;
 * every policy check happens in query.c, for each query on its own, cached or not. A question
 * is asked of one upstream set (the global upstreams or a forward zone's): the set's id is part
 * of the cache key and of the in-flight match, so zones never share answers. */
#include <sodium.h>
#include <stdlib.h>
#include <string.h>

#include "serve/fetch.h"
#include "moat/bytes.h"
#include "moat/cache.h"
#include "moat/err.h"
#include "moat/spare.h"
#include "serve/upstream.h"
#include "serve/worker.h"

#define FETCH_BUCKETS 1024
#define ANSWER_KEEP_PKT 4096 /* freed answers are kept with their packet buffer up to this size */

struct fetch {
	struct dlist link; /* in its bucket */
	struct worker *srv;
	uint64_t hash;
	uint8_t lname[NAME_MAXWIRE];
	uint16_t qtype, qclass;
	bool dnssec_ok;
	uint32_t variant; /* cache key variant: DO bit | upstream set id << 1 */
	struct upstream_req *up;
	struct dlist waiters; /* struct fetch_wait */
	struct answer *ans;   /* one reference; resp is filled by upstream.c */
};

struct fetch_wait {
	struct dlist link;
	struct fetch *f;
	fetch_cb cb;
	void *ctx;
};

struct fetch_table {
	uint8_t key[crypto_shorthash_KEYBYTES];
	struct dlist buckets[FETCH_BUCKETS];
	/* A struct answer holds a whole parsed answer (~17 KB): reusing freed ones saves a large
	 * malloc and free per query, and the page faults of the heap growing and shrinking. */
	struct spare answers;
	struct spare fetches, waits; /* freed struct fetch and struct fetch_wait, as answers */
};

void answer_unref(struct answer *a)
{
	if (!a || --a->refs > 0)
		return;
	struct fetch_table *t = a->srv->fetches;
	if (t && t->answers.n < SPARE_MAX) {
		if (a->pkt_cap == 0 || a->pkt_cap > ANSWER_KEEP_PKT) {
			free(a->pkt); /* not answer_room's, or too large to keep */
			a->pkt = NULL;
			a->pkt_cap = 0;
		}
		spare_give(&t->answers, a);
	} else {
		free(a->pkt);
		free(a);
	}
}

uint8_t *answer_room(struct answer *a, size_t len)
{
	if (!a->pkt || a->pkt_cap < len) {
		size_t cap = len < 512 ? 512 : len;
		uint8_t *p = malloc(cap);
		if (!p)
			return NULL;
		free(a->pkt);
		a->pkt = p;
		a->pkt_cap = cap;
	}
	return a->pkt;
}

static struct answer *answer_new(struct worker *srv)
{
	struct fetch_table *t = srv->fetches;
	bool kept = t->answers.n > 0; /* with its packet buffer */
	struct answer *a = spare_take(&t->answers, sizeof(*a));
	if (!a)
		return NULL;
	if (!kept) {
		a->pkt = NULL;
		a->pkt_cap = 0;
	}
	a->srv = srv;
	a->refs = 1;
	a->cached = false;
	a->stale = false;
	a->local = false; /* a spare may have been a local answer */
	memset(&a->upstream, 0, sizeof(a->upstream));
	a->up_us = -1;
	a->len = 0;
	a->tpl_len = 0;
	return a;
}

/* The in-flight table files a question under the cache's hash of it (hashed once already, by
 * fetch_prefetch), or without a cache the same key bytes (moat/cache.h) under its own key. */
static uint64_t question_hash(const struct worker *srv, const struct fetch_table *t,
                              const uint8_t *lname, uint16_t qtype, uint16_t qclass,
                              uint32_t variant)
{
	if (srv->cache)
		return cache_key_hash(srv->cache, lname, qtype, qclass, variant);
	uint8_t key[CACHE_MAXKEY];
	int kl = cache_key(key, lname, qtype, qclass, variant);
	uint64_t h;
	crypto_shorthash((unsigned char *)&h, key, (size_t)kl, t->key);
	return h;
}

int fetch_init(struct worker *srv, size_t cache_bytes)
{
	struct fetch_table *t = malloc(sizeof(*t));
	if (!t)
		return MOAT_ENOMEM;
	t->answers.n = t->fetches.n = t->waits.n = 0;
	randombytes_buf(t->key, sizeof(t->key));
	for (int i = 0; i < FETCH_BUCKETS; i++)
		dlist_init(&t->buckets[i]);
	srv->fetches = t;
	srv->cache = NULL;
	const struct config *cfg = srv->cfg;
	if (cache_bytes) {
		srv->cache = cache_new(cache_bytes, cfg->cache_min_ttl, cfg->cache_max_ttl);
		if (!srv->cache)
			return MOAT_ENOMEM;
		cache_keep_stale(srv->cache, cfg->serve_stale);
	}
	return 0;
}

void fetch_deinit(struct worker *srv)
{
	cache_free(srv->cache);
	srv->cache = NULL;
	if (srv->fetches) {
		struct spare *as = &srv->fetches->answers;
		while (as->n) { /* each with its packet buffer */
			struct answer *a = spare_take(as, 0);
			free(a->pkt);
			free(a);
		}
		spare_drop(&srv->fetches->fetches);
		spare_drop(&srv->fetches->waits);
	}
	free(srv->fetches);
	srv->fetches = NULL;
}

/* The TTL an answer may be cached for, or 0 when it must not be (RFC 2308 for negatives). */
static uint32_t cacheable_ttl(const struct wire_resp *r)
{
	if (r->flags & WIRE_FLAG_TC)
		return 0; /* truncated */
	if (r->rcode == WIRE_NXDOMAIN)
		return r->neg_ttl == UINT32_MAX ? 0 : r->neg_ttl;
	if (r->rcode != WIRE_NOERROR)
		return 0;
	if (r->min_ttl != UINT32_MAX) {
		/* A NOERROR with records; a chain that ends without data is negative for its
		 * last name: the SOA then bounds it too. */
		return r->neg_ttl < r->min_ttl ? r->neg_ttl : r->min_ttl;
	}
	return r->neg_ttl == UINT32_MAX ? 0 : r->neg_ttl; /* NODATA */
}

/* A cache value: the packet's length (2 bytes), the packet, the template's length (2 bytes),
 * the template (wire_resp_template: a hit's answer is copied, not rebuilt; length 0 when the
 * answer has none), and the parse packed (wire_resp_pack), so a hit needs no parse either.
 * Built in cache_val; returns its length or < 0. */
static _Thread_local uint8_t cache_val[4 + WIRE_MAXMSG + WIRE_TEMPLATE_MAX + WIRE_RESP_PACKED_MAX];
static _Thread_local uint8_t tpl_buf[WIRE_TEMPLATE_MAX]; /* the template being made */

static int cache_value(const uint8_t *pkt, size_t len, const uint8_t *tpl, size_t tlen,
                       const struct wire_resp *r)
{
	uint8_t *v = cache_val;
	be16_put(v, (uint16_t)len);
	memcpy(v + 2, pkt, len);
	v += 2 + len;
	be16_put(v, (uint16_t)tlen);
	memcpy(v + 2, tpl, tlen);
	v += 2 + tlen;
	int n = wire_resp_pack(r, v, sizeof(cache_val) - (size_t)(v - cache_val));
	return n < 0 ? n : (int)(v - cache_val) + n;
}

/* a's packet and template (tlen bytes at tpl; 0: none) in its own buffer. */
static bool answer_keep(struct answer *a, const uint8_t *pkt, size_t len, const uint8_t *tpl,
                        size_t tlen)
{
	if (!answer_room(a, len + tlen))
		return false;
	memcpy(a->pkt, pkt, len);
	memcpy(a->pkt + len, tpl, tlen);
	a->len = len;
	a->tpl_len = tlen;
	return true;
}

/* An answer from a cache value (packet, template and packed parse), or NULL if it does not
 * decode. */
static struct answer *answer_from_value(struct worker *srv, const uint8_t *v, size_t vlen,
                                        uint32_t age)
{
	size_t len = vlen >= 2 ? be16_get(v) : 0;
	if (vlen < 4 + len || len < WIRE_HDR)
		return NULL;
	const uint8_t *t = v + 2 + len;
	size_t tlen = be16_get(t);
	if (vlen < 4 + len + tlen)
		return NULL;
	struct answer *a = answer_new(srv);
	if (a && answer_keep(a, v + 2, len, t + 2, tlen) &&
	    wire_resp_unpack(t + 2 + tlen, vlen - 4 - len - tlen, &a->resp) == 0) {
		a->resp.age = age;
		a->cached = true;
		return a;
	}
	answer_unref(a);
	return NULL;
}

static void fetch_free(struct fetch *f)
{
	dlist_del(&f->link);
	answer_unref(f->ans);
	spare_give(&f->srv->fetches->fetches, f);
}

static void wait_free(struct worker *srv, struct fetch_wait *w)
{
	spare_give(&srv->fetches->waits, w);
}

static void on_upstream(void *ctx, int status, const uint8_t *pkt, size_t len,
                        const struct sockaddr *from, int64_t elapsed_us)
{
	struct fetch *f = ctx;
	struct worker *srv = f->srv;
	struct answer *a = f->ans;
	f->up = NULL;
	dlist_del(&f->link); /* later questions start afresh (or hit the cache) */
	dlist_init(&f->link);

	if (status == 0) {
		a->up_us = elapsed_us;
		memcpy(&a->upstream, from,
		       from->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
		                                   : sizeof(struct sockaddr_in));
		/* Made once here, the template serves this answer's waiters and every hit. */
		int tl = wire_resp_template(pkt, len, &a->resp, f->lname, f->qtype, f->qclass,
		                            tpl_buf, sizeof(tpl_buf));
		size_t tlen = tl > 0 && tl <= UINT16_MAX ? (size_t)tl : 0;
		if (!answer_keep(a, pkt, len, tpl_buf, tlen)) {
			status = MOAT_ENOMEM;
		} else {
			uint32_t ttl = srv->cache ? cacheable_ttl(&a->resp) : 0;
			int vl = ttl ? cache_value(pkt, len, tpl_buf, tlen, &a->resp) : -1;
			if (vl > 0)
				cache_put_hashed(srv->cache, f->hash, f->lname, f->qtype, f->qclass,
				                 f->variant, cache_val, (size_t)vl, ttl,
				                 uv_now(srv->loop)); /* f->hash: question_hash */
		}
	}
	/* Serve-stale (RFC 8767): no upstream answered, or one said SERVFAIL/REFUSED; an answer
	 * that expired less than serve_stale seconds ago is better than none. It goes through
	 * the same checks and grant as any answer, TTLs capped by answer_ttl_cap. */
	struct answer *stale = NULL;
	if (srv->cache && srv->cfg->serve_stale &&
	    (status < 0 || a->resp.rcode == WIRE_SERVFAIL || a->resp.rcode == WIRE_REFUSED)) {
		size_t vlen;
		const uint8_t *v = cache_get_stale(srv->cache, f->lname, f->qtype, f->qclass,
		                                   f->variant, uv_now(srv->loop), &vlen);
		if (v && (stale = answer_from_value(srv, v, vlen, 0))) {
			stale->stale = true;
			a = stale;
			status = 0;
		}
	}
	/* Each waiter's callback may free its query (and so cancel only its own wait). */
	while (!dlist_empty(&f->waiters)) {
		struct fetch_wait *w = container_of(f->waiters.next, struct fetch_wait, link);
		dlist_del(&w->link);
		fetch_cb cb = w->cb;
		void *wctx = w->ctx;
		wait_free(srv, w);
		cb(wctx, status, status == 0 ? a : NULL);
	}
	answer_unref(stale);
	fetch_free(f);
}

/* The cache key's variant: the DO bit and the upstream set's id (0: the global upstreams). */
static uint32_t variant_of(const struct upstream_set *set, bool dnssec_ok)
{
	return (uint32_t)dnssec_ok | (set ? set->id << 1 : 0);
}

void fetch_prefetch(struct worker *srv, const struct upstream_set *set, const uint8_t *lname,
                    uint16_t qtype, uint16_t qclass)
{
	if (srv->cache)
		cache_prefetch(srv->cache, lname, qtype, qclass,
		               variant_of(set, srv->cfg->upstream_dnssec_ok));
}

int fetch_answer(struct worker *srv, const struct upstream_set *set, const uint8_t *lname,
                 uint16_t qtype, uint16_t qclass, bool may_wait, fetch_cb cb, void *ctx,
                 struct answer **hit, struct fetch_wait **wait)
{
	int nl = name_wire_len(lname, NAME_MAXWIRE);
	if (nl < 0)
		return nl;
	bool dnssec_ok = srv->cfg->upstream_dnssec_ok; /* moatd's policy, not the client's bit */
	uint32_t variant = variant_of(set, dnssec_ok);

	/* The cache: a hit comes with its parse (checked by wire_resp_unpack). */
	if (srv->cache) {
		size_t vlen;
		uint32_t age;
		const uint8_t *v = cache_get(srv->cache, lname, qtype, qclass, variant,
		                             uv_now(srv->loop), &vlen, &age);
		struct answer *a = v ? answer_from_value(srv, v, vlen, age) : NULL;
		if (a) {
			*hit = a;
			return FETCH_HIT;
		}
	}

	if (!may_wait)
		return FETCH_BUSY;
	struct fetch_table *t = srv->fetches;
	uint64_t h = question_hash(srv, t, lname, qtype, qclass, variant);
	struct dlist *b = &t->buckets[h & (FETCH_BUCKETS - 1)];
	struct fetch *f = NULL;
	for (struct dlist *l = b->next; l != b; l = l->next) {
		struct fetch *c = container_of(l, struct fetch, link);
		if (c->hash == h && c->qtype == qtype && c->qclass == qclass &&
		    c->variant == variant && !memcmp(c->lname, lname, (size_t)nl)) {
			f = c;
			break;
		}
	}
	struct fetch_wait *w = spare_take(&t->waits, sizeof(*w));
	if (!w)
		return MOAT_ENOMEM;
	if (!f) {
		if (!(f = spare_take(&t->fetches, sizeof(*f))) || !(f->ans = answer_new(srv))) {
			spare_give(&t->fetches, f);
			wait_free(srv, w);
			return MOAT_ENOMEM;
		}
		f->srv = srv;
		f->up = NULL;
		f->hash = h;
		memcpy(f->lname, lname, (size_t)nl);
		f->qtype = qtype;
		f->qclass = qclass;
		f->dnssec_ok = dnssec_ok;
		f->variant = variant;
		dlist_init(&f->waiters);
		dlist_add(b, &f->link);
		int rc = upstream_query(srv, set, lname, qtype, qclass, dnssec_ok, &f->ans->resp,
		                        on_upstream, f, &f->up);
		if (rc < 0) {
			fetch_free(f);
			wait_free(srv, w);
			return rc;
		}
	}
	w->f = f;
	w->cb = cb;
	w->ctx = ctx;
	dlist_add(f->waiters.prev, &w->link);
	*wait = w;
	return FETCH_WAIT;
}

void fetch_cancel(struct fetch_wait *w)
{
	struct fetch *f = w->f;
	dlist_del(&w->link);
	wait_free(f->srv, w);
	if (dlist_empty(&f->waiters) && f->up) {
		upstream_cancel(f->up); /* nobody waits any more */
		fetch_free(f);
	}
}

void fetch_cancel_all(struct worker *srv)
{
	struct fetch_table *t = srv->fetches;
	if (!t)
		return;
	for (int i = 0; i < FETCH_BUCKETS; i++)
		while (!dlist_empty(&t->buckets[i])) {
			struct fetch *f = container_of(t->buckets[i].next, struct fetch, link);
			while (!dlist_empty(&f->waiters)) {
				struct fetch_wait *w =
				    container_of(f->waiters.next, struct fetch_wait, link);
				dlist_del(&w->link);
				wait_free(srv, w);
			}
			if (f->up)
				upstream_cancel(f->up);
			fetch_free(f);
		}
}
