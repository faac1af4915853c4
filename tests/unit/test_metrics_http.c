/* Unit tests for the metrics endpoint moatd and moat-fw share (resolver/metrics_http.c), over a
 * real loopback socket: GET /metrics answers 200 with the body the program renders and the
 * Prometheus content type, both from a listening socket handed over (moat-fw) and from an
 * address it binds (moatd); another path is 404 with a line naming the program; a body that
 * cannot be rendered closes the connection without an answer. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "moat/metrics_http.h"

static int calls;

static char *body_ok(void *ctx, size_t *len)
{
	calls++;
	char *t = strdup((const char *)ctx);
	*len = strlen(t);
	return t;
}

static char *body_fail(void *ctx, size_t *len)
{
	(void)ctx;
	(void)len;
	calls++;
	return NULL;
}

/* A listening socket on 127.0.0.1, any port; its address into sa. */
static int listener(struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	socklen_t len = sizeof(*sa);
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert(fd >= 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)sa, sizeof(*sa)), 0);
	cr_assert_eq(listen(fd, 4), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)sa, &len), 0);
	return fd;
}

/* Send one request, read the whole answer (the server closes after HTTP/1.0) into out. */
static size_t fetch(const struct sockaddr_in *sa, const char *path, char *out, size_t cap)
{
	char req[128];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_eq(connect(fd, (const struct sockaddr *)sa, sizeof(*sa)), 0);
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", path);
	cr_assert_eq(send(fd, req, (size_t)n, 0), n);
	size_t got = 0;
	for (int i = 0; i < 100 && got + 1 < cap; i++) {
		struct pollfd p = {fd, POLLIN, 0};
		cr_assert_eq(poll(&p, 1, 5000), 1, "no answer within 5 s");
		ssize_t k = recv(fd, out + got, cap - got - 1, 0);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	out[got] = '\0';
	close(fd);
	return got;
}

Test(metrics_http, serves_a_given_socket)
{
	struct sockaddr_in sa;
	char out[4096];
	int fd = listener(&sa);
	struct metrics_http_opts o = {
	    .program = "prog", .fd = fd, .body = body_ok, .ctx = "m_total 7\n"};
	struct metrics_http *h = metrics_http_start(&o);
	cr_assert_not_null(h);
	calls = 0;
	fetch(&sa, "/metrics", out, sizeof(out));
	cr_expect(strncmp(out, "HTTP/1.0 200", 12) == 0 || strncmp(out, "HTTP/1.1 200", 12) == 0,
	          "%s", out);
	cr_expect_not_null(strstr(out, "Content-Type: text/plain; version=0.0.4\r\n"), "%s", out);
	cr_expect_not_null(strstr(out, "\r\n\r\nm_total 7\n"), "%s", out);
	cr_expect_eq(calls, 1);
	fetch(&sa, "/other", out, sizeof(out));
	cr_expect_not_null(strstr(out, " 404 "), "%s", out);
	cr_expect_not_null(strstr(out, "\r\n\r\nprog: GET /metrics\n"), "%s", out);
	cr_expect_eq(calls, 1, "a 404 renders no body");
	metrics_http_stop(h);
}

Test(metrics_http, binds_an_address)
{
	struct sockaddr_in sa;
	char out[4096];
	struct metrics_http *h = NULL;
	/* A port found free a moment ago; another process may take it first, so a few tries. */
	for (int i = 0; i < 5 && !h; i++) {
		close(listener(&sa));
		struct metrics_http_opts o = {.program = "prog",
		                              .addr = (const struct sockaddr *)&sa,
		                              .fd = -1,
		                              .body = body_ok,
		                              .ctx = "a 1\n"};
		h = metrics_http_start(&o);
	}
	cr_assert_not_null(h);
	fetch(&sa, "/metrics", out, sizeof(out));
	cr_expect_not_null(strstr(out, "\r\n\r\na 1\n"), "%s", out);
	metrics_http_stop(h);
}

Test(metrics_http, failed_body_closes)
{
	struct sockaddr_in sa;
	char out[4096];
	int fd = listener(&sa);
	struct metrics_http_opts o = {.program = "prog", .fd = fd, .body = body_fail};
	struct metrics_http *h = metrics_http_start(&o);
	cr_assert_not_null(h);
	calls = 0;
	cr_expect_eq(fetch(&sa, "/metrics", out, sizeof(out)), 0, "got: %s", out);
	cr_expect_eq(calls, 1);
	metrics_http_stop(h);
}
