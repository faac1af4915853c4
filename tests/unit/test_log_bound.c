/* Unit tests for one worker's query log (serve/log_bound.c) through the real sink and writer
 * thread (serve/log_sink.c) into a file: repeats of a deny are counted, not written, and closed
 * by a "repeated" line; allowed answers are never counted away; the byte budget holds and its
 * "suppressed" line counts what it left out; a writer stuck on its file never blocks the worker
 * (the full ring's lines are counted); lines formatted in place in the ring come out whole and
 * exact through its wraps. In every case each query is counted exactly once. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "moat/log.h"
#include "moat/name.h"
#include "serve/log_bound.h"
#include "serve/log_sink.h"

struct tally {
	uint64_t lines, plain, repeated, suppressed, budget, full, bytes;
};

static uint64_t num_after(const char *l, const char *key)
{
	const char *p = strstr(l, key);
	return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* The tally of the log's lines holding `only` (NULL: every line). */
static struct tally read_lines(const char *path, const char *only)
{
	struct tally t = {0};
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	char l[LOG_LINE_MAX + 2];
	while (fgets(l, sizeof(l), f)) {
		if (only && !strstr(l, only))
			continue;
		t.lines++;
		t.bytes += strlen(l);
		cr_assert_eq(l[strlen(l) - 1], '\n', "whole lines only");
		uint64_t s = num_after(l, "\"suppressed\":");
		if (s) {
			t.suppressed += s;
			if (strstr(l, "\"log budget\""))
				t.budget += s;
			else
				t.full += s;
			continue;
		}
		uint64_t r = num_after(l, "\"repeated\":");
		if (r)
			t.repeated += r;
		else
			t.plain++;
	}
	fclose(f);
	return t;
}

static struct tally read_log(const char *path)
{
	return read_lines(path, NULL);
}

static char path[64];
static struct log_sink *sink;
static struct log_out *out;

static void open_log(uint64_t budget)
{
	snprintf(path, sizeof(path), "/tmp/moat-test-bound-XXXXXX");
	int fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	close(fd);
	cr_assert_eq(log_sink_open(path, 1, &sink), 0);
	cr_assert_not_null(sink);
	cr_assert_eq(log_sink_start(sink), 0);
	out = log_out_new(log_sink_ring(sink, 0), budget);
	cr_assert_not_null(out);
}

static struct tally close_log(uint64_t now_ms)
{
	log_out_close(out, now_ms);
	log_out_free(out);
	log_sink_close(sink);
	struct tally t = read_log(path);
	unlink(path);
	return t;
}

static struct sockaddr_in client(unsigned last)
{
	struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(4000)};
	s.sin_addr.s_addr = htonl(0x0a000000u | last);
	return s;
}

static uint8_t qn[1000][NAME_MAXWIRE];

static const uint8_t *name_n(unsigned i)
{
	char t[32];
	int n = snprintf(t, sizeof(t), "x%u.evil.test", i);
	cr_assert_gt(name_from_text(t, (size_t)n, qn[i % 1000]), 0);
	return qn[i % 1000];
}

static struct log_query q(const struct sockaddr_in *c, const uint8_t *name, const char *decision)
{
	return (struct log_query){.client = (const struct sockaddr *)c,
	                          .transport = "udp",
	                          .agent = "ci",
	                          .qname = name,
	                          .qtype = 1,
	                          .qclass = 1,
	                          .decision = decision,
	                          .reason = "moat: not on allowlist of agent ci",
	                          .rcode = 3,
	                          .upstream_us = -1};
}

Test(log_bound, identical_denies_counted)
{
	open_log(0);
	struct sockaddr_in c = client(7);
	const uint8_t *n = name_n(1);
	struct log_query e = q(&c, n, "deny-not-allowed");
	for (unsigned i = 0; i < 1000; i++) {
		log_out_query(out, &e, 5000 + i / 2);
		log_out_flush(out, 5000 + i / 2);
	}
	struct tally t = close_log(5600);
	cr_expect_eq(t.plain, 1, "the first one is written");
	cr_expect_eq(t.repeated, 999);
	cr_expect_eq(t.lines, 2);
}

Test(log_bound, count_closes_after_a_second)
{
	open_log(0);
	struct sockaddr_in c = client(7);
	struct log_query e = q(&c, name_n(1), "deny-high-risk");
	log_out_query(out, &e, 1000);
	log_out_query(out, &e, 1500);
	log_out_flush(out, 2100);     /* the count closes: "repeated":1 */
	log_out_query(out, &e, 2200); /* a fresh line, its own count */
	log_out_query(out, &e, 2300);
	log_out_query(out, &e, 2400);
	struct tally t = close_log(2500);
	cr_expect_eq(t.plain, 2);
	cr_expect_eq(t.repeated, 3);
	cr_expect_eq(t.lines, 4);
}

