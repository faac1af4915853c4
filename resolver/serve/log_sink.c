/* log_sink.c owns the query log's way to its file (see log_sink.h): the per-worker rings, the
 * writer thread that empties them, the wake-up between the two, and the file's descriptor
 * (opened, replaced on logrotate, closed).
 *
 * A ring is a power-of-two byte array with two running byte counts: head (written by its worker
 * only, published with release) and tail (written by the writer only). A line is copied in
 * whole or not at all, wrapping at the end of the array; the writer hands the two pieces to
 * writev as they are. The wake-up is the Dekker pattern on two flags: a worker publishes head,
 * fences, then reads the writer's "sleeping"; the writer sets "sleeping", fences, then reads
 * every head once more before it waits. One of the two always sees the other, so no line waits
 * for a wake-up that never comes, and a busy log costs the workers no system call at all. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "moat/err.h"
#include "moat/log.h"
#include "serve/log_sink.h"

#define LOG_BUSY_BYTES (16u << 10) /* a drain this large: the log is busy, batch the next */
#define LOG_BATCH_NS 16000000      /* how long a busy writer lets lines gather, at most */
#define LOG_LINGER_NS 1000000      /* after any drain: the next lines come without a wake-up */

struct log_ring {
	/* The worker's cache lines and the writer's apart: each writes only its own. */
	_Alignas(64) uint64_t head; /* bytes ever appended (release) */
	uint64_t kicked;            /* head at the last kick (the worker's own) */
	struct log_sink *sink;
	char *data;
	_Alignas(64) uint64_t tail; /* bytes ever written out (release) */
};

struct log_sink {
	int fd;
	bool is_stdout;
	unsigned nrings;
	struct log_ring *rings;
	pthread_t thread;
	bool started;
	pthread_mutex_t lock; /* with cv: the writer's sleep, stop and start-up */
	pthread_cond_t cv;
	int sleeping; /* the writer waits on cv (read by the workers without the lock) */
	bool stopping, running;
	uint64_t lost_bytes; /* write errors (disk full, ...): the writer's own */
	bool failing;        /* the last write failed (said once on stderr) */
};

static bool is_dev_null(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3);
}

int log_sink_open(const char *path, unsigned nrings, struct log_sink **out)
{
	*out = NULL;
	bool std = !path || strcmp(path, "-") == 0;
	/* 0666 less the umask, as fopen(path, "a") did. */
	int fd = std ? STDOUT_FILENO
	             : open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0666);
	if (fd < 0)
		return MOAT_EIO;
	if (is_dev_null(fd)) {
		if (!std)
			close(fd);
		return 0; /* no log: nothing is formatted */
	}
	struct log_sink *s = calloc(1, sizeof(*s));
	if (s)
		s->rings = aligned_alloc(64, sizeof(struct log_ring) * nrings);
	if (!s || !s->rings) {
		free(s);
		if (!std)
			close(fd);
		return MOAT_ENOMEM;
	}
	s->fd = fd;
	s->is_stdout = std;
	s->nrings = nrings;
	for (unsigned i = 0; i < nrings; i++) {
		struct log_ring *r = &s->rings[i];
		memset(r, 0, sizeof(*r));
		r->sink = s;
		if (!(r->data = malloc(LOG_RING_BYTES))) {
			s->nrings = i;
			log_sink_close(s);
			return MOAT_ENOMEM;
		}
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cv, NULL);
	*out = s;
	return 0;
}

struct log_ring *log_sink_ring(struct log_sink *s, unsigned i)
{
	return s && i < s->nrings ? &s->rings[i] : NULL;
}

#define LOG_RING_PREFETCH 512 /* bytes: a line is 360-440 */

