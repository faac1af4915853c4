/* The choice of agent by client address (policy_clients.c): an index over every agent's client
 * ranges, built once per policy snapshot, so picking the agent of a query costs one hash probe
 * per distinct prefix length in use (a handful), not one test per range: a host with a
 * thousand runtime agents pays what a host with one does. */
#ifndef MOAT_POLICY_CLIENTS_H
#define MOAT_POLICY_CLIENTS_H

#include <stddef.h>
#include <sys/socket.h>

struct policy;
struct policy_agent;
struct policy_clients;

/* Index p's agents' ranges into p->byclient (replacing none: call once, at the end of a
 * snapshot's build). On identical ranges the first agent keeps it (config_check refuses them
 * in a config; agent_edit refuses them at runtime). Returns 0 or MOAT_ENOMEM. */
int policy_clients_build(struct policy *p);

/* The agent with the longest range holding client, or NULL. Pure. */
const struct policy_agent *policy_clients_find(const struct policy *p,
                                               const struct sockaddr *client);

/* The agent that has exactly range r (same length, same masked address), or NULL. */
const struct policy_agent *policy_clients_exact(const struct policy *p, const struct cidr *r);

void policy_clients_free(struct policy_clients *c);

#endif
