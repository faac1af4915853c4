/* rpz_feed.c owns the transfer thread of RPZ zones (rpz_feed.h): per transferred zone, when it
 * is due (start, NOTIFY, SOA refresh or retry), the transfer off every worker's loop, and the
 * snapshot that replaces that one zone, published under the feed's lock. NOTIFYs are bounded
 * per zone: a signed one replayed (its MAC seen, or signed before the newest accepted) is
 * refused, and transfers NOTIFYs start are at least FEED_NOTIFY_GAP_MS apart (the NOTIFYs in
 * between make one more transfer, not one each). */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "moat/err.h"
#include "moat/rpz.h"
#include "moat/rpz_xfr.h"
#include "ops/rpz_feed.h"

#define FEED_XFR_TIMEOUT_MS 10000
#define FEED_RETRY_MIN_S 1
#define FEED_REFRESH_MAX_S 86400
#define FEED_NOTIFY_GAP_MS 1000 /* between transfers NOTIFYs start; more wait and count once */
#define FEED_NOTIFY_MACS 16     /* MACs remembered of the NOTIFYs signed in the latest second */

struct feed_zone {
	uint64_t due_ms; /* next transfer; 0: now */
	uint32_t retry;  /* the SOA's retry timer of the last transfer (s); 0: none yet */
	bool notified;
	uint64_t notify_us;     /* when the first NOTIFY not yet served came (monotonic); 0: none */
	uint64_t notify_xfr_ms; /* when a NOTIFY last started a transfer (monotonic); 0: never */
	/* Replays: the newest time signed accepted, and the MACs accepted with that time. */
	uint64_t signed_at;
	struct rpz_notify_sig seen[FEED_NOTIFY_MACS];
	unsigned nseen;
};

struct rpz_feed {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop, running;
	struct config view;      /* owned: only rpz/nrpz are set (deep copies) */
	struct feed_zone *zones; /* owned: one per view.rpz */
	uint64_t gen;            /* bumped by every adopt: a transfer begun before is dropped */
	struct policy *cur;      /* one reference: the snapshot the workers run */
	rpz_publish_fn publish;
	void *ctx;
};

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void zone_copy_free(struct config_rpz *z)
{
	if (z->tsig_secret)
		explicit_bzero(z->tsig_secret, strlen(z->tsig_secret));
	free(z->tsig_secret);
	free(z->file);
	memset(z, 0, sizeof(*z));
}

static int zone_copy(struct config_rpz *dst, const struct config_rpz *src)
{
	*dst = *src;
	dst->file = NULL; /* the feed cares only for transferred zones */
	dst->tsig_secret = src->tsig_secret ? strdup(src->tsig_secret) : NULL;
	return src->tsig_secret && !dst->tsig_secret ? MOAT_ENOMEM : 0;
}

static void view_free(struct config *v, struct feed_zone **zones)
{
	for (size_t i = 0; i < v->nrpz; i++)
		zone_copy_free(&v->rpz[i]);
	free(v->rpz);
	v->rpz = NULL;
	v->nrpz = 0;
	free(*zones);
	*zones = NULL;
}

static int view_build(struct config *v, struct feed_zone **zones, const struct config *cfg)
{
	memset(v, 0, sizeof(*v));
	if (!cfg->nrpz)
		return 0;
	v->rpz = calloc(cfg->nrpz, sizeof(*v->rpz));
	*zones = calloc(cfg->nrpz, sizeof(**zones));
	if (!v->rpz || !*zones)
		return MOAT_ENOMEM;
	for (; v->nrpz < cfg->nrpz; v->nrpz++)
		if (zone_copy(&v->rpz[v->nrpz], &cfg->rpz[v->nrpz]))
			return MOAT_ENOMEM;
	return 0;
}

static void txt_addr(const struct sockaddr_storage *ss, char *out, size_t cap)
{
	char h[64] = "?";
	const struct sockaddr *sa = (const struct sockaddr *)ss;
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, h, sizeof(h));
	else
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, h, sizeof(h));
	snprintf(out, cap, "%s#%u", h,
	         ntohs(sa->sa_family == AF_INET ? ((const struct sockaddr_in *)sa)->sin_port
	                                        : ((const struct sockaddr_in6 *)sa)->sin6_port));
}

