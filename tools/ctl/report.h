/* report.h: `moatctl report` (report.c reads the logs and aggregates them, report_out.c writes
 * the three formats). Internal to moatctl. */
#ifndef MOAT_CTL_REPORT_H
#define MOAT_CTL_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moat/name.h"
#include "moat/policy.h"
#include "moat/recommend.h"

#define REP_TS 32    /* "2026-12-01T22:00:00.123Z" and room */
#define REP_ADDRS 32 /* addresses kept per name */
#define REP_DECS 4   /* distinct decisions kept per name */
#define REP_AGENT 64

struct rep_addr {
	uint8_t family; /* 4 or 6 */
	uint8_t a[16];
};

/* A name an agent asked for. */
struct rep_name {
	size_t agent; /* index into report.agents */
	char name[NAME_MAXTEXT];
	char dec[REP_DECS][24]; /* the decisions seen, in order of first sight */
	unsigned ndec;
	uint64_t count;
	char first[REP_TS], last[REP_TS];
	struct rep_addr addr[REP_ADDRS];
	unsigned naddr;
	struct policy_ports ports; /* connected to, through its addresses */
	bool any_port;
};

/* Connections to one destination and port, by outcome. */
struct rep_conn {
	size_t agent; /* SIZE_MAX: the source matched no agent seen */
	char src[48]; /* the sandbox address it came from */
	struct rep_addr dst;
	uint8_t proto; /* 6, 17, 1 (ICMP) ... */
	uint16_t port;
	char outcome[32]; /* "connected" or the drop's reason ("never-resolved") */
	uint64_t count;
	char first[REP_TS], last[REP_TS];
	size_t nnames; /* names whose answers held dst */
};

struct rep_agent {
	char name[REP_AGENT];
	uint64_t queries;
	struct recommendation rec;
	bool rec_done;
};

struct report {
	struct rep_agent *agents;
	size_t nagents;
	struct rep_name *names;
	size_t nnames, cap_names;
	struct rep_conn *conns;
	size_t nconns, cap_conns;
	uint64_t suppressed; /* drops moat-fw counted but did not write one by one */
	char since[REP_TS];  /* "" : everything */
	const char *only;    /* the one agent asked for, or NULL */
	/* lookups (report.c) */
	struct rep_index *byname, *byclient;
	char first[REP_TS], last[REP_TS];
	uint64_t lines, bad_lines;
};

/* report.c: read the query logs and moat-fw's logs into r, then attribute the connections to
 * names and build each agent's recommendation. 0, or a negative code with the reason printed. */
int report_read_queries(struct report *r, const char *path);
int report_read_fw(struct report *r, const char *path);
int report_finish(struct report *r, const struct policy_set *highrisk, unsigned wildcard_min);
void report_free(struct report *r);
/* "10m", "2h", "3d", "90s" ago, or "2026-12-01", "2026-12-01T22:00:00[Z]", into out as the
 * log's form (UTC); 0 or MOAT_EINVAL. */
int report_since(const char *text, char out[REP_TS]);
/* "tcp" / "udp" / the protocol number as text. */
const char *report_proto(uint8_t p, char *buf, size_t cap);

/* report_out.c: write the report; 0 or 1 (an allowlist was asked for several agents). */
int report_print_text(const struct report *r);
int report_print_json(const struct report *r);
int report_print_allowlist(const struct report *r);

#endif
