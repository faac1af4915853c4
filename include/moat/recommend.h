/* The recommended allowlist (recommend.c): from the names an agent was seen to resolve (in audit
 * mode, or allowed) and the ports it connected to, the list that lets the same workload through
 * when enforced, and no more than the workload showed:
 *   - names are grouped by registrable domain (libpsl, the system's public suffix list with its
 *     private section); where at least wildcard_min distinct names below one registrable domain
 *     were seen, they become one wildcard on it (`*.example.com`; its apex, if seen, stays an
 *     exact line); elsewhere each name is its own exact line. A wildcard is therefore never on
 *     or above a public suffix (`alice.github.io` and `bob.github.io` are two registrable
 *     domains: two exact lines);
 *   - no wildcard where the lint would warn about it (one over a public suffix,
 *     `*.amazonaws.com` covering `s3.amazonaws.com`), where the domain or a name seen below it is
 *     high-risk (a high-risk neighbour: widening there is what the list warns about), and never
 *     a high-risk name or an IP literal at all;
 *   - each line's ports are the union of the connections seen to the addresses of the names it
 *     covers (`tcp/443,8443 udp/123`); a line whose names were never connected to, or with
 *     more than POLICY_PORTS_MAX ports, names none (every port) and says so.
 * The result is then linted like any allowlist (the warnings come with it). Pure, apart from
 * reading the public suffix list. */
#ifndef MOAT_RECOMMEND_H
#define MOAT_RECOMMEND_H

#include <stdbool.h>
#include <stddef.h>

#include "moat/name.h"
#include "moat/policy.h"

/* One name seen, with the ports connected to its addresses. */
struct recommend_name {
	uint8_t lname[NAME_MAXWIRE]; /* lower-cased wire form */
	struct policy_ports ports;   /* connections seen (n 0: none) */
	bool any_port;               /* more ports than a rule holds, or a port-less flow */
	bool highrisk;               /* denied as high-risk: never recommended, never widened */
};

/* One line of the recommendation. */
struct recommend_rule {
	char pattern[NAME_MAXTEXT + 2]; /* "api.example.com", "*.example.com" */
	struct policy_ports ports;      /* n 0: every port (see no_conn, any_port) */
	bool any_port;                  /* too many ports for one line: every port */
	bool no_conn;                   /* none of its names was connected to: every port */
	unsigned covers;                /* names seen that it allows */
};

struct recommendation {
	struct recommend_rule *rules; /* owned, sorted by pattern */
	size_t n;
	char *
	    *lint; /* owned: the lint's warnings about the lines ("recommended:N: warning: ...") */
	size_t nlint;
	size_t skipped; /* names left out: high-risk or IP literals */
};

/* Build the recommendation for n names (duplicates are merged). highrisk may be NULL.
 * wildcard_min: distinct names below one registrable domain from which a wildcard is written
 * (0: the default, 4). Ownership: *out is filled; release with recommend_free. Returns 0 or
 * MOAT_ENOMEM. */
#define RECOMMEND_WILDCARD_MIN 4
int recommend_build(const struct recommend_name *v, size_t n, const struct policy_set *highrisk,
                    unsigned wildcard_min, struct recommendation *out);
void recommend_free(struct recommendation *r);

/* The allowlist line of a rule ("*.example.com tcp/443") into out. Returns its length. */
int recommend_line(const struct recommend_rule *r, char *out, size_t cap);

#endif
