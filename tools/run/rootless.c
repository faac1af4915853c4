/* rootless.c owns moat run's answer to --rootless (see moat-run(1) and README "moat run"). */
#include "run.h"

#include <stdio.h>

int rootless_refuse(void)
{
	run_err("--rootless: refused (not implemented yet)");
	return RUN_EXIT_FAIL;
}