/* The outcome of one transfer, with the lock held: publish, or keep the last zone. */
static void transfer_done(struct rpz_feed *f, size_t i, int rc, struct rpz_xfr_result *res,
                          uint32_t old_serial, bool had, double ms, uint64_t notify_us,
                          const char *err)
{
	char after[64] = ""; /* how long since the NOTIFY that asked for it */
	const struct config_rpz *z = &f->view.rpz[i];
	char from[80];
	uint64_t now = now_ms();
	txt_addr(&z->primary, from, sizeof(from));
	if (rc) {
		uint32_t retry = f->zones[i].retry ? f->zones[i].retry : 10;
		f->zones[i].due_ms =
		    now + 1000ull * (retry < FEED_RETRY_MIN_S ? FEED_RETRY_MIN_S : retry);
		if (had)
			fprintf(stderr,
			        "moatd: rpz %s: transfer from %s failed, serial %u kept: %s\n",
			        z->name, from, old_serial, err);
		else
			fprintf(stderr, "moatd: rpz %s: transfer from %s failed, no zone yet: %s\n",
			        z->name, from, err);
		return;
	}
	uint32_t refresh = res->refresh < 1 ? 1 : res->refresh;
	f->zones[i].retry = res->retry > FEED_REFRESH_MAX_S ? FEED_REFRESH_MAX_S : res->retry;
	f->zones[i].due_ms =
	    now + 1000ull * (refresh > FEED_REFRESH_MAX_S ? FEED_REFRESH_MAX_S : refresh);
	if (!res->data) {
		fprintf(stderr, "moatd: rpz %s: serial %u is current\n", z->name, res->serial);
		return;
	}
	struct policy *np = policy_with_rpz(f->cur, i, res->data);
	if (!np) {
		fprintf(stderr, "moatd: rpz %s: out of memory, serial %u kept\n", z->name,
		        old_serial);
		return;
	}
	f->publish(f->ctx, np);
	policy_unref(f->cur);
	f->cur = np;
	if (notify_us)
		snprintf(after, sizeof(after), ", %.1f ms after NOTIFY",
		         (double)(now_us() - notify_us) / 1e3);
	if (res->ixfr)
		fprintf(stderr,
		        "moatd: rpz %s: IXFR from %s serial %u -> %u applied (%zu changes, %zu "
		        "triggers) in %.1f ms%s\n",
		        z->name, from, old_serial, res->serial, res->changes, rpz_count(res->data),
		        ms, after);
	else
		fprintf(
		    stderr,
		    "moatd: rpz %s: AXFR from %s serial %u loaded (%zu triggers) in %.1f ms%s\n",
		    z->name, from, res->serial, rpz_count(res->data), ms, after);
}

/* The next zone due, or -1 with *wait_ms until one is. */
static long next_due(struct rpz_feed *f, uint64_t *until)
{
	uint64_t now = now_ms();
	*until = now + 3600000;
	for (size_t i = 0; i < f->view.nrpz; i++) {
		if (!f->view.rpz[i].primary.ss_family)
			continue;
		const struct feed_zone *fz = &f->zones[i];
		uint64_t gap = fz->notify_xfr_ms ? fz->notify_xfr_ms + FEED_NOTIFY_GAP_MS : 0;
		if ((fz->notified && gap <= now) || fz->due_ms <= now)
			return (long)i;
		if (fz->due_ms < *until)
			*until = fz->due_ms;
		if (fz->notified && gap < *until)
			*until = gap;
	}
	return -1;
}

