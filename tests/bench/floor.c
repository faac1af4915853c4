/* floor.c: the benchmark's reference responder, "what the kernel costs". Receives UDP DNS
 * queries in batches of 64 (recvmmsg), flips QR, sets RCODE NXDOMAIN and sends every datagram
 * back to its source in one sendmmsg. Nothing else: no parsing, no checks.
 * Usage: bench-floor ADDR PORT (e.g. bench-floor 127.0.0.1 53). Stops on SIGTERM/SIGINT. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#define BATCH 64
#define MAXMSG 4096

int main(int argc, char **argv)
{
	static unsigned char buf[BATCH][MAXMSG];
	static struct sockaddr_in from[BATCH];
	static struct iovec iov[BATCH];
	static struct mmsghdr msgs[BATCH];
	struct sockaddr_in sa = {.sin_family = AF_INET};

	if (argc != 3 || inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
		fprintf(stderr, "usage: bench-floor ADDR PORT\n");
		return 2;
	}
	sa.sin_port = htons((unsigned short)atoi(argv[2]));
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		perror("bench-floor");
		return 1;
	}
	for (;;) {
		for (int i = 0; i < BATCH; i++) {
			iov[i] = (struct iovec){.iov_base = buf[i], .iov_len = MAXMSG};
			msgs[i].msg_hdr = (struct msghdr){.msg_name = &from[i],
			                                  .msg_namelen = sizeof(from[i]),
			                                  .msg_iov = &iov[i],
			                                  .msg_iovlen = 1};
		}
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
