/* log.c writes the query log: one JSON line per query (format in moat/log.h), escaped so that
 * any byte a hostile client puts in a name stays inside its string. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "moat/err.h"
#include "moat/log.h"
#include "moat/name.h"
#include "moat/wire.h"

FILE *log_open(const char *path)
{
	FILE *f = (!path || strcmp(path, "-") == 0) ? stdout : fopen(path, "a");
	/* Fully buffered: the daemon calls log_flush once per event-loop turn, so a burst of
	 * queries costs one write, and a line is never split between writes of two turns. */
	if (f)
		setvbuf(f, NULL, _IOFBF, 1 << 16);
	return f;
}

int log_reopen_fd(FILE *f, int fd)
{
	flockfile(f);
	fflush(f);
	int rc = dup3(fd, fileno(f), O_CLOEXEC) < 0 ? MOAT_EIO : 0;
	funlockfile(f);
	close(fd);
	return rc;
}

int log_reopen(FILE *f, const char *path)
{
	if (!f || f == stdout || !path || strcmp(path, "-") == 0)
		return 0;
	int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0)
		return MOAT_EIO;
	return log_reopen_fd(f, fd);
}

void log_flush(FILE *f)
{
	if (f)
		fflush(f);
}

void log_close(FILE *f)
{
	if (f && f != stdout)
		fclose(f);
	else if (f)
		fflush(f);
}

const char *log_format_addr(const struct sockaddr *sa, bool with_port, char *buf, size_t cap)
{
	char ip[INET6_ADDRSTRLEN];
	const void *a;
	unsigned port;
	bool v6 = sa && sa->sa_family == AF_INET6;
	if (sa && sa->sa_family == AF_INET) {
		a = &((const struct sockaddr_in *)(const void *)sa)->sin_addr;
		port = ntohs(((const struct sockaddr_in *)(const void *)sa)->sin_port);
	} else if (v6) {
		a = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
		port = ntohs(((const struct sockaddr_in6 *)(const void *)sa)->sin6_port);
	} else {
		snprintf(buf, cap, "?");
		return buf;
	}
	/* Written by hand: snprintf here was ~1% of every query (one or two calls a line). */
	if (!inet_ntop(sa->sa_family, a, ip, sizeof(ip)) || cap == 0) {
		if (cap)
			buf[0] = 0;
		return buf;
	}
	char tmp[INET6_ADDRSTRLEN + 10];
	size_t n = 0;
	if (with_port && v6)
		tmp[n++] = '[';
	for (const char *s = ip; *s; s++)
		tmp[n++] = *s;
	if (with_port) {
		if (v6)
			tmp[n++] = ']';
		tmp[n++] = ':';
		char d[6];
		int k = 0;
		do
			d[k++] = (char)('0' + port % 10);
		while ((port /= 10) && k < 5);
		while (k > 0)
			tmp[n++] = d[--k];
	}
	if (n >= cap)
		n = cap - 1;
	memcpy(buf, tmp, n);
	buf[n] = 0;
	return buf;
}

/* One line is built in a buffer and written with one fwrite: no printf on the hot path, and a
 * line is never interleaved with another thread's. */
struct line {
	char buf[4096];
	size_t n;
};

static void put(struct line *l, const char *s, size_t n)
{
	if (n > sizeof(l->buf) - l->n)
		n = sizeof(l->buf) - l->n;
	memcpy(l->buf + l->n, s, n);
	l->n += n;
}

static void puts_(struct line *l, const char *s)
{
	put(l, s, strlen(s));
}

static void put_uint(struct line *l, uint64_t v)
{
	char d[24];
	int i = sizeof(d);
	do
		d[--i] = (char)('0' + v % 10);
	while ((v /= 10) && i > 0);
	put(l, d + i, sizeof(d) - (size_t)i);
}

/* Append s as a JSON string (quotes included), or null. */
static void json_str(struct line *l, const char *s)
{
	static const char hex[] = "0123456789abcdef";
	if (!s) {
		puts_(l, "null");
		return;
	}
	put(l, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		/* Runs of plain characters go in one copy (names and reasons are nearly all plain).
		 */
		const unsigned char *q = p;
		while (*q >= 0x20 && *q < 0x7f && *q != '"' && *q != '\\')
			q++;
		if (q != p) {
			put(l, (const char *)p, (size_t)(q - p));
			if (!*q)
				break;
			p = q;
		}
		if (*p == '"' || *p == '\\') {
			char e[2] = {'\\', (char)*p};
			put(l, e, 2);
		} else { /* a control character or a byte >= 0x7f */
			char e[6] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15]};
			put(l, e, 6);
		}
	}
	put(l, "\"", 1);
}

