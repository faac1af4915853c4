/* log_bound.c owns what one worker lets into the query log (see log_bound.h): the "ts" clock,
 * the table of recent refusals and denies whose repeats are counted instead of written, the
 * byte budget, and the summary lines that close each count. Lines go to the worker's ring
 * (log_sink.h). */
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <time.h>

#include "moat/log.h"
#include "serve/log_bound.h"
#include "serve/log_sink.h"

#define REP_SLOTS 64    /* recent refusals and denies, by a hash of their question */
#define REP_LINE 640    /* a longer line is written every time, never counted */
#define REP_WINDOW 1000 /* ms a count stays open after its first line */
#define SUMMARY_MS 1000 /* suppressed lines at most this often */

/* A slot's line stays where it was put in the ring until it repeats: most denies never do (a
 * scan of fresh names), and copying each into a slot wrote 64 slots' 40 kB, most of the L1
 * cache, ~6 lines a deny. Its first repeat keeps a copy (rep_line of the slot's index), which
 * the count's closing line needs once the ring has gone round. */
struct rep {
	uint64_t since_ms; /* when its line was logged */
	uint64_t hash;     /* rep_hash of its question: another question's line is not compared */
	uint64_t count;    /* identical queries since, not written */
	uint64_t at;       /* its place in the ring (log_ring_head), while not kept */
	uint16_t len;      /* 0: empty */
	bool kept;         /* the text is in the slot's rep_line, else at `at` (if still there) */
};

struct log_out {
	struct log_ring *ring;
	uint64_t budget; /* bytes a second; 0: none */
	int64_t tokens;  /* bytes that may go now (negative: a line overdrew them) */
	uint64_t refill_ms;
	uint64_t sup_budget; /* queries left out since the last suppressed line, by cause */
	uint64_t sup_full;
	uint64_t next_sweep_ms;
	bool clock_set;
	int64_t rt_off_ms; /* wall clock minus the loop's clock */
	uint64_t rt_at_ms, ts_ms;
	char ts[LOG_TS_LEN];
	char line[LOG_LINE_MAX];  /* the query line being decided on */
	char sline[LOG_LINE_MAX]; /* a summary line */
	struct rep rep[REP_SLOTS];
	char rep_line[REP_SLOTS][REP_LINE]; /* the kept texts, by slot */
};

struct log_out *log_out_new(struct log_ring *ring, uint64_t budget)
{
	struct log_out *o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->ring = ring;
	o->budget = budget;
	o->tokens = (int64_t)budget;
	return o;
}

void log_out_free(struct log_out *o)
{
	free(o);
}

/* The "ts" of a line logged at now_ms: the loop's clock (the time of this loop turn) plus the
 * wall clock's offset, read again each second (so a clock step shows within a second). */
static const char *out_ts(struct log_out *o, uint64_t now_ms)
{
	if (o->clock_set && now_ms == o->ts_ms)
		return o->ts;
	if (!o->clock_set || now_ms - o->rt_at_ms >= 1000 || now_ms < o->rt_at_ms) {
		struct timespec rt, mono;
		clock_gettime(CLOCK_REALTIME, &rt);
		clock_gettime(CLOCK_MONOTONIC, &mono); /* uv_now's clock */
		o->rt_off_ms = ((int64_t)rt.tv_sec - (int64_t)mono.tv_sec) * 1000 +
		               (rt.tv_nsec - mono.tv_nsec) / 1000000;
		o->rt_at_ms = now_ms;
		o->clock_set = true;
	}
	log_format_ts((int64_t)now_ms + o->rt_off_ms, o->ts);
	o->ts_ms = now_ms;
	return o->ts;
}

static void refill(struct log_out *o, uint64_t now_ms)
{
	if (!o->budget || now_ms <= o->refill_ms)
		return;
	uint64_t add = (now_ms - o->refill_ms) * o->budget / 1000;
	if (add == 0)
		return; /* keep the fraction for later */
	o->tokens = o->tokens + (int64_t)add > (int64_t)o->budget ? (int64_t)o->budget
	                                                          : o->tokens + (int64_t)add;
	o->refill_ms = now_ms;
}

/* Write a line that stands for `stands` queries, within the budget; what does not go in is
 * counted, never lost. */
static bool emit(struct log_out *o, const char *line, size_t n, uint64_t stands)
{
	if (o->budget && o->tokens <= 0) {
		o->sup_budget += stands;
		return false;
	}
	if (!log_ring_put(o->ring, line, n)) {
		o->sup_full += stands;
		return false;
	}
	o->tokens -= (int64_t)n;
	return true;
}

/* Refusals and denies are what a flood is made of; an allowed answer is never counted away. */
static bool repeatable(const struct log_query *e)
{
	const char *d = e->decision;
	/* Byte by byte: strncmp's call was 30 instructions a deny. An allow stops at the first. */
	return e->qname && d &&
	       ((d[0] == 'd' && d[1] == 'e' && d[2] == 'n' && d[3] == 'y' && d[4] == '-') ||
	        (d[0] == 'r' && !strcmp(d, "refuse-client")));
}

/* FNV-1a over the client's address, the name (a word at a time) and the type: picks the two
 * slots a question may use and is kept in its slot. Each of these shows in the line, so equal
 * lines have equal hashes and a slot of another hash is not compared; the lines themselves are,
 * so a collision costs an extra line, never a wrong count. */