/* One transfer of zone i, the lock released around the network part. */
static void transfer(struct rpz_feed *f, size_t i)
{
	struct config_rpz z;
	char err[512] = "";
	struct rpz_xfr_result res = {0};
	uint64_t notify_us = f->zones[i].notify_us;
	if (f->zones[i].notified)
		f->zones[i].notify_xfr_ms = now_ms();
	f->zones[i].notified = false;
	f->zones[i].notify_us = 0;
	if (zone_copy(&z, &f->view.rpz[i]) || i >= f->cur->nrpz) {
		f->zones[i].due_ms = now_ms() + 10000;
		return;
	}
	struct rpz_data *cur = rpz_data_ref(f->cur->rpz[i]);
	uint64_t gen = f->gen;
	pthread_mutex_unlock(&f->mu);
	uint64_t t0 = now_ms();
	int rc = rpz_xfr_pull(&z, cur->kind, cur, FEED_XFR_TIMEOUT_MS, &res, err, sizeof(err));
	if (rc == MOAT_ENOENT && cur->loaded) { /* the diffs do not fit our copy: start over */
		fprintf(stderr, "moatd: rpz %s: IXFR does not apply (%s): AXFR\n", z.name, err);
		rc = rpz_xfr_pull(&z, cur->kind, NULL, FEED_XFR_TIMEOUT_MS, &res, err, sizeof(err));
	}
	double ms = (double)(now_ms() - t0);
	pthread_mutex_lock(&f->mu);
	if (gen == f->gen)
		transfer_done(f, i, rc, &res, cur->serial, cur->loaded, ms, notify_us, err);
	rpz_data_unref(res.data);
	rpz_data_unref(cur);
	zone_copy_free(&z);
}

static void *feed_main(void *arg)
{
	struct rpz_feed *f = arg;
	pthread_mutex_lock(&f->mu);
	f->running = true; /* the thread's own set-up (rseq, robust list) is done */
	pthread_cond_broadcast(&f->cv);
	while (!f->stop) {
		uint64_t until;
		long i = next_due(f, &until);
		if (i >= 0) {
			transfer(f, (size_t)i);
			continue;
		}
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		uint64_t wait = until - now_ms();
		ts.tv_sec += (time_t)(wait / 1000);
		ts.tv_nsec += (long)(wait % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&f->cv, &f->mu, &ts);
	}
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

bool rpz_feed_wanted(const struct config *cfg)
{
	for (size_t i = 0; i < cfg->nrpz; i++)
		if (cfg->rpz[i].primary.ss_family)
			return true;
	return false;
}

int rpz_feed_start(struct rpz_feed **out, const struct config *cfg, struct policy *p,
                   rpz_publish_fn publish, void *ctx)
{
	struct rpz_feed *f = calloc(1, sizeof(*f));
	pthread_condattr_t ca;
	if (!f)
		return MOAT_ENOMEM;
	if (view_build(&f->view, &f->zones, cfg)) {
		view_free(&f->view, &f->zones);
		free(f);
		return MOAT_ENOMEM;
	}
	f->cur = policy_ref(p);
	f->publish = publish;
	f->ctx = ctx;
	pthread_mutex_init(&f->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&f->thread, NULL, feed_main, f) != 0) {
		policy_unref(f->cur);
		view_free(&f->view, &f->zones);
		free(f);
		return MOAT_ENOMEM;
	}
	/* Wait until the thread runs: glibc's per-thread set-up must not meet the filter. */
	pthread_mutex_lock(&f->mu);
	while (!f->running)
		pthread_cond_wait(&f->cv, &f->mu);
	pthread_mutex_unlock(&f->mu);
	*out = f;
	return 0;
}

/* The zone of the running view that np's zone i continues, or -1. */
static long same_zone(const struct rpz_feed *f, const struct config_rpz *z,
                      const struct rpz_data *nd)
{
	for (size_t j = 0; j < f->view.nrpz && j < f->cur->nrpz; j++) {
		const struct config_rpz *o = &f->view.rpz[j];
		if (!strcmp(o->name, z->name) && o->primary.ss_family &&
		    name_equal(o->zone, z->zone) &&
		    !memcmp(&o->primary, &z->primary, sizeof(o->primary)) &&
		    f->cur->rpz[j]->kind == nd->kind)
			return (long)j;
	}
	return -1;
}

void rpz_feed_adopt(struct rpz_feed *f, const struct config *cfg, struct policy *np)
{
	struct config nv;
	struct feed_zone *nz = NULL;
	pthread_mutex_lock(&f->mu);
	if (view_build(&nv, &nz, cfg)) { /* out of memory: keep the old zones and schedule */
		view_free(&nv, &nz);
	} else {
		for (size_t i = 0; i < nv.nrpz && i < np->nrpz; i++) {
			long j =
			    nv.rpz[i].primary.ss_family ? same_zone(f, &nv.rpz[i], np->rpz[i]) : -1;
			if (j < 0)
				continue; /* new: due now (calloc) */
			nz[i] = f->zones[j];
			if (strcmp(nv.rpz[i].tsig_name, f->view.rpz[j].tsig_name) ||
			    strcmp(nv.rpz[i].tsig_secret ? nv.rpz[i].tsig_secret : "",
			           f->view.rpz[j].tsig_secret ? f->view.rpz[j].tsig_secret : ""))
				nz[i].due_ms = 0; /* a new key: try it now */
			rpz_data_unref(np->rpz[i]);
			np->rpz[i] = rpz_data_ref(f->cur->rpz[j]);
		}
		view_free(&f->view, &f->zones);
		f->view = nv;
		f->zones = nz;
	}
	f->gen++;
	policy_unref(f->cur);
	f->cur = policy_ref(np);
	f->publish(f->ctx, np);
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
}

