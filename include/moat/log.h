/* The query log: one JSON object per line for every query moatd answers or drops, so an
 * operator can see who asked what and why moat decided as it did. Format (version 2):
 *   {"ts":"2026-11-30T07:55:01.123Z","client":"127.0.0.1","transport":"udp","agent":"ci-42",
 *    "qname":"example.com.","qtype":"A","qclass":1,"decision":"allow","reason":"allowed by ...",
 *    "rcode":"NOERROR","upstream":"192.0.2.53:53","upstream_ms":1.234,"alert":false,
 *    "v":2,"rule":"allow/ci.txt:12","answer":["192.0.2.10","2001:db8::10"],
 *    "grant":"OK","grant_lifetime":300}
 * "agent", "upstream" and "upstream_ms" are null when they do not apply. Version 2 added the
 * last five keys (version 1 lines have none of them and no "v"):
 *   v               the format version
 *   rule            "file:line" of the pattern that allowed or denied the name, or null
 *   answer          the addresses passed to the client (A/AAAA and SVCB/HTTPS hints), [] when
 *                   none, null when no upstream answer was released
 *   grant           moat-fw's verdict (fwproto_status_str: "OK", "DENIED", "FAILED" (also
 *                   timeouts and a lost channel), "BADMSG"), "none" (no firewall, or no
 *                   address to grant), or null (the query never got that far)
 *   grant_lifetime  seconds granted (the client's TTLs are capped at it), or null
 * decision is one of: allow, allow-cached (answered from the cache), allow-stale (expired
 * answer served because no upstream answered, RFC 8767), deny-not-allowed, deny-high-risk,
 * deny-ip-literal, deny-embedded-address (in the name or in the answer), deny-class,
 * refuse-client, formerr, notimp, badvers, and would-deny (audit mode: on no allowlist, answered
 * as an allow would be; reason is the one enforce mode gives, moat/policy_audit.h). */
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
	/* version 2 */
	const char *rule_file; /* NULL: no rule */
	uint32_t rule_line;
	const uint8_t *answer; /* addresses passed: 4 bytes (IPv4) or 16 (IPv6) each, see alen */
	const uint8_t *alen;   /* per address: 4 or 16; NULL with nanswer 0: null in the log */
	unsigned nanswer;
	bool has_answer;     /* an answer was released ("answer" is a list, maybe empty) */
	const char *grant;   /* NULL: null */
	bool has_grant_life; /* false: null */
	uint32_t grant_life;
};

#define LOG_FORMAT_VERSION 2

/* Open the log: path NULL or "-" means stdout. The stream is fully buffered; call log_flush
 * at the end of each batch of work (moatd: each event-loop turn). Ownership: caller closes with
 * log_close. Returns NULL with errno set on failure. */
FILE *log_open(const char *path);
void log_flush(FILE *f);

/* logrotate: point f at path again (the renamed file keeps what was written). The FILE and its
 * buffering stay; the new file descriptor replaces the old one under the stream's lock, so
 * other threads writing to f are safe. stdout is left alone. Returns 0 or MOAT_EIO. */
int log_reopen(FILE *f, const char *path);
/* The same with a descriptor already open for the new file (moatd under its filter opens it
 * relative to the log's directory: logreopen.c). fd is consumed. */
int log_reopen_fd(FILE *f, int fd);

/* s as a JSON string with quotes ("null" for NULL) into out. Returns the length, or
 * MOAT_ESPACE (out is then cut but terminated). */
int log_json_quote(const char *s, char *out, size_t cap);
void log_close(FILE *f);

/* Write one query line. Never fails the query: a write error is counted by the caller's
 * metrics, the answer still goes out. */
void log_write_query(FILE *f, const struct log_query *e);

/* Format a socket address as text ("127.0.0.1", "[::1]:53" when with_port). Returns buf. */
const char *log_format_addr(const struct sockaddr *sa, bool with_port, char *buf, size_t cap);

#endif
