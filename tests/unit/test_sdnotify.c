/* Unit tests for the readiness datagram (moat/sdnotify.h): address forms of $NOTIFY_SOCKET (path
 * and abstract '@'), and that one send is one datagram a listener receives as sent. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "moat/err.h"
#include "moat/sdnotify.h"

Test(sdnotify, path_and_abstract_addresses)
{
	struct sockaddr_un sa;
	socklen_t len;
	cr_assert_eq(sdnotify_addr("/run/systemd/notify", &sa, &len), 0);
	cr_expect_str_eq(sa.sun_path, "/run/systemd/notify");
	cr_expect_eq(len,
	             offsetof(struct sockaddr_un, sun_path) + strlen("/run/systemd/notify") + 1);
	cr_assert_eq(sdnotify_addr("@moat/x", &sa, &len), 0);
	cr_expect_eq(sa.sun_path[0], '\0');
	cr_expect_eq(memcmp(sa.sun_path + 1, "moat/x", 6), 0);
	cr_expect_eq(len, offsetof(struct sockaddr_un, sun_path) + 7, "no NUL counted");
}

Test(sdnotify, unusable_values)
{
	struct sockaddr_un sa;
	socklen_t len;
	char longer[200];
	memset(longer, 'a', sizeof(longer) - 1);
	longer[0] = '/';
	longer[sizeof(longer) - 1] = '\0';
	cr_expect_eq(sdnotify_addr("", &sa, &len), MOAT_EINVAL);
	cr_expect_eq(sdnotify_addr("@", &sa, &len), MOAT_EINVAL);
	cr_expect_eq(sdnotify_addr("relative/path", &sa, &len), MOAT_EINVAL);
	cr_expect_eq(sdnotify_addr(longer, &sa, &len), MOAT_EINVAL);
	cr_expect_eq(sdnotify_addr(NULL, &sa, &len), MOAT_EINVAL);
}

Test(sdnotify, without_the_variable_nothing_happens)
{
	unsetenv("NOTIFY_SOCKET");
	cr_expect_eq(sdnotify_open(), 0);
	cr_expect_eq(sdnotify_send("READY=1"), 0);
	sdnotify_close();
}

static void roundtrip(const char *value, const struct sockaddr_un *sa, socklen_t len)
{
	char buf[128];
	int l = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(l, 0);
	cr_assert_eq(bind(l, (const struct sockaddr *)sa, len), 0);
	setenv("NOTIFY_SOCKET", value, 1);
	cr_assert_eq(sdnotify_open(), 1);
	cr_assert_eq(sdnotify_send("READY=1\nSTATUS=serving"), 0);
	ssize_t n = recv(l, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	cr_assert_eq(n, (ssize_t)strlen("READY=1\nSTATUS=serving"));
	buf[n] = '\0';
	cr_expect_str_eq(buf, "READY=1\nSTATUS=serving");
	cr_expect_lt(recv(l, buf, sizeof(buf), MSG_DONTWAIT), 0, "one datagram, no more");
	sdnotify_close();
	unsetenv("NOTIFY_SOCKET");
	close(l);
}

Test(sdnotify, datagram_reaches_a_path_socket)
{
	char dir[] = "/tmp/moat-sdnotify-XXXXXX";
	cr_assert_not_null(mkdtemp(dir));
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/notify", dir);
	char value[sizeof(sa.sun_path)];
	snprintf(value, sizeof(value), "%s", sa.sun_path);
	roundtrip(value, &sa, sizeof(sa));
	unlink(sa.sun_path);
	rmdir(dir);
}

Test(sdnotify, datagram_reaches_an_abstract_socket)
{
	char value[64];
	snprintf(value, sizeof(value), "@moat-sdnotify-test-%d", (int)getpid());
	struct sockaddr_un sa;
	socklen_t len;
	cr_assert_eq(sdnotify_addr(value, &sa, &len), 0);
	roundtrip(value, &sa, len);
}

Test(sdnotify, nobody_listening_is_an_error)
{
	setenv("NOTIFY_SOCKET", "/nonexistent/moat-notify", 1);
	cr_expect_eq(sdnotify_open(), MOAT_EIO);
	cr_expect_eq(sdnotify_send("READY=1"), 0, "nothing open, nothing sent");
	unsetenv("NOTIFY_SOCKET");
}
