/* metrics_endpoint.h: moatd's metrics endpoint (metrics_endpoint.c, `metrics:`). Main thread. */
#ifndef MOAT_METRICS_ENDPOINT_H
#define MOAT_METRICS_ENDPOINT_H

#include <stddef.h>
#include <sys/socket.h>

struct worker;

/* Serve GET /metrics on addr (moat/metrics_http.h: its own thread, started here, so before the
 * system-call filter). ws is borrowed until metrics_endpoint_stop. Returns 0 or MOAT_EIO. */
int metrics_endpoint_start(const struct sockaddr *addr, struct worker *ws, unsigned n,
                           const char *version, char *err, size_t errlen);
void metrics_endpoint_stop(void);

#endif