bool log_ring_put(struct log_ring *r, const char *line, size_t n)
{
	uint64_t h = r->head, t = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	if (n > LOG_RING_BYTES - (h - t))
		return false;
	size_t pos = h & (LOG_RING_BYTES - 1), first = LOG_RING_BYTES - pos;
	if (line != r->data + pos) { /* else written in place (log_ring_room): nothing to copy */
		if (first > n)
			first = n;
		memcpy(r->data + pos, line, first);
		memcpy(r->data, line + first, n - first);
	}
	__atomic_store_n(&r->head, h + n, __ATOMIC_RELEASE);
	/* The next line's bytes, for writing: the free part of the ring was written a ring ago
	 * and left this core's cache since, so the next line's stores would each wait for a line.
	 */
	size_t next = (h + n) & (LOG_RING_BYTES - 1);
	if (next + LOG_RING_PREFETCH <= LOG_RING_BYTES)
		for (size_t k = 0; k < LOG_RING_PREFETCH; k += 64)
			__builtin_prefetch(r->data + next + k, 1);
	return true;
}

char *log_ring_room(struct log_ring *r, size_t max)
{
	uint64_t h = r->head, t = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
	size_t pos = h & (LOG_RING_BYTES - 1);
	if (max > LOG_RING_BYTES - (h - t) || max > LOG_RING_BYTES - pos)
		return NULL;
	return r->data + pos;
}

uint64_t log_ring_head(const struct log_ring *r)
{
	return r->head;
}

const char *log_ring_peek(const struct log_ring *r, uint64_t at, size_t n)
{
	size_t pos = at & (LOG_RING_BYTES - 1);
	if (r->head - at > LOG_RING_BYTES - LOG_LINE_MAX || n > LOG_RING_BYTES - pos)
		return NULL;
	return r->data + pos;
}

void log_ring_kick(struct log_ring *r)
{
	if (!r || r->head == r->kicked)
		return;
	r->kicked = r->head;
	struct log_sink *s = r->sink;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (__atomic_load_n(&s->sleeping, __ATOMIC_RELAXED)) {
		pthread_mutex_lock(&s->lock);
		pthread_cond_signal(&s->cv);
		pthread_mutex_unlock(&s->lock);
	}
}

/* ------------------------------------------------------------------ the writer -- */

/* Write iov[0..n) whole (a short write goes on where it stopped). Returns false on an error
 * other than EINTR; EAGAIN (stdout made non-blocking by someone) waits a little. */
static bool write_all(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t w = writev(fd, iov, n > IOV_MAX ? IOV_MAX : n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				nanosleep(&(struct timespec){0, 1000000}, NULL);
				continue;
			}
			return false;
		}
		while (n > 0 && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++, n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return true;
}

/* Write what every ring holds now. Returns the bytes taken; *most: the most from one ring. */
static size_t drain(struct log_sink *s, size_t *most)
{
	struct iovec iov[2 * 64];
	uint64_t upto[64];
	size_t total = 0;
	for (unsigned base = 0; base < s->nrings; base += 64) {
		unsigned nr = s->nrings - base < 64 ? s->nrings - base : 64;
		int n = 0;
		for (unsigned i = 0; i < nr; i++) {
			struct log_ring *r = &s->rings[base + i];
			uint64_t h = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE), t = r->tail;
			upto[i] = h;
			if (h == t)
				continue;
			size_t pos = t & (LOG_RING_BYTES - 1), len = h - t;
			size_t first = LOG_RING_BYTES - pos < len ? LOG_RING_BYTES - pos : len;
			iov[n++] = (struct iovec){r->data + pos, first};
			if (len > first)
				iov[n++] = (struct iovec){r->data, len - first};
			total += len;
			if (len > *most)
				*most = len;
		}
		if (n == 0)
			continue;
		size_t bytes = 0;
		for (int k = 0; k < n; k++)
			bytes += iov[k].iov_len;
		bool ok = write_all(s->fd, iov, n);
		if (!ok) {
			s->lost_bytes += bytes;
			if (!s->failing)
				fprintf(stderr,
				        "moatd: cannot write the query log: %s (lines are lost "
				        "until it works again)\n",
				        strerror(errno));
		} else if (s->failing) {
			fprintf(stderr, "moatd: the query log is written again (%llu bytes lost)\n",
			        (unsigned long long)s->lost_bytes);
		}
		s->failing = !ok;
		for (unsigned i = 0; i < nr; i++)
			__atomic_store_n(&s->rings[base + i].tail, upto[i], __ATOMIC_RELEASE);
	}
	return total;
}

