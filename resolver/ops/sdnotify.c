/* sdnotify.c owns the one descriptor moatd and moat-fw use to tell the service manager how they
 * are (see moat/sdnotify.h). Written by hand rather than linking libsystemd: the protocol is a
 * single datagram, the daemons must run where there is no systemd at all, and the socket has to
 * be opened before moatd's system-call filter while the messages go out after it. */
#include "moat/sdnotify.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moat/err.h"

static int sdnotify_fd = -1;

int sdnotify_addr(const char *value, struct sockaddr_un *sa, socklen_t *salen)
{
	size_t n = value ? strlen(value) : 0;

	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (n < 2 || n >= sizeof(sa->sun_path) || (value[0] != '/' && value[0] != '@'))
		return MOAT_EINVAL;
	memcpy(sa->sun_path, value, n);
	if (value[0] == '@')
		sa->sun_path[0] = '\0'; /* abstract namespace: the name is not NUL-terminated */
	*salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (value[0] == '/'));
	return 0;
}

int sdnotify_open(void)
{
	struct sockaddr_un sa;
	socklen_t salen;
	const char *value = getenv("NOTIFY_SOCKET");

	if (value == NULL)
		return 0;
	if (sdnotify_fd >= 0)
		return 1;
	if (sdnotify_addr(value, &sa, &salen) != 0)
		return MOAT_EINVAL;
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return MOAT_EIO;
	if (connect(fd, (struct sockaddr *)&sa, salen) != 0) {
		close(fd);
		return MOAT_EIO;
	}
	sdnotify_fd = fd;
	return 1;
}

int sdnotify_send(const char *msg)
{
	size_t n = strlen(msg);
	ssize_t w;

	if (sdnotify_fd < 0)
		return 0;
	do
		w = send(sdnotify_fd, msg, n, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	return w == (ssize_t)n ? 0 : MOAT_EIO;
}

void sdnotify_close(void)
{
	if (sdnotify_fd >= 0)
		close(sdnotify_fd);
	sdnotify_fd = -1;
}
