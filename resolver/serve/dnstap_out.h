/* dnstap_out.h: moatd's dnstap writer (dnstap_out.c). Start it before the workers attach and
 * before the system-call filter; the hooks are no-ops for a worker whose w->dnstap is NULL. */
#ifndef MOAT_DNSTAP_OUT_H
#define MOAT_DNSTAP_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "moat/config.h"

struct worker;

/* Open cfg->dnstap_path (nothing when unset) with one input queue per worker. identity and
 * version are borrowed for the process's life. Returns 0 or MOAT_EIO with err set. */
int dnstap_out_start(const struct config *cfg, unsigned nworkers, const char *identity,
                     const char *version, char *err, size_t errlen);
/* Give worker w its queue (w->index), on any thread before w runs. */
void dnstap_out_attach(struct worker *w);
/* After every worker stopped: write what is queued and close. */
void dnstap_out_stop(void);

/* On w's thread. */
void dnstap_client(struct worker *srv, const struct sockaddr *client, bool tcp, const uint8_t *msg,
                   size_t len, bool response);
void dnstap_forwarder(struct worker *srv, const struct sockaddr *upstream, const uint8_t *msg,
                      size_t len, bool tcp, bool response);

#endif
