/* The query log: one JSON object per line for every query moatd answers or drops, so an
 * operator can see who asked what and why moat decided as it did. Format (version 1):
 *   {"ts":"2026-11-30T07:55:01.123Z","client":"127.0.0.1","transport":"udp","agent":"ci-42",
 *    "qname":"example.com.","qtype":"A","qclass":1,"decision":"allow","reason":"allowed by ...",
 *    "rcode":"NOERROR","upstream":"192.0.2.53:53","upstream_ms":1.234,"alert":false}
 * "agent", "upstream" and "upstream_ms" are null when they do not apply. */
#ifndef MOAT_LOG_H
#define MOAT_LOG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

struct log_query {
	const struct sockaddr *client;
	const char *transport; /* "udp" or "tcp" */
	const char *agent;     /* NULL: no agent (unknown client) */
	const uint8_t *qname;  /* wire form; NULL when no question could be read */
	uint16_t qtype, qclass;
	const char *decision; /* "allow", "deny-not-allowed", "formerr", ... */
	const char *reason;
	int rcode;                       /* -1: nothing was sent */
	const struct sockaddr *upstream; /* NULL: not forwarded */
	int64_t upstream_us;             /* -1: not forwarded */
	bool alert;
};

/* Open the log: path NULL or "-" means stdout. The stream is fully buffered; call log_flush
 * at the end of each batch of work (moatd: each event-loop turn). Ownership: caller closes with
 * log_close. Returns NULL with errno set on failure. */
FILE *log_open(const char *path);
void log_flush(FILE *f);
void log_close(FILE *f);

/* Write one query line. Never fails the query: a write error is counted by the caller's
 * metrics, the answer still goes out. */
void log_write_query(FILE *f, const struct log_query *e);

/* Format a socket address as text ("127.0.0.1", "[::1]:53" when with_port). Returns buf. */
const char *log_format_addr(const struct sockaddr *sa, bool with_port, char *buf, size_t cap);

#endif