static uint64_t rep_hash(const struct log_query *e)
{
	uint64_t h = 0xcbf29ce484222325ull ^ e->qtype ^ ((uint64_t)e->qclass << 16);
	/* The address a word at a time, as the name below. */
	uint64_t a[2] = {0, 0};
	if (e->client && e->client->sa_family == AF_INET)
		memcpy(a, &((const struct sockaddr_in *)(const void *)e->client)->sin_addr, 4);
	else if (e->client && e->client->sa_family == AF_INET6)
		memcpy(a, ((const struct sockaddr_in6 *)(const void *)e->client)->sin6_addr.s6_addr,
		       16);
	h = (h ^ a[0] ^ (uint64_t)(e->client ? e->client->sa_family : 0) << 56) * 0x100000001b3ull;
	h ^= h >> 32;
	h = (h ^ a[1]) * 0x100000001b3ull;
	h ^= h >> 32;
	/* The name eight bytes at a time (its length first: the labels end it), the last few
	 * gathered into one word. */
	const uint8_t *p = e->qname;
	size_t len = 1;
	while (p[len - 1])
		len += p[len - 1] + 1u;
	for (; len >= 8; p += 8, len -= 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		h = (h ^ v) * 0x100000001b3ull;
		h ^= h >> 32;
	}
	uint64_t v = len;
	for (; len; p++, len--)
		v = v << 8 | *p;
	h = (h ^ v) * 0x100000001b3ull;
	return h ^ h >> 29;
}

/* A slot's text: kept, or in the ring while it is still there (else NULL). */
static const char *rep_text(const struct log_out *o, const struct rep *r)
{
	return r->kept ? o->rep_line[r - o->rep] : log_ring_peek(o->ring, r->at, r->len);
}

/* Close a slot's count: its "repeated" line when queries were counted (a counted slot is
 * kept); the slot empties. */
static void rep_close(struct log_out *o, struct rep *r, uint64_t now_ms)
{
	if (r->count) {
		size_t n = log_format_repeated(o->sline, o->rep_line[r - o->rep], r->len,
		                               out_ts(o, now_ms), r->count);
		emit(o, o->sline, n, r->count);
	}
	r->len = 0;
	r->count = 0;
}

void log_out_query(struct log_out *o, const struct log_query *e, uint64_t now_ms)
{
	refill(o, now_ms);
	if (o->budget && o->tokens <= 0) {
		o->sup_budget++; /* over the budget: not even formatted */
		return;
	}
	/* Formatted where it goes, at the ring's head, when the ring has the room in one piece: the
	 * line is not copied again (~120 instructions). Not put, it stays free space. */
	char *line = log_ring_room(o->ring, LOG_LINE_MAX);
	if (!line)
		line = o->line;
	size_t n = log_format_query(line, e, out_ts(o, now_ms));
	if (repeatable(e)) {
		/* Two ways: a question that shares a slot with another keeps counting. */
		uint64_t h = rep_hash(e);
		struct rep *w[2] = {&o->rep[h & (REP_SLOTS - 1)],
		                    &o->rep[(h >> 32 & (REP_SLOTS - 1)) ^ 1]};
		for (int k = 0; k < 2; k++) {
			struct rep *c = w[k];
			const char *t;
			if (c->len == n && c->hash == h && now_ms - c->since_ms < REP_WINDOW &&
			    (t = rep_text(o, c)) &&
			    !memcmp(t + LOG_TS_END, line + LOG_TS_END, n - LOG_TS_END)) {
				if (!c->kept) { /* its first repeat: the text is kept from now */
					memcpy(o->rep_line[c - o->rep], t, n);
					c->kept = true;
				}
				c->count++;
				return;
			}
		}
		struct rep *r = !w[0]->len || (w[1]->len && w[1]->since_ms > w[0]->since_ms)
		                    ? w[0]
		                    : w[1]; /* an empty slot, else the older */
		if (r->len) { /* another question takes the slot: its count is written first */
			/* Its count's line goes to the ring's head, where this line is. */
			if (line != o->line && r->count) {
				memcpy(o->line, line, n);
				line = o->line;
			}
			rep_close(o, r, now_ms);
		}
		uint64_t at = log_ring_head(o->ring);
		bool put = emit(o, line, n, 1);
		if (n <= REP_LINE) {
			r->len = (uint16_t)n;
			r->hash = h;
			r->since_ms = now_ms;
			r->at = at;
			/* Not in the ring in one piece (left out, or put round its end): kept now.
			 */
			r->kept = !put || !log_ring_peek(o->ring, at, n);
			if (r->kept)
				memcpy(o->rep_line[r - o->rep], line, n);
		}
		return;
	}
	emit(o, line, n, 1);
}

/* A "suppressed" line for count queries left out; outside the budget (one a second at most),
 * so it is refused only by a full ring, and then said later. */
static void suppressed(struct log_out *o, uint64_t *count, const char *why, uint64_t now_ms)
{
	if (!*count)
		return;
	size_t n = log_format_suppressed(o->sline, out_ts(o, now_ms), *count, why);
	if (log_ring_put(o->ring, o->sline, n))
		*count = 0;
}

static void sweep(struct log_out *o, uint64_t now_ms, bool all)
{
	for (unsigned i = 0; i < REP_SLOTS; i++) {
		struct rep *r = &o->rep[i];
		if (r->len && (all || now_ms - r->since_ms >= REP_WINDOW))
			rep_close(o, r, now_ms);
	}
	suppressed(o, &o->sup_budget, "log budget", now_ms);
	suppressed(o, &o->sup_full, "log buffer full", now_ms);
	o->next_sweep_ms = now_ms + SUMMARY_MS;
}

void log_out_flush(struct log_out *o, uint64_t now_ms)
{
	if (!o)
		return;
	if (now_ms >= o->next_sweep_ms)
		sweep(o, now_ms, false);
	log_ring_kick(o->ring);
}

void log_out_close(struct log_out *o, uint64_t now_ms)
{
	if (!o)
		return;
	refill(o, now_ms);
	sweep(o, now_ms, true);
	log_ring_kick(o->ring);
}
