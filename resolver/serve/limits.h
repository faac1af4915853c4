/* limits.h: moatd's file-descriptor budget. The caps (TCP clients, questions in flight and the
 * upstream socket pool they allow) decide how many descriptors moatd may need; at start-up,
 * while still privileged, RLIMIT_NOFILE is raised to that, or the caps are lowered to what
 * the limit allows (and moatd says so). */
#ifndef MOAT_LIMITS_H
#define MOAT_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#include "moat/config.h"

/* Descriptors the caps of cfg may need with nworkers workers. */
uint64_t limits_nofile_need(const struct config *cfg, unsigned nworkers);

/* Raise RLIMIT_NOFILE to what cfg needs; if the hard limit cannot be raised, lower
 * tcp_max_clients and inflight_max to fit and write a line saying so to msg (msg[0] == 0
 * otherwise). Returns 0, or a negative MOAT_* code when not even the smallest caps fit. */
int limits_fit_nofile(struct config *cfg, char *msg, size_t msglen);

#endif
