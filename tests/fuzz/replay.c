/* replay.c: a main() for the libFuzzer targets in this directory, so that every target also builds
 * with gcc as an ordinary program that runs LLVMFuzzerTestOneInput once per file of its checked-in
 * corpus. CMake registers each as the unit test fuzz/<name> (replay_<name> corpus/<name>), which is
 * how every crash a fuzzer ever found stays a regression test, in the plain and the ASan build.
 *
 *   replay_<name> DIR-OR-FILE...    runs every regular file (directories: sorted, not recursive);
 *                                   exits 0, or the target aborts on the first failing input
 *
 * Running a fuzzer by hand (clang 14 with libclang-rt-14-dev; one fuzzer at a time on a shared
 * box):
 *
 *   CC=clang cmake -S . -B build-fuzz -DMOAT_FUZZ=ON -DMOAT_SANITIZE=ON
 *   cmake --build build-fuzz --target fuzz_resp
 *   mkdir -p /tmp/fz-resp                       # the fuzzer's working corpus: new inputs go here
 *   build-fuzz/fuzz_resp /tmp/fz-resp tests/fuzz/corpus/resp \
 *       -max_total_time=1800 -rss_limit_mb=2048 -timeout=10 -jobs=1 -workers=1 \
 *       -print_final_stats=1 -artifact_prefix=/tmp/fz-resp-
 *
 * (-jobs=1 writes the log to ./fuzz-0.log.) For query, resp and name add -detect_leaks=0 (2 to 5
 * times faster): ldns leaks in ldns_wire2pkt on some packets (see fuzz_ldns.h) and each leaking
 * input makes libFuzzer scan for leaks; moat's wire and name code allocates nothing, and the
 * replay test still checks leaks (tools/test runs it under ASan with detect_leaks=1).
 *
 * Targets: query, resp, name, policy, fwproto, svcb, ctlproto. A finding leaves crash-, leak- or
 * timeout-<sha1> at the artifact prefix; replay it with build-fuzz/fuzz_resp FILE (or
 * build-replay/replay_resp FILE), fix the module, and keep the input as
 * tests/fuzz/corpus/<name>/regress-<what>.bin. To fold new coverage into the checked-in corpus
 * (min-*.bin) without growing it much:
 *
 *   mkdir /tmp/min && build-fuzz/fuzz_resp -merge=1 /tmp/min tests/fuzz/corpus/resp /tmp/fz-resp
 *
 * then copy the most interesting of /tmp/min (keep each corpus under ~200 files and ~1 MB).
 * tests/fuzz/make_seeds.py regenerates the hand-made seeds deterministically. */
#include <dirent.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned long nrun;
static char current[4096]; /* the input being run, named when a check aborts */

static void on_abort(int sig)
{
	static const char msg[] = "replay: failing input: ";
	if (write(2, msg, sizeof(msg) - 1) < 0 || write(2, current, strlen(current)) < 0 ||
	    write(2, "\n", 1) < 0) {
		/* nothing more to say */
	}
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Read the whole file into a buffer of exactly its size, so that ASan sees any read past the end
 * of the input just as libFuzzer's own buffer would show it. */
static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return -1;
	}
	size_t cap = 4096, len = 0;
	uint8_t *buf = malloc(cap);
	size_t n;
	while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap) {
			uint8_t *nb = realloc(buf, cap *= 2);
			if (!nb)
				free(buf);
			buf = nb;
		}
	}
	int bad = ferror(f);
	fclose(f);
	if (!buf || bad) {
		fprintf(stderr, "%s: read failed\n", path);
		free(buf);
		return -1;
	}
	snprintf(current, sizeof(current), "%s", path);
	uint8_t *exact = malloc(len ? len : 1);
	if (!exact) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, len);
	free(buf);
	LLVMFuzzerTestOneInput(exact, len);
	free(exact);
	nrun++;
	return 0;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d) {
		perror(dir);
		return -1;
	}
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			char **nn = realloc(names, cap * sizeof(*nn));
			if (!nn) {
				rc = -1;
				break;
			}
			names = nn;
		}
		if (!(names[n] = strdup(e->d_name))) {
			rc = -1;
			break;
		}
		n++;
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++) {
		char path[4096];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		if (rc == 0 && stat(path, &st) == 0 && S_ISREG(st.st_mode))
			rc = run_file(path);
		free(names[i]);
	}
	free(names);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s DIR-OR-FILE...\n", argv[0]);
		return 2;
	}
	signal(SIGABRT, on_abort);
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) != 0) {
			perror(argv[i]);
			return 1;
		}
		if ((S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i])) != 0)
			return 1;
	}
	if (nrun == 0) {
		fprintf(stderr, "%s: no inputs found\n", argv[0]);
		return 1; /* an empty or misplaced corpus must not pass as a green test */
	}
	printf("%s: %lu inputs replayed\n", argv[0], nrun);
	return 0;
}
