/* local_answer.h: the answers moatd gives without asking an upstream: from local data
 * (local_data:, hosts:), which then takes the path of an upstream answer, and the answers
 * built here outright (errors, denials in the agent's deny form, RFC 8482 for ANY). Loop
 * thread only. */
#ifndef MOAT_LOCAL_ANSWER_H
#define MOAT_LOCAL_ANSWER_H

#include <stdbool.h>
#include <stdint.h>

#include "serve/fetch.h"
#include "serve/reply.h"
#include "moat/policy.h"

/* The local-data answer to q as a parsed struct answer marked local (one reference, the
 * caller's: release with answer_unref), or NULL when local data has nothing for the name. The
 * answer then takes the path of any other: its checks, its grant, its rebuild for the client. */
struct answer *local_answer_data(struct worker *srv, const struct policy *p,
                                 const struct wire_query *q);

/* Answer q with rcode and an EDE (ede_code 0: none; reason its text, may be NULL). deny: a
 * policy denial, answered in the agent's deny form (NXDOMAIN, REFUSED or the sinkhole's
 * records), which replaces rcode. Returns the rcode of the answer sent, for the log. No
 * allocation (a stack buffer). */
int local_answer_send(struct worker *srv, struct reply_to *to, const struct wire_query *q,
                      const struct policy_agent *agent, bool deny, uint8_t rcode, uint16_t ede_code,
                      const char *reason);

/* The RFC 8482 answer to ANY for an allowed name (never forwarded, never an amplifier).
 * Returns the rcode sent. */
int local_answer_any(struct worker *srv, struct reply_to *to, const struct wire_query *q);

#endif
