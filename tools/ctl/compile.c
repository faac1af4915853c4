/* compile.c owns `moatctl compile` (text allowlists or high-risk lists into one compiled policy
 * file, moat/policy_file.h) and `moatctl verify` (a compiled file checked in full: header,
 * sections, body checksum, and with --pubkey its signature). */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "ctl.h"
#include "moat/policy.h"
#include "moat/policy_file.h"
#include "moat/keyfile.h"
#include "moat/policy_sig.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void print_info(const char *path, const struct policy_set *s)
{
	struct policy_file_info in;
	if (policy_file_info(s, &in))
		return;
	printf("%s: format %u, %s, %llu patterns on %llu names, %llu bytes (%llu slots, %llu bytes "
	       "of records: rules and names), %llu port rules, %llu source files\n",
	       path, in.version, in.highrisk ? "high-risk" : "allowlist",
	       (unsigned long long)in.patterns, (unsigned long long)in.names,
	       (unsigned long long)in.file_len, (unsigned long long)in.slots,
	       (unsigned long long)in.arena_len, (unsigned long long)in.nports,
	       (unsigned long long)in.nfiles);
}

int ctl_compile_main(int argc, char **argv)
{
	static const struct option opts[] = {{"highrisk", no_argument, NULL, 'H'},
	                                     {"output", required_argument, NULL, 'o'},
	                                     {NULL, 0, NULL, 0}};
	const char *out = NULL;
	bool highrisk = false;
	char err[1024];
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "Ho:", opts, NULL)) != -1) {
		if (c == 'H')
			highrisk = true;
		else if (c == 'o')
			out = optarg;
		else
			return 2;
	}
	if (!out || optind >= argc || !policy_file_is_compiled(out)) {
		fprintf(stderr, "usage: moatctl compile [--highrisk] -o OUT%s FILE...\n",
		        POLICY_FILE_EXT);
		return 2;
	}
	double t0 = now_s();
	struct policy_set *s = policy_set_new();
	if (!s)
		return 1;
	if (highrisk)
		policy_set_forbid_ports(s);
	for (int i = optind; i < argc; i++)
		if (policy_set_load_file(s, argv[i], err, sizeof(err))) {
			fprintf(stderr, "moatctl compile: %s\n", err);
			policy_set_free(s);
			return 1;
		}
	double t1 = now_s();
	int rc = policy_file_write(s, highrisk, out, err, sizeof(err));
	policy_set_free(s);
	double t2 = now_s();
	/* Read back in full: what was written is what moatd will map. */
	struct policy_set *m = NULL;
	if (!rc)
		rc =
		    policy_file_open(out, highrisk, POLICY_VERIFY_FULL, NULL, &m, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "moatctl compile: %s\n", err);
		return 1;
	}
	print_info(out, m);
	printf("%s: read %.2f s, written %.2f s, verified %.2f s\n", out, t1 - t0, t2 - t1,
	       now_s() - t2);
	policy_set_free(m);
	return 0;
}

bool ctl_policy_command(int argc, char **argv, int *status)
{
	static const struct {
		const char *name;
		int (*main)(int argc, char **argv);
	} cmds[] = {{"compile", ctl_compile_main},
	            {"verify", ctl_verify_main},
	            {"sign", ctl_sign_main},
	            {"keygen", ctl_keygen_main}};
	for (size_t i = 0; argc >= 2 && i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name)) {
			*status = cmds[i].main(argc - 1, argv + 1);
			return true;
		}
	return false;
}

int ctl_verify_main(int argc, char **argv)
{
	static const struct option opts[] = {{"pubkey", required_argument, NULL, 'p'},
	                                     {"highrisk", no_argument, NULL, 'H'},
	                                     {NULL, 0, NULL, 0}};
	uint8_t pk[32];
	bool have_pk = false, highrisk = false;
	char err[1024];
	int c, bad = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "p:H", opts, NULL)) != -1) {
		if (c == 'p') {
			if (keyfile_read(optarg, pk, sizeof(pk), err, sizeof(err))) {
				fprintf(stderr, "moatctl verify: %s\n", err);
				return 2;
			}
			have_pk = true;
		} else if (c == 'H') {
			highrisk = true;
		} else {
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "usage: moatctl verify [--pubkey K.pub] [--highrisk] FILE%s...\n",
		        POLICY_FILE_EXT);
		return 2;
	}
	for (int i = optind; i < argc; i++) {
		struct policy_set *m = NULL;
		/* With a key the signature covers every byte; the body checksum is checked too. */
		int rc = have_pk ? policy_sig_verify_file(argv[i], pk, err, sizeof(err)) : 0;
		if (!rc)
			rc = policy_file_open(argv[i], highrisk, POLICY_VERIFY_FULL, NULL, &m, err,
			                      sizeof(err));
		if (rc) {
			fprintf(stderr, "moatctl verify: %s\n", err);
			bad = 1;
			continue;
		}
		print_info(argv[i], m);
		if (have_pk)
			printf("%s: signature good\n", argv[i]);
		policy_set_free(m);
	}
	return bad;
}