void rpz_feed_set_current(struct rpz_feed *f, struct policy *np)
{
	pthread_mutex_lock(&f->mu);
	/* Same config as f->cur: np's zones are those of the snapshot it was edited from, which an
	 * IXFR may have replaced since; take the feed's, index by index. */
	for (size_t i = 0; i < np->nrpz && i < f->cur->nrpz; i++)
		if (np->rpz[i] != f->cur->rpz[i]) {
			rpz_data_unref(np->rpz[i]);
			np->rpz[i] = rpz_data_ref(f->cur->rpz[i]);
		}
	policy_unref(f->cur);
	f->cur = policy_ref(np);
	f->publish(f->ctx, np);
	pthread_mutex_unlock(&f->mu);
}

/* A NOTIFY of zone fz whose TSIG verified: fresh, or a replay (a MAC already accepted, or a
 * time signed older than the newest accepted) to refuse. A primary signs each NOTIFY anew, so
 * two in one second differ in their MAC. */
static bool notify_fresh(struct feed_zone *fz, const struct rpz_notify_sig *sig, const char *zone,
                         char *why, size_t whylen)
{
	if (!sig->signed_at)
		return true; /* no key: nothing to tell a replay by (the gap still bounds transfers)
		              */
	if (sig->signed_at < fz->signed_at) {
		snprintf(why, whylen,
		         "NOTIFY for rpz %s signed at %llu, before the last one accepted (%llu): "
		         "a replay, ignored",
		         zone, (unsigned long long)sig->signed_at,
		         (unsigned long long)fz->signed_at);
		return false;
	}
	if (sig->signed_at > fz->signed_at) {
		fz->signed_at = sig->signed_at;
		fz->nseen = 0;
	}
	for (unsigned k = 0; k < fz->nseen && k < FEED_NOTIFY_MACS; k++)
		if (fz->seen[k].mac_len == sig->mac_len &&
		    !memcmp(fz->seen[k].mac, sig->mac, sig->mac_len)) {
			snprintf(why, whylen,
			         "NOTIFY for rpz %s replayed (its MAC was seen): ignored", zone);
			return false;
		}
	fz->seen[fz->nseen++ % FEED_NOTIFY_MACS] = *sig;
	return true;
}

int rpz_feed_notify(struct rpz_feed *f, const uint8_t *pkt, size_t len, const struct sockaddr *from,
                    uint8_t *out, size_t cap, char *why, size_t whylen)
{
	size_t zi = 0;
	struct rpz_notify_sig sig;
	pthread_mutex_lock(&f->mu);
	int n = rpz_notify_check(&f->view, pkt, len, from, (uint64_t)time(NULL), out, cap, &zi,
	                         &sig, why, whylen);
	if (n > 0 && !notify_fresh(&f->zones[zi], &sig, f->view.rpz[zi].name, why, whylen))
		n = MOAT_EINVAL;
	if (n > 0) {
		f->zones[zi].notified = true;
		if (!f->zones[zi].notify_us)
			f->zones[zi].notify_us = now_us();
		pthread_cond_signal(&f->cv);
	}
	pthread_mutex_unlock(&f->mu);
	return n;
}

void rpz_feed_stop(struct rpz_feed *f)
{
	if (!f)
		return;
	pthread_mutex_lock(&f->mu);
	f->stop = true;
	pthread_cond_signal(&f->cv);
	pthread_mutex_unlock(&f->mu);
	pthread_join(f->thread, NULL);
	policy_unref(f->cur);
	view_free(&f->view, &f->zones);
	pthread_mutex_destroy(&f->mu);
	pthread_cond_destroy(&f->cv);
	free(f);
}
