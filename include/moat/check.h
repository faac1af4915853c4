/* moatd --check: what an operator reads before starting a resolver. After the config and every
 * policy file loaded (errors stop earlier, with file:line), it prints the lint warnings, the
 * client ranges of different agents that overlap (the most specific wins, as at run time), which
 * agent each listen address's clients go to, and a summary line. Pure: writes to the streams. */
#ifndef MOAT_CHECK_H
#define MOAT_CHECK_H

#include <stdbool.h>
#include <stdio.h>

#include "moat/config.h"
#include "moat/policy.h"

/* Print the report (summary and notes to out, warnings to errs). Returns the exit status: 0, or
 * 1 when strict and there is at least one warning. */
int check_report(const struct config *cfg, struct policy *p, bool strict, FILE *out, FILE *errs);

#endif
