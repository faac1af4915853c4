/* holder.c owns the answer to "does a running moat-fw hold table inet moat here?" (holder.h):
 * the pid in the table's comment, checked against /proc (alive, in this network namespace, and
 * still called moat-fw). */
#include "holder.h"

#include "nft.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

/* Whether pid lives in the network namespace of this process; unknown (EACCES) counts as yes. */
static bool fwhold_same_netns(unsigned long pid, bool *alive)
{
	char path[64];
	struct stat self, other;
	snprintf(path, sizeof(path), "/proc/%lu", pid);
	*alive = stat(path, &other) == 0;
	if (!*alive)
		return false;
	snprintf(path, sizeof(path), "/proc/%lu/ns/net", pid);
	if (stat("/proc/self/ns/net", &self) != 0 || stat(path, &other) != 0)
		return errno != ENOENT; /* gone meanwhile, or cannot tell */
	return self.st_ino == other.st_ino && self.st_dev == other.st_dev;
}

int fwhold_check(struct fwnft *n, unsigned long *pid, char *comm, size_t commlen)
{
	char c[256], path[64];
	bool alive;
	*pid = 0;
	if (commlen)
		comm[0] = '\0';
	if (fwnft_table_comment(n, FWNFT_TABLE, c, sizeof(c)) != 0)
		return FWHOLD_NONE;
	*pid = fwnft_comment_pid(c);
	if (*pid == 0 || !fwhold_same_netns(*pid, &alive))
		return FWHOLD_FREE;
	/* A pid taken over by another program since is not a holder. */
	snprintf(path, sizeof(path), "/proc/%lu/comm", *pid);
	FILE *f = fopen(path, "r");
	char name[64] = "";
	if (f) {
		if (fgets(name, sizeof(name), f))
			name[strcspn(name, "\n")] = '\0';
		fclose(f);
	}
	if (f && strcmp(name, "moat-fw") != 0)
		return FWHOLD_FREE;
	snprintf(comm, commlen, "%s", f ? name : "?");
	return FWHOLD_HELD;
}