Test(log_bound, allowed_and_different_are_written)
{
	open_log(0);
	struct sockaddr_in c1 = client(1), c2 = client(2);
	const uint8_t *n = name_n(3);
	struct log_query a = q(&c1, n, "allow");
	for (int i = 0; i < 10; i++)
		log_out_query(out, &a, 100);
	struct log_query d1 = q(&c1, n, "deny-not-allowed"), d2 = q(&c2, n, "deny-not-allowed");
	struct log_query d3 = d1;
	d3.qtype = 28;
	log_out_query(out, &d1, 100);
	log_out_query(out, &d2, 100);
	log_out_query(out, &d3, 100);
	log_out_query(out, &d1, 100);
	struct tally t = close_log(200);
	cr_expect_eq(t.plain, 13, "every allow, and one line per client and type");
	cr_expect_eq(t.repeated, 1);
}

/* 40 questions taking turns in the 64 slots (some share one), each asked 250 times: whatever
 * the slots did, every query is in a line or a count. */
Test(log_bound, slots_shared_counts_exact)
{
	open_log(0);
	struct sockaddr_in c = client(9);
	uint64_t sent = 0;
	for (unsigned round = 0; round < 20; round++)
		for (unsigned i = 0; i < 500; i++) {
			uint64_t now = 10000 + round * 100 + i / 10;
			struct log_query e = q(&c, name_n(i % 40), "deny-not-allowed");
			log_out_query(out, &e, now);
			log_out_flush(out, now);
			sent++;
		}
	struct tally t = close_log(20000);
	cr_expect_eq(t.plain + t.repeated + t.suppressed, sent);
	cr_expect_lt(t.lines, sent / 4, "repeats were counted (%llu lines)",
	             (unsigned long long)t.lines);
}

/* 100k different denies over 10 simulated seconds with a 20 kB/s budget. */
Test(log_bound, budget_bounds_bytes_counts_exact)
{
	const uint64_t budget = 20000;
	open_log(budget);
	struct sockaddr_in c = client(5);
	uint64_t now = 0;
	for (unsigned i = 0; i < 100000; i++) {
		now = 1000 + i / 10; /* 10 a millisecond: 10 s */
		struct log_query e = q(&c, name_n(i), "deny-not-allowed");
		log_out_query(out, &e, now);
		log_out_flush(out, now);
	}
	struct tally t = close_log(now);
	cr_expect_eq(t.plain + t.repeated + t.suppressed, 100000,
	             "lines %llu + %llu, left out %llu", (unsigned long long)t.plain,
	             (unsigned long long)t.repeated, (unsigned long long)t.suppressed);
	cr_expect_eq(t.suppressed, t.budget);
	cr_expect_gt(t.suppressed, 90000);
	/* a second's burst, ten seconds' refill, one line of overdraft, a summary a second */
	cr_expect_leq(t.bytes, budget * 11 + LOG_LINE_MAX + 11 * 80, "%llu bytes",
	              (unsigned long long)t.bytes);
	cr_expect_geq(t.bytes, budget * 10, "the budget is used, %llu bytes",
	              (unsigned long long)t.bytes);
}

/* The log is a pipe nobody reads yet: the writer blocks on it, the worker does not. */
static void *reader(void *arg)
{
	int fd = *(int *)arg;
	FILE *copy = fopen(path, "w");
	char buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		fwrite(buf, 1, (size_t)n, copy);
	fclose(copy);
	return NULL;
}

Test(log_bound, stuck_writer_never_blocks)
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", p[1]);
	cr_assert_eq(log_sink_open(proc, 1, &sink), 0);
	close(p[1]);
	cr_assert_eq(log_sink_start(sink), 0);
	out = log_out_new(log_sink_ring(sink, 0), 0);
	struct sockaddr_in c = client(5);
	_Static_assert(LOG_RING_BYTES < 5u << 20, "6 MB overflow the ring");
	for (unsigned i = 0; i < 20000; i++) { /* 6 MB: the pipe and the ring overflow */
		struct log_query e = q(&c, name_n(i), "deny-not-allowed");
		log_out_query(out, &e, 1000);
		log_out_flush(out, 1000);
	}
	snprintf(path, sizeof(path), "/tmp/moat-test-bound-pipe-%d", getpid());
	pthread_t th;
	cr_assert_eq(pthread_create(&th, NULL, reader, &p[0]), 0);
	/* once the writer caught up, the next second's sweep writes the count */
	for (int k = 0; k < 200; k++) {
		log_out_flush(out, 2000 + (uint64_t)k * 1000);
		usleep(10000);
	}
	log_out_close(out, 300000);
	log_out_free(out);
	log_sink_close(sink);
	pthread_join(th, NULL);
	close(p[0]);
	struct tally t = read_log(path);
	unlink(path);
	cr_expect_gt(t.full, 0, "the full ring's lines were counted");
	cr_expect_eq(t.plain + t.full, 20000);
}