int log_json_quote(const char *s, char *out, size_t cap)
{
	static _Thread_local struct line l;
	l.n = 0;
	json_str(&l, s);
	if (cap == 0)
		return MOAT_ESPACE;
	size_t n = l.n < cap ? l.n : cap - 1;
	memcpy(out, l.buf, n);
	out[n] = 0;
	return l.n < cap && l.n < sizeof(l.buf) ? (int)n : MOAT_ESPACE;
}

/* "2026-11-30T07:55:01": formatted once a second, not once a query. */
static const char *when_seconds(time_t sec)
{
	static _Thread_local time_t last = -1;
	static _Thread_local char text[32];
	if (sec != last) {
		struct tm tm;
		gmtime_r(&sec, &tm);
		strftime(text, sizeof(text), "%Y-%m-%dT%H:%M:%S", &tm);
		last = sec;
	}
	return text;
}

/* The version 2 keys (see log.h), and the closing brace. */
static void put_v2(struct line *l, const struct log_query *e)
{
	puts_(l, ",\"v\":2,\"rule\":");
	if (e->rule_file) {
		json_str(l, e->rule_file);
		l->n--; /* reopen the string for ":line" */
		put(l, ":", 1);
		put_uint(l, e->rule_line);
		put(l, "\"", 1);
	} else {
		puts_(l, "null");
	}
	puts_(l, ",\"answer\":");
	if (e->has_answer) {
		put(l, "[", 1);
		const uint8_t *a = e->answer;
		for (unsigned i = 0; i < e->nanswer; i++) {
			char txt[INET6_ADDRSTRLEN];
			int fam = e->alen[i] == 4 ? AF_INET : AF_INET6;
			if (i)
				put(l, ",", 1);
			put(l, "\"", 1);
			puts_(l, inet_ntop(fam, a, txt, sizeof(txt)) ? txt : "?");
			put(l, "\"", 1);
			a += e->alen[i];
		}
		put(l, "]", 1);
	} else {
		puts_(l, "null");
	}
	puts_(l, ",\"grant\":");
	json_str(l, e->grant);
	puts_(l, ",\"grant_lifetime\":");
	if (e->has_grant_life)
		put_uint(l, e->grant_life);
	else
		puts_(l, "null");
	put(l, "}", 1);
}

void log_write_query(FILE *f, const struct log_query *e)
{
	struct timespec ts;
	char client[64], up[64], qname[NAME_MAXTEXT], qtype[16];
	static _Thread_local struct line l;

	if (!f)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	if (!e->qname || name_to_text(e->qname, qname, sizeof(qname)) < 0)
		qname[0] = 0;

	l.n = 0;
	puts_(&l, "{\"ts\":\"");
	puts_(&l, when_seconds(ts.tv_sec));
	char ms[5] = {'.', (char)('0' + ts.tv_nsec / 100000000),
	              (char)('0' + ts.tv_nsec / 10000000 % 10),
	              (char)('0' + ts.tv_nsec / 1000000 % 10), 'Z'};
	put(&l, ms, 5);
	puts_(&l, "\",\"client\":");
	json_str(&l, log_format_addr(e->client, false, client, sizeof(client)));
	puts_(&l, ",\"transport\":");
	json_str(&l, e->transport);
	puts_(&l, ",\"agent\":");
	json_str(&l, e->agent);
	puts_(&l, ",\"qname\":");
	json_str(&l, e->qname ? qname : NULL);
	puts_(&l, ",\"qtype\":");
	json_str(&l, e->qname ? wire_type_str(e->qtype, qtype, sizeof(qtype)) : NULL);
	puts_(&l, ",\"qclass\":");
	put_uint(&l, e->qclass);
	puts_(&l, ",\"decision\":");
	json_str(&l, e->decision);
	puts_(&l, ",\"reason\":");
	json_str(&l, e->reason);
	puts_(&l, ",\"rcode\":");
	json_str(&l, e->rcode < 0 ? NULL : wire_rcode_str((uint8_t)e->rcode));
	puts_(&l, ",\"upstream\":");
	json_str(&l, e->upstream ? log_format_addr(e->upstream, true, up, sizeof(up)) : NULL);
	puts_(&l, ",\"upstream_ms\":");
	if (e->upstream_us >= 0) {
		put_uint(&l, (uint64_t)e->upstream_us / 1000);
		char frac[4] = {'.', (char)('0' + e->upstream_us % 1000 / 100),
		                (char)('0' + e->upstream_us % 100 / 10),
		                (char)('0' + e->upstream_us % 10)};
		put(&l, frac, 4);
	} else {
		puts_(&l, "null");
	}
	puts_(&l, e->alert ? ",\"alert\":true" : ",\"alert\":false");
	put_v2(&l, e);
	if (l.n == sizeof(l.buf))
		l.n--; /* an overlong line is cut, never left without its newline */
	l.buf[l.n++] = '\n';
	fwrite(l.buf, 1, l.n, f);
}
