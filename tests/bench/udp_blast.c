/* udp_blast.c: a UDP load of small datagrams against an echo responder (bench-floor), for the
 * cost of a forwarding path (tests/bench/fw_guard.sh). Sends batches of 64 datagrams of 32 bytes
 * (sendmmsg) to ADDR:PORT for SECONDS, keeping at most 2048 unanswered (a 10 ms silence forgets
 * them as lost), and prints "echoes=N seconds=S pps=P" (answers per second).
 * Usage: bench-udp-blast ADDR PORT SECONDS. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define BATCH 64
#define WINDOW 2048

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	static unsigned char out[BATCH][32], in[BATCH][512];
	static struct iovec oiov[BATCH], iiov[BATCH];
	static struct mmsghdr om[BATCH], im[BATCH];
	struct sockaddr_in sa = {.sin_family = AF_INET};
	if (argc != 4 || inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
		fprintf(stderr, "usage: bench-udp-blast ADDR PORT SECONDS\n");
		return 2;
	}
	sa.sin_port = htons((unsigned short)atoi(argv[2]));
	double secs = atof(argv[3]);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		perror("socket");
		return 1;
	}
	for (int i = 0; i < BATCH; i++) {
		memset(out[i], 0,
		       sizeof(out[i])); /* a DNS header's worth: the responder flips QR */
		oiov[i] = (struct iovec){out[i], sizeof(out[i])};
		om[i].msg_hdr = (struct msghdr){.msg_iov = &oiov[i], .msg_iovlen = 1};
		iiov[i] = (struct iovec){in[i], sizeof(in[i])};
		im[i].msg_hdr = (struct msghdr){.msg_iov = &iiov[i], .msg_iovlen = 1};
	}
	long long echoes = 0, outstanding = 0;
	double t0 = now_s(), end = t0 + secs;
	while (now_s() < end) {
		if (outstanding < WINDOW) {
			int n = sendmmsg(fd, om, BATCH, 0);
			if (n > 0)
				outstanding += n;
		}
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, outstanding >= WINDOW ? 10 : 0) == 0 && outstanding >= WINDOW)
			outstanding = 0; /* silence: what is out is lost */
		int r;
		while ((r = recvmmsg(fd, im, BATCH, MSG_DONTWAIT, NULL)) > 0) {
			echoes += r;
			outstanding = outstanding > r ? outstanding - r : 0;
		}
	}
	double s = now_s() - t0;
	printf("echoes=%lld seconds=%.2f pps=%.0f\n", echoes, s, (double)echoes / s);
	return 0;
}