/* Wait (2 s at most) until the log file is `by` bytes longer than *seen; *seen := its size. */
static void wait_growth(off_t *seen, off_t by)
{
	struct stat st = {0};
	for (int k = 0; k < 2000 && !(stat(path, &st) == 0 && st.st_size >= *seen + by); k++)
		usleep(1000);
	*seen = st.st_size;
}

/* Lines are formatted in place at the ring's head (log_ring_room) when it has the room, else in
 * the worker's own buffer and copied; a count closed on the way goes to the head first. Through
 * ~9 MB (the 4 MiB ring wraps twice) of allows and denies whose repeats share slots,
 * every line in the file is whole and exactly the line of its query (a "repeated" line: that
 * line with its count), and each query is counted once. */
Test(log_bound, lines_whole_through_the_ring)
{
	open_log(0);
	const unsigned sent = 40000;
	off_t seen = 0;
	for (unsigned i = 0; i < sent; i++) {
		uint64_t now = 1000 + i / 20;
		struct sockaddr_in c = client(i % 3);
		unsigned k =
		    i % 4 ? i : i / 4 % 50; /* a quarter from 50 names: counted, slots taken */
		struct log_query e = q(&c, name_n(k), i % 5 ? "deny-not-allowed" : "allow");
		log_out_query(out, &e, now);
		log_out_flush(out, now);
		if (i % 500 ==
		    499) /* ~120 kB since the last wait: the writer catches up (<= 2 s) */
			wait_growth(&seen, 64 << 10);
	}
	/* Each second's sweep writes the counts of a full ring once the writer caught up. */
	for (int k = 0; k < 50; k++) {
		log_out_flush(out, 1000 + sent / 20 + 1000 * (uint64_t)(k + 1));
		usleep(10000);
	}
	log_out_close(out, 1000 + sent / 20 + 60000);
	log_out_free(out);
	log_sink_close(sink);
	FILE *f = fopen(path, "r");
	cr_assert_not_null(f);
	static char l[LOG_LINE_MAX + 2], want[LOG_LINE_MAX];
	uint64_t counted = 0, lines = 0;
	while (fgets(l, sizeof(l), f)) {
		lines++;
		size_t n = strlen(l);
		cr_assert(n > LOG_TS_END && l[n - 1] == '\n', "whole line %llu",
		          (unsigned long long)lines);
		uint64_t s = num_after(l, "\"suppressed\":");
		if (s) {
			counted += s;
			continue;
		}
		char *rep = strstr(l, ",\"repeated\":");
		uint64_t r = rep ? strtoull(rep + 12, NULL, 10) : 0;
		if (rep) { /* the line as it was written the first time, with this ts */
			strcpy(rep, "}\n");
			n = strlen(l);
		}
		counted += rep ? r : 1;
		const char *cl = strstr(l, "\"client\":\"10.0.0."),
		           *nm = strstr(l, "\"qname\":\"x");
		cr_assert(cl && nm, "%s", l);
		struct sockaddr_in c = client((unsigned)strtoul(cl + 17, NULL, 10));
		unsigned k = (unsigned)strtoul(nm + 10, NULL, 10);
		struct log_query e =
		    q(&c, name_n(k),
		      strstr(l, "\"decision\":\"allow\"") ? "allow" : "deny-not-allowed");
		size_t m = log_format_query(want, &e, l + 7);
		cr_assert(m == n && !memcmp(want, l, n), "line %llu:\n%s\nwant\n%.*s",
		          (unsigned long long)lines, l, (int)m, want);
	}
	fclose(f);
	unlink(path);
	cr_expect_eq(counted, sent, "each query once: %llu of %u", (unsigned long long)counted,
	             sent);
	cr_expect_gt(lines, sent / 2, "most were written (%llu lines)", (unsigned long long)lines);
}

/* log_ring_peek gives a line's bytes while they are in the ring: right after its put, and until
 * the head has gone so far round that a line formatted there could reach them. */
