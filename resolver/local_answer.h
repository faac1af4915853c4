/* local_answer.h: the step of a query's path that answers from local data (local_data:,
 * hosts:) instead of an upstream. Loop thread only. */
#ifndef MOAT_LOCAL_ANSWER_H
#define MOAT_LOCAL_ANSWER_H

#include "fetch.h"
#include "moat/policy.h"

/* The local answer to q as a parsed struct answer marked local (one reference, the caller's:
 * release with answer_unref), or NULL when local data has nothing for the name. The answer
 * then takes the path of any other: its checks, its grant, its rebuild for the client. */
struct answer *local_answer(struct worker *srv, const struct policy *p, const struct wire_query *q);

#endif
