/* logwrite.c: the least a query log to a file can cost, "what the kernel costs" for the log
 * (as floor.c is for the UDP path). Appends LINES lines of BYTES bytes each to FILE in writes of
 * BATCH lines, as moatd's log writer hands its batches to writev, and prints the CPU time
 * (utime + stime, getrusage) per line in µs. The file is emptied first and removed at the end.
 * Usage: bench-logwrite FILE BYTES BATCH LINES (e.g. bench-logwrite /tmp/x.jsonl 430 800 1000000).
 * tests/bench/run runs it with a scenario's bytes a query and moatd's batch at that rate. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static double cpu_us(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 +
	       (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

int main(int argc, char **argv)
{
	long bytes = argc == 5 ? atol(argv[2]) : 0, batch = argc == 5 ? atol(argv[3]) : 0,
	     lines = argc == 5 ? atol(argv[4]) : 0;
	if (bytes < 1 || bytes > 65536 || batch < 1 || batch > 100000 || lines < batch) {
		fprintf(stderr, "usage: bench-logwrite FILE BYTES BATCH LINES\n");
		return 2;
	}
	size_t len = (size_t)bytes * (size_t)batch;
	char *buf = malloc(len);
	int fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (!buf || fd < 0) {
		perror("bench-logwrite");
		return 1;
	}
	for (size_t i = 0; i < len; i++) /* JSON-like text, a newline a line */
		buf[i] = (i + 1) % (size_t)bytes ? (char)('a' + i % 26) : '\n';
	double t0 = cpu_us();
	long done = 0;
	for (; done + batch <= lines; done += batch)
		for (size_t off = 0; off < len;) {
			ssize_t w = write(fd, buf + off, len - off);
			if (w < 0) {
				perror("bench-logwrite: write");
				unlink(argv[1]);
				return 1;
			}
			off += (size_t)w;
		}
	double us = cpu_us() - t0;
	close(fd);
	unlink(argv[1]);
	free(buf);
	printf("%.4f\n", us / (double)done);
	return 0;
}
