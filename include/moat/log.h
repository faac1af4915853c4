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
#include <stddef.h>
#include <sys/socket.h>

/* transport, decision and grant point at string constants (the formatter keeps their JSON
 * text by pointer); every other string may be any buffer. */
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
	bool reason_rule; /* the reason is the rule's, "allowed by FILE:LINE": made from rule_file
	                   * and rule_line, not reason (what policy_decide leaves to the rule) */
	const uint8_t *answer; /* addresses passed: 4 bytes (IPv4) or 16 (IPv6) each, see alen */
	const uint8_t *alen;   /* per address: 4 or 16; NULL with nanswer 0: null in the log */
	unsigned nanswer;
	bool has_answer;     /* an answer was released ("answer" is a list, maybe empty) */
	const char *grant;   /* NULL: null */
	bool has_grant_life; /* false: null */
	uint32_t grant_life;
};

#define LOG_FORMAT_VERSION 2

/* Two kinds of summary line keep a flood from becoming a log flood (moatd's log_bound.c);
 * every query is still counted exactly once, in a line of its own or in one count:
 *   repeated    a line with every key above and "repeated":N before its closing brace stands
 *               for N more queries identical to it (every key but "ts"), refused or denied
 *               since a line with the same keys and no "repeated" was written; its "ts" is
 *               when the count was closed (at most a second after that first line)
 *   suppressed  {"ts":"...","v":2,"suppressed":N,"why":"log budget"} says that N queries were
 *               not logged: over the log's byte budget ("log budget") or while the writer was
 *               behind and the worker's buffer full ("log buffer full") */

#define LOG_LINE_MAX 4096 /* a longer line is cut, still one line with its newline */
#define LOG_TS_LEN 24     /* "2026-11-30T07:55:01.123Z" */
#define LOG_TS_END 31     /* the offset just past a line's ts: {"ts":"...Z */
#define LOG_IP_MAX 46     /* INET6_ADDRSTRLEN: the longest address text and its NUL */

/* The "ts" text of a time in milliseconds since the epoch (UTC), not NUL-terminated. */
void log_format_ts(int64_t unix_ms, char ts[LOG_TS_LEN]);

/* One query line, its newline included, into out; returns its length. No allocation, no
 * stdio: the worker's hot path. */
size_t log_format_query(char out[LOG_LINE_MAX], const struct log_query *e,
                        const char ts[LOG_TS_LEN]);

/* The summary lines above: line (len bytes, as log_format_query wrote it) with "ts" now and
 * "repeated":count; or a "suppressed" line. Return their length. */
size_t log_format_repeated(char out[LOG_LINE_MAX], const char *line, size_t len,
                           const char ts[LOG_TS_LEN], uint64_t count);
size_t log_format_suppressed(char out[LOG_LINE_MAX], const char ts[LOG_TS_LEN], uint64_t count,
                             const char *why);

/* s as a JSON string with quotes ("null" for NULL) into out. Returns the length, or
 * MOAT_ESPACE (out is then cut but terminated). */
int log_json_quote(const char *s, char *out, size_t cap);

/* An address (4 or 16 bytes) as text, exactly as inet_ntop writes it, NUL-terminated ("?" for
 * another length). Returns its length. */
size_t log_format_ip(char out[LOG_IP_MAX], const uint8_t *addr, size_t len);

/* Format a socket address as text ("127.0.0.1", "[::1]:53" when with_port). Returns buf. */
const char *log_format_addr(const struct sockaddr *sa, bool with_port, char *buf, size_t cap);

#endif
