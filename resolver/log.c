/* log.c writes the query log: one JSON line per query (format in moat/log.h), escaped so that
 * any byte a hostile client puts in a name stays inside its string. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

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
	char ip[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	if (sa && sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const void *)sa;
		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
		port = ntohs(s4->sin_port);
		if (with_port)
			snprintf(buf, cap, "%s:%u", ip, port);
		else
			snprintf(buf, cap, "%s", ip);
	} else if (sa && sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const void *)sa;
		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
		port = ntohs(s6->sin6_port);
		if (with_port)
			snprintf(buf, cap, "[%s]:%u", ip, port);
		else
			snprintf(buf, cap, "%s", ip);
	} else {
		snprintf(buf, cap, "?");
	}
	return buf;
}

/* Append s as a JSON string (quotes included). */
static void json_str(FILE *f, const char *s)
{
	if (!s) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\')
			fprintf(f, "\\%c", *p);
		else if (*p < 0x20 || *p >= 0x7f)
			fprintf(f, "\\u%04x", *p);
		else
			fputc(*p, f);
	}
	fputc('"', f);
}

void log_write_query(FILE *f, const struct log_query *e)
{
	struct timespec ts;
	struct tm tm;
	char when[40], client[64], up[64], qname[NAME_MAXTEXT], qtype[16];

	if (!f)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
	if (!e->qname || name_to_text(e->qname, qname, sizeof(qname)) < 0)
		qname[0] = 0;

	/* One buffered line, flushed whole by line buffering. */
	flockfile(f);
	fprintf(f, "{\"ts\":\"%s.%03ldZ\",\"client\":", when, ts.tv_nsec / 1000000);
	json_str(f, log_format_addr(e->client, false, client, sizeof(client)));
	fputs(",\"transport\":", f);
	json_str(f, e->transport);
	fputs(",\"agent\":", f);
	json_str(f, e->agent);
	fputs(",\"qname\":", f);
	json_str(f, e->qname ? qname : NULL);
	fputs(",\"qtype\":", f);
	json_str(f, e->qname ? wire_type_str(e->qtype, qtype, sizeof(qtype)) : NULL);
	fprintf(f, ",\"qclass\":%u,\"decision\":", e->qclass);
	json_str(f, e->decision);
	fputs(",\"reason\":", f);
	json_str(f, e->reason);
	fputs(",\"rcode\":", f);
	json_str(f, e->rcode < 0 ? NULL : wire_rcode_str((uint8_t)e->rcode));
	fputs(",\"upstream\":", f);
	json_str(f, e->upstream ? log_format_addr(e->upstream, true, up, sizeof(up)) : NULL);
	if (e->upstream_us >= 0)
		fprintf(f, ",\"upstream_ms\":%.3f", (double)e->upstream_us / 1000.0);
	else
		fputs(",\"upstream_ms\":null", f);
	fprintf(f, ",\"alert\":%s}\n", e->alert ? "true" : "false");
	funlockfile(f);
}
