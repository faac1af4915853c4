/* moatctl: the operator's tool. This file owns the command table and dispatch only; each
 * command lives in its own file (compile.c: compile, verify; sign.c: sign, keygen). The control
 * socket commands (status, reload, ...) join the table from tools/ctl/ of their own. */
#include <stdio.h>
#include <string.h>

#include "ctl.h"
#include "moat/version.h"

static const struct {
	const char *name;
	int (*main)(int argc, char **argv);
	const char *usage;
} commands[] = {
    {"compile", ctl_compile_main, "[--highrisk] -o OUT.mpol FILE...  compile text lists"},
    {"verify", ctl_verify_main, "[--pubkey K.pub] FILE.mpol...  check a compiled file in full"},
    {"sign", ctl_sign_main, "--key K FILE...  write FILE.sig (Ed25519)"},
    {"keygen", ctl_keygen_main, "-o K  write a signing key K and its public key K.pub"},
};

static int usage(FILE *f)
{
	fprintf(f, "usage: moatctl COMMAND [ARGS]\ncommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %s %s\n", commands[i].name, commands[i].usage);
	fprintf(f, "moatctl --help | --version\n");
	return f == stdout ? 0 : 2;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return usage(stderr);
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return usage(stdout);
	if (!strcmp(argv[1], "--version")) {
		printf("moatctl %s\n", MOAT_VERSION_FULL);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].main(argc - 1, argv + 1);
	fprintf(stderr, "moatctl: unknown command '%s'\n", argv[1]);
	return usage(stderr);
}
