/* moatd's command line (config_flags.c): the flags read into struct config_flags, then applied
 * onto the struct config that -c loaded (or that config_init made), through the same table of
 * ranges and the same config_validate as the file. Without -c the flags also make the one
 * agent, 'default'. */
#ifndef MOAT_CONFIG_FLAGS_H
#define MOAT_CONFIG_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "moat/config.h"

#define CONFIG_FLAGS_NUM_MAX 32

struct config_flags {
	const char *config_path;
	bool check, strict;
	bool strict_chain, allow_private, audit;
	bool no_seccomp;
	const char *deny, *log, *firewall, *user, *zones_dir, *control, *metrics, *state_dir;
	char **allow; /* owned until handed to the flag-mode agent */
	size_t nallow;
	struct sockaddr_storage *listen, *up; /* owned until handed to the config */
	size_t nlisten, nup;
	struct sockaddr_storage source;
	bool has_source;
	struct {
		const struct config_limit *lim;
		uint32_t v;
	} num[CONFIG_FLAGS_NUM_MAX]; /* numeric flags, in the order given */
	size_t nnum;
};

/* Read the flags and -c into cfg (config_init'ed here) and validate it. Returns 0, or < 0
 * after printing the reason to stderr; --help and --version print and exit(0). Both o and cfg
 * then hold what they own: config_flags_free(o) and config_free(cfg) release it. */
int config_flags_build(int argc, char **argv, struct config *cfg, struct config_flags *o);

/* Release what o still owns (the lists not handed to cfg). */
void config_flags_free(struct config_flags *o);

#endif
