/* Runtime agents brought back from the state store at start-up (agent_restore.c). */
#ifndef MOAT_AGENT_RESTORE_H
#define MOAT_AGENT_RESTORE_H

#include <stddef.h>

struct agentstore;
struct policy;

/* Replace *p (its reference is released) by *p plus every agent of st; *n says how many.
 * Returns 0, or < 0 with err set and *p unchanged. */
int agent_restore(struct agentstore *st, struct policy **p, size_t *n, char *err, size_t errlen);

#endif
