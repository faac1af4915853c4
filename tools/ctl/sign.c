/* sign.c owns `moatctl sign` (FILE.sig beside each file, moat/policy_sig.h: a compiled policy
 * over its header page, any other file whole) and `moatctl keygen` (a signing key and its
 * public key). */
#include <getopt.h>
#include <sodium.h>
#include <stdio.h>

#include "ctl.h"
#include "moat/policy.h"
#include "moat/policy_file.h"
#include "moat/keyfile.h"
#include "moat/policy_sig.h"

/* A header signature vouches for the blocks through the block table: so a compiled file is
 * signed only if every block matches now (moatd would fail its damaged lookups closed, but a
 * signature must not stand for a damaged file). 0, or an error with err set. */
static int check_compiled(const char *path, char *err, size_t errlen)
{
	struct policy_set *m = NULL;
	if (!policy_file_is_compiled(path))
		return 0;
	int rc = policy_file_open(path, false, POLICY_VERIFY_FULL, NULL, &m, err, errlen);
	if (m)
		policy_set_free(m);
	return rc;
}

int ctl_sign_main(int argc, char **argv)
{
	static const struct option opts[] = {{"key", required_argument, NULL, 'k'},
	                                     {NULL, 0, NULL, 0}};
	const char *key = NULL;
	uint8_t sk[64];
	char err[1024];
	int c, bad = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "k:", opts, NULL)) != -1) {
		if (c != 'k')
			return 2;
		key = optarg;
	}
	if (!key || optind >= argc) {
		fprintf(stderr, "usage: moatctl sign --key K FILE...\n");
		return 2;
	}
	if (sodium_init() < 0 || keyfile_read(key, sk, sizeof(sk), err, sizeof(err))) {
		fprintf(stderr, "moatctl sign: %s\n", err);
		return 1;
	}
	for (int i = optind; i < argc; i++) {
		if (check_compiled(argv[i], err, sizeof(err)) ||
		    policy_sig_sign_file(argv[i], sk, err, sizeof(err))) {
			fprintf(stderr, "moatctl sign: %s\n", err);
			bad = 1;
			continue;
		}
		printf("%s%s written\n", argv[i], POLICY_SIG_EXT);
	}
	sodium_memzero(sk, sizeof(sk));
	return bad;
}

int ctl_keygen_main(int argc, char **argv)
{
	char err[1024];
	int c;
	const char *out = NULL;
	optind = 1;
	while ((c = getopt(argc, argv, "o:")) != -1) {
		if (c != 'o')
			return 2;
		out = optarg;
	}
	if (!out || optind != argc) {
		fprintf(stderr, "usage: moatctl keygen -o K\n");
		return 2;
	}
	if (keyfile_keygen(out, err, sizeof(err))) {
		fprintf(stderr, "moatctl keygen: %s\n", err);
		return 1;
	}
	printf("%s (secret, mode 0600) and %s.pub written\n", out, out);
	return 0;
}
