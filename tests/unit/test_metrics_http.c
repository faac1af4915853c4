/* Unit tests for the metrics endpoint moatd and moat-fw share (resolver/metrics_http.c), over a
 * real loopback socket: GET /metrics answers 200 with the body the program renders and the
 * Prometheus content type, both from a listening socket handed over (moat-fw) and from an
 * address it binds (moatd); another path is 404 with a line naming the program; a body that
 * cannot be rendered closes the connection without an answer; slow clients (a byte every few
 * seconds) neither keep a scraper out nor hold their connections past the deadline. */
#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "moat/metrics_http.h"

static int calls;
static char why[200]; /* metrics_http_start's reason when it fails */

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
	cr_assert_eq(listen(fd, 16), 0);
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
	struct metrics_http *h = metrics_http_start(&o, why, sizeof(why));
	cr_assert_not_null(h, "%s", why);
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
		h = metrics_http_start(&o, why, sizeof(why));
	}
	cr_assert_not_null(h, "%s", why);
	fetch(&sa, "/metrics", out, sizeof(out));
	cr_expect_not_null(strstr(out, "\r\n\r\na 1\n"), "%s", out);
	metrics_http_stop(h);
}

Test(metrics_http, says_why_it_cannot_listen)
{
	struct sockaddr_in sa;
	int fd = listener(&sa); /* listening: the address is in use */
	struct metrics_http_opts o = {
	    .program = "prog", .addr = (const struct sockaddr *)&sa, .fd = -1, .body = body_ok};
	why[0] = '\0';
	cr_expect_null(metrics_http_start(&o, why, sizeof(why)));
	cr_expect_str_eq(why, "cannot listen (address in use or not local?)");
	close(fd);
}

Test(metrics_http, failed_body_closes)
{
	struct sockaddr_in sa;
	char out[4096];
	int fd = listener(&sa);
	struct metrics_http_opts o = {.program = "prog", .fd = fd, .body = body_fail};
	struct metrics_http *h = metrics_http_start(&o, why, sizeof(why));
	cr_assert_not_null(h, "%s", why);
	calls = 0;
	cr_expect_eq(fetch(&sa, "/metrics", out, sizeof(out)), 0, "got: %s", out);
	cr_expect_eq(calls, 1);
	metrics_http_stop(h);
}

/* A slow client from 127.0.0.1: connected, one byte of a request sent, the rest never. */
static int slow_client(const struct sockaddr_in *sa)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_eq(connect(fd, (const struct sockaddr *)sa, sizeof(*sa)), 0);
	cr_assert_eq(send(fd, "G", 1, 0), 1);
	return fd;
}

/* Whether the server closed fd (EOF or reset) within ms. */
static bool closed_within(int fd, int ms)
{
	struct pollfd p = {fd, POLLIN, 0};
	char b[64];
	return poll(&p, 1, ms) == 1 && recv(fd, b, sizeof(b), MSG_DONTWAIT) <= 0;
}

/* 8 slow clients, all from the scraper's own address, then the scraper: it gets its answer
 * (within 2 s here: the connections in its way are closed, not waited for), and every slow
 * client is closed by the server although it keeps sending (the deadline counts from accept;
 * the idle timeout alone would never close them). */
Test(metrics_http, slow_clients_do_not_hold_the_endpoint, .timeout = 60)
{
	struct sockaddr_in sa;
	char out[4096];
	int fd = listener(&sa), slow[8];
	struct metrics_http_opts o = {.program = "prog", .fd = fd, .body = body_ok, .ctx = "s 1\n"};
	struct metrics_http *h = metrics_http_start(&o, why, sizeof(why));
	cr_assert_not_null(h, "%s", why);
	for (int i = 0; i < 8; i++)
		slow[i] = slow_client(&sa);
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = {.tv_sec = 2};
	cr_assert_eq(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	cr_assert_eq(connect(s, (const struct sockaddr *)&sa, sizeof(sa)), 0);
	static const char req[] = "GET /metrics HTTP/1.0\r\n\r\n";
	cr_assert_eq(send(s, req, sizeof(req) - 1, 0), (ssize_t)sizeof(req) - 1);
	size_t got = 0;
	for (ssize_t k;
	     got + 1 < sizeof(out) && (k = recv(s, out + got, sizeof(out) - 1 - got, 0)) > 0;)
		got += (size_t)k;
	out[got] = '\0';
	close(s);
	cr_expect_not_null(strstr(out, "\r\n\r\ns 1\n"),
	                   "no answer within 2 s past 8 slow clients: '%s'", out);
	/* Each slow client keeps sending a byte a second; the server closes every one (bounded:
	 * the deadline is 5 s, the poll gives 20). */
	int open = 8;
	for (int round = 0; round < 20 && open; round++) {
		open = 0;
		for (int i = 0; i < 8; i++) {
			if (slow[i] < 0)
				continue;
			if (closed_within(slow[i], 1000 / 8) ||
			    send(slow[i], "E", 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
				close(slow[i]);
				slow[i] = -1;
				continue;
			}
			open++;
		}
	}
	cr_expect_eq(open, 0, "%d slow clients still held a connection", open);
	for (int i = 0; i < 8; i++)
		if (slow[i] >= 0)
			close(slow[i]);
	metrics_http_stop(h);
}
