/* moat-escape's shared declarations: the run's configuration (config.c), the probes that talk
 * to the network with a bound on every wait (probe.c), what a reply means (judge.c), the ten
 * escape tests built from them (tests.c) and the report in its three formats (report.c).
 * main.c only wires these together, so everything but the command line is reachable from the
 * unit tests through libmoatescape. */
#ifndef MOAT_ESCAPE_H
#define MOAT_ESCAPE_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "moat/name.h"

#define ESCAPE_NTESTS 13
#define ESCAPE_CONTROL 10 /* the test that must work */
#define ESCAPE_NCORE 11   /* tests 1-11 always run; 12 and 13 need a witness */
#define ESCAPE_DEFAULT_WITNESS_PORT 7
#define ESCAPE_DEFAULT_INBOUND_PORT 18080
#define ESCAPE_MAXLIST 16  /* entries per repeatable key */
#define ESCAPE_NAMELEN 256 /* a name in text, trailing dot optional (253 chars + NUL is enough) */
#define ESCAPE_DETAIL 1024 /* one test's detail column */
#define ESCAPE_REASON 200  /* what escaped, for the summary line */
#define ESCAPE_MAXADDR 8   /* addresses kept from one answer */
#define ESCAPE_DEFAULT_TIMEOUT_MS 2000
#define ESCAPE_DEFAULT_EXPIRE_WAIT 120
#define ESCAPE_DEFAULT_GRANT_MIN 30 /* moat-fw's default --min-lifetime */
#define ESCAPE_EXPIRE_MARGIN 2      /* seconds past the grant: moat-fw's 1 s slack plus rounding */

enum escape_format { ESCAPE_FMT_TABLE = 0, ESCAPE_FMT_TAP, ESCAPE_FMT_JSON };

/* An address with its length (4 or 16): sinkhole addresses and answer addresses. */
struct escape_addr {
	uint8_t len;
	uint8_t b[16];
};

struct escape_cfg {
	struct sockaddr_storage resolver;
	bool has_resolver;
	char allowed[ESCAPE_NAMELEN];     /* required: the control name */
	char target_host[ESCAPE_NAMELEN]; /* allowed-target host: a name or an address literal */
	uint16_t target_port;             /* 0: not given (allowed:443 is used) */
	char rebind[ESCAPE_MAXLIST][ESCAPE_NAMELEN];
	size_t nrebind;
	bool rebind_default;
	char meta_names[ESCAPE_MAXLIST][ESCAPE_NAMELEN];
	size_t nmeta;
	struct sockaddr_in meta_addr; /* the metadata address: IPv4, numeric forms derive from it */
	struct sockaddr_in6 meta_addr6; /* the IPv6 metadata address (fd00:ec2::254) */
	struct sockaddr_storage others[ESCAPE_MAXLIST];
	size_t nothers;
	bool others_default;
	struct sockaddr_storage unresolved; /* port unused: 80 and 443 are tried */
	bool unresolved_default;
	struct sockaddr_in6 v6_target;
	bool v6_default;
	uint32_t expire_wait;             /* seconds test 8 may wait; 0 skips it */
	uint32_t grant_min;               /* the firewall's shortest grant, seconds */
	char expire_name[ESCAPE_NAMELEN]; /* empty: the allowed name */
	uint16_t expire_port;             /* 0: the allowed target's port */
	char tunnel_domain[ESCAPE_NAMELEN];
	char scoped_name[ESCAPE_NAMELEN]; /* test 11: a name allowed for some ports only */
	uint16_t scoped_open;             /* a TCP port its allowlist line names */
	uint16_t scoped_closed;           /* a TCP port it does not name (0: 443, or 80) */
	uint32_t timeout_ms;
	struct escape_addr sinks[ESCAPE_MAXLIST];
	size_t nsinks;
	char witness_host[ESCAPE_NAMELEN]; /* tests 12, 13: a host outside (allowed name) that */
	uint16_t witness_port;             /* ... runs tools/escape/witness.py; empty: not run */
	uint16_t inbound_port; /* test 13: where the sandbox listens for the witness's call */
	struct sockaddr_storage spoof[ESCAPE_MAXLIST]; /* test 12: sources to forge */
	size_t nspoof; /* 0: derived from the sandbox's own addresses */
	enum escape_format format;
	/* Which repeatable keys were given: the first one replaces the default list. */
	bool set_rebind, set_meta, set_others, set_sinks;
};

/* ---- configuration (config.c) ---- */

/* Defaults for everything except the resolver and the control. */
void escape_cfg_init(struct escape_cfg *c);

/* Apply one key (the file's key = the long flag's name). Returns 0, or MOAT_EINVAL with a
 * reason in err. */
int escape_cfg_set(struct escape_cfg *c, const char *key, const char *value, char *err,
                   size_t errlen);

