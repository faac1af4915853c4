/* floor.c: the benchmark's reference responder, "what the kernel costs". Receives UDP DNS
 * queries in batches of 64 (recvmmsg), flips QR, sets RCODE NXDOMAIN and sends every datagram
 * back to its source in one sendmmsg. Nothing else: no parsing, no checks.
 *
 * With an upstream it is the floor of a forwarded miss instead: the four datagrams a forwarding
 * resolver moves a query (client in, upstream out, upstream in, client out), batched as moatd
 * batches them, and nothing else. Each batch of questions goes out on one connected socket under
 * IDs of its own (a counter: the slot where the client's address and ID wait), each batch of
 * answers goes back to the clients with their IDs. No check of any kind: no resolver can forward
 * for less, so a forwarded miss's target below this figure cannot be met on that machine.
 *
 * Usage: bench-floor ADDR PORT [UPSTREAM-ADDR UPSTREAM-PORT] (e.g. bench-floor 127.0.0.1 53).
 * Stops on SIGTERM/SIGINT. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define BATCH 64
#define MAXMSG 4096

static unsigned char buf[BATCH][MAXMSG];
static struct sockaddr_in from[BATCH];
static struct iovec iov[BATCH];
static struct mmsghdr msgs[BATCH];

static void arm(int named)
{
	for (int i = 0; i < BATCH; i++) {
		iov[i] = (struct iovec){.iov_base = buf[i], .iov_len = MAXMSG};
		msgs[i].msg_hdr = (struct msghdr){.msg_name = named ? &from[i] : NULL,
		                                  .msg_namelen = named ? sizeof(from[i]) : 0,
		                                  .msg_iov = &iov[i],
		                                  .msg_iovlen = 1};
	}
}

static int addr_of(const char *ip, const char *port, struct sockaddr_in *sa)
{
	*sa = (struct sockaddr_in){.sin_family = AF_INET,
	                           .sin_port = htons((unsigned short)atoi(port))};
	return inet_pton(AF_INET, ip, &sa->sin_addr) == 1 ? 0 : -1;
}

static void respond(int fd)
{
	for (;;) {
		arm(1);
		int n = recvmmsg(fd, msgs, BATCH, MSG_WAITFORONE, NULL);
		if (n <= 0)
			continue;
		for (int i = 0; i < n; i++) {
			buf[i][2] |= 0x80; /* QR (bytes past msg_len are not sent) */
			buf[i][3] = (unsigned char)((buf[i][3] & 0xf0) | 3); /* RCODE NXDOMAIN */
			iov[i].iov_len = msgs[i].msg_len;
		}
		sendmmsg(fd, msgs, (unsigned)n, 0);
	}
}

/* The first m messages, however many sendmmsg takes a call (a failure ends the batch). */
static void send_all(int fd, int m)
{
	for (int sent = 0; sent < m;) {
		int r = sendmmsg(fd, msgs + sent, (unsigned)(m - sent), 0);
		if (r <= 0)
			break;
		sent += r;
	}
}

/* A question waiting for its answer, at the slot its upstream ID names. */
static struct {
	struct sockaddr_in client;
	uint8_t id[2];
} waiting[65536];

static void forward(int fd, int up)
{
	uint16_t next = 0;
	struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = up, .events = POLLIN}};
	for (;;) {
		if (poll(p, 2, -1) <= 0)
			continue;
		if (p[0].revents & POLLIN) { /* questions: to the upstream under our IDs */
			arm(1);
			int n = recvmmsg(fd, msgs, BATCH, MSG_DONTWAIT, NULL), m = 0;
			for (int i = 0; i < n; i++) {
				if (msgs[i].msg_len < 12)
					continue; /* no header: not sent on */
				waiting[next].client = from[i];
				memcpy(waiting[next].id, buf[i], 2);
				buf[i][0] = (uint8_t)(next >> 8);
				buf[i][1] = (uint8_t)next;
				next++;
				/* the kept ones moved down: the batch sends exactly them */
				iov[m] =
				    (struct iovec){.iov_base = buf[i], .iov_len = msgs[i].msg_len};
				msgs[m].msg_hdr =
				    (struct msghdr){.msg_iov = &iov[m], .msg_iovlen = 1};
				m++;
			}
			send_all(up, m);
		}
		if (p[1].revents & POLLIN) { /* answers: back to their clients with their IDs */
			arm(0);
			int n = recvmmsg(up, msgs, BATCH, MSG_DONTWAIT, NULL), m = 0;
			for (int i = 0; i < n; i++) {
				unsigned k = (unsigned)buf[i][0] << 8 | buf[i][1];
				if (msgs[i].msg_len < 12 || waiting[k].client.sin_family != AF_INET)
					continue; /* not an answer to a question sent */
				memcpy(buf[i], waiting[k].id, 2);
				iov[m] =
				    (struct iovec){.iov_base = buf[i], .iov_len = msgs[i].msg_len};
				msgs[m].msg_hdr =
				    (struct msghdr){.msg_name = &waiting[k].client,
				                    .msg_namelen = sizeof(waiting[k].client),
				                    .msg_iov = &iov[m],
				                    .msg_iovlen = 1};
				m++;
			}
			send_all(fd, m);
		}
	}
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa, ua;
	if ((argc != 3 && argc != 5) || addr_of(argv[1], argv[2], &sa) < 0 ||
	    (argc == 5 && addr_of(argv[3], argv[4], &ua) < 0)) {
		fprintf(stderr, "usage: bench-floor ADDR PORT [UPSTREAM-ADDR UPSTREAM-PORT]\n");
		return 2;
	}
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("bench-floor");
		return 1;
	}
	if (argc == 3)
		respond(fd);
	int up = socket(AF_INET, SOCK_DGRAM, 0);
	if (up < 0 || connect(up, (struct sockaddr *)&ua, sizeof(ua)) < 0) {
		perror("bench-floor: upstream");
		return 1;
	}
	forward(fd, up);
}
