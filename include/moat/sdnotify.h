/* sdnotify: the service manager's readiness protocol (sd_notify(3)), written out by hand: one
 * datagram of "KEY=VALUE\n" lines to the AF_UNIX socket named by $NOTIFY_SOCKET (a path, or an
 * abstract name when it starts with '@'). Without $NOTIFY_SOCKET every call does nothing.
 *
 * The socket is opened and connected by sdnotify_open, before the daemon installs its
 * system-call filter; later messages (READY=1, STATUS=, STOPPING=1) are a plain send() on it. */
#ifndef MOAT_SDNOTIFY_H
#define MOAT_SDNOTIFY_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

/* Turn a $NOTIFY_SOCKET value into an address. Returns the address length for connect(), or
 * MOAT_EINVAL for a value that names no usable socket (empty, relative, too long). Pure. */
int sdnotify_addr(const char *value, struct sockaddr_un *sa, socklen_t *salen);

/* Open and connect the notification socket named by $NOTIFY_SOCKET. Returns 1 when one is
 * open, 0 when the variable is unset (not run by a service manager), or a negative MOAT_E*
 * code. The descriptor is the module's (close-on-exec), kept until sdnotify_close. */
int sdnotify_open(void);

/* Send msg (e.g. "READY=1\nSTATUS=serving") as one datagram. Returns 0 (also when no socket is
 * open) or MOAT_EIO. */
int sdnotify_send(const char *msg);

void sdnotify_close(void);

#endif