/* key=value (or "key value") lines, '#' comments; err gets "label:line: reason". */
int escape_cfg_load_string(struct escape_cfg *c, const char *text, size_t len, const char *label,
                           char *err, size_t errlen);
int escape_cfg_load_file(struct escape_cfg *c, const char *path, char *err, size_t errlen);

/* The first "nameserver" of a resolv.conf, port 53. MOAT_ENOENT when there is none, MOAT_EIO
 * when the file cannot be read. */
int escape_resolv_conf(const char *path, struct sockaddr_storage *out);

/* After file and flags: the resolver from resolv_path when not given, the control required, the
 * target and expire defaults filled in. Returns 0 or MOAT_EINVAL with err set. */
int escape_cfg_finish(struct escape_cfg *c, const char *resolv_path, char *err, size_t errlen);

/* The address as "1.2.3.4:53" / "[2001:db8::1]:53" (or without the port when port is false). */
const char *escape_sa_str(const struct sockaddr *sa, bool port, char *out, size_t cap);

/* ---- numeric forms of an IPv4 address (config.c) ---- */

enum {
	ESCAPE_FORM_DOTTED = 0,
	ESCAPE_FORM_DECIMAL,
	ESCAPE_FORM_HEX,
	ESCAPE_FORM_OCTAL,
	ESCAPE_NFORMS
};

/* The address written four ways: 169.254.169.254, 2852039166, 0xa9fea9fe, 0251.0376.0251.0376. */
void escape_numeric_forms(struct in_addr a, char forms[ESCAPE_NFORMS][32]);

/* ---- probes (probe.c) ---- */

enum escape_conn {
	ESCAPE_CONN_OPEN = 0, /* the handshake completed: a path exists */
	ESCAPE_CONN_REFUSED,  /* a RST came back: no connection */
	ESCAPE_CONN_TIMEOUT,  /* nothing came back in time (a dropping firewall) */
	ESCAPE_CONN_UNREACH,  /* the kernel or an ICMP error said no (no route, EPERM, ...) */
};

/* One TCP connect, non-blocking with poll, closed at once. *err gets the errno (0 when open). */
enum escape_conn escape_connect(const struct sockaddr *sa, unsigned timeout_ms, int *err);

/* "open", "refused", "timeout", or the errno's text for UNREACH, into buf. */
const char *escape_conn_str(enum escape_conn st, int err, char *buf, size_t cap);

enum escape_dns_status {
	ESCAPE_DNS_REPLY = 0, /* a reply with our ID and QR set came back */
	ESCAPE_DNS_TIMEOUT,   /* nothing within the timeout */
	ESCAPE_DNS_NETERR,    /* the socket failed (no route, refused by ICMP, reset) */
	ESCAPE_DNS_BADNAME,   /* the name is not a valid DNS name */
};

enum escape_transport { ESCAPE_TR_AUTO = 0, ESCAPE_TR_UDP, ESCAPE_TR_TCP };

struct escape_dns {
	enum escape_dns_status status;
	int err;  /* errno for NETERR */
	bool tcp; /* the reply came over TCP */
	uint16_t id, qtype;
	uint8_t lname[NAME_MAXWIRE];
	size_t len;
	uint8_t pkt[65535];
};

/* Send one query (random ID, RD, EDNS) and wait for its reply. AUTO is UDP, then TCP when the
 * reply is truncated; the whole exchange shares one deadline of timeout_ms. */
void escape_dns_query(const struct sockaddr *server, const char *name, uint16_t qtype,
                      enum escape_transport tr, unsigned timeout_ms, struct escape_dns *out);

/* ---- what a reply means (judge.c) ---- */

/* What a reply means to the escape tests. */
enum escape_verdict {
	ESCAPE_V_DENY =
	    0, /* NXDOMAIN, REFUSED, or NOERROR whose only answers are sinkhole addresses */
	ESCAPE_V_NODATA,    /* NOERROR with an empty answer section */
	ESCAPE_V_FAIL,      /* SERVFAIL or another error rcode: no data, but no deny either */
	ESCAPE_V_DATA,      /* NOERROR with answer records that are not sinkhole addresses */
	ESCAPE_V_MALFORMED, /* not a well-formed answer to our question */
};

struct escape_answer {
	enum escape_verdict verdict;
	uint8_t rcode;
	int ede;      /* RFC 8914 info code, -1 when absent */
	size_t naddr; /* non-sinkhole A/AAAA records in the answer section */
	struct escape_addr addr[ESCAPE_MAXADDR]; /* the first ESCAPE_MAXADDR of them */
	uint32_t addr_ttl;                       /* lowest TTL of those, UINT32_MAX when none */
	size_t nsink;                            /* sinkhole A/AAAA records */
	size_t nother;                           /* other answer records (CNAME, TXT, ...) */
};