Test(log_bound, ring_peek_until_the_ring_goes_round)
{
	open_log(0);
	struct log_ring *r = log_sink_ring(sink, 0);
	static char line[300];
	memset(line, 'a', sizeof(line) - 1);
	line[sizeof(line) - 1] = '\n';
	uint64_t at = log_ring_head(r);
	cr_assert(log_ring_put(r, line, sizeof(line)));
	const char *t = log_ring_peek(r, at, sizeof(line));
	cr_assert(t && !memcmp(t, line, sizeof(line)), "there right after its put");
	off_t seen = 0;
	line[0] = 'b';
	bool gone = false;
	for (unsigned i = 0; i < 3 * LOG_RING_BYTES / sizeof(line) && !gone; i++) {
		while (!log_ring_put(r, line, sizeof(line))) { /* the writer is behind */
			log_ring_kick(r);
			wait_growth(&seen, 1);
		}
		log_ring_kick(r);
		uint64_t ahead = log_ring_head(r) - at;
		t = log_ring_peek(r, at, sizeof(line));
		if (ahead <= LOG_RING_BYTES - LOG_LINE_MAX)
			cr_assert(t && t[0] == 'a', "%llu bytes on, still there",
			          (unsigned long long)ahead);
		else
			gone = true;
	}
	cr_expect(gone);
	cr_expect_null(t, "once a line at the head could reach it: NULL");
	/* A line put round the ring's end is not one piece: NULL. */
	for (unsigned i = 0; i < 3 * LOG_RING_BYTES / 40; i++) {
		uint64_t h = log_ring_head(r);
		size_t pos = h & (LOG_RING_BYTES - 1);
		if (pos + sizeof(line) > LOG_RING_BYTES) {
			while (!log_ring_put(r, line, sizeof(line))) {
				log_ring_kick(r);
				wait_growth(&seen, 1);
			}
			cr_expect_null(log_ring_peek(r, h, sizeof(line)));
			break;
		}
		while (!log_ring_put(r, line, 1 + (i % 7) * 40)) {
			log_ring_kick(r);
			wait_growth(&seen, 1);
		}
	}
	log_out_free(out);
	log_sink_close(sink);
	unlink(path);
}

/* The plain lines (in the file) with this name, and the queries their "repeated" lines count. */
static void name_lines(const char *name, uint64_t *plain, uint64_t *repeated)
{
	char key[64];
	snprintf(key, sizeof(key), "\"qname\":\"%s\"", name);
	struct tally t = read_lines(path, key);
	*plain = t.plain;
	*repeated = t.repeated;
}

/* run_round(flood): a deny of x1 once, a deny of x2 twice (its first repeat: the slot keeps a
 * copy), `flood` allowed lines (never counted: they only move the ring on), then both again.
 * Gives the plain lines and the counted repeats of each name. */
static void run_round(unsigned flood, uint64_t got[4])
{
	open_log(0);
	struct sockaddr_in c = client(9);
	struct log_query d1 = q(&c, name_n(1), "deny-not-allowed");
	struct log_query d2 = q(&c, name_n(2), "deny-not-allowed");
	log_out_query(out, &d1, 1000);
	log_out_query(out, &d2, 1000);
	log_out_query(out, &d2, 1000);
	off_t seen = 0;
	for (unsigned i = 0; i < flood; i++) {
		struct log_query a = q(&c, name_n(10 + i % 900), "allow");
		log_out_query(out, &a, 1000 + i / 100);
		log_out_flush(out, 1000 + i / 100);
		if (i % 500 == 499)
			wait_growth(&seen, 64 << 10);
	}
	log_out_query(out, &d1, 1500);
	log_out_query(out, &d2, 1500);
	log_out_close(out, 1600);
	log_out_free(out);
	log_sink_close(sink);
	struct tally t = read_log(path);
	name_lines("x1.evil.test.", &got[0], &got[1]);
	name_lines("x2.evil.test.", &got[2], &got[3]);
	unlink(path);
	cr_expect_eq(t.suppressed, 0, "the writer kept up");
	cr_expect_eq(t.plain + t.repeated, 5 + flood, "each query once");
}

/* A deny's line stays in the ring, not copied, until it repeats. Its repeat is counted while
 * the line is there; once the ring has gone round (allowed lines of twice its bytes), the
 * repeat is written again. A count already open was kept at its first repeat and goes on. */
Test(log_bound, repeat_after_the_ring_went_round)
{
	uint64_t near[4], far[4];
	run_round(100, near); /* ~30 kB: the ring has not gone round */
	cr_expect_eq(near[0], 1, "x1 once");
	cr_expect_eq(near[1], 1, "x1's repeat counted");
	cr_expect_eq(near[2], 1);
	cr_expect_eq(near[3], 2, "x2's two repeats counted");
	run_round(2 * LOG_RING_BYTES / 250, far); /* lines of ~300 bytes */
	cr_expect_eq(far[0], 2, "x1 written again: its line was overwritten");
	cr_expect_eq(far[1], 0);
	cr_expect_eq(far[2], 1, "x2 once");
	cr_expect_eq(far[3], 2, "x2's repeats counted: its line was kept");
}
