/* remove.c owns `moat-fw --remove`: delete table inet moat (in --netns when given) and say what
 * went with it. The only way moat-fw's rules ever leave: a stop keeps them (closed stays
 * closed). */
#include "remove.h"
#include "hostnet.h"
#include "moat/err.h"
#include "nft.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FWREMOVE_LIST_MAX (8u << 20) /* a table of a million grants lists in well under this */

/* Append the names of the listing's "\tKIND NAME {" lines to out, comma separated. */
static void fwremove_names(const char *list, const char *kind, char *out, size_t cap)
{
	size_t kl = strlen(kind);
	out[0] = '\0';
	for (const char *p = list; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		if (p[0] != '\t' || strncmp(p + 1, kind, kl) != 0 || p[1 + kl] != ' ')
			continue;
		const char *n = p + 2 + kl;
		size_t len = strcspn(n, " {\n");
		size_t l = strlen(out);
		snprintf(out + l, cap - l, "%s%.*s", l ? ", " : "", (int)len, n);
	}
}

int fwremove_run(const char *netns)
{
	char err[512], chains[512], sets[512];
	if (netns && fwhost_enter_netns(netns) < 0)
		return 1;
	struct fwnft *n = fwnft_open();
	char *list = malloc(FWREMOVE_LIST_MAX);
	if (!n || !list) {
		fprintf(stderr, "moat-fw: cannot create the libnftables context\n");
		fwnft_close(n);
		free(list);
		return 1;
	}
	const char *where = netns ? netns : "this namespace";
	int rc = fwnft_query(n, "list table inet " FWNFT_TABLE "\n", list, FWREMOVE_LIST_MAX, err,
	                     sizeof(err));
	if (rc < 0) {
		printf("moat-fw: no table inet " FWNFT_TABLE " in %s; nothing removed\n", where);
		fwnft_close(n);
		free(list);
		return 0;
	}
	size_t grants = 0;
	for (const char *p = list; (p = strstr(p, " expires ")) != NULL; p++)
		grants++;
	fwremove_names(list, "chain", chains, sizeof(chains));
	fwremove_names(list, "set", sets, sizeof(sets));
	rc = fwnft_run(n, "delete table inet " FWNFT_TABLE "\n", err, sizeof(err));
	if (rc < 0)
		fprintf(stderr, "moat-fw: cannot delete table inet " FWNFT_TABLE ": %s\n", err);
	else
		printf("moat-fw: removed table inet " FWNFT_TABLE
		       " from %s: chains %s; sets %s; %zu "
		       "live grants\n",
		       where, chains, sets, grants);
	fwnft_close(n);
	free(list);
	return rc < 0 ? 1 : 0;
}