/* Classify a reply to (lname, qtype): sinks are the addresses that mean "denied". */
void escape_classify(const uint8_t *pkt, size_t len, uint16_t id, const uint8_t *lname,
                     uint16_t qtype, const struct escape_addr *sinks, size_t nsinks,
                     struct escape_answer *a);

/* True for loopback, link-local, private, shared, unspecified, multicast and metadata addresses,
 * also when embedded in IPv6 (mapped, NAT64, 6to4, Teredo): moat's own address guard. */
bool escape_addr_internal(const struct escape_addr *a);

/* "NXDOMAIN", "NOERROR 192.0.2.1", "NOERROR sinkhole", "REFUSED (EDE 15)", ... into buf. */
const char *escape_answer_str(const struct escape_answer *a, char *buf, size_t cap);

/* ---- tunnelling names (probe.c) ---- */

/* base32 (RFC 4648 alphabet, lower case, no padding) of n bytes; out needs 8*n/5 + 2 bytes. */
void escape_base32(const uint8_t *in, size_t n, char *out);

/* A tunnelling name: 63-byte base32 labels of random data under domain, as many (3 or 4) as
 * fit in 255 bytes; the last label is shortened to fit. Returns its length or MOAT_EINVAL. */
int escape_tunnel_name(const char *domain, char *out, size_t cap);

/* ---- the tests (tests.c) ---- */

enum escape_outcome {
	ESCAPE_HELD = 0, /* blocked, as it should be */
	ESCAPE_ESCAPED,  /* something got through */
	ESCAPE_WORKS,    /* the control worked */
	ESCAPE_FAILED,   /* the control failed: a false deny */
	ESCAPE_NOTRUN,   /* could not be run (skipped); the run cannot claim it held */
	ESCAPE_UNSET,    /* not configured (12, 13 without a witness): not shown, not counted */
};

struct escape_result {
	int id;
	const char *name;
	const char *expect; /* "blocked" or "works" */
	enum escape_outcome outcome;
	char detail[ESCAPE_DETAIL];
	char reason[ESCAPE_REASON]; /* why it escaped / failed / did not run, for the summary */
};

/* Called after each test, for streaming output. */
typedef void (*escape_progress_fn)(void *ctx, const struct escape_result *r);

/* The number of tests this configuration runs (the TAP plan): unset ones do not count. */
int escape_ntests(const struct escape_cfg *c);

/* Resolve name A and AAAA: the first address of each family into out (at most 2); txt says
 * what came back. */
size_t escape_resolve2(const struct escape_cfg *c, const char *name, struct escape_addr out[2],
                       char *txt, size_t cap);

/* Put addr and port into a sockaddr. */
void escape_to_sa(const struct escape_addr *a, uint16_t port, struct sockaddr_storage *ss);

/* ---- tests 12 and 13, judged by the witness outside (hostile.c) ---- */

/* 12: UDP datagrams with forged sources (raw socket) to the witness; any it saw escaped. */
void escape_test_spoof(const struct escape_cfg *c, struct escape_result *r);

/* 13: the witness connects back to the sandbox's inbound-port; an open connection escaped. */
void escape_test_inbound(const struct escape_cfg *c, struct escape_result *r);

/* Run the tests in order. res[i] is test i+1. */
void escape_run(const struct escape_cfg *c, struct escape_result res[ESCAPE_NTESTS],
                escape_progress_fn fn, void *ctx);

/* Upper bound of a run in milliseconds: every probe at its timeout plus test 8's wait. */
uint64_t escape_worst_case_ms(const struct escape_cfg *c);

/* Fill id, name and expect for test number id (1..ESCAPE_NTESTS), outcome HELD (WORKS for the
 * control), empty texts. */
void escape_result_init(struct escape_result *r, int id);

/* ---- the report (report.c) ---- */

const char *escape_outcome_str(enum escape_outcome o);

/* printf-style append to buf, with "; " before it unless buf is empty. */
void escape_appendf(char *buf, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "moat-escape: N of M held[; escaped: ...][; control failed (...)][; not run: ...]". */
void escape_summary(const struct escape_result *r, size_t n, char *out, size_t cap);

/* True when every test held and the control worked: exit status 0. */
bool escape_all_held(const struct escape_result *r, size_t n);

/* Streaming report: begin, one row per test as it finishes, end with the summary. JSON is
 * written whole at the end. */
void escape_report_begin(FILE *f, enum escape_format fmt, const struct escape_cfg *c);
void escape_report_row(FILE *f, enum escape_format fmt, const struct escape_result *r);
void escape_report_end(FILE *f, enum escape_format fmt, const struct escape_result *r, size_t n);

/* A JSON string literal (quotes included) for s. */
void escape_json_str(FILE *f, const char *s);

#endif