static bool pending(struct log_sink *s)
{
	for (unsigned i = 0; i < s->nrings; i++)
		if (__atomic_load_n(&s->rings[i].head, __ATOMIC_ACQUIRE) != s->rings[i].tail)
			return true;
	return false;
}

static uint64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* How long a writer that just took `most` bytes from its fullest ring, `since` ns after its
 * previous drain began, lets lines gather. A busy log waits until that ring would be a quarter
 * full at the same rate, at most LOG_BATCH_NS: each wake-up costs the worker's CPU two context
 * switches and its caches the writer's bytes (a drain's copy through the 1 MB L2 evicts the
 * worker's tables), so fewer and larger writes are cheaper (8 ms against 4 ms: 0.3-1.6% less
 * CPU a query in tests/bench/ab.sh; 16 ms and a 4 MiB ring against 8 ms and 2 MiB: 0.6-0.9%;
 * 32 ms and 8 MiB against 16 ms: no difference, 0.993-1.005), while a faster worker still finds
 * room in its ring. */
static long pause_ns(size_t most, uint64_t since)
{
	if (most < LOG_BUSY_BYTES || !since)
		return LOG_LINGER_NS;
	uint64_t want = (uint64_t)(LOG_RING_BYTES / 4) * since / most;
	return want > LOG_BATCH_NS    ? LOG_BATCH_NS
	       : want < LOG_LINGER_NS ? LOG_LINGER_NS
	                              : (long)want;
}

static void *writer_main(void *arg)
{
	struct log_sink *s = arg;
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL); /* signals are the main loop's */
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); /* as every thread of moatd (worker.c) */
	pthread_mutex_lock(&s->lock);
	s->running = true;
	pthread_cond_broadcast(&s->cv);
	uint64_t last = 0;
	for (;;) {
		pthread_mutex_unlock(&s->lock);
		uint64_t now = mono_ns();
		size_t most = 0, n = drain(s, &most);
		/* Lines came: more will, let them gather (longer when busy). Meanwhile the writer
		 * counts as awake, so no worker pays for a wake-up (at 10k queries a second one
		 * per loop turn cost more than the writing). A quiet log sleeps until kicked. */
		if (n)
			nanosleep(&(struct timespec){0, pause_ns(most, last ? now - last : 0)},
			          NULL);
		last = n ? now : 0;
		pthread_mutex_lock(&s->lock);
		if (n)
			continue;
		if (s->stopping && !pending(s))
			break;
		__atomic_store_n(&s->sleeping, 1, __ATOMIC_SEQ_CST);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		if (!pending(s) && !s->stopping)
			pthread_cond_wait(&s->cv, &s->lock);
		__atomic_store_n(&s->sleeping, 0, __ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

int log_sink_start(struct log_sink *s)
{
	if (!s)
		return 0;
	if (pthread_create(&s->thread, NULL, writer_main, s) != 0)
		return MOAT_ENOMEM;
	s->started = true;
	pthread_mutex_lock(&s->lock);
	while (!s->running)
		pthread_cond_wait(&s->cv, &s->lock);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

int log_sink_reopen_fd(struct log_sink *s, int fd)
{
	int rc = 0;
	/* dup3 swaps the file under the descriptor at once; a writev already running finishes
	 * on the old file, the next one goes to the new. */
	if (s && !s->is_stdout && dup3(fd, s->fd, O_CLOEXEC) < 0)
		rc = MOAT_EIO;
	close(fd);
	return rc;
}

void log_sink_close(struct log_sink *s)
{
	if (!s)
		return;
	if (s->started) {
		pthread_mutex_lock(&s->lock);
		s->stopping = true;
		pthread_cond_signal(&s->cv);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->thread, NULL);
		pthread_mutex_destroy(&s->lock);
		pthread_cond_destroy(&s->cv);
	} else {
		size_t most = 0;
		drain(s, &most);
	}
	for (unsigned i = 0; i < s->nrings; i++)
		free(s->rings[i].data);
	if (!s->is_stdout)
		close(s->fd);
	free(s->rings);
	free(s);
}
